"""Job-size prediction from the loss a job has produced so far (Optimus's loss fitting) and from the history of
finished jobs (Hare's conservative predictor). Pure functions and a small history record; the policies that use
them are :class:`clustergym.baselines.hlas_l.HLASL` and :class:`clustergym.baselines.hlas_p.HLASP`.

**Optimus's loss model** (Peng et al., EuroSys '18, §3.1): l(k) = 1 / (b0 k + b1) + b2 with b0, b1, b2 >= 0,
k the iteration. How we fit it (our choice; scipy-free, numpy only): for a fixed b2 the model is linear in the
transformed target y = 1 / (l - b2) = b0 k + b1, solved by least squares with the non-negativity of b0 and b1
enforced exactly (a two-variable NNLS: a coefficient that comes out negative is clamped to 0 and the other refit),
each point weighted by (l - b2)^2 so the linear residual approximates the residual in loss units. b2 is found by
minimising the loss-unit squared error over [0, min observed loss): a grid of :data:`B2_GRID` values, then as
many again between the best grid point's neighbours (vectorised: a fit costs well under a millisecond).

**Convergence rule** (ours: the simulator's jobs run their iteration budget and have no loss threshold to
reach): a job is predicted to converge at the first iteration where
the fitted loss's excess over its asymptote is at most ``eps`` of its excess at k = 0, i.e. (l(k) - b2) /
(l(0) - b2) <= eps, which gives k* = (b1 / b0)(1 / eps - 1). The rule is free of loss units and of the iteration
scale. Default ``eps`` = 0.05 (95 % of the reachable decrease done). For the catalogue's k = 1 power-law curves
(AlexNet, VGG-16, Inception-v3: l(x) = l_min + (l0 - l_min) / (1 + x / 0.05), x = k / budget) the model is exact
and k* = 0.95 x the budget; the other curves (k = 2, 3, or Pollux's measured ones) are not of Optimus's form and
the fit is only an approximation.

**Stated rules for poor input**: fewer than :data:`MIN_POINTS` (3, the number of parameters) distinct
iterations raise :class:`TooFewPoints` (the policies then predict nothing: 0 additional rounds); a non-finite
or negative loss or iteration, a loss of 0 (the model stays above b2 >= 0), unequal lengths, or iterations not
strictly increasing raise :class:`LossFitError` (the policies then predict nothing too).
A fit with b0 = 0 (no decrease seen) predicts convergence now (a flat fit has no decrease left to wait for):
0 additional iterations. No smoothing makes a fit on few early points look better than it is.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from clustergym.core.job import Job, JobState
from clustergym.core.view import ClusterView

MIN_POINTS = 3
B2_GRID = 48


class LossFitError(ValueError):
    """The loss points cannot be fitted (module docstring, "Stated rules for poor input")."""


class TooFewPoints(LossFitError):
    """Fewer than :data:`MIN_POINTS` loss points: the three-parameter model is undetermined."""


@dataclass(frozen=True)
class OptimusFit:
    """A fitted l(k) = 1 / (b0 k + b1) + b2 and the number of points it was fitted to; ``rmse`` in loss units."""

    b0: float
    b1: float
    b2: float
    n_points: int
    rmse: float

    def loss(self, k: float | np.ndarray) -> float | np.ndarray:
        """The fitted loss at iteration(s) ``k``."""
        return 1.0 / (self.b0 * np.asarray(k, dtype=float) + self.b1) + self.b2

    def converged_at(self, eps: float = 0.05) -> float:
        """k* = (b1 / b0)(1 / eps - 1): the iteration where the excess over b2 falls to ``eps`` of its value at
        k = 0 (module docstring); 0 when b0 = 0 (a flat fit: no decrease left)."""
        if not 0.0 < eps < 1.0:
            raise ValueError(f"eps must be in (0, 1), got {eps!r}")
        if self.b0 <= 0.0:
            return 0.0
        return self.b1 / self.b0 * (1.0 / eps - 1.0)


def _check(iters: Sequence[float], losses: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    k = np.asarray(iters, dtype=float).ravel()
    y = np.asarray(losses, dtype=float).ravel()
    if k.shape != y.shape:
        raise LossFitError(f"{k.size} iterations but {y.size} losses")
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(y))):
        raise LossFitError("loss points must be finite (a NaN or inf loss or iteration was given)")
    if np.any(k < 0) or np.any(y < 0):
        raise LossFitError("iterations and losses must be >= 0 (Optimus's model has b0, b1, b2 >= 0)")
    if np.any(np.diff(k) <= 0):
        raise LossFitError("iterations must be strictly increasing")
    if k.size < MIN_POINTS:
        raise TooFewPoints(f"{k.size} loss point(s); the fit needs at least {MIN_POINTS}")
    return k, y


def _linear_nnls(k: np.ndarray, z: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of ``z`` and ``w`` (one row per candidate b2): weighted least squares of z = b0 k + b1 with
    b0, b1 >= 0 (the two-variable NNLS, solved exactly: the free solution if both are >= 0, else the better of
    the two fits with one coefficient at 0)."""
    sw, swk, swz = w.sum(1), (w * k).sum(1), (w * z).sum(1)
    swkk, swkz = (w * k * k).sum(1), (w * k * z).sum(1)
    det = sw * swkk - swk * swk
    with np.errstate(divide="ignore", invalid="ignore"):
        b0 = np.where(det > 0, (sw * swkz - swk * swz) / det, -1.0)
        b1 = (swz - b0 * swk) / sw
        ok = (b0 >= 0) & (b1 >= 0)
        c1 = np.maximum(0.0, swz / sw)  # b0 = 0
        c0 = np.where(swkk > 0, np.maximum(0.0, swkz / swkk), 0.0)  # b1 = 0
    e1 = (w * (z - c1[:, None]) ** 2).sum(1)
    e0 = (w * (z - c0[:, None] * k) ** 2).sum(1)
    use1 = e1 <= e0
    return (np.where(ok, b0, np.where(use1, 0.0, c0)), np.where(ok, b1, np.where(use1, c1, 0.0)))


