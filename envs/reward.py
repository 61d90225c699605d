"""The env's objectives (MLFS Eq. 7) as a registry, and the per-env reward computation over it.

An :class:`Objective` names a cumulative counter of the simulator's metrics (``sim.metrics.<counter>``); its
value over a step is the counter's change divided by ``n_jobs x scale``, times ``sign`` (+1: more is better,
-1: less is better). ``scale`` is a number or the name of an :class:`~clustergym.config.EnvConfig` field
(``time_scale``, ``bytes_scale``). The env's scalar reward is ``beta . g`` with ``beta`` =
``EnvConfig.reward_weights`` (default: each objective's ``weight``); with ``vector_reward=True`` the reward
is ``g`` itself. Because every objective is a difference of a cumulative counter, an episode's rewards sum
exactly to the counters' totals (``env.objective_totals()``).

To add an objective: one entry in :data:`OBJECTIVES` (or :func:`register` before making the env). The
objective names, ``EnvConfig.reward_weights`` (length and default), ``info["objectives"]``, the vector
reward, ``reward_space``/``reward_dim`` and :class:`clustergym.wrappers.MOReward` all follow the registry.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from operator import sub, truediv
from typing import Any, Sequence

import numpy as np


@dataclass(frozen=True)
class Objective:
    """One objective g_i: ``sign x d(sim.metrics.<counter>) / (n_jobs x scale)`` per step."""

    name: str
    counter: str
    sign: float
    weight: float  # default beta_i
    scale: float | str = 1.0  # a number or the name of an EnvConfig field
    doc: str = ""

    def __post_init__(self) -> None:
        if self.sign not in (1, -1):
            raise ValueError(f"objective {self.name!r}: sign must be +1 or -1, got {self.sign}")
        if not isinstance(self.scale, str) and not self.scale > 0:
            raise ValueError(f"objective {self.name!r}: scale must be > 0 or an EnvConfig field name")


# MLFS §4.1 weights beta_1..beta_5; MLFS Eq. (1) prints signs that would reward long JCTs: the signs here
# implement its stated intent (shorter JCT, less traffic are better)
OBJECTIVES: list[Objective] = [
    Objective("jct", "jobs_in_system_integral", -1, 0.5, "time_scale",
              "integral of jobs in the system (sums to the mean JCT / time_scale)"),
    Objective("deadline", "deadlines_met", +1, 0.55, doc="deadlines met (sums to the deadline ratio)"),
    Objective("bandwidth", "cross_mb", -1, 0.25, "bytes_scale", "cross-server traffic in MB"),
    Objective("accuracy_met", "accuracy_met", +1, 0.15, doc="accuracy requirements met (sums to their ratio)"),
    Objective("accuracy", "accuracy_sum", +1, 0.15, doc="accuracy by the deadline of ended jobs (sums to the mean)"),
    # UniSched (§II-A): SLO jobs are judged by their deadlines, best-effort jobs by their latency. Weight 0 by
    # default (MLFS Eq. 7 has the five above); the UniSched scenarios weight these two instead
    Objective("slo_miss", "slo_missed", -1, 0.0, doc="deadlines missed by SLO (strict or soft) jobs, "
              "counted when the deadline passes (sums to their number / n_jobs)"),
    Objective("be_jct", "be_in_system_integral", -1, 0.0, "time_scale",
              "integral of best-effort jobs in the system (sums to their summed JCT / (n_jobs x time_scale))"),
]


def register(objective: Objective) -> None:
    """Add an objective at the end of the registry (for envs and configs made afterwards)."""
    if objective.name in objective_names():
        raise ValueError(f"objective {objective.name!r} is already registered")
    OBJECTIVES.append(objective)


def objectives() -> tuple[Objective, ...]:
    """The registry now (an env keeps the objectives of its construction)."""
    return tuple(OBJECTIVES)


def objective_names() -> tuple[str, ...]:
    return tuple(o.name for o in OBJECTIVES)


def single_objective_weights(name: str) -> tuple[float, ...]:
    """Weight 1 on objective ``name`` and 0 on every other of the registry (e.g. "jct": the return of a
    terminated episode is then -mean JCT / time_scale exactly)."""
    if name not in objective_names():
        raise ValueError(f"unknown objective {name!r}; one of {objective_names()}")
    return tuple(1.0 if n == name else 0.0 for n in objective_names())


def default_weights() -> tuple[float, ...]:
    return tuple(float(o.weight) for o in OBJECTIVES)


class Reward:
    """The objectives of one env: cumulative counters -> the objective vector g of a step, and ``beta . g``.

    ``objectives`` is the registry at the env's construction; ``weights`` are ``beta`` (one per objective);
    ``config`` resolves scales given as EnvConfig field names. Per episode: :meth:`reset` on the new
    simulator's metrics, then :meth:`step_values` once per env step pays what accrued since the previous
    call (so the steps' values add up exactly to :meth:`totals`, whatever happened between them)."""

    def __init__(self, objectives: Sequence[Objective], weights: Sequence[float], config: Any):
        self.objectives = tuple(objectives)
        self.names = tuple(o.name for o in self.objectives)
        self.dim = len(self.objectives)
        if len(weights) != self.dim:
            raise ValueError(f"{len(weights)} reward weights for {self.dim} objectives {self.names}")
        self.beta = np.asarray(weights, dtype=np.float64)
        self._scales = tuple(_scale(o, config) for o in self.objectives)
        get = operator.attrgetter(*(o.counter for o in self.objectives))
        # counters(metrics) -> the tuple of the objectives' cumulative counters (one C call per step)
        self.counters = get if self.dim > 1 else (lambda m: (get(m),))
        self._divisors: tuple[float, ...] = ()
        self._metrics: Any = None
        self._start: tuple = ()
        self._last: tuple = ()

    def reset(self, metrics: Any, n_jobs: int) -> None:
        """A new episode on ``metrics`` (counters checked) of ``n_jobs`` jobs; accrual starts now."""
        for o in self.objectives:
            if not hasattr(metrics, o.counter):
                raise AttributeError(f"objective {o.name!r}: the simulator's metrics have no counter {o.counter!r}")
        # sign x d / (n x scale) == d / (sign x n x scale) in IEEE arithmetic (negation is exact)
        self._divisors = tuple(o.sign * (n_jobs * s) for o, s in zip(self.objectives, self._scales))
        self._metrics = metrics
        self._start = self._last = self.counters(metrics)

    def step_values(self) -> np.ndarray:
        """g (float64, one per objective) accrued since the previous call (or the reset)."""
        now = self.counters(self._metrics)
        g = self._values(now, self._last)
        self._last = now
        return g

    def totals(self) -> np.ndarray:
        """g accrued since the reset: the sum of every :meth:`step_values` so far and what accrued since."""
        return self._values(self.counters(self._metrics), self._start)

    def _values(self, now: tuple, base: tuple) -> np.ndarray:
        return np.array(list(map(truediv, map(sub, now, base), self._divisors)))

    def scalar(self, g: np.ndarray) -> float:
        """``beta . g`` (``ndarray.dot``: the same BLAS dot as ``@``, with less call overhead)."""
        return float(self.beta.dot(g))

    def space(self):
        from gymnasium import spaces

        return spaces.Box(-np.inf, np.inf, (self.dim,), np.float32)


def _scale(o: Objective, config: Any) -> float:
    if not isinstance(o.scale, str):
        return float(o.scale)
    v = getattr(config, o.scale, None)
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0:
        raise ValueError(f"objective {o.name!r}: scale {o.scale!r} is not a positive EnvConfig field")
    return float(v)
