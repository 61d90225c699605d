"""HLAS-P: HLAS with conservative job-size prediction (Hare, Chen et al., IEEE TCC 2024, §V, Figs. 12-13, 26-27).

Everything of :class:`~clustergym.baselines.hlas.HLAS` (grouping, EFT placement with relaxed synchronisation,
round-level rescheduling) stays; only the job order changes (§V-B):

- **Expected size.** H_n(t) = (R_n^r(t) + R_n^p(t)) x T̄_n, with R^r the rounds run (iterations done) and R^p
  the predicted additional rounds. A prediction made at R^r = r0 says "p more rounds": its target is r0 + p, and
  R^p(t) = max(0, r0 + p - R^r): while the job runs inside its prediction R^p falls as R^r grows and H stays put;
  once it is used up (R^p = 0) H grows with R^r as in HLAS. Hence H_n(t) = max(R^r, r0 + p) x T̄_n.
- **Queues.** The K queues of HLAS by H (same thresholds E_k); a new job with a prediction enters the queue of
  its expected size, not Q_1. Each queue has two sub-queues: q_k^1 (R^p > 0) before q_k^2 (R^p = 0); q_k^1 by
  R^p descending ("the job with larger R^p is scheduled first"), q_k^2 FIFO. HLAS's "a partly scheduled job
  first" is kept.

**Hare's conservative predictor** (§V-A, Fig. 13), :class:`HLASP` (``hlas-p``). The paper gives its steps, no
numbers; every value below is ours, exposed as a parameter:

1. *Loss fit, partial.* Optimus's fit of the loss the job has produced so far
   (:mod:`clustergym.baselines.size_predict`; convergence where the fitted excess over the asymptote is ``eps`` of
   its initial value) gives the remaining rounds; only a limited number is predicted: α = min(fit, A_n), with
   A_n = ``horizon_s`` / T̄_n, the rounds the job runs in ``horizon_s`` seconds on an average group (default
   3600 s, HLAS's second threshold E_2). No fit (fewer than 3 loss points, e.g. a job that has not run, or
   points the fit rejects): no α.
2. *History.* Similar jobs = finished jobs of the same model in this episode (the simulator has no job names or
   users; :class:`~clustergym.baselines.size_predict.History`). Their mean rounds give the historical remaining
   h = min(max(0, mean - R^r), A_n) ("averaging α and practical rounds in history": rounds still to run, so
   both terms count the same thing). R^p = (α + h) / 2 with both, the one there is with one, 0 with neither.
3. *NAS groups* (:mod:`clustergym.core.nas`: trials of one search, stopped by its controller when they fall
   behind). A job that "falls far behind others" of its group gets a smaller prediction: R^p of steps 1-2 (step
   3 follows them in Fig. 13) x ``nas_shrink`` (default 0.5). Falling far behind (ours): after its d whole
   iterations the job's loss is above ``nas_lag`` (default 1.1) x the best loss another trial of its group
   (running or ended) showed after min(d, its own iterations), i.e. some competitor did better with at most as
   many iterations. Only what the scheduler sees is read: the group's membership and the losses its trials
   reported so far (:meth:`~clustergym.core.view.ClusterView.nas_trials`, ``observed_loss``). ``nas_shrink``
   = 1 switches step 3 off. The test is made whenever a prediction is (a job that starts lagging between two
   predictions keeps its current one).

A prediction is made when the scheduler first sees the job, and again once it is used up (R^r has reached its
target) and either the job's iterations have grown by ``refit_growth`` since the last attempt or a job of its
model has finished since (a new record). R^p = 0 puts the job in q^2 with H = R^r T̄ (as in HLAS).

**The seeded stand-in** (:class:`HLASPStandin`, ``hlas-p-standin``; kept for the earlier hare-hetero numbers,
and as ``hlas-p-oracle`` with ``fraction=1, error=0``): it reads the job's true rounds to its stopping point
(``Job.target_iters``), which no scheduler sees: a noisy, deliberately low oracle made once at first sight,
R^p_0 = floor(``fraction`` x N_n x exp(``error`` x eps)), eps ~ N(0, 1) drawn from a stream seeded by
(``seed``, job id) (deterministic, independent of the order jobs are seen). Defaults ``fraction`` = 0.5 and
``error`` = 0.2; ``error`` = 0 with ``fraction`` = 1 is a clairvoyant size; ``fraction`` = 0 is HLAS. Hare's
Fig. 12(c) is reproduced by the ordering with a predictor that knows only "J3 runs at least 3 rounds"
(tests/test_hlas_p.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command
from .hlas import HLAS
from .size_predict import History, LossFitParams, fitted_remaining, refit_due


@dataclass
class ExpectedSizeHLAS(HLAS):
    """HLAS-P's ordering by expected size (module docstring) around a predictor: :meth:`predict_target` (the
    rounds the job is predicted to reach; default: rounds done + :meth:`predict_rounds`) and :meth:`_retry`
    (whether a used-up prediction is made again; default never)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._predicted: dict[int, tuple[float, float, int]] = {}  # jid -> (target, iterations at the attempt, records)

    def new_episode(self, view: ClusterView) -> None:
        super().new_episode(view)
        self._predicted = {}

    def predict_rounds(self, view: ClusterView, job: Job) -> float:
        """R^p: the additional rounds predicted now."""
        raise NotImplementedError

    def predict_target(self, view: ClusterView, job: Job) -> float:
        """The rounds the job is predicted to reach: R^r now + :meth:`predict_rounds`."""
        return view.iters(job) + self.predict_rounds(view, job)

    def _records(self, job: Job) -> int:
        return 0

    def _retry(self, view: ClusterView, job: Job, done_then: float, records_then: int) -> bool:
        return False

    def predicted(self, view: ClusterView, job: Job) -> float:
        """The target (r0 + p) of the job's current prediction; predicted at first sight and per :meth:`_retry`."""
        p = self._predicted.get(job.jid)
        if p is None or (view.iters(job) >= p[0] and self._retry(view, job, p[1], p[2])):
            p = self._predicted[job.jid] = (self.predict_target(view, job), view.iters(job), self._records(job))
        return p[0]

    def service(self, view: ClusterView, job: Job) -> float:
        """H_n(t) = (R^r + R^p) x T̄_n = max(R^r, r0 + p) x T̄_n: the expected size."""
        return max(view.iters(job), self.predicted(view, job)) * self.tbar(view, job)

    def rank(self, view: ClusterView, job: Job) -> tuple:
        """(queue by H, sub-queue q^1 before q^2, R^p descending in q^1, then FIFO)."""
        left = max(0.0, self.predicted(view, job) - view.iters(job))
        return (super().rank(view, job)[0], left <= 0.0, -left, job.spec.submit_time, job.jid)


