"""HLAS-P: HLAS with conservative job-size prediction (Hare, Chen et al., IEEE TCC 2024, §V, Figs. 12-13, 26-27).

Everything of :class:`~clustergym.baselines.hlas.HLAS` (grouping, EFT placement with relaxed synchronisation,
round-level rescheduling) stays; only the job order changes (§V-B):

- **Expected size.** H_n(t) = (R_n^r(t) + R_n^p(t)) x T̄_n, with R^r the rounds run (iterations done) and R^p
  the predicted additional rounds. The prediction is made once, when the job first meets the scheduler
  (R^r = 0: "when a job goes out of the prediction module"), as R^p_0; afterwards R^p(t) = max(0, R^p_0 - R^r):
  while the job runs inside its prediction, R^p falls as R^r grows and H stays put; once the prediction is
  used up (R^p = 0) H grows with R^r as in HLAS. Hence H_n(t) = max(R^r, R^p_0) x T̄_n.
- **Queues.** The K queues of HLAS by H (same thresholds E_k); a new job with a prediction enters the queue of
  its expected size, not Q_1. Each queue has two sub-queues: q_k^1 (R^p > 0) before q_k^2 (R^p = 0); q_k^1 by
  R^p descending ("the job with larger R^p is scheduled first"), q_k^2 FIFO. HLAS's "a partly scheduled job
  first" is kept.

**The predictor (our stand-in; the paper's is silent on numbers).** Hare's conservative predictor (Fig. 13)
fits the loss curve, averages with similar jobs' history and shrinks the guess for NAS jobs that fall behind;
its output is a lower bound on the remaining rounds. The simulator knows each job's true rounds to its
stopping point (``Job.target_iters``), so the stand-in is a noisy, deliberately low oracle:
R^p_0 = floor(``fraction`` x N_n x exp(``error`` x eps)), eps ~ N(0, 1) drawn from a stream seeded by
(``seed``, job id) (deterministic, independent of the order jobs are seen). The paper gives no fraction or
error; defaults ``fraction`` = 0.5 (conservative: half the true size) and ``error`` = 0.2 (a log-normal
factor, about +-20 %). ``error`` = 0 with ``fraction`` = 1 is a clairvoyant size; ``fraction`` = 0 is HLAS
(every job in q^2, FIFO, H = R^r T̄: the same order as HLAS). Hare's Fig. 12(c) is reproduced by the policy
with a predictor that knows only "J3 runs at least 3 rounds" (tests/test_hlas_p.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .hlas import HLAS


@dataclass
class HLASP(HLAS):
    """Hare's HLAS-P (module docstring): HLAS ordered by expected size with a conservative size prediction.
    ``fraction`` and ``error``: the predictor's scale and log-normal error; ``seed``: its error stream."""

    name = "hlas-p"
    source = "Hare/HLAS-P (Chen, Li, Wu, Guo, IEEE TCC 2024) §V-A/B, Figs. 12-13, 26-27"
    fraction: float = 0.5
    error: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.fraction) and self.fraction >= 0):
            raise ValueError(f"HLAS-P fraction must be a finite number >= 0, got {self.fraction!r}")
        if not (math.isfinite(self.error) and self.error >= 0):
            raise ValueError(f"HLAS-P error must be a finite number >= 0, got {self.error!r}")
        self._predicted: dict[int, float] = {}

    def new_episode(self, view: ClusterView) -> None:
        super().new_episode(view)
        self._predicted = {}

    def predict_rounds(self, view: ClusterView, job: Job) -> float:
        """R^p_0: the conservative prediction of the job's rounds, made at its first sight (module docstring)."""
        total = view.iters(job) + view.remaining_iters(job)
        eps = np.random.default_rng((int(self.seed), int(job.jid))).standard_normal()
        return float(math.floor(self.fraction * total * math.exp(self.error * eps)))

    def predicted(self, view: ClusterView, job: Job) -> float:
        """R^p_0 of ``job``, predicted once and kept."""
        p = self._predicted.get(job.jid)
        if p is None:
            p = self._predicted[job.jid] = self.predict_rounds(view, job)
        return p

    def service(self, view: ClusterView, job: Job) -> float:
        """H_n(t) = (R^r + R^p) x T̄_n = max(R^r, R^p_0) x T̄_n: the expected size."""
        return max(view.iters(job), self.predicted(view, job)) * self.tbar(view, job)

    def rank(self, view: ClusterView, job: Job) -> tuple:
        """(queue by H, sub-queue q^1 before q^2, R^p descending in q^1, then FIFO)."""
        left = max(0.0, self.predicted(view, job) - view.iters(job))
        return (super().rank(view, job)[0], left <= 0.0, -left, job.spec.submit_time, job.jid)
