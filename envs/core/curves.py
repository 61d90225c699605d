"""Learning curves: accuracy and loss as functions of training progress.

A curve is defined over *progress* ``x = iteration / max_iterations`` (``x`` in [0, 1] covers the job's
iteration budget). Trace jobs only say how long a job ran, not how many iterations its model needs to
converge, so each model's curve is stretched over the job's budget: a job that ran to completion in the
trace reaches the end of its model's curve at ``max_iterations``. This is a documented modelling choice
(README, "Learning curves").
"""
from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LearningCurve:
    """Piecewise-linear accuracy and loss over progress ``x`` (monotone accuracy, non-increasing loss).

    ``x`` must start at 0 and be strictly increasing; values beyond the last point are held constant.
    Measured curves (Pollux traces) and parametric ones (:func:`power_law_curve`) both end up in this form,
    so every consumer sees the same interface.
    """

    x: tuple[float, ...]
    accuracy: tuple[float, ...]
    loss: tuple[float, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if not (len(self.x) == len(self.accuracy) == len(self.loss) >= 2):
            raise ValueError("curve arrays must have equal length >= 2")
        if self.x[0] != 0.0 or any(b <= a for a, b in zip(self.x, self.x[1:])):
            raise ValueError("curve x must start at 0 and increase strictly")

    def accuracy_at(self, x: float) -> float:
        return float(np.interp(x, self.x, self.accuracy))

    def loss_at(self, x: float) -> float:
        return float(np.interp(x, self.x, self.loss))

    @property
    def final_accuracy(self) -> float:
        return self.accuracy_at(1.0)

    def progress_for_accuracy(self, target: float) -> float:
        """Smallest x with accuracy >= target (inf if never reached within the curve)."""
        acc = self.accuracy
        if acc[0] >= target:
            return 0.0
        for i in range(1, len(acc)):
            if acc[i] >= target:
                a0, a1 = acc[i - 1], acc[i]
                frac = (target - a0) / (a1 - a0) if a1 > a0 else 1.0
                return self.x[i - 1] + frac * (self.x[i] - self.x[i - 1])
        return math.inf

    def paced(self, pace: float) -> "LearningCurve":
        """This curve traversed ``pace`` times as fast: its value at progress x is this curve's at ``pace`` x x
        (``pace`` > 1 reaches the plateau sooner, < 1 ends the budget short of it). 1 returns the curve itself."""
        if pace == 1.0:
            return self
        if not 0.0 < pace < math.inf:
            raise ValueError(f"pace must be a finite number > 0 (got {pace!r})")
        return LearningCurve(tuple(v / pace for v in self.x), self.accuracy, self.loss, f"{self.source} x pace {pace:g}")

    def optimum_progress(self, tolerance: float = 0.002) -> float:
        """OptStop (MLFS §3.5): the earliest progress whose accuracy is within ``tolerance`` of the best
        accuracy reachable in the budget (x <= 1). Stopping there saves iterations at (almost) no accuracy cost."""
        return _optimum_progress(self, tolerance)


@lru_cache(maxsize=1024)
def _optimum_progress(curve: LearningCurve, tolerance: float) -> float:
    # cached: every job of a model asks the same question of the same (immutable) curve
    best = max(a for xx, a in zip(curve.x, curve.accuracy) if xx <= 1.0)
    best = max(best, curve.accuracy_at(1.0))
    return min(1.0, curve.progress_for_accuracy(best - tolerance))


def power_law_curve(a0: float, a_max: float, l0: float, l_min: float, k: float = 1.0, scale: float = 0.1,
                    points: int = 64, source: str = "parametric") -> LearningCurve:
    """A saturating curve ``a(x) = a_max - (a_max - a0) * (1 + x/scale)^-k`` (loss alike).

    Inverse-power-law learning curves are the usual parametric fit for DL training (SLAQ, Optimus); the
    parameters per model live in the catalogue with their justification.
    """
    xs = np.linspace(0.0, 1.0, points) ** 2  # denser early, where curves move fastest
    decay = (1.0 + xs / scale) ** (-k)
    acc = a_max - (a_max - a0) * decay
    loss = l_min + (l0 - l_min) * decay
    return LearningCurve(tuple(float(v) for v in xs), tuple(float(v) for v in acc), tuple(float(v) for v in loss), source)
