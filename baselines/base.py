"""Shared machinery of the heuristic schedulers.

A policy sees the :class:`~clustergym.core.engine.Simulator` (read-only) and a :class:`View`: the tasks it may
place, the running tasks it may move, and the servers it may use. It answers with its commands in order
of preference (:meth:`Policy.preferences`, a lazy generator). Two drivers consume that:

- :func:`run` drives a bare Simulator: the view is every ready task, every running task on an overloaded
  server and every server; the first valid preference is executed, until the policy has none left
  (the round ends) -- no Gymnasium needed;
- :class:`clustergym.baselines.agent.HeuristicAgent` drives the Gymnasium env: the view is the env's candidate
  window and destination columns, and the first preference the action mask allows is returned. So a
  heuristic sees exactly the task window an agent sees.

Helpers here: the server-side masks every policy needs (plain admission, an exclusive GPU, or MLFS's
"will not be overloaded by hosting the task"), the gang guard (does a whole job fit now?), the ideal
virtual host (MLFS §3.3.2) and the ideal virtual task (MLFS §3.3.3).
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar, Iterator, Sequence

import numpy as np

from clustergym.core.commands import Command, command_error, execute
from clustergym.core.job import Job, JobState, Task, TaskState

if TYPE_CHECKING:
    from clustergym.core.engine import Simulator

# ---------------------------------------------------------------------------------------------- commands


@dataclass
class View:
    """What a policy may act on at this step."""

    place: list[Task]
    migrate: list[Task]
    servers: np.ndarray  # server ids the policy may use as destinations
    can_preempt: bool = False

    @staticmethod
    def full(sim: "Simulator", can_preempt: bool = True) -> "View":
        over = sim.overloaded_servers()
        mig = [t for s in over for t in sim.running_tasks(s)]
        return View(sim.ready_tasks(), mig, np.arange(sim.cluster.n_servers), can_preempt)


def is_valid(sim: "Simulator", cmd: Command) -> bool:
    """Would the simulator accept ``cmd`` now?"""
    return command_error(sim, cmd) is None


# ------------------------------------------------------------------------------------- per-sim estimates

_CACHE: "weakref.WeakKeyDictionary[Simulator, dict]" = weakref.WeakKeyDictionary()


def sim_cache(sim: "Simulator") -> dict:
    c = _CACHE.get(sim)
    if c is None:
        c = _CACHE[sim] = {}
    return c


def ref_iter_time(sim: "Simulator", job: Job) -> float:
    """Reference iteration time of a job: its model's single-GPU iteration time averaged over the
    cluster's GPUs (Hare's heterogeneity-averaged round time T̄_n; also MLF-H's run-time estimate)."""
    return sim.cluster.mean_iter_time(job.model)


def remaining_time(sim: "Simulator", job: Job) -> float:
    """Estimated remaining run time (s): remaining iterations x reference iteration time."""
    return max(0.0, job.target_iters - current_iters(sim, job)) * ref_iter_time(sim, job)


def current_iters(sim: "Simulator", job: Job) -> float:
    """Iterations done up to ``sim.now`` (the engine materialises progress only at events)."""
    it = job.iters
    if job.rate > 0 and job.fully_placed and job.state == JobState.ACTIVE:
        start = max(job.last_update, job.paused_until)
        it = min(job.target_iters, it + job.rate * max(0.0, sim.now - start))
    return it


def running_time(sim: "Simulator", job: Job) -> float:
    """Time the job has spent progressing, up to ``sim.now``."""
    rt = job.running_time
    if job.rate > 0 and job.fully_placed and job.state == JobState.ACTIVE:
        rt += max(0.0, sim.now - max(job.last_update, job.paused_until))
    return rt


def task_gpu_use(task: Task) -> float:
    """GPU utilisation the task causes (the engine's rule: gpu_util x usage factor, capped at 1)."""
    return min(1.0, task.t.gpu_util * task.job.usage_factor)


def waiting_time(sim: "Simulator", task: Task) -> float:
    w = task.waited
    if task.state == TaskState.WAITING:
        w += sim.now - task.queued_since
    return w


# --------------------------------------------------------------------------------------- server masks


def _any_per_server(sim: "Simulator", gpu_bool: np.ndarray) -> np.ndarray:
    c = sim.cluster
    return np.logical_or.reduceat(gpu_bool, c.server_first_gpu)


