"""HLAS: Heterogeneity-aware Least-Attained-Service (Hare, Chen et al., IEEE TCC 2024, §II-B.3, §IV).

Preparation (§IV-A, Eqs. 4-6): the servers are grouped so that every group shows each profiled model about the
same speed (:mod:`clustergym.baselines.hare_grouping`: min-max objective, greedy + local search, whole servers
because commands address servers). T̄_n, the job's average one-round time, is its round time on an idle group
(EFT with relaxed synchronisation), averaged over the groups.

Run time (Algorithms 1-3, the prose's reading: the first non-empty queue only):

- **Queues.** Service H_n = R_n^r x T̄_n (rounds done = iterations done). K queues by the thresholds E_k;
  a new job enters Q_1 (H = 0) and is demoted as its service grows (never promoted).
- **Order.** The highest non-empty queue is served; in it a partly scheduled job first, then FIFO (arrival).
- **Placement: relaxed synchronisation by EFT** (:mod:`clustergym.baselines.hare_plan`). A job's tasks go to the
  group where its round ends first, each task to the GPU where it finishes first; several tasks of a round may
  share a GPU and run one after another (the simulator times them so), so a job starts on fewer idle GPUs than
  it has tasks and puts more tasks on faster GPUs (Figs. 5, 10). A job that no single group holds spreads over
  the groups (a partly scheduled job continues on the next idle group); one job per GPU at a time.
- **Round-level rescheduling, task-level non-preemption.** Hare reassigns every round, never a running task.
  A simulated iteration is short against a decision tick, so a decision point is a round boundary: a waiting
  job takes the GPUs of running jobs ranked below it (queue, then arrival) when they would hold it, and a
  running job whose round would end ``reschedule_gain`` sooner on the GPUs free now leaves its GPUs to be placed
  by EFT again. Both go through the simulator's preemption (its suspend/resume cost is charged; Hare's own task
  switch costs under 5 % of a task, §II-C). In the Gymnasium env a preemption is an action only while tasks
  wait (``EnvConfig.preemption``); through :func:`clustergym.baselines.base.run` always.

Unspecified in the paper (seed_hare.md §7.2), our defaults, all exposed: K = 4 with thresholds 600, 3600,
21600 s of average-group time (ratio 6); |U| = the count of the rarest GPU type's servers;
``reschedule_gain`` = 0.1 (a reschedule pays the simulator's suspend/resume cost, so a marginal gain is not
worth it). :func:`eft_split` reproduces Fig. 10 and :func:`single_gpu_toy` Fig. 12; HLAS-P (§V) is
:class:`clustergym.baselines.hlas_p.HLASP`.
"""
from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from clustergym.core.catalogue_data import get_model, model_names
from clustergym.core.job import Job, JobState, Task, TaskState
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy
from .hare_grouping import group_servers, server_speeds
from .hare_plan import Occupancy, Plan, current_round_time, eft_plan


def eft_split(n_tasks: int, task_times: Sequence[float]) -> tuple[list[int], float]:
    """Earliest-finish-time split of one round's ``n_tasks`` identical tasks over GPUs whose per-task
    times are ``task_times`` (ties to the lower GPU index). Returns the tasks per GPU and the round's
    task-GPU time (sum of the task times; Hare's service measure under relaxed synchronisation)."""
    finish = [0.0] * len(task_times)
    count = [0] * len(task_times)
    for _ in range(n_tasks):
        g = min(range(len(task_times)), key=lambda i: (finish[i] + task_times[i], i))
        finish[g] += task_times[g]
        count[g] += 1
    return count, float(sum(c * t for c, t in zip(count, task_times)))


def hlas_order_key(service: float, arrival_rank: int, thresholds: Sequence[float] | None = None):
    """HLAS job order: queue by service (least attained first), FIFO inside a queue. With
    ``thresholds=None`` the queues are continuous (pure LAS), as in Hare's one-GPU toy example."""
    q = service if thresholds is None else bisect.bisect_right(list(thresholds), service)
    return (q, arrival_rank)


def single_gpu_toy(sizes: Sequence[int], mode: str = "las", predicted: Sequence[int] | None = None) -> list[float]:
    """Hare Fig. 12: one GPU, unit-time rounds, job i has ``sizes[i]`` rounds, all arriving at 0.
    ``mode``: "las" (HLAS order on attained rounds), "srtf" (clairvoyant), "hlas-p" (HLAS order on
    expected size = attained + conservatively predicted additional rounds, ``predicted[i]`` at start).
    Returns completion times."""
    n = len(sizes)
    done = [0] * n
    end = [0.0] * n
    pred = list(predicted) if predicted is not None else [0] * n
    t = 0
    while any(d < s for d, s in zip(done, sizes)):
        live = [i for i in range(n) if done[i] < sizes[i]]
        if mode == "srtf":
            i = min(live, key=lambda i: (sizes[i] - done[i], i))
        elif mode == "las":
            i = min(live, key=lambda i: hlas_order_key(done[i], i))
        elif mode == "hlas-p":
            i = min(live, key=lambda i: hlas_order_key(done[i] + max(0, pred[i] - done[i]), i))
        else:
            raise ValueError(mode)
        done[i] += 1
        t += 1
        if done[i] == sizes[i]:
            end[i] = float(t)
    return end