def _fit_grid(k: np.ndarray, y: np.ndarray, b2: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(b0, b1, loss-unit SSE) of the best curve for each asymptote in ``b2`` (each below every loss)."""
    e = y[None, :] - b2[:, None]
    b0, b1 = _linear_nnls(k[None, :], 1.0 / e, e * e)
    with np.errstate(divide="ignore"):
        pred = 1.0 / (b0[:, None] * k[None, :] + b1[:, None]) + b2[:, None]
    sse = ((pred - y[None, :]) ** 2).sum(1)
    return b0, b1, np.where(np.isfinite(sse), sse, np.inf)


def fit_optimus(iters: Sequence[float], losses: Sequence[float]) -> OptimusFit:
    """Fit Optimus's l(k) = 1 / (b0 k + b1) + b2 (b >= 0) to observed (iteration, loss) points (module
    docstring: profile over b2, exact NNLS for b0, b1). Raises :class:`TooFewPoints` / :class:`LossFitError`."""
    k, y = _check(iters, losses)
    if y.min() <= 0.0:
        raise LossFitError("a loss of 0 has no fit: Optimus's l(k) = 1 / (b0 k + b1) + b2 stays above b2 >= 0")
    grid = np.linspace(0.0, float(y.min()) * (1.0 - 1e-9), B2_GRID)
    i = int(np.argmin(_fit_grid(k, y, grid)[2]))
    # a finer grid between the best point's neighbours (the coarse best included)
    fine = np.append(np.linspace(grid[max(0, i - 1)], grid[min(B2_GRID - 1, i + 1)], B2_GRID), grid[i])
    b0, b1, sse = _fit_grid(k, y, fine)
    j = int(np.argmin(sse))
    if not math.isfinite(sse[j]):
        raise LossFitError("no curve of Optimus's form fits these points")
    return OptimusFit(float(b0[j]), float(b1[j]), float(fine[j]), int(k.size), math.sqrt(float(sse[j]) / k.size))


def predict_remaining(iters: Sequence[float], losses: Sequence[float], eps: float = 0.05) -> float:
    """Optimus's remaining-iterations prediction after the last observed point: max(0, k* - last iteration);
    0 with fewer than :data:`MIN_POINTS` points (the stated rule: no prediction). Bad points raise
    :class:`LossFitError`."""
    try:
        fit = fit_optimus(iters, losses)
    except TooFewPoints:
        return 0.0
    return max(0.0, fit.converged_at(eps) - float(iters[-1]))


def check_fit_params(who: str, eps: float, max_points: int, refit_growth: float) -> None:
    """The loss-fit parameters the size-predicting policies share: ``eps`` in (0, 1), ``max_points`` an integer
    >= :data:`MIN_POINTS`, ``refit_growth`` >= 0; else a ValueError naming ``who``'s parameter."""
    if not 0.0 < eps < 1.0:
        raise ValueError(f"{who} eps must be in (0, 1), got {eps!r}")
    if isinstance(max_points, bool) or not isinstance(max_points, int) or max_points < MIN_POINTS:
        raise ValueError(f"{who} max_points must be an integer >= {MIN_POINTS}, got {max_points!r}")
    if not refit_growth >= 0.0:
        raise ValueError(f"{who} refit_growth must be >= 0, got {refit_growth!r}")