@dataclass
class HLASP(LossFitParams, ExpectedSizeHLAS):
    """Hare's HLAS-P with its conservative predictor (module docstring): loss fit capped at ``horizon_s`` of
    rounds, averaged with the finished jobs of the same model. ``eps``, ``max_points``: the loss fit's
    convergence fraction and points; ``refit_growth``: growth of the iterations done before a used-up prediction
    is made again; ``nas_lag``, ``nas_shrink``: step 3's lag factor and shrink (module docstring)."""

    name = "hlas-p"
    source = "Hare/HLAS-P (Chen, Li, Wu, Guo, IEEE TCC 2024) §V-A/B, Figs. 12-13, 26-27"
    horizon_s: float = 3600.0
    nas_lag: float = 1.1
    nas_shrink: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.horizon_s) and self.horizon_s > 0):
            raise ValueError(f"HLAS-P horizon_s must be a finite number > 0, got {self.horizon_s!r}")
        if not (math.isfinite(self.nas_lag) and self.nas_lag >= 1.0):
            raise ValueError(f"HLAS-P nas_lag must be a finite number >= 1, got {self.nas_lag!r}")
        if not 0.0 <= self.nas_shrink <= 1.0:
            raise ValueError(f"HLAS-P nas_shrink must be in [0, 1], got {self.nas_shrink!r}")
        self.history = History()

    def new_episode(self, view: ClusterView) -> None:
        super().new_episode(view)
        self.history = History()

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        self.history.update(view)
        yield from super().preferences(view, cands)

    def _records(self, job: Job) -> int:
        return len(self.history.rounds.get(job.spec.model, ()))

    def _retry(self, view: ClusterView, job: Job, done_then: float, records_then: int) -> bool:
        return refit_due(view.iters(job), done_then, self.refit_growth) or self._records(job) != records_then

    def predict_rounds(self, view: ClusterView, job: Job) -> float:
        """R^p: the mean of the capped loss-fit α and the capped historical remaining (module docstring)."""
        cap = self.horizon_s / self.tbar(view, job)
        parts = []
        alpha = fitted_remaining(view, job, self.max_points, self.eps)  # None: no fit, no α
        if alpha is not None:
            parts.append(min(cap, alpha))
        mean = self.history.mean_rounds(job.spec.model)
        if mean is not None:
            parts.append(min(cap, max(0.0, mean - view.iters(job))))
        rounds = float(np.mean(parts)) if parts else 0.0
        if rounds > 0.0 and self.nas_shrink < 1.0 and self.lags_group(view, job):
            rounds *= self.nas_shrink
        return rounds

    def lags_group(self, view: ClusterView, job: Job) -> bool:
        """Step 3's test: whether the job falls far behind its NAS group (module docstring); False outside a
        group or before its first whole iteration."""
        done = math.floor(view.iters(job) + 1e-9)
        if done < 1 or job.spec.nas_group is None:
            return False
        best = math.inf
        for other in view.nas_trials(job):
            k = min(done, math.floor(view.iters(other) + 1e-9))
            if other is not job and k >= 1:
                best = min(best, view.observed_loss(other, k))
        return view.observed_loss(job, done) > self.nas_lag * best


@dataclass
class HLASPStandin(ExpectedSizeHLAS):
    """HLAS-P's ordering with the seeded stand-in predictor that reads the true size (module docstring).
    ``fraction`` and ``error``: the predictor's scale and log-normal error; ``seed``: its error stream."""

    name = "hlas-p-standin"
    source = "Hare/HLAS-P ordering (IEEE TCC 2024 §V-B) with a seeded stand-in of its predictor (true size x fraction x noise)"
    fraction: float = 0.5
    error: float = 0.2
    seed: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.fraction) and self.fraction >= 0):
            raise ValueError(f"HLAS-P fraction must be a finite number >= 0, got {self.fraction!r}")
        if not (math.isfinite(self.error) and self.error >= 0):
            raise ValueError(f"HLAS-P error must be a finite number >= 0, got {self.error!r}")

    def predict_target(self, view: ClusterView, job: Job) -> float:
        """R^p_0: the stand-in's prediction of the job's rounds, made once at its first sight."""
        total = view.iters(job) + view.remaining_iters(job)
        eps = np.random.default_rng((int(self.seed), int(job.jid))).standard_normal()
        return float(math.floor(self.fraction * total * math.exp(self.error * eps)))
