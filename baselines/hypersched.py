"""HyperSched (Liaw et al., SoCC '19), adapted: deadline-aware, favours jobs likely to gain accuracy
before their deadline.

HyperSched allocates a cluster to hyper-parameter trials so that the best trial is as accurate as
possible by a deadline, shifting resources to promising trials. Per job, we estimate the accuracy it
can still gain before its deadline if it ran at its reference speed from now on:

    gain_J = acc(min(target, i + (deadline - now) / T_ref)) - acc(i)

and order jobs (1) those that can finish before their deadline, (2) those that can still gain accuracy
before it, (3) the rest (deadline passed); inside a class by gain per GPU (largest first), then earliest
deadline. Non-preemptive, skips jobs that do not fit, one task per GPU, consolidated. HyperSched's
trial-level resource elasticity and early termination of unpromising trials are not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order


@dataclass
class HyperSched(Policy):
    name = "hypersched"
    source = "HyperSched (Liaw et al., SoCC'19); MLFS §4.1 comparison method"

    def key(self, view: ClusterView, job: Job):
        it = view.iters(job)
        T = view.ref_iter_time(job)
        left = job.spec.deadline - view.now
        reach = min(job.target_iters, it + max(0.0, left) / T)
        m = job.spec.max_iterations
        gain = job.curve.accuracy_at(reach / m) - job.curve.accuracy_at(it / m)
        can_finish = left > 0 and (job.target_iters - it) * T <= left
        cls = 0 if can_finish else (1 if gain > 0 else 2)
        return (cls, -gain / job.spec.n_gpus, job.spec.deadline)

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: self.key(view, j), "exclusive", pack_order, True)
