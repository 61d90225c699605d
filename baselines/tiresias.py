"""Tiresias 2D-LAS (Gu et al., NSDI '19), the "2D-LAS" baseline of Hare.

Attained service = GPUs x time the job has run (the 2D attained service, heterogeneity-oblivious).
Jobs sit in K discretised priority queues by attained service (thresholds in GPU-seconds); a lower
queue index is served first, FIFO (submission time) inside a queue. Placement is gang, one task per GPU,
consolidated (servers hosting the job first, then best fit), GPU type ignored.

Preemption: when the best waiting job does not fit and a running job sits in a strictly lower-priority
queue, the lowest-priority running job (latest submitted among ties) is preempted (``sim.preempt``,
suspend/resume costs charged by the engine). Through the env it acts on the victim's running-job row
(``EnvConfig.preemption``, on by default); with ``preemption=False`` Tiresias is non-preemptive. The head is
taken from the whole queue and the victim from every running job, not only the window's rows.

Thresholds: the paper's K and thresholds are operator parameters; we default to K = 2 with one
threshold at 3600 GPU-seconds (one GPU-hour) and no starvation promotion (``promote_knob`` = None).
Both are exposed; they are our reading, not numbers printed in the seeds.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterator

from clustergym.core.job import Job, JobState
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order


def queue_index(service: float, thresholds: tuple[float, ...]) -> int:
    """Queue of a job with ``service`` (0 = highest priority): Q_k holds E_k^L <= service < E_k^H."""
    return bisect.bisect_right(thresholds, service)


@dataclass
class Tiresias(Policy):
    name = "tiresias"
    source = "Tiresias (Gu et al., NSDI'19) 2D-LAS; Hare (TCC'24) 2D-LAS baseline"
    thresholds: tuple[float, ...] = (3600.0,)  # GPU-seconds; K = len + 1 queues
    preempt: bool = True
    promote_knob: float | None = None  # starvation guard: promote to Q_0 when waited > knob x run time
    # our variant (off: the rule as described): preempt, in one decision round, every victim the head needs
    # before anything else is placed, so backfill cannot take the freed GPUs first (docs/baselines.md)
    clear_at_once: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        self._clearing: tuple = ((), ())  # (Policy._round, victims' job ids): the round's preemption plan

    def service(self, view: ClusterView, job: Job) -> float:
        return job.spec.n_gpus * view.running_time(job)

    def queue(self, view: ClusterView, job: Job) -> int:
        q = queue_index(self.service(view, job), self.thresholds)
        if self.promote_knob is not None:
            run = view.running_time(job)
            if run > 0 and job.waiting_time > self.promote_knob * run:
                q = 0
        return q

    def key(self, view: ClusterView, job: Job):
        return (self.queue(view, job), job.spec.submit_time)

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if self.clear_at_once and self.preempt and cands.can_preempt and self._clearing[0] == self._round:
            for jid in self._clearing[1]:  # those already preempted are refused by the round rule
                yield Command("preempt", jid=jid)
        yield from self.job_first(view, cands, lambda j: self.key(view, j), "exclusive", pack_order, True)
        if self.preempt and cands.can_preempt:
            yield from self._preemptions(view)

    def _preemptions(self, view: ClusterView) -> Iterator[Command]:
        # the whole queue, not just the window: the env only shows tasks that fit now, and the jobs that
        # need a preemption are exactly those that do not
        waiting = {t.job.jid: t.job for t in view.waiting_tasks() if t.job.n_placed == 0}
        if not waiting:
            return
        head = min(waiting.values(), key=lambda j: (self.key(view, j), j.jid))
        qh = self.queue(view, head)
        running = [j for j in view.active_jobs()
                   if j.state == JobState.ACTIVE and j.fully_placed and self.queue(view, j) > qh]
        if not running:
            return
        idle = int((view.gpu_n_tasks == 0).sum())
        # only if freeing every lower-queue job could make room (otherwise preempting is pointless)
        if sum(j.spec.n_gpus for j in running) + idle < head.spec.n_gpus:
            return
        running.sort(key=lambda j: (self.queue(view, j), j.spec.submit_time, j.jid), reverse=True)
        if not self.clear_at_once:
            yield Command("preempt", jid=running[0].jid)
            return
        victims: list[int] = []
        for j in running:  # lowest priority first, until the head's GPUs would be free
            victims.append(j.jid)
            idle += j.spec.n_gpus
            if idle >= head.spec.n_gpus:
                break
        self._clearing = (self._round, tuple(victims))
        for jid in victims:
            yield Command("preempt", jid=jid)
