"""Seeded synthetic workloads following MLFS §4.1, with a load knob (UniSched sweeps 80-160 %).

- **GPUs per job**: drawn from {1, 2, 4, 8, 16, 32} (MLFS §4.1: "randomly selected from {1, 2, 4, 8, 16,
  32}"), uniform by default; :data:`PHILLY_GPU_WEIGHTS` gives the bundled Philly trace's frequencies.
- **Durations**: log-normal fitted by maximum likelihood to the bundled Philly durations
  (:func:`fit_lognormal`): ``ln d ~ N(mu, sigma^2)`` with :data:`PHILLY_LOGNORMAL` (mu = 6.7909,
  sigma = 2.1555, i.e. median exp(mu) = 14.8 min, mean exp(mu + sigma^2/2) = 9,082 s = 2.52 h; the trace's own
  mean is 13,136 s: the fit under-weights the extreme tail), optionally truncated to
  ``[min_duration, max_duration]`` by resampling; or ``duration="philly"``: bootstrap from the trace.
- **Arrivals**: ``"poisson"`` (exponential gaps, rate lambda) or ``"diurnal"`` (non-homogeneous Poisson,
  rate ``lambda (1 + A sin(2 pi t / P + phase))``, by thinning; its mean rate over a period is lambda).
- **Load** (offered GPU-seconds per second divided by the cluster's GPUs):
  ``load = lambda E[n_gpus] E[duration] / cluster_gpus``, so ``lambda = load * cluster_gpus /
  (E[n_gpus] E[duration])``, with the expectations of the distributions in use (computed exactly for
  the GPU weights, in closed form (normal CDF) for a truncated log-normal, as the sample mean for the
  bootstrap). Scaling ``load`` scales the arrival rate only; job sizes keep their distribution.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from .mapping import MappingConfig, to_job_specs
from .nas import NAS_FRACTION, NAS_GROUP_SIZE, NAS_PACE_SIGMA, make_nas_groups
from .workload import MLFS_GPU_CHOICES, JobSpec

GPU_CHOICES: tuple[int, ...] = MLFS_GPU_CHOICES
# Frequencies of these sizes in the bundled Philly trace (jobs of 12/24/64/128 GPUs left out).
PHILLY_GPU_WEIGHTS: dict[int, float] = {1: 76627, 2: 1818, 4: 1870, 8: 1643, 16: 199, 32: 67}
# MLE log-normal fit of the bundled Philly durations (s); recomputed and checked by the tests.
PHILLY_LOGNORMAL: tuple[float, float] = (6.790906, 2.155537)


def fit_lognormal(durations: np.ndarray | pd.Series) -> tuple[float, float]:
    """Maximum-likelihood log-normal fit (mu, sigma) of positive durations (sigma with ddof = 0)."""
    d = np.asarray(durations, dtype=float)
    d = d[d > 0]
    if len(d) < 2:
        raise ValueError("need at least two positive durations to fit")
    ln = np.log(d)
    return float(ln.mean()), float(ln.std())


def _lognormal_mean(mu: float, sigma: float, lo: float, hi: float) -> float:
    """Mean of a log-normal truncated to [lo, hi] (closed form via the normal CDF)."""
    def phi(x: float) -> float:
        return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))

    a = (math.log(lo) - mu) / sigma if lo > 0 else -math.inf
    b = (math.log(hi) - mu) / sigma if math.isfinite(hi) else math.inf
    mass = phi(b) - phi(a)
    if mass <= 0:
        raise ValueError("duration bounds leave no probability mass")
    return math.exp(mu + sigma ** 2 / 2) * (phi(b - sigma) - phi(a - sigma)) / mass


class _Durations:
    def __init__(self, kind: str, mu: float, sigma: float, lo: float, hi: float) -> None:
        self.kind, self.mu, self.sigma, self.lo, self.hi = kind, mu, sigma, lo, hi
        if not (0 <= lo < hi and math.isfinite(lo)):  # (NaN fails every comparison)
            raise ValueError(f"need 0 <= min_duration < max_duration (got {lo!r}, {hi!r})")
        if kind == "lognormal":
            if not (math.isfinite(mu) and 0 < sigma < math.inf):
                raise ValueError(f"lognormal (mu, sigma) must be finite with sigma > 0 (got {mu!r}, {sigma!r})")
            self.mean = _lognormal_mean(mu, sigma, lo, hi)
        elif kind == "philly":
            from .traces import load_philly

            d = load_philly()["duration"].to_numpy()
            self.pool = d[(d >= lo) & (d <= hi)]
            if len(self.pool) == 0:
                raise ValueError("no Philly duration within bounds")
            self.mean = float(self.pool.mean())
        else:
            raise ValueError("duration must be 'lognormal' or 'philly'")

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "philly":
            return self.pool[rng.integers(0, len(self.pool), n)].astype(float)
        out = rng.lognormal(self.mu, self.sigma, n)
        bad = (out < self.lo) | (out > self.hi)
        while bad.any():  # rejection sampling keeps the truncated distribution exact
            out[bad] = rng.lognormal(self.mu, self.sigma, int(bad.sum()))
            bad = (out < self.lo) | (out > self.hi)
        return out


def arrival_rate(load: float, cluster_gpus: int, mean_gpus: float, mean_duration: float) -> float:
    """Jobs per second that offer ``load`` x ``cluster_gpus`` GPU-seconds per second."""
    if not (0 < load < math.inf and cluster_gpus > 0):  # (NaN fails every comparison)
        raise ValueError(f"load and cluster_gpus must be finite and > 0 (got load={load!r}, cluster_gpus={cluster_gpus!r})")
    return load * cluster_gpus / (mean_gpus * mean_duration)


def _arrivals(rng: np.random.Generator, n: int, rate: float, kind: str, amplitude: float, period: float,
              phase: float) -> np.ndarray:
    if kind == "poisson":
        return np.cumsum(rng.exponential(1.0, n)) / rate
    if kind != "diurnal":
        raise ValueError("arrival must be 'poisson' or 'diurnal'")
    if not 0.0 <= amplitude <= 1.0:
        raise ValueError("diurnal amplitude must be in [0, 1]")
    if not (0.0 < period < math.inf and math.isfinite(phase)):
        raise ValueError(f"diurnal period must be finite and > 0 and phase finite (got {period!r}, {phase!r})")
    lam_max = rate * (1.0 + amplitude)
    out: list[np.ndarray] = []
    got, t = 0, 0.0
    while got < n:
        m = max(64, int(1.2 * (n - got) * (1.0 + amplitude)))
        cand = t + np.cumsum(rng.exponential(1.0 / lam_max, m))
        lam = rate * (1.0 + amplitude * np.sin(2.0 * math.pi * cand / period + phase))
        acc = cand[rng.random(m) * lam_max < lam]
        out.append(acc)
        got += len(acc)
        t = float(cand[-1])
    return np.concatenate(out)[:n]


def generate_trace(n_jobs: int, seed: int, cluster_gpus: int, load: float = 1.0, arrival: str = "poisson", *,
                   gpu_choices: Sequence[int] = GPU_CHOICES, gpu_weights: Mapping[int, float] | Sequence[float] | None = None,
                   duration: str = "lognormal", lognormal: tuple[float, float] = PHILLY_LOGNORMAL,
                   min_duration: float = 0.0, max_duration: float = math.inf,
                   diurnal_amplitude: float = 0.5, diurnal_period: float = 86400.0,
                   diurnal_phase: float = 0.0) -> pd.DataFrame:
    """A synthetic canonical trace (see :mod:`clustergym.core.traces`); ``attrs["rate"]`` is the arrival rate."""
    if n_jobs < 0:
        raise ValueError("n_jobs must be >= 0")
    choices = np.asarray(gpu_choices, dtype=np.int64)
    if gpu_weights is None:
        w = np.ones(len(choices))
    elif isinstance(gpu_weights, Mapping):
        w = np.array([float(gpu_weights.get(int(c), 0.0)) for c in choices])
    else:
        w = np.asarray(gpu_weights, dtype=float)
    if len(w) != len(choices) or (w < 0).any() or w.sum() <= 0 or (choices < 1).any():
        raise ValueError("gpu_weights must give a non-negative weight per GPU choice (>= 1 GPU), summing > 0")
    p = w / w.sum()
    dist = _Durations(duration, lognormal[0], lognormal[1], min_duration, max_duration)
    mean_gpus = float((p * choices).sum())
    rate = arrival_rate(load, cluster_gpus, mean_gpus, dist.mean)
    # One generator, fixed order: sizes, durations, arrivals. Arrival gaps are drawn at unit rate and
    # scaled, so for Poisson arrivals a different load only rescales the same arrival pattern.
    rng = np.random.Generator(np.random.PCG64(seed))
    gpus = choices[np.minimum(np.searchsorted(np.cumsum(p), rng.random(n_jobs), side="right"), len(choices) - 1)]
    durs = dist.sample(rng, n_jobs)
    t = _arrivals(rng, n_jobs, rate, arrival, diurnal_amplitude, diurnal_period, diurnal_phase)
    df = pd.DataFrame({"job_id": np.arange(n_jobs, dtype=np.int64), "submit_time": t.astype(float),
                       "n_gpus": gpus.astype(np.int64), "duration": durs.astype(float)})
    df.attrs = {"source": f"synthetic(seed={seed}, load={load}, arrival={arrival})", "t0": None, "filters": {},
                "rate": rate, "mean_gpus": mean_gpus, "mean_duration": dist.mean, "cluster_gpus": cluster_gpus,
                "load": load}
    return df


def offered_load(df: pd.DataFrame, cluster_gpus: int, horizon: float | None = None) -> float:
    """Measured offered load: sum(n_gpus x duration) / (horizon x cluster_gpus); horizon None = the trace's
    arrival span (:func:`clustergym.core.traces.window_offered_load`, the definition trace windows' ``load``
    uses)."""
    work = (df["n_gpus"] * df["duration"]).to_numpy(dtype=float)
    if horizon is None:
        from .traces import window_offered_load

        return window_offered_load(df["submit_time"].to_numpy(), work, cluster_gpus)
    return float(work.sum()) / (horizon * cluster_gpus)


def generate(n_jobs: int, seed: int, cluster_gpus: int, load: float = 1.0, arrival: str = "poisson",
             mapping: MappingConfig | None = None, cluster: Any = None, *, nas_fraction: float = NAS_FRACTION,
             nas_group_size: int = NAS_GROUP_SIZE, nas_pace_sigma: float = NAS_PACE_SIGMA, **trace_kw) -> list[JobSpec]:
    """Synthetic job specs: :func:`generate_trace` then :func:`clustergym.core.mapping.to_job_specs`.
    The mapping seed is derived from ``seed`` (a separate stream), so both steps are reproducible.
    ``cluster`` (a ClusterSpec) sets the mapping's reference server. ``nas_fraction`` > 0 turns about that
    share of the jobs into NAS groups of ``nas_group_size`` trials whose curve paces spread by
    ``nas_pace_sigma`` (:func:`clustergym.core.nas.make_nas_groups`, from a stream of ``seed`` of its own);
    0 (the default) leaves every job as it is."""
    df = generate_trace(n_jobs, seed, cluster_gpus, load, arrival, **trace_kw)
    map_seed = int(np.random.SeedSequence([seed, 1]).generate_state(1)[0])
    specs = to_job_specs(df, map_seed, mapping, cluster)
    return make_nas_groups(specs, seed, nas_fraction, nas_group_size, nas_pace_sigma)
