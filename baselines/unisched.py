"""UniSched (Gao, Ye, Sun, Zhang, Wen; IEEE Trans. Computers 2024): a lease-based scheduler for strict-SLO and
best-effort jobs, on the same ``preferences`` API as every heuristic. The estimator and the MILP are
:mod:`clustergym.baselines.unisched_milp`; this module turns the cluster view into the MILP's input and its plan
into commands.

Every ``cycle_s`` (UniSched's BE lease, 5 minutes) the policy re-plans (UniSched §III-C):

- **Estimator** (§III-B). Speed: the job is "profiled" on one GPU (T^comp) and, with its own partitions and
  replicas, on one node and on one GPU per node; T^1 and T^2 of Eq. 2 are fitted to those two times (the
  simulator's own cost model on the cluster's reference server and commonest GPU type: our stand-in for the
  paper's 5-minute profiling run on at most 2 GPUs, which occupies no GPU here; the paper's jobs are
  data-parallel, ours may be model-parallel, whose communication a 2-GPU data-parallel profile would miss).
  Eq. 2 then estimates every allocation: one node uses T^1, several nodes T^2 (the spread layout: an
  overestimate for a packed multi-node job, which UniSched counts as safe for deadlines). Iterations: what the job still needs to its current stopping point (for an OptStop job, the
  simulator's learning-curve prediction: UniSched's training-iteration estimator). Suspend/resume: t^sr is
  the simulator's checkpoint cost for the job (measured while profiling in the paper), expected over the
  remaining leases by Eq. 3 (SLO) or n/2 (best-effort); T^dur by Eq. 1.
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
allocation puts the job on as few servers as its cells span (:func:`consolidated_order`), the single-GPU
allocation spreads it. Jobs the
plan leaves out wait for the next cycle, as in UniSched.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Iterator

from clustergym.core.dag import reference_iteration_time
from clustergym.core.job import Job, TaskState
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, spread_order
from .unisched_milp import (BE_VALUE_SCALE, MilpJob, Plan, allocation_options, cells_of, duration, iteration_time,
                            solve_plan, sr_overhead)


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

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.cycle_s > 0 or self.horizon_slots < 1 or not self.time_limit_s > 0 or self.max_jobs < 1:
            raise ValueError(f"unisched: cycle_s, time_limit_s must be > 0 and horizon_slots, max_jobs >= 1 "
                             f"(got {self.cycle_s}, {self.time_limit_s}, {self.horizon_slots}, {self.max_jobs})")
        self.solves = 0
        self.solve_seconds = 0.0
        self.statuses: Counter = Counter()
        self.last_status = ""

    def new_episode(self, view: ClusterView) -> None:
        self._plan: Plan | None = None
        self._planned_at = -math.inf
        self._plan_round: tuple = ()
        self._spread: set[int] = set()
        self._profiles: dict[int, tuple[float, float, float]] = {}
        sizes = Counter(zip(view.server_n_gpus.tolist(), view.nic_gbps.tolist(), view.intra_gbps.tolist()))
        self._server = max(sizes, key=lambda k: sizes[k] * k[0])  # the server shape holding the most GPUs
        self._top = max(0, int(math.log2(max(1, self._server[0]))))
        self._gpu = max(view.gpu_type_counts, key=view.gpu_type_counts.__getitem__)

    # ----------------------------------------------------------------------------------------- estimator
    def profile(self, job: Job) -> tuple[float, float, float]:
        """(T^comp, T^1, T^2) of Eq. 2: T^comp the iteration time on one GPU, T^1 and T^2 fitted so that Eq. 2
        gives the job's own iteration time on one node and on one GPU per node."""
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
        """The job as the MILP sees it (estimates, values, allocations, what it holds now)."""
        n, size, slot = job.spec.n_gpus, 1 << self._top, self.cycle_s
        prof = self.profile(job)
        shapes = allocation_options(n, self._top)
        times = [iteration_time(*prof, n, nodes) for _, nodes in shapes]
        options = [(cells, times[0] / t) for (cells, _), t in zip(shapes, times) if times[0] / t >= self.min_speed_ratio]
        n_iter, t_iter = view.remaining_iters(job), iteration_time(*prof, n, math.ceil(n / size))
        remaining = n_iter * t_iter
        raw = max(1, math.ceil(remaining / slot - 1e-9))
        t_sr = view.checkpoint_s(job)
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

    # ------------------------------------------------------------------------------------------ selector
    def plan(self, view: ClusterView) -> Plan:
        """The current cycle's plan, re-solved once ``cycle_s`` has passed since the last one."""
        if self._plan is not None and view.now < self._planned_at + self.cycle_s:
            return self._plan
        active = sorted(view.active_jobs(), key=lambda j: (not j.spec.has_slo, j.n_placed == 0, j.spec.submit_time,
                                                           j.jid))[: self.max_jobs]
        jobs = [self.milp_job(view, j) for j in active]
        free = [0] * (self._top + 1)
        for s in range(view.n_servers):
            for g, c in enumerate(cells_of(int(view.idle_gpus[s]), self._top)):
                free[g] += c
        plan, outcome = solve_plan(jobs, free, view.n_gpus, self.horizon_slots, self.time_limit_s)
        if plan is None:
            plan = self._fallback(view, jobs)
        self.solves += 1
        self.solve_seconds += plan.seconds
        self.statuses[plan.status] += 1
        self.last_status = plan.status
        self._plan, self._planned_at, self._plan_round = plan, view.now, (view.decisions, view.now)
        # jobs started on single GPUs (the fragmented allocation) are spread, the others packed
        self._spread = {j.jid for j in jobs if not j.running and plan.run.get(j.jid, -1) >= 0 and j.n_gpus > 1
                        and j.options[plan.run[j.jid]][0][0] == j.n_gpus}
        return plan

    def _fallback(self, view: ClusterView, jobs: list[MilpJob]) -> Plan:
        """No solution within the time limit: the previous plan for the jobs still active, else the greedy rule."""
        ids = {j.jid for j in jobs}
        if self._plan is not None:
            return Plan({jid: p for jid, p in self._plan.run.items() if jid in ids}, "cached")
        run, left = {}, view.n_gpus
        order = sorted(jobs, key=lambda j: (not j.running, j.deadlines is None,
                                            j.deadlines[0][0] if j.deadlines else -j.be_value))
        for j in order:
            if j.running or j.n_gpus <= left:
                run[j.jid] = -1 if j.running else 0
                left -= j.n_gpus
        return Plan(run, "greedy")

    # ------------------------------------------------------------------------------------------ commands
    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if not view.active_jobs():
            return
        plan = self.plan(view)
        if cands.can_preempt and self._plan_round == (view.decisions, view.now):
            for job in view.active_jobs():
                if job.n_placed and job.jid not in plan.run:
                    yield Command("preempt", jid=job.jid)
        planned = [t for t in cands.place if t.job.jid in plan.run or t.job.n_placed]
        if not planned:
            return

        def key(job: Job) -> tuple:
            return (not job.spec.has_slo, job.spec.deadline if job.spec.has_slo else view.remaining_time(job))

        def order(v: ClusterView, task, mask):
            return (spread_order if task.job.jid in self._spread else consolidated_order)(v, task, mask)

        yield from self.job_first(view, Candidates(planned, cands.migrate, cands.servers, cands.can_preempt),
                                  key, "exclusive", order, True)
