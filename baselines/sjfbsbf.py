"""SJF-BSBF, SJF-FFS and the size-ordered SJF of Luo et al., "Scheduling Deep Learning Jobs in Multi-Tenant GPU
Clusters via Wise Resource Sharing" (seed ``002``; docs/baselines.md).

All three are non-preemptive and gang-scheduled, one task per GPU of their own, and never move a running job.
Each round they plan every pending job in priority order on a copy of the GPUs' occupancy, then place the plan
task by task (``Command("place", tid, server, gpu=g)``):

- **SJF-BSBF** (Algorithm 1): jobs by ``L_k = t_iter x I_k`` ascending (the pseudo-code; clairvoyant, as the
  paper's). A job takes the "top" free GPUs, consolidated on as few servers as possible, when enough GPUs hold
  no job. Otherwise, if free GPUs plus GPUs holding exactly one job (at most ``C = 2`` jobs per GPU) suffice,
  every running job on one-job GPUs is a candidate partner: Algorithm 2 searches the new job's sub-batch
  ``B / s`` (powers of two, ``s`` = 1, 2, ... up to ``B``: the text's range, which includes ``b = 1``) and, for
  each, Theorem 1 decides between sharing now and waiting for the partner to finish (:func:`pair_jct`); the
  partners whose best option is sharing are taken by their pair JCT ascending until the job has its GPUs. A
  sub-batch whose task does not fit the partner's GPU memory is not a candidate (the paper's reason for
  accumulation; it gives no memory formula: :mod:`clustergym.core.accumulation` is ours). Our readings where
  the paper is silent: shared GPUs go first and free GPUs complete the set only when the beneficial partners
  are too few ("we do not pick the free GPUs at first ... to save resources"); the job takes the largest
  ``s`` its partners chose (memory fits every one of them); a job that still lacks GPUs stays pending.
- **SJF-FFS** (§VI-A4): the same order and free-GPU rule, but when free GPUs are short the job takes one-job
  GPUs first fit (GPU index order, its task fitting their memory at its full batch), with no benefit check
  and no sub-batch search.
- **SJF by GPU count** (``sjf-gpu``, the paper's prose: priority "according to their used GPU numbers"):
  exclusive GPUs, jobs by GPU count then ``L_k``; it never shares.

A job's parameter server (the paper's jobs are all-reduce; the catalogue's PS jobs need a rule) is placed before
its workers through the rule every heuristic shares, :func:`~clustergym.baselines.base.keep_ps_with_workers`,
with the plan as where its workers will be: it goes to the planned server holding the most of its workers that
still fit there after it (the first planned worker's server on ties), else to the first allowed server that
takes it; the workers keep their planned GPUs.

Theorem 1's inputs: ``t`` is a job's iteration time alone (its model's mean single-GPU time over the cluster,
:meth:`ClusterView.ref_iter_time`, times its accumulation compute factor), ``i`` its remaining
iterations, ``xi`` the simulator's interference ratio of the pair on the partner's GPU (the same rule the
simulation applies). Through the Gymnasium env (``predict``) the GPU and the sub-batch are actions only with
``EnvConfig.gpu_actions`` and ``sub_batch_actions``; with both the env plays the core run exactly
(``tests/test_window_gpu_sub_batch.py``). Without them the simulator's GPU rule picks the GPU on the planned
server and jobs keep their batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from clustergym.core.accumulation import compute_factor, memory_needed, steps_error
from clustergym.core.job import Job, Task, TaskState
from clustergym.core.resources import fits
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, keep_ps_with_workers

MAX_JOBS_PER_GPU = 2  # the paper's C
SHARING = ("best-benefit", "first-fit", "none")


def pair_jct(t_r: float, i_r: float, xi_r: float, t_n: float, i_n: float, xi_n: float) -> tuple[float, float]:
    """Theorem 1 for a running job R (iteration time ``t_r`` alone, ``i_r`` iterations left, ratio ``xi_r``
    while shared) and a new job N: the pair's average JCT from now (sharing now, sequential: N starts when R
    ends). Sharing: both run slowed until the first finishes, the other then runs alone."""
    seq = (2.0 * t_r * i_r + t_n * i_n) / 2.0
    f_r, f_n = t_r * xi_r * i_r, t_n * xi_n * i_n
    if f_r <= f_n:
        end_r, end_n = f_r, f_r + t_n * (i_n - f_r / (t_n * xi_n))
    else:
        end_n, end_r = f_n, f_n + t_r * (i_r - f_n / (t_r * xi_r))
    return (end_r + end_n) / 2.0, seq


def delayed_pair_jct(kappa: float, t_r: float, i_r: float, xi_r: float, t_n: float, i_n: float, xi_n: float) -> float:
    """The pair's average JCT when N joins R after ``kappa`` seconds (0 <= kappa <= t_r i_r): Theorem 1's
    general schedule, whose optimum the theorem puts at an endpoint."""
    left = i_r - kappa / t_r
    share, _ = pair_jct(t_r, left, xi_r, t_n, i_n, xi_n)
    # the JCT of R counts from now: kappa alone, then the shared schedule; N's too (it waits kappa in the queue)
    return kappa + share


@dataclass
class _Plan:
    """One job's planned slots, (task, server, GPU) for each of its waiting workers, and its accumulation
    steps."""

    job: Job
    slots: list[tuple[Task, int, int]]
    steps: int = 1


@dataclass
class SJFBSBF(Policy):
    """SJF-BSBF (Algorithm 1 with Algorithm 2 and Theorem 1); the planner of SJF-FFS and SJF by GPU count too
    (``sharing``, ``order_by_gpus``): the module docstring states the rules."""

    name = "sjf-bsbf"
    source = "SJF-BSBF (Luo et al., 2024) Algorithms 1-2, Theorem 1"
    sharing: str = "best-benefit"  # when free GPUs are short: "best-benefit", "first-fit" or "none" (wait)
    order_by_gpus: bool = False  # priority by GPU count first (then L_k)
    sub_batches: bool = True  # Algorithm 2's sub-batch search (False: the job's own batch only)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.sharing not in SHARING:
            raise ValueError(f"{self.name}: sharing must be one of {SHARING}, got {self.sharing!r}")

    def new_episode(self, view: ClusterView) -> None:
        self._planned: tuple = ()
        self._plan: list[_Plan] = []

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if self._planned != self._round:
            self._planned = self._round
            self._plan = self._make_plan(view, cands)
        allowed = set(cands.servers.tolist())
        for p in self._plan:
            job = p.job
            if job.n_placed == 0 and job.accum_steps != p.steps:
                yield Command("sub-batch", jid=job.jid, steps=p.steps)
            ps = [t for t in job.tasks if t.is_ps and t.state == TaskState.WAITING]
            if ps:  # a PS first (every worker depends on it), through the shared rule, the plan as its workers'
                yield from self._place_ps(view, ps, p, allowed)
            for t, s, g in p.slots:
                if t.state == TaskState.WAITING and s in allowed:
                    yield Command("place", t.tid, s, gpu=g)

    @staticmethod
    def _place_ps(view: ClusterView, ps: list[Task], p: _Plan, allowed: set[int]) -> Iterator[Command]:
        """The job's parameter server(s) by :func:`~clustergym.baselines.base.keep_ps_with_workers` with the
        plan's servers as its workers' (the planned servers first, in plan order, then the other allowed ones)."""
        planned = {t.tid: s for t, s, _ in p.slots}
        order = list(dict.fromkeys([s for _, s, _ in p.slots] + sorted(allowed)))
        for t in ps:
            yield from (Command("place", t.tid, s) for s in keep_ps_with_workers(view, t, order, "fit",
                                                                                  planned=planned))

    # ------------------------------------------------------------------------------------------ planning
    def _priority(self, view: ClusterView, job: Job) -> tuple:
        size = (job.spec.n_gpus,) if self.order_by_gpus else ()
        return (job.n_placed == 0, *size, view.remaining_time(job), job.jid)

    def _make_plan(self, view: ClusterView, cands: Candidates) -> list[_Plan]:
        """Algorithm 1 over the candidate jobs, on a copy of the GPUs' jobs and free memory."""
        occupant = {g: view.gpu_jobs(g) for g in range(view.n_gpus)}
        free_mem = (view.gpu_mem_cap - view.gpu_mem_used).tolist()
        servers = set(cands.servers.tolist())
        jobs = {t.job.jid: t.job for t in cands.place}
        plans = []
        for job in sorted(jobs.values(), key=lambda j: self._priority(view, j)):
            plan = self._plan_job(view, job, occupant, free_mem, servers)
            if plan is None:
                continue
            for t, _, g in plan.slots:
                occupant[g] = occupant[g] + (job,)
                free_mem[g] -= memory_needed(job.model, t.t.share, plan.steps)
            plans.append(plan)
        return plans

    def _plan_job(self, view: ClusterView, job: Job, occupant: dict, free_mem: list, servers: set) -> _Plan | None:
        """Algorithm 1's lines 5-21 for one job on the planning copies, or None (it stays pending)."""
        waiting = [t for t in job.tasks if not t.is_ps and t.state == TaskState.WAITING]
        need = len(waiting)
        if not need:
            return None
        mem = max(t.t.gpu_memory_gb for t in waiting)
        free = [g for g, jobs in occupant.items() if not jobs and int(view.gpu_server[g]) in servers
                and fits(free_mem[g], mem)]
        if len(free) >= need:
            return self._slots(view, job, waiting, self._consolidated(view, free, need), job.accum_steps)
        if self.sharing == "none" or job.n_placed:
            return None
        one = [g for g, jobs in occupant.items() if len(jobs) == MAX_JOBS_PER_GPU - 1 and jobs[0] is not job
               and int(view.gpu_server[g]) in servers]
        if len(free) + len(one) < need:
            return None
        if self.sharing == "first-fit":
            shared, steps = [g for g in one if fits(free_mem[g], mem)][:need], job.accum_steps
        else:
            shared, steps = self._best_benefit(view, job, one, occupant, free_mem, need)
        if len(shared) + len(free) < need:
            return None
        return self._slots(view, job, waiting, shared + self._consolidated(view, free, need - len(shared)), steps)

    @staticmethod
    def _slots(view: ClusterView, job: Job, waiting: list, gpus: list[int], steps: int) -> _Plan:
        return _Plan(job, [(t, int(view.gpu_server[g]), g) for t, g in zip(waiting, gpus)], steps)

    def _best_benefit(self, view: ClusterView, job: Job, one: list[int], occupant: dict, free_mem: list,
                      need: int) -> tuple[list[int], int]:
        """Algorithm 1 lines 12-19 with Algorithm 2: the one-job GPUs of the partners worth sharing with, by pair
        JCT ascending, until ``need`` are chosen; and the accumulation steps the job takes."""
        by_partner: dict[Job, list[int]] = {}
        for g in one:
            by_partner.setdefault(occupant[g][0], []).append(g)
        worker = next(t for t in job.tasks if not t.is_ps)
        chosen = []
        for partner, gpus in by_partner.items():
            best = self._algorithm2(view, job, worker.t.share, partner, gpus, free_mem)
            if best is not None:
                chosen.append((best[1], partner.jid, best[0], gpus))
        chosen.sort(key=lambda c: (c[0], c[1]))
        out, steps = [], 1
        for _, _, s, gpus in chosen:
            if len(out) >= need:
                break
            out += gpus[: need - len(out)]
            steps = max(steps, s)
        return out, steps

    def _algorithm2(self, view: ClusterView, job: Job, share: float, partner: Job, gpus: list[int],
                    free_mem: list) -> tuple[int, float] | None:
        """Algorithm 2: over sub-batches B/s (s = 1, 2, 4, ... <= B) whose task fits every partner GPU, the
        one with the shortest pair JCT; returns (s, that JCT) if sharing beats waiting, else None."""
        g = gpus[0]
        xi_n = view.interference(job.model.name, partner.model.name, g).xi
        xi_r = view.interference(partner.model.name, job.model.name, g).xi
        t_r = view.ref_iter_time(partner) * compute_factor(partner.model, partner.accum_steps)
        i_r = view.remaining_iters(partner)
        t_n, i_n = view.ref_iter_time(job), view.remaining_iters(job)
        room = min(free_mem[h] for h in gpus)
        best: tuple[int, float, bool] | None = None
        s = 1
        while steps_error(job.model, s) is None and (self.sub_batches or s == 1):
            if fits(room, memory_needed(job.model, share, s)):
                shared, seq = pair_jct(t_r, i_r, xi_r, t_n * compute_factor(job.model, s), i_n, xi_n)
                if best is None or shared <= best[1]:
                    best = (s, shared, shared < seq)
            s *= 2
        return (best[0], best[1]) if best is not None and best[2] else None

    @staticmethod
    def _consolidated(view: ClusterView, free: list[int], n: int) -> list[int]:
        """``n`` of the ``free`` GPUs on as few servers as possible: the server with the fewest free GPUs that
        holds all of them if one does, else servers with the most free GPUs first (lowest index on ties)."""
        if n <= 0:
            return []
        per: dict[int, list[int]] = {}
        for g in free:
            per.setdefault(int(view.gpu_server[g]), []).append(g)
        whole = [s for s, gs in per.items() if len(gs) >= n]
        if whole:
            return per[min(whole, key=lambda s: (len(per[s]), s))][:n]
        out: list[int] = []
        for s in sorted(per, key=lambda s: (-len(per[s]), s)):
            out += per[s][: n - len(out)]
        return out


@dataclass
class SJFFFS(SJFBSBF):
    name = "sjf-ffs"
    source = "SJF-FFS (SJF with first-fit sharing), the SJF-BSBF paper's §VI-A4 baseline"
    sharing: str = "first-fit"


@dataclass
class SJFBySize(SJFBSBF):
    name = "sjf-gpu"
    source = "SJF by GPU count (the SJF-BSBF paper's size-based priority, §V-B1), exclusive GPUs"
    sharing: str = "none"
    order_by_gpus: bool = True
