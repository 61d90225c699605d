"""UniSched's profiling phase (Gao et al., IEEE TC 2024, §III-A, §III-B.1, §III-C.2): every new job is first a
*profiler job*; the Selector schedules it like any job (reward 1: above every best-effort job, below every SLO
job) for one BE lease on at most 2 GPUs; what the run shows feeds the Estimator, and only then does the job
become an SLO or best-effort job of the execution phase.

What the paper states, and how it is modelled here:

- **Length and GPUs.** A fixed time, "empirically set as five minutes" (``profile_s``, one BE lease), on at most
  2 GPUs whatever the request: a 1-GPU job on one GPU; a multi-GPU job that will run on one machine
  (its request fits one node) on 2 GPUs of one server; a larger job on one GPU on each of 2 servers.
- **What it measures (Eq. 2).** T^comp (one GPU) and, on the 2-GPU run, the communication term of the layout it
  will run in: T^1 on one node, or T^2 across nodes. Eq. 2 extrapolates them linearly to the job's request
  (the paper's Fig. 7(a) error that grows with the GPU count). The unmeasured term is unknown, so a job profiled
  on one node is offered only one-node allocations (the paper's case (i): the job "will be executed on one
  machine"). The combined suspend + resume overhead t^sr is the one measured on the profiling GPUs, "updated in
  the execution phase" once the job has run on its own GPUs.

Our choices where the paper is silent:

- **What the run observes.** The iteration time the simulator's cost model gives for the job's model on the
  profiling servers' GPU type, GPUs per server and link speeds, with the job's own parallelism shrunk to 2 GPUs
  (2 replicas; 2 partitions for a model-parallel job: the paper's jobs are data-parallel), on idle GPUs: the
  stint does not see other jobs' traffic.
- **Profiling is overhead, not progress** (by default). The paper changes the batch size while profiling and
  counts the profiling time in the JCT, so the job's iterations do not advance while it is profiled. With
  ``UniSched.profile_progress`` a job whose stint is its own layout (1 GPU, or 2 GPUs of one node for a 2-GPU
  job) is profiled by running it: the job itself holds the stint's GPUs for its first BE lease and keeps its
  iterations (:meth:`Profiler.start_in_place`); larger jobs' 2-GPU runs are not their own layout and stay
  overhead.
- **A stint lasts to the next plan.** A stint ends at the first re-plan (one BE cycle) at or after
  ``profile_s``: it holds one BE lease, as the paper's profiler job does, so a ``profile_s`` shorter than the
  cycle changes nothing (measured on MIX1, both clusters, seeds 0-7: 60, 150 and 300 s give the same episode
  summaries).
- **Who holds the GPUs.** A stint's GPUs are held in this ledger, not by the simulator: UniSched places nothing
  on them until the stint ends (no other scheduler shares the cluster), and the simulator's utilisation counts
  them idle. Every decision that needs free GPUs (a stint's servers, the MILP's free cells, the gang guard, the
  servers a worker may take) reads them from :meth:`Profiler.free_gpus`.
- **Server choice.** Best fit: the server(s) with the fewest free GPUs that hold the stint, ties by index.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from clustergym.core.dag import reference_iteration_time
from clustergym.core.job import Job, TaskState
from clustergym.core.view import ClusterView

PROFILE_VALUE = 1.0  # a profiler job's reward: above every best-effort job (< 1), 1/100 of an SLO job's


@dataclass(frozen=True)
class Profile:
    """What a finished profiling stint gave the Estimator: Eq. 2's T^comp and the communication term it measured
    (``t_intra`` = T^1 for a one-node stint, ``t_inter`` = T^2 for a two-node one, the other None), the combined
    suspend + resume overhead on the profiling GPUs, and when the stint ended."""

    t_comp: float
    t_intra: float | None
    t_inter: float | None
    t_sr: float
    ended: float


def stint_layout(n_gpus: int, node_gpus: int) -> tuple[int, int]:
    """(GPUs of the stint, servers it spans): 1 GPU for a 1-GPU job; 2 GPUs on one server for a job that fits a
    node of ``node_gpus``; one GPU on each of 2 servers otherwise."""
    if n_gpus < 1 or node_gpus < 1:
        raise ValueError(f"stint_layout needs n_gpus >= 1 and node_gpus >= 1 (got {n_gpus}, {node_gpus})")
    if n_gpus == 1:
        return 1, 1
    return (2, 1) if n_gpus <= node_gpus else (2, 2)


class Profiler:
    """The profiling ledger of one episode: the stints running (job -> (servers, GPUs per server, end)) and the
    profiles of the jobs whose stint ended."""

    def __init__(self, profile_s: float) -> None:
        self.profile_s = profile_s
        self.stints: dict[int, tuple[tuple[int, ...], int, float]] = {}
        self.in_place: dict[int, float] = {}  # job -> when its profiling run (the job itself) was selected
        self.done: dict[int, Profile] = {}
        self.started = 0

    def state(self, jid: int) -> str:
        """"profiled", "profiling" (its stint runs; :meth:`settle` ends the stints that are over) or "new"."""
        if jid in self.done:
            return "profiled"
        return "profiling" if jid in self.stints or jid in self.in_place else "new"

    def reserved(self) -> dict[int, int]:
        """GPUs per server held by the running stints."""
        out: dict[int, int] = {}
        for servers, per, _ in self.stints.values():
            for s in servers:
                out[s] = out.get(s, 0) + per
        return out

    def free_gpus(self, view: ClusterView, servers: Iterable[int] | None = None) -> dict[int, int]:
        """Idle GPUs per server (of ``servers``, else every server) that no running stint holds (the simulator
        counts a stint's GPUs idle)."""
        reserved = self.reserved()
        servers = range(view.n_servers) if servers is None else servers
        return {int(s): max(0, int(view.idle_gpus[s]) - reserved.get(int(s), 0)) for s in servers}

    def settle(self, view: ClusterView) -> None:
        """Turn every stint that has ended by now into the job's :class:`Profile`. A profiling run of the job
        itself is measured on the servers it runs on; one whose job never got its GPUs is forgotten (the job is a
        profiler job again)."""
        if not (self.stints or self.in_place):
            return
        active = {j.jid for j in view.active_jobs()}
        for jid, (servers, per, end) in list(self.stints.items()):
            if end <= view.now + 1e-9:
                del self.stints[jid]
                if jid in active:
                    self.done[jid] = measure(view, view.job(jid), servers, per, end)
        for jid, began in list(self.in_place.items()):
            if jid not in active:
                del self.in_place[jid]
            elif began + self.profile_s <= view.now + 1e-9:
                del self.in_place[jid]
                job = view.job(jid)
                workers = [t.server for t in job.tasks if t.state == TaskState.RUNNING and not t.is_ps]  # a server each
                if job.n_placed == len(job.tasks) and workers:
                    servers = tuple(sorted(set(workers)))
                    self.done[jid] = measure(view, job, servers, len(workers) // len(servers), view.now)

    def start_in_place(self, view: ClusterView, job: Job) -> None:
        """Profile ``job`` by running it (its stint is its own layout): the policy places the job as planned,
        the simulator holds its GPUs, its iterations advance, and :meth:`settle` measures it."""
        self.in_place[job.jid] = view.now
        self.started += 1

    def held_in_place(self, view: ClusterView) -> int:
        """GPUs held by jobs whose own run is their profiling stint."""
        return sum(view.job(jid).n_placed for jid in self.in_place)

    def start(self, view: ClusterView, job: Job, node_gpus: int) -> bool:
        """Start the job's stint on the best-fit free GPUs (module docstring); False if none hold it now."""
        n, spans = stint_layout(job.spec.n_gpus, node_gpus)
        per = n // spans
        fits = sorted((n_free, s) for s, n_free in self.free_gpus(view).items() if n_free >= per)
        if len(fits) < spans:
            return False
        servers = tuple(sorted(s for _, s in fits[:spans]))
        self.stints[job.jid] = (servers, per, view.now + self.profile_s)
        self.started += 1
        return True


def measure(view: ClusterView, job: Job, servers: tuple[int, ...], per: int, ended: float) -> Profile:
    """What the stint on ``servers`` (``per`` GPUs each) observed (module docstring)."""
    s = job.spec
    first = servers[0]
    gpu, node = str(view.server_gpu_type[first]), int(view.server_n_gpus[first])
    nic, intra = float(view.nic_gbps[first]), float(view.intra_gbps[first])

    def t(parts: int, reps: int, per_node: int) -> float:
        return reference_iteration_time(job.model, parts, reps, s.sync, gpu, s.comm_ps_mb, s.comm_worker_mb,
                                        per_node, nic, intra)

    t_comp = t(1, 1, node)
    n_stint = per * len(servers)
    t_intra = t_inter = None
    if n_stint == 2:
        two = t(2, 1, per) if s.n_partitions > 1 else t(1, 2, per)
        if len(servers) == 1:
            t_intra = max(0.0, two - t_comp)
        else:
            t_inter = max(0.0, two - t_comp)
    return Profile(t_comp, t_intra, t_inter, view.checkpoint_s(job, n_stint), ended)