def server_mask(sim: "Simulator", task: Task, mode: str = "fit", h: float | None = None,
                moving: bool = False) -> np.ndarray:
    """Servers that can take ``task`` now.

    - ``"fit"``: the simulator's admission (nominal CPU, memory, GPU memory);
    - ``"exclusive"``: ... and an idle GPU (no task on it) with room: one task per GPU, as gang
      schedulers (FIFO, Tiresias, Gavel ...) allocate;
    - ``"headroom"`` (MLFS §3.3.2): ... the server is underloaded and will not become overloaded by
      hosting the task: its CPU and memory use plus the task's stay within ``h`` x capacity, and its
      least-loaded GPU with room stays within ``h`` after adding the task's GPU use.
    """
    c = sim.cluster
    ok = sim.feasible_servers(task, moving=moving)
    if mode == "fit":
        return ok
    if mode == "exclusive":
        if task.is_ps:
            return ok
        g = (c.gpu_n_tasks == 0) & (c.gpu_mem_cap - c.gpu_mem_used + 1e-9 >= task.t.gpu_memory_gb)
        return ok & _any_per_server(sim, g)
    if mode == "share":  # GPU time-sharing allowed while the GPU's summed use stays <= h (default 1)
        if task.is_ps:
            return ok
        cap = 1.0 if h is None else h
        g = (c.gpu_mem_cap - c.gpu_mem_used + 1e-9 >= task.t.gpu_memory_gb) & (
            c.gpu_load + task_gpu_use(task) <= cap + 1e-9)
        return ok & _any_per_server(sim, g)
    if mode == "headroom":
        h = sim.config.overload_threshold if h is None else h
        f = task.job.usage_factor
        cpu = c.cpu_use + task.t.cpu_cores * f
        mem = c.mem_use + task.t.memory_gb * f
        if moving and task.server >= 0:
            cpu = cpu.copy(); mem = mem.copy()
            cpu[task.server] -= task.t.cpu_cores * f
            mem[task.server] -= task.t.memory_gb * f
        ok = ok & ~effective_overload(sim) & (cpu <= h * c.cpu_cap) & (mem <= h * c.mem_cap)
        if not task.is_ps:
            g = (c.gpu_mem_cap - c.gpu_mem_used + 1e-9 >= task.t.gpu_memory_gb) & gpu_headroom(
                c.gpu_load, task_gpu_use(task), h)
            ok &= _any_per_server(sim, g)
        return ok


def gpu_headroom(load: np.ndarray, use: float, h: float) -> np.ndarray:
    """A GPU "will not be overloaded by hosting the task": load + use <= h, or the GPU is idle (a task
    whose own use exceeds h -- the catalogue has models at 0.95 -- may still run alone; otherwise it
    could never be placed)."""
    return (load + use <= h + 1e-9) | (load <= 1e-9)


def hot_gpus(sim: "Simulator") -> np.ndarray:
    """GPUs overloaded by sharing: load above h_r with tasks of at least two jobs on them (the engine's
    rule). A GPU kept busy by one job is not something placement or migration can fix."""
    c = sim.cluster
    return (c.gpu_load > sim.config.overload_threshold) & (c.gpu_n_jobs >= 2)


def effective_overload(sim: "Simulator") -> np.ndarray:
    """Servers overloaded in a way scheduling can address: CPU, memory or NIC above h_r, or a shared GPU
    above h_r (see :func:`hot_gpus`). Equal to the engine's flag except for single-task GPU overload."""
    c, h = sim.cluster, sim.config.overload_threshold
    return (c.overloaded & ((c.cpu_use > h * c.cpu_cap) | (c.mem_use > h * c.mem_cap)
                            | (c.net_mbps > h * c.nic_gbps * 125.0))) | _any_per_server(sim, hot_gpus(sim))