@dataclass
class HLAS(Policy):
    """Hare's HLAS (module docstring). ``thresholds``: the queue bounds E_k on the service H_n, in seconds of
    running on an average group (K = len + 1 queues; ``()``: one queue, FIFO); ``n_groups``: |U| (None: the
    count of the rarest GPU type's servers, :func:`~clustergym.baselines.hare_grouping.default_n_groups`);
    ``relaxed_sync``: several tasks of a round may share a GPU; ``reschedule``: round-level rescheduling
    (jobs ranked lower give their GPUs to a waiting job ranked higher; a job whose round would run at least
    ``reschedule_gain`` faster on the GPUs free now is re-placed), through preemption."""

    name = "hlas"
    source = "Hare/HLAS (Chen, Li, Wu, Guo, IEEE TCC 2024) §II-B.3, §IV, Eqs. 4-6, Algorithms 1-3"
    thresholds: tuple[float, ...] = (600.0, 3600.0, 21600.0)
    n_groups: int | None = None
    relaxed_sync: bool = True
    reschedule: bool = True
    reschedule_gain: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        self.thresholds = tuple(float(x) for x in self.thresholds)
        if any(not x > 0 for x in self.thresholds) or list(self.thresholds) != sorted(set(self.thresholds)):
            raise ValueError(f"HLAS thresholds must be positive and strictly increasing, got {self.thresholds}")
        if self.n_groups is not None and (isinstance(self.n_groups, bool) or not isinstance(self.n_groups, int)
                                          or self.n_groups < 1):
            raise ValueError(f"HLAS n_groups must be None or an integer >= 1, got {self.n_groups!r}")
        if not 0.0 <= self.reschedule_gain < 1.0:
            raise ValueError(f"HLAS reschedule_gain must be in [0, 1), got {self.reschedule_gain!r}")
        self.groups: list[list[int]] = []
        self._tbar: dict[int, float] = {}
        # plans and the occupancy they read depend on the placement alone: kept while it is unchanged (the same
        # simulator's view and ClusterView.placement_version), e.g. across rounds in which nothing was placed
        self._plans: dict[tuple, Plan | None] = {}
        self._occ: Occupancy | None = None
        self._plans_at: tuple | None = None

    # -- preparation: GPU grouping (Eqs. 4-6) and the average round time T̄_n
    def new_episode(self, view: ClusterView) -> None:
        types = list(view.server_gpu_type)
        models = [get_model(m) for m in model_names()]
        models = [m for m in models if all(t in m.iteration_time for t in set(types))]
        times = np.array([[m.iter_time(t) for t in types] for m in models])
        self.groups = group_servers(server_speeds(times, view.server_n_gpus), types, self.n_groups)
        self._tbar = {}

    def tbar(self, view: ClusterView, job: Job) -> float:
        """T̄_n: the job's round time on an idle group (EFT, relaxed sync), averaged over the groups that can
        hold it (the whole cluster if none can)."""
        v = self._tbar.get(job.jid)
        if v is None:
            occ = Occupancy(view)
            workers = list(job.tasks)
            times = []
            for g in self.groups:
                plan = eft_plan(view, workers, occ.gpus(job, g, frozenset(), self.relaxed_sync, idle=True))
                if plan is not None:
                    times.append(plan.round_time)
            if not times:
                plan = eft_plan(view, workers, occ.gpus(job, range(view.n_servers), frozenset(),
                                                             self.relaxed_sync, idle=True))
                times.append(plan.round_time if plan is not None else view.ref_iter_time(job))
            v = self._tbar[job.jid] = float(np.mean(times))
        return v

    # -- run time: queues by attained service, FIFO inside a queue
    def service(self, view: ClusterView, job: Job) -> float:
        """H_n = R_n^r x T̄_n: rounds (iterations) done times the average round time."""
        return view.iters(job) * self.tbar(view, job)

    def rank(self, view: ClusterView, job: Job) -> tuple:
        return (hlas_order_key(self.service(view, job), 0, self.thresholds)[0], job.spec.submit_time, job.jid)

    def plan(self, view: ClusterView, job: Job, freed: frozenset[int] = frozenset(),
             unplaced: bool = False) -> Plan | None:
        """Where the job's unplaced workers go now: the group where its round ends first (a job already partly
        placed stays in its groups); all groups together if no one group holds it (Hare's partly scheduled job
        continues on the next idle group); None if the GPUs it may use cannot hold it. ``unplaced``: as if all
        its tasks were back in the queue and its GPUs free (a reschedule)."""
        at = (view, view.placement_version)
        if self._plans_at != at:
            self._plans.clear()
            self._occ = None
            self._plans_at = at
        key = (job.jid, freed, unplaced)
        if key not in self._plans:
            if self._occ is None:
                self._occ = Occupancy(view)
            self._plans[key] = self._eft_over_groups(view, self._occ, job, freed, unplaced)
        return self._plans[key]

    def _eft_over_groups(self, view: ClusterView, occ: Occupancy, job: Job, freed: frozenset[int],
                         unplaced: bool) -> Plan | None:
        placed = [] if unplaced else [t for t in job.tasks if t.state == TaskState.RUNNING]
        workers = [t for t in job.tasks if t not in placed]
        mine = frozenset(t.server for t in placed)
        best = None
        for g in (g for g in self.groups if not mine or mine & set(g)):
            p = eft_plan(view, workers, occ.gpus(job, g, freed, self.relaxed_sync, unplaced=unplaced), mine)
            if p is not None and (best is None or p.round_time < best.round_time - 1e-12):
                best = p
        if best is None and len(self.groups) > 1:
            best = eft_plan(view, workers, occ.gpus(job, range(view.n_servers), freed, self.relaxed_sync,
                                                         unplaced=unplaced), mine)
        return best

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        yield from self._placements(view, cands)
        if self.reschedule and cands.can_preempt:
            yield from self._make_room(view)
            yield from self._leave_slow_gpus(view)

    def _placements(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        """Highest queue first, a partly placed job first, FIFO (Algorithm 3); each job's tasks by EFT."""
        by_job: dict[int, list[Task]] = {}
        for t in cands.place:
            if t.tid not in self._touched:
                by_job.setdefault(t.job.jid, []).append(t)
        jobs = sorted((view.job(j) for j in by_job), key=lambda j: (j.n_placed == 0, self.rank(view, j)))
        allowed = set(cands.servers.tolist())
        for job in jobs:
            p = self.plan(view, job)
            if p is None:  # (the plan checks every unplaced task: HLAS's own gang guard)
                continue
            target = dict(zip((t.tid for t in p.tasks), p.servers))
            for t in sorted(by_job[job.jid], key=lambda t: t.tid):
                first = target.get(t.tid, p.servers[0])
                rest = sorted(set(p.servers) - {first})
                for s in [first, *rest]:
                    if s in allowed:
                        yield Command("place", t.tid, s)

    def _running(self, view: ClusterView) -> list[Job]:
        return [j for j in view.active_jobs() if j.state == JobState.ACTIVE and j.fully_placed
                and not any(t.tid in self._touched for t in j.tasks)]

    def _make_room(self, view: ClusterView) -> Iterator[Command]:
        """Round-level rescheduling by priority: the best-ranked waiting job that cannot be placed now, but could
        be on the GPUs of the running jobs ranked below it, takes them: the lowest-ranked of those is preempted."""
        waiting = {t.job.jid: t.job for t in view.waiting_tasks() if t.job.n_placed == 0 and t.tid not in self._touched}
        running = self._running(view)
        for head in sorted(waiting.values(), key=lambda j: self.rank(view, j)):
            if self.plan(view, head) is not None:
                continue
            r = self.rank(view, head)
            lower = sorted((j for j in running if self.rank(view, j) > r), key=lambda j: self.rank(view, j))
            if lower and self.plan(view, head, frozenset(j.jid for j in lower)) is not None:
                for victim in reversed(lower):
                    yield Command("preempt", jid=victim.jid)
            return

    def _leave_slow_gpus(self, view: ClusterView) -> Iterator[Command]:
        """Round-level rescheduling by speed: a running job whose next round would end at least
        ``reschedule_gain`` sooner on the GPUs free now (its own included) is taken off its GPUs, to be placed
        by EFT again (highest ranked first). Only a plan that puts some task on another server counts: the
        policy places tasks on servers and the simulator picks the GPU within one (least loaded), so a plan
        with the job's own servers and task counts would be placed as the job runs now. (Without this check a
        16-task job whose EFT split of one server's GPUs beats the simulator's was preempted and placed back
        the same way every round: 302 preemptions of one job on held-out window 20004 of the contended
        default, ``GPUCluster-v2``.)"""
        for job in sorted(self._running(view), key=lambda j: self.rank(view, j)):
            now = current_round_time(view, job)
            p = self.plan(view, job, unplaced=True)
            if (p is not None and p.round_time < now * (1.0 - self.reschedule_gain) - 1e-12
                    and Counter(p.servers) != Counter(t.server for t in job.tasks)):
                yield Command("preempt", jid=job.jid)
