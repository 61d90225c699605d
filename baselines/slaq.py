"""SLAQ (Zhang et al., SoCC '17): quality-driven scheduling, as MLFS compares against it.

SLAQ gives resources to the jobs with the largest predicted loss reduction per unit of resource. Our
version ranks jobs by the normalised loss reduction the job would make in the next ``horizon_s``
(default: one scheduling tick) if it ran at its reference speed, divided by its GPU count:

    score_J = (loss(i) - loss(i + horizon / T_ref)) / (loss(0) - min loss) / n_gpus

where the loss comes from the job's learning curve (SLAQ predicts it online from the observed curve;
reading the curve is our shortcut). Highest score first, skipping jobs that do not fit; one task per
GPU, consolidated. SLAQ's fine-grained reallocation of CPU shares between running jobs is not modelled.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order


@dataclass
class SLAQ(Policy):
    name = "slaq"
    source = "SLAQ (Zhang, Stafman, Or, Freedman, SoCC'17); MLFS §4.1 comparison method"
    horizon_s: float | None = None  # None: the simulator's tick

    def score(self, view: ClusterView, job: Job) -> float:
        horizon = view.tick_s if self.horizon_s is None else self.horizon_s
        it = view.iters(job)
        ahead = min(job.target_iters, it + horizon / view.ref_iter_time(job))
        curve = job.curve
        span = max(1e-12, curve.loss[0] - min(curve.loss))
        return (job.loss_at_iter(it) - job.loss_at_iter(ahead)) / span / job.spec.n_gpus

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: -self.score(view, j), "exclusive", pack_order, True)