def restrict(mask: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """``mask`` limited to the view's servers."""
    if len(servers) == len(mask):
        return mask
    out = np.zeros_like(mask)
    out[servers] = mask[servers]
    return out


def job_servers(job: Job) -> set[int]:
    return {t.server for t in job.tasks if t.state == TaskState.RUNNING}


def pack_order(sim: "Simulator", task: Task, mask: np.ndarray) -> list[int]:
    """Consolidating order: servers already hosting the job first, then the fewest idle GPUs that
    still fit (best fit), then the lowest index."""
    c = sim.cluster
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    mine = job_servers(task.job)
    idle = np.add.reduceat((c.gpu_n_tasks == 0).astype(np.int64), c.server_first_gpu)
    key = sorted(idx.tolist(), key=lambda s: (s not in mine, int(idle[s]), s))
    return key


def spread_order(sim: "Simulator", task: Task, mask: np.ndarray) -> list[int]:
    """Load-balancing order (worst fit): lowest dominant utilisation first."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    u = sim.cluster.utilisation()
    dom = np.maximum.reduce([u["gpu"], u["cpu"], u["mem"]])
    return sorted(idx.tolist(), key=lambda s: (float(dom[s]), s))


# -------------------------------------------------------------------------------------------- gang guard


def job_fits(sim: "Simulator", job: Job, mode: str = "exclusive", servers: np.ndarray | None = None,
             h: float | None = None, empty: bool = False) -> bool:
    """Can every waiting task of ``job`` be placed right now (under ``mode``), given what is free?

    A greedy dry run on copies of the free capacities (tasks in DAG order, each on the first server
    that still takes it). The engine only runs a job whose every task holds a slot, so a scheduler that
    starts a job it cannot finish placing strands the slots until the gang timeout: every policy uses
    this guard before starting a job (documented addition, switchable with ``gang_guard``)."""
    c = sim.cluster
    if h is None:
        h = 1.0 if mode == "share" else sim.config.overload_threshold
    if empty:  # would it fit on the idle cluster? (static feasibility under ``mode``)
        cpu_free, mem_free = c.cpu_cap.copy(), c.mem_cap.copy()
        cpu_use, mem_use = np.zeros_like(c.cpu_use), np.zeros_like(c.mem_use)
        gmem, gload, gn = c.gpu_mem_cap.copy(), np.zeros_like(c.gpu_load), np.zeros_like(c.gpu_n_tasks)
    else:
        cpu_free = c.cpu_cap - c.cpu_alloc
        mem_free = c.mem_cap - c.mem_alloc
        cpu_use, mem_use = c.cpu_use.copy(), c.mem_use.copy()
        gmem = c.gpu_mem_cap - c.gpu_mem_used
        gload = c.gpu_load.copy()
        gn = c.gpu_n_tasks.copy()
    allowed = np.ones(c.n_servers, dtype=bool)
    if servers is not None and len(servers) != c.n_servers:
        allowed[:] = False
        allowed[servers] = True
    if mode == "headroom" and not empty:
        allowed &= ~effective_overload(sim)
    first = c.server_first_gpu
    for t in job.tasks:
        if t.state != TaskState.WAITING and not empty:
            continue
        tt, f = t.t, job.usage_factor
        ok = allowed & (cpu_free + 1e-9 >= tt.cpu_cores) & (mem_free + 1e-9 >= tt.memory_gb)
        if mode == "headroom":
            ok &= (cpu_use + tt.cpu_cores * f <= h * c.cpu_cap) & (mem_use + tt.memory_gb * f <= h * c.mem_cap)
        if not t.is_ps:
            g = gmem + 1e-9 >= tt.gpu_memory_gb
            if mode == "exclusive":
                g &= gn == 0
            elif mode == "headroom":
                g &= gpu_headroom(gload, task_gpu_use(t), h)
            elif mode == "share":
                g &= gload + task_gpu_use(t) <= h + 1e-9
            ok &= np.logical_or.reduceat(g, first)
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return False
        s = int(cand[0])
        cpu_free[s] -= tt.cpu_cores
        mem_free[s] -= tt.memory_gb
        cpu_use[s] += tt.cpu_cores * f
        mem_use[s] += tt.memory_gb * f
        if not t.is_ps:
            rng = range(int(first[s]), int(first[s] + c.server_n_gpus[s]))
            best = min((gi for gi in rng if g[gi]), key=lambda gi: gload[gi])
            gmem[best] -= tt.gpu_memory_gb
            gload[best] += task_gpu_use(t)
            gn[best] += 1
    return True


# ---------------------------------------------------------------------------------- MLFS vector choices


def comm_neighbours(task: Task) -> list[tuple[Task, float]]:
    """DAG neighbours of a task and the MB exchanged with each per iteration: parent/child edges carry
    ``comm_worker_mb``; worker<->PS ``2 comm_ps_mb``; an all-reduce ring links the replicas of a
    partition (``2 (R-1)/R comm_ps_mb``)."""
    job, spec = task.job, task.job.spec
    out: list[tuple[Task, float]] = []
    tasks = job.tasks
    if task.is_ps:
        return [(t, 2.0 * spec.comm_ps_mb) for t in tasks if not t.is_ps]
    for p in task.t.parents:
        out.append((tasks[p], 2.0 * spec.comm_ps_mb if tasks[p].is_ps else spec.comm_worker_mb))
    for ch in task.t.children:
        out.append((tasks[ch], spec.comm_worker_mb))
    if spec.sync == "ps":
        if not any(tasks[p].is_ps for p in task.t.parents):
            out.append((tasks[0], 2.0 * spec.comm_ps_mb))
    elif spec.n_replicas > 1:
        vol = 2.0 * (spec.n_replicas - 1) / spec.n_replicas * spec.comm_ps_mb
        out.extend((t, vol) for t in tasks if t is not task and t.t.partition == task.t.partition)
    return out


def comm_to_servers(sim: "Simulator", task: Task) -> np.ndarray:
    """MB per iteration between ``task`` and its already placed DAG neighbours, per server."""
    vol = np.zeros(sim.cluster.n_servers)
    for nb, mb in comm_neighbours(task):
        if nb.state == TaskState.RUNNING:
            vol[nb.server] += mb
    return vol


def server_util_matrix(sim: "Simulator") -> np.ndarray:
    """Per-server utilisation vectors U_s = (GPU, CPU, memory, network), shape (S, 4)."""
    u = sim.cluster.utilisation()
    return np.stack([u["gpu"], u["cpu"], u["mem"], u["net"]], axis=1)


def ideal_host_order(sim: "Simulator", task: Task, mask: np.ndarray, util: np.ndarray | None = None) -> list[int]:
    """MLFS §3.3.2 ideal virtual host. Candidates: ``mask`` (underloaded, not overloaded by the task).
    The ideal vector takes, per resource, the minimum utilisation among the candidates, and for
    bandwidth the maximum communication volume between the task and a candidate (volumes are divided by
    that maximum, so the ideal is 1 when any neighbour is placed and 0 otherwise); the degradation term
    q is 0 everywhere (no model of it) and is dropped. Servers by Euclidean distance to it, nearest
    first (ties: lowest index)."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    U = server_util_matrix(sim) if util is None else util
    X = U[idx]
    bw = comm_to_servers(sim, task)[idx]
    m = bw.max()
    bwn = bw / m if m > 0 else bw
    ideal = X.min(axis=0)
    d = np.sum((X - ideal) ** 2, axis=1) + (bwn - (1.0 if m > 0 else 0.0)) ** 2
    order = np.lexsort((idx, d))
    return [int(idx[i]) for i in order]


def task_util_vector(sim: "Simulator", task: Task) -> np.ndarray:
    """U_k: the task's share of its server's GPU, CPU, memory and NIC capacity."""
    c, s = sim.cluster, task.server
    f = task.job.usage_factor
    gpu = 0.0 if task.is_ps else task_gpu_use(task) / c.server_n_gpus[s]
    net = 0.0
    if task.job.rate > 0:
        for nb, mb in comm_neighbours(task):
            if nb.state == TaskState.RUNNING and nb.server != s:
                net += mb
        net = net * task.job.rate / (c.nic_gbps[s] * 125.0)
    return np.array([gpu, task.t.cpu_cores * f / c.cpu_cap[s], task.t.memory_gb * f / c.mem_cap[s], net])


def overloaded_resources(sim: "Simulator", s: int) -> np.ndarray:
    """Which of (GPU, CPU, memory, network) are above h_r on server ``s`` (GPU: any of its GPUs)."""
    c, h = sim.cluster, sim.config.overload_threshold
    g = c.server_gpus(s)
    return np.array([bool(hot_gpus(sim)[g.start:g.stop].any()), c.cpu_use[s] > h * c.cpu_cap[s],
                     c.mem_use[s] > h * c.mem_cap[s], c.net_mbps[s] > h * c.nic_gbps[s] * 125.0])


def ideal_task_choice(sim: "Simulator", s: int, candidates: Sequence[Task]) -> Task | None:
    """MLFS §3.3.3 ideal virtual task: per overloaded resource the maximum of the candidates'
    utilisations, per other resource the minimum; bandwidth to the tasks staying on the server ideal 0
    (volumes divided by the candidates' maximum). Returns the candidate nearest to it."""
    if not candidates:
        return None
    over = overloaded_resources(sim, s)
    X = np.array([task_util_vector(sim, t) for t in candidates])
    ideal = np.where(over, X.max(axis=0), X.min(axis=0))
    bw = np.array([sum(mb for nb, mb in comm_neighbours(t) if nb.state == TaskState.RUNNING and nb.server == s)
                   for t in candidates])
    m = bw.max()
    bwn = bw / m if m > 0 else bw
    d = np.sum((X - ideal) ** 2, axis=1) + bwn ** 2
    return candidates[int(np.lexsort(([t.tid for t in candidates], d))[0])]


# ------------------------------------------------------------------------------------------------ policy


@dataclass
class Policy:
    """Base class. Subclasses set ``name`` and ``source`` and implement :meth:`preferences`.

    Parameters common to all: ``gang_guard`` (start a job only if all its waiting tasks fit now; a job
    already partly placed is always completed first).
    """

    name: ClassVar[str] = "policy"
    source: ClassVar[str] = ""
    uniform_over_mask: ClassVar[bool] = False  # the env adapter samples the mask (random policy)
    gang_guard: bool = True

    def __post_init__(self) -> None:
        self._round: tuple = ()
        self._touched: set[int] = set()  # tasks moved or requeued in this round: never touched twice
        self._fit_cache: dict[int, bool] = {}

    # -- lifecycle
    def attach(self, sim: "Simulator") -> None:
        """Called once per new Simulator (episode) before the first decision (e.g. to add controllers)."""

    def begin(self, sim: "Simulator") -> None:
        key = (id(sim), sim.decision_count, sim.now)
        if key != self._round:
            self._round = key
            self._touched = set()
            self._fit_cache = {}

    def observe(self, sim: "Simulator", cmd: Command) -> None:
        """Record a command about to be (or just) executed."""
        if cmd.kind in ("migrate", "requeue", "place"):
            self._touched.add(cmd.tid)
        elif cmd.kind == "preempt":
            self._touched.update(t.tid for t in sim.job_by_id[cmd.jid].tasks)
        if cmd.kind in ("migrate", "requeue", "preempt"):
            self._fit_cache.clear()

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    # -- decisions
    def preferences(self, sim: "Simulator", view: View) -> Iterator[Command]:
        raise NotImplementedError

    def decide(self, sim: "Simulator", view: View | None = None) -> Command | None:
        """The most preferred valid command, or None to end the round."""
        self.begin(sim)
        view = View.full(sim) if view is None else view
        for cmd in self.preferences(sim, view):
            if is_valid(sim, cmd):
                return cmd
        return None

    # -- shared helpers for subclasses
    def fits(self, sim: "Simulator", job: Job, mode: str, servers: np.ndarray) -> bool:
        if not self.gang_guard or job.n_placed > 0:
            return True
        v = self._fit_cache.get(job.jid)
        if v is None:
            v = self._fit_cache[job.jid] = job_fits(sim, job, mode, servers)
        return v

    def job_first(self, sim: "Simulator", view: View, job_key, mode: str, order_fn,
                  backfill: bool = True) -> Iterator[Command]:
        """Place tasks job by job: partly placed jobs first, then jobs by ``job_key`` (ascending); a
        job's ready tasks in DAG order; servers by ``order_fn(sim, task, mask)``. Without ``backfill``
        the first job that does not fit blocks everything behind it."""
        by_job: dict[int, list[Task]] = {}
        for t in view.place:
            if t.tid not in self._touched:
                by_job.setdefault(t.job.jid, []).append(t)
        jobs = [sim.job_by_id[j] for j in by_job]
        jobs.sort(key=lambda j: (j.n_placed == 0, job_key(j), j.jid))
        for job in jobs:
            if not self.fits(sim, job, mode, view.servers):
                if not backfill:
                    return
                continue
            for t in sorted(by_job[job.jid], key=lambda t: t.tid):
                mask = restrict(server_mask(sim, t, mode), view.servers)
                for s in order_fn(sim, t, mask):
                    yield Command("place", t.tid, s)


# --------------------------------------------------------------------------------------------- drivers


def run(sim: "Simulator", policy: Policy, max_commands: int = 100_000) -> dict:
    """Drive ``sim`` to the end with ``policy`` (core level, no Gymnasium). Returns ``sim.summary()``."""
    policy.attach(sim)
    while sim.next_decision():
        for _ in range(max_commands):
            cmd = policy.decide(sim)
            if cmd is None:
                break
            policy.observe(sim, cmd)
            execute(sim, cmd)
    return sim.summary()

