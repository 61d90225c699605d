"""UniSched (Gao, Ye, Sun, Zhang, Wen; IEEE Trans. Computers 2024): a lease-based scheduler for strict-SLO and
best-effort jobs, on the same ``preferences`` API as every heuristic. The estimator and the MILP are
:mod:`clustergym.baselines.unisched_milp`; this module turns the cluster view into the MILP's input and its plan
into commands.

Every ``cycle_s`` (UniSched's BE lease, 5 minutes) the policy re-plans (UniSched §III-C):

- **Profiling phase** (§III-A, :mod:`clustergym.baselines.unisched_profile`). A new job is a profiler job: the
  MILP selects it (value 1, one BE lease on at most 2 GPUs) like any job, and it is profiled for ``profile_s``
  (5 minutes) on GPUs no job may take meanwhile; its iterations do not advance, and only then does it enter
  the execution phase as an SLO or best-effort job. ``profile_s=0`` switches the phase off (every job is known
  at once through :meth:`UniSched.reference_profile`); ``profiled_estimates=False`` keeps the phase's cost but
  estimates from the reference profile (isolates the cost from the estimates).
- **Estimator** (§III-B). Speed: Eq. 2 with the stint's T^comp and the communication term it measured (T^1 on
  one node, T^2 across nodes; a job profiled on one node is offered one-node allocations only). Without the
  phase, the reference profile: the job on one GPU (T^comp) and, with its own partitions and replicas, on one
  node and on one GPU per node, T^1 and T^2 fitted to those two times (the simulator's own cost model on the
  cluster's reference server and commonest GPU type). Eq. 2 then estimates every allocation: one node uses
  T^1, several nodes T^2. Iterations: what the job still needs to its current stopping point (for an OptStop
  job, the simulator's learning-curve prediction: UniSched's training-iteration estimator). Suspend/resume:
  t^sr as measured on the profiling GPUs until the job has run on its own (then the simulator's checkpoint
  cost for its GPUs), expected over the remaining leases by Eq. 3 (SLO) or n/2 (best-effort); T^dur by Eq. 1.
- **Policy generator**: each job's allocations (round-up, exact cells, single GPUs:
  :func:`~clustergym.baselines.unisched_milp.allocation_options`) with their speed relative to the
  consolidated one (phi-bar, Eq. 8, from Eq. 2). Allocations below ``min_speed_ratio`` (0.5) are not offered
  (our choice: on 10 Gbit/s NICs a model-parallel job spread over nodes runs up to 20 times slower, and the
  MILP, which values a best-effort job by the reciprocal of its remaining time, would still prefer running it
  so to waiting; the paper's PCIe-vs-RDMA gaps are small enough not to need the cut).
- **Reward generator**: an SLO job's deadlines and values (strict 100; soft 100/80/50/20,
  :meth:`JobSpec.slo_deadlines`); a best-effort job 0.99 / (its remaining leases), below every SLO value. An
  SLO job that can no longer meet any of its deadlines is planned as a best-effort job (our choice: the paper
  does not say; it must still finish).
- **Selector**: the MILP over every active job (at most ``max_jobs``, SLO jobs and then the oldest first),
  solved by HiGHS within ``time_limit_s``. When the limit is hit HiGHS's incumbent is used if it has one;
  otherwise the previous cycle's plan for the jobs still active (the paper's cached solution); with no plan
  cached, the greedy rule: running jobs keep their GPUs, then SLO jobs by earliest deadline, then best-effort
  jobs by fewest remaining leases, while GPUs remain. An infeasible MILP raises
  :class:`~clustergym.baselines.unisched_milp.InfeasibleMILP`.

Acting on the plan: in the plan's round, running jobs the plan does not keep are suspended (``preempt``;
with the simulator's leases only at their lease's end, the MILP pins the others). Planned waiting jobs are
then placed, SLO jobs first by deadline, then best-effort by value, one task per GPU: a consolidated or exact
allocation puts the job on as few servers as its cells span (:func:`consolidated_order`); the single-GPU
allocation's level-0 cells go, with ``single_gpu_placement="best-fit"``, to the servers with the fewest free
GPUs first (the buddy accounting of Eq. 14, which takes level-0 cells from the free level-0 cells before it
splits a larger one), with ``"worst-fit"`` to the least loaded servers first. With ``place_as_planned`` a
planned job starts only once the cells of the allocation the plan chose for it are free
(:func:`~clustergym.baselines.unisched_milp.cells_free`); without it, on whatever GPUs the gang guard finds.
Jobs the plan leaves out wait for the next cycle, as in UniSched.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.dag import reference_iteration_time
from clustergym.core.job import Job, Task, TaskState
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order, spread_order
from .unisched_milp import (BE_VALUE_SCALE, MilpJob, Plan, allocation_options, cells_free, cells_of, duration,
                            iteration_time, solve_plan, sr_overhead)
from .unisched_profile import PROFILE_VALUE, Profiler, stint_layout


def consolidated_order(view: ClusterView, task, mask) -> list[int]:
    """A consolidated allocation's server order (UniSched's cells): servers hosting the job first, then servers
    whose idle GPUs take every GPU task the job still has waiting (best fit among them), then the others by
    most idle GPUs (whole nodes first for a job larger than a node); ties by index. Best fit alone
    (:func:`~clustergym.baselines.base.pack_order`) would split a job over the last free GPUs of several nodes."""
    idx = mask.nonzero()[0].tolist()
    if not idx:
        return []
    job = task.job
    mine = {t.server for t in job.tasks if t.state == TaskState.RUNNING}
    left = sum(1 for t in job.tasks if t.state == TaskState.WAITING and not t.is_ps)
    idle = view.idle_gpus
    return sorted(idx, key=lambda s: (s not in mine, int(idle[s]) < left,
                                      int(idle[s]) if int(idle[s]) >= left else -int(idle[s]), s))


@dataclass
class UniSched(Policy):
    name = "unisched"
    source = "UniSched (Gao et al., IEEE TC'24): Eqs. 1-3 estimator, lease-based MILP selector (Eqs. 4-14), pulp + HiGHS"
    cycle_s: float = 300.0  # the BE lease: one scheduling cycle, one slot of the MILP
    horizon_slots: int = 24  # K: the MILP plans two hours ahead
    time_limit_s: float = 2.0
    max_jobs: int = 150
    min_speed_ratio: float = 0.5  # allocations slower than this x the consolidated one are not offered
    profile_s: float = 300.0  # the profiling stint (0: no profiling phase, the idle-reference estimates)
    profiled_estimates: bool = True  # False: profiling costs its time and GPUs but the estimates are the reference
    profile_progress: bool = False  # True: a job whose stint is its own layout (<= 2 GPUs) is profiled by running it
    place_as_planned: bool = True  # a planned job starts only once the cells of its planned allocation are free
    # the single-GPU allocation's level-0 cells: "best-fit" takes them from the servers with the fewest free GPUs
    # first (buddy allocation, the accounting of Eq. 14); "worst-fit" from the least loaded servers first
    single_gpu_placement: str = "best-fit"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.cycle_s > 0 or self.horizon_slots < 1 or not self.time_limit_s > 0 or self.max_jobs < 1:
            raise ValueError(f"unisched: cycle_s, time_limit_s must be > 0 and horizon_slots, max_jobs >= 1 "
                             f"(got {self.cycle_s}, {self.time_limit_s}, {self.horizon_slots}, {self.max_jobs})")
        if self.single_gpu_placement not in ("best-fit", "worst-fit"):
            raise ValueError(f"unisched: single_gpu_placement must be 'best-fit' or 'worst-fit' "
                             f"(got {self.single_gpu_placement!r})")
        if not (math.isfinite(self.profile_s) and self.profile_s >= 0):
            raise ValueError(f"unisched: profile_s must be a finite number >= 0 (got {self.profile_s!r})")
        self.solves = 0
        self.solve_seconds = 0.0
        self.statuses: Counter = Counter()
        self.last_status = ""

    def new_episode(self, view: ClusterView) -> None:
        self._plan: Plan | None = None
        self._planned_at = -math.inf
        self._plan_round: tuple = ()
        self._cells: dict[int, tuple[int, ...]] = {}
        self._profiles: dict[int, tuple[float, float, float]] = {}
        sizes = Counter(zip(view.server_n_gpus.tolist(), view.nic_gbps.tolist(), view.intra_gbps.tolist()))
        self._server = max(sizes, key=lambda k: sizes[k] * k[0])  # the server shape holding the most GPUs
        self._top = max(0, int(math.log2(max(1, self._server[0]))))
        self._gpu = max(view.gpu_type_counts, key=view.gpu_type_counts.__getitem__)
        self.profiler = Profiler(self.profile_s)

    # ----------------------------------------------------------------------------------------- estimator
    def profile(self, job: Job) -> tuple[float, float | None, float | None]:
        """(T^comp, T^1, T^2) of Eq. 2. With the profiling phase: what the job's stint measured (the term it did
        not measure is None, :mod:`~clustergym.baselines.unisched_profile`); without (or with
        ``profiled_estimates`` off): :meth:`reference_profile`."""
        measured = self.profiler.done.get(job.jid)
        if measured is not None and self.profiled_estimates:
            return measured.t_comp, measured.t_intra, measured.t_inter
        return self.reference_profile(job)

    def reference_profile(self, job: Job) -> tuple[float, float, float]:
        """(T^comp, T^1, T^2) on the cluster's reference server and commonest GPU type: T^comp the iteration time
        on one GPU, T^1 and T^2 fitted so that Eq. 2 gives the job's own iteration time on one node and on one
        GPU per node."""
        p = self._profiles.get(job.jid)
        if p is None:
            s, (gps, nic, intra) = job.spec, self._server
            n = s.n_gpus

            def t(parts: int, reps: int, per_node: int) -> float:
                return reference_iteration_time(job.model, parts, reps, s.sync, self._gpu, s.comm_ps_mb,
                                                s.comm_worker_mb, per_node, nic, intra)

            t_comp = t(1, 1, max(1, gps))
            if n == 1:
                p = (t_comp, 0.0, 0.0)
            else:
                one = t(s.n_partitions, s.n_replicas, max(n, gps))
                spread = t(s.n_partitions, s.n_replicas, 1)
                p = (t_comp, max(0.0, one - t_comp) / (n - 1), max(0.0, spread - t_comp) / (n - 1))
            self._profiles[job.jid] = p
        return p

    def milp_job(self, view: ClusterView, job: Job) -> MilpJob:
        """The job as the MILP sees it (estimates, values, allocations, what it holds now); a job not yet
        profiled is a profiler job (:meth:`profiler_job`)."""
        if self.profile_s > 0 and self.profiler.state(job.jid) == "new":
            return self.profiler_job(job)
        n, slot = job.spec.n_gpus, self.cycle_s
        t_comp, t_intra, t_inter = self.profile(job)
        # an allocation whose communication term was not measured is not offered (unisched_profile)
        shapes = [(c, nodes) for c, nodes in allocation_options(n, self._top)
                  if n == 1 or (t_intra if nodes == 1 else t_inter) is not None]
        times = [iteration_time(t_comp, t_intra or 0.0, t_inter or 0.0, n, nodes) for _, nodes in shapes]
        options = [(cells, times[0] / t) for (cells, _), t in zip(shapes, times) if times[0] / t >= self.min_speed_ratio]
        n_iter, t_iter = view.remaining_iters(job), times[0]  # times[0]: the round-up, consolidated allocation
        remaining = n_iter * t_iter
        raw = max(1, math.ceil(remaining / slot - 1e-9))
        measured = self.profiler.done.get(job.jid)
        t_sr = (measured.t_sr if measured is not None and self.profiled_estimates and job.record.first_start < 0
                else view.checkpoint_s(job))
        deadlines = None
        if job.spec.has_slo:
            steps = [(math.floor((d - view.now) / slot), v) for d, v in job.spec.slo_deadlines()]
            leases = math.ceil(duration(sr_overhead(raw, max(raw, steps[0][0]), t_sr), n_iter, t_iter) / slot - 1e-9)
            if any(leases <= q for q, _ in steps):
                deadlines = steps
        if deadlines is None:
            leases = max(1, math.ceil(duration(sr_overhead(raw, None, t_sr), n_iter, t_iter) / slot - 1e-9))
        held: tuple[int, ...] = ()
        running = job.n_placed > 0
        if running:
            per_server = Counter(t.server for t in job.tasks if t.state == TaskState.RUNNING and not t.is_ps)
            held = tuple(map(sum, zip(*(cells_of(c, self._top) for c in per_server.values())))) or (0,) * (self._top + 1)
        pinned = running and view.command_error(Command("preempt", jid=job.jid)) is not None
        return MilpJob(job.jid, n, options, max(1, leases), deadlines, BE_VALUE_SCALE / max(1, leases),
                       running, pinned, held)

    def profiler_job(self, job: Job) -> MilpJob:
        """A new job as the MILP sees it: one BE lease on its profiling stint's GPUs (1 GPU; 2 GPUs as one cell
        of a node; or 2 single GPUs of two nodes), valued :data:`PROFILE_VALUE`."""
        n, spans = stint_layout(job.spec.n_gpus, 1 << self._top)
        cells = cells_of(n, self._top) if spans == 1 else tuple(n if g == 0 else 0 for g in range(self._top + 1))
        return MilpJob(job.jid, n, [(cells, 1.0)], 1, None, PROFILE_VALUE)

    # ------------------------------------------------------------------------------------------ selector
    def plan(self, view: ClusterView) -> Plan:
        """The current cycle's plan, re-solved once ``cycle_s`` has passed since the last one. Profiler jobs the
        plan selects start their stints now (on GPUs no job may take until the stint ends)."""
        if self._plan is not None and view.now < self._planned_at + self.cycle_s:
            return self._plan
        self.profiler.settle(view)
        active = sorted((j for j in view.active_jobs() if self.profiler.state(j.jid) != "profiling"),
                        key=lambda j: (not j.spec.has_slo, j.n_placed == 0, j.spec.submit_time, j.jid))
        jobs = [self.milp_job(view, j) for j in active[: self.max_jobs]]
        free = [0] * (self._top + 1)
        for n_free in self.profiler.free_gpus(view).values():
            for g, c in enumerate(cells_of(n_free, self._top)):
                free[g] += c
        total = view.n_gpus - sum(self.profiler.reserved().values()) - self.profiler.held_in_place(view)
        plan, outcome = solve_plan(jobs, free, total, self.horizon_slots, self.time_limit_s)
        if plan is None:
            plan = self._fallback(jobs, total)
        new = {j.jid for j in active[: self.max_jobs] if self.profile_s > 0 and self.profiler.state(j.jid) == "new"}
        for jid in sorted(new & set(plan.run)):
            job = view.job(jid)
            if self.profile_progress and stint_layout(job.spec.n_gpus, 1 << self._top) == (job.spec.n_gpus, 1):
                self.profiler.start_in_place(view, job)  # the stint is the job's own first lease: it stays planned
                continue
            del plan.run[jid]
            self.profiler.start(view, job, 1 << self._top)
        self.solves += 1
        self.solve_seconds += plan.seconds
        self.statuses[plan.status] += 1
        self.last_status = plan.status
        self._plan, self._planned_at, self._plan_round = plan, view.now, (view.decisions, view.now)
        # the planned cells of the jobs this plan starts (server_order and fits read them)
        self._cells = {j.jid: j.options[plan.run[j.jid]][0] for j in jobs
                       if not j.running and plan.run.get(j.jid, -1) >= 0}
        return plan

    def _fallback(self, jobs: list[MilpJob], total: int) -> Plan:
        """No solution within the time limit: the previous plan for the jobs still active, else the greedy rule
        over the ``total`` GPUs no profiling stint holds."""
        ids = {j.jid for j in jobs}
        if self._plan is not None:
            return Plan({jid: p for jid, p in self._plan.run.items() if jid in ids}, "cached")
        run, left = {}, total
        order = sorted(jobs, key=lambda j: (not j.running, j.deadlines is None,
                                            j.deadlines[0][0] if j.deadlines else -j.be_value))
        for j in order:
            if j.running or j.n_gpus <= left:
                run[j.jid] = -1 if j.running else 0
                left -= j.n_gpus
        return Plan(run, "greedy")

    # ------------------------------------------------------------------------------------------ commands
    def fits(self, view: ClusterView, job: Job, mode: str, servers: np.ndarray) -> bool:
        """The gang guard, with the profiling stints' GPUs counted as taken (the simulator sees them idle); with
        ``place_as_planned``, a job waits until the cells of the allocation the plan chose for it are free
        (UniSched runs a job on the cells its plan selects; placing it on whatever GPUs are free would spread a
        consolidated allocation over more servers than its cells span)."""
        if not super().fits(view, job, mode, servers):
            return False
        if job.n_placed > 0:
            return True
        cells = self._cells.get(job.jid) if self.place_as_planned else None
        if cells is not None:
            return cells_free(self.profiler.free_gpus(view, servers).values(), cells)
        if not self.profiler.stints:
            return True
        need = sum(1 for t in job.tasks if t.state == TaskState.WAITING and not t.is_ps)
        return sum(self.profiler.free_gpus(view, servers).values()) >= need

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if not view.active_jobs():
            return
        plan = self.plan(view)
        if cands.can_preempt and self._plan_round == (view.decisions, view.now):
            for job in view.active_jobs():
                if job.n_placed and job.jid not in plan.run and self.profiler.state(job.jid) != "profiling":
                    yield Command("preempt", jid=job.jid)
        planned = [t for t in cands.place if t.job.jid in plan.run or t.job.n_placed]
        if not planned:
            return

        def key(job: Job) -> tuple:
            return (not job.spec.has_slo, job.spec.deadline if job.spec.has_slo else view.remaining_time(job))

        yield from self.job_first(view, Candidates(planned, cands.migrate, cands.servers, cands.can_preempt),
                                  key, "exclusive", self.server_order, True)

    def server_order(self, view: ClusterView, task: Task, mask: np.ndarray) -> list[int]:
        """Where a planned job's task may go, best first: its single-GPU allocation's level-0 cells by
        ``single_gpu_placement``, any other allocation consolidated (:func:`consolidated_order`); never onto a
        profiling stint's GPUs."""
        cells = self._cells.get(task.job.jid, ())
        if cells and cells[0] > 1 and not any(cells[1:]):  # the single-GPU allocation of a multi-GPU job
            single = pack_order if self.single_gpu_placement == "best-fit" else spread_order
            servers = single(view, task, mask)
        else:
            servers = consolidated_order(view, task, mask)
        # a profiling stint's GPUs look idle to the simulator: no worker goes on them, and a PS only where a
        # waiting worker of its job still can (keep_ps_with_workers's dry run does not see the stints)
        if task.is_ps and not any(t.state == TaskState.WAITING and not t.is_ps for t in task.job.tasks):
            return servers
        free = self.profiler.free_gpus(view, servers)  # per task: each placement of this round takes an idle GPU
        return [s for s in servers if free[s] > 0]