def refit_due(done: float, done_then: float, growth: float) -> bool:
    """Whether a job fitted when it had done ``done_then`` iterations is fitted again now that it has done
    ``done``: once its iterations have grown by the fraction ``growth`` (the size predictors' ``refit_growth``)."""
    return done > done_then * (1.0 + growth)


@dataclass
class LossFitParams:
    """The loss-fit parameters of the size-predicting policies (a dataclass mixin listed before the policy's base
    class): ``eps`` (convergence fraction), ``max_points`` (loss points per fit), ``refit_growth`` (growth of the
    iterations done before a job is fitted again), checked by :func:`check_fit_params` after the base's own
    checks."""

    eps: float = 0.05
    max_points: int = 32
    refit_growth: float = 0.1

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[misc]  (the policy base class next in the MRO)
        check_fit_params(type(self).__name__, self.eps, self.max_points, self.refit_growth)


# ------------------------------------------------------------------------------ what a scheduler observes
def observed_losses(view: ClusterView, job: Job, max_points: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """The (iteration, loss) points the job has reported so far: its loss after each whole iteration done
    (iterations 1 .. floor(done)), thinned to at most ``max_points`` evenly spaced ones (the last always kept).
    Only the prefix the job has run is read (:meth:`ClusterView.observed_loss`), never its total size."""
    ks = loss_points(int(math.floor(view.iters(job) + 1e-9)), max_points)
    return ks, np.array([view.observed_loss(job, k) for k in ks])


def loss_points(done: int, max_points: int = 32) -> np.ndarray:
    """The iterations whose loss a fit reads after ``done`` whole iterations: 1 .. done, thinned to at most
    ``max_points`` evenly spaced ones (the last always kept); empty before the first iteration."""
    if done < 1:
        return np.zeros(0)
    return np.unique(np.round(np.linspace(1, done, min(done, max_points))).astype(np.int64)).astype(float)


def fitted_remaining(view: ClusterView, job: Job, max_points: int = 32, eps: float = 0.05) -> float | None:
    """The rounds Optimus's fit of the job's observed loss (:func:`observed_losses`) predicts it still runs after
    its last observed iteration, max(0, k* - last); None when there is no fit (too few or bad points: the
    stated rules of the module docstring)."""
    ks, ls = observed_losses(view, job, max_points)
    try:
        fit = fit_optimus(ks, ls)
    except LossFitError:  # (TooFewPoints included)
        return None
    return max(0.0, fit.converged_at(eps) - float(ks[-1]))


@dataclass
class History:
    """Hare's historical running records as the scheduler sees them in one episode: the rounds run by every job
    that finished (reached its own stopping point; a job stopped by a command is not a record), by model name
    (the simulator has no job names or users: "similar jobs" = the same model). :meth:`update` at each decision."""

    rounds: dict[str, list[float]] = field(default_factory=dict)
    _live: set[int] = field(default_factory=set)

    def update(self, view: ClusterView) -> None:
        """Record the jobs that were active at the last update and are finished now."""
        live = {j.jid for j in view.active_jobs()}
        for jid in self._live - live:
            job = view.job(jid)
            if job.state == JobState.FINISHED:
                self.rounds.setdefault(job.spec.model, []).append(float(view.iters(job)))
        self._live = live

    def mean_rounds(self, model: str) -> float | None:
        """Mean rounds of the finished jobs of ``model``; None if there are none."""
        r = self.rounds.get(model)
        return float(np.mean(r)) if r else None
