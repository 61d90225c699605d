"""HLAS-L: HLAS with Optimus's loss-fitting size prediction (Hare, Chen et al., IEEE TCC 2024, §VI, Figs. 26-27:
"for HLAS-L, we add predicted job size by the loss fitting technique [19]", [19] = Optimus, Peng et al.).

Everything of :class:`~clustergym.baselines.hlas.HLAS` stays (grouping, EFT placement with relaxed
synchronisation, round-level rescheduling, K queues by H with FIFO inside a queue); only the virtual job size
changes: H_n = (R^r + R^p_L) x T̄_n, with R^p_L the rounds Optimus's fit of the job's loss so far predicts it still
runs (:func:`clustergym.baselines.size_predict.predict_remaining`: l(k) = 1 / (b0 k + b1) + b2, converged where
the fitted excess over b2 is ``eps`` of its initial value). The paper gives no more detail; our choices:

- the prediction is the full remaining size (not capped: that is what distinguishes it from HLAS-P's conservative
  partial prediction), re-fitted as the job runs;
- the loss points: the job's loss after each whole iteration done, thinned to ``max_points`` evenly spaced ones
  (:func:`~clustergym.baselines.size_predict.observed_losses`: the prefix the job has run, never its total size);
- a job is re-fitted once its iterations done have grown by ``refit_growth`` (default 10 %) since its last fit
  (a fit costs about a millisecond; Optimus also refits periodically, not per step); between fits the remaining
  size counts down as the job runs;
- with fewer than 3 points, or points the fit rejects (a loss of 0), R^p_L = 0: the job is ordered as in HLAS.
  A new job has no points, so it enters Q_1 as in HLAS; the fit on its first few points is poor (the paper's
  reason for HLAS-L's "trivial improvement") and nothing here corrects it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .hlas import HLAS
from .size_predict import LossFitParams, fitted_remaining, refit_due


@dataclass
class HLASL(LossFitParams, HLAS):
    """Hare's HLAS-L baseline (module docstring): HLAS ordered by attained + Optimus-predicted remaining rounds.
    ``eps``: the convergence rule's fraction; ``max_points``: loss points per fit; ``refit_growth``: relative
    growth of the iterations done that triggers a new fit."""

    name = "hlas-l"
    source = "Hare/HLAS-L (Chen, Li, Wu, Guo, IEEE TCC 2024) §VI Figs. 26-27; loss fitting of Optimus (Peng et al., EuroSys '18) §3.1"

    def __post_init__(self) -> None:
        super().__post_init__()
        self._fits: dict[int, tuple[float, float]] = {}

    def new_episode(self, view: ClusterView) -> None:
        super().new_episode(view)
        self._fits = {}

    def fitted_end(self, view: ClusterView, job: Job) -> float:
        """The iteration where the job's last loss fit predicts it converges (its iterations done + the
        predicted remaining, at the time of that fit); re-fitted per ``refit_growth``."""
        done = view.iters(job)
        last = self._fits.get(job.jid)
        if last is None or refit_due(done, last[0], self.refit_growth):
            left = fitted_remaining(view, job, self.max_points, self.eps)  # None: no fit, nothing predicted
            end = float(np.floor(done + 1e-9)) + (left or 0.0)  # from the last observed iteration
            last = self._fits[job.jid] = (done, end)
        return last[1]

    def predicted_remaining(self, view: ClusterView, job: Job) -> float:
        """R^p_L: the rounds the loss fit predicts the job still runs (0 without a usable fit)."""
        return max(0.0, self.fitted_end(view, job) - view.iters(job))

    def service(self, view: ClusterView, job: Job) -> float:
        """H_n = (R^r + R^p_L) x T̄_n: the virtual job size."""
        return (view.iters(job) + self.predicted_remaining(view, job)) * self.tbar(view, job)
