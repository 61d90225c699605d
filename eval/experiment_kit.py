"""What every named experiment is built from: the registry (``@experiment``, :func:`get`), the paired statistics
of the claims tables, and the contended default's sweep. Experiment modules (``experiments.py`` and
``experiments_<topic>.py``) import from here; ``experiments.py`` imports the topic modules to register them.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .specs import expand_loads, make_runs, parse_policy, parse_scenario
from .stats import fmt_pct, t_interval

EXPERIMENTS: dict[str, Callable] = {}


def experiment(fn: Callable) -> Callable:
    EXPERIMENTS[fn.__name__.replace("_", "-")] = fn
    return fn


def get(name: str) -> Callable:
    try:
        return EXPERIMENTS[name]
    except KeyError:
        raise SystemExit(f"unknown experiment {name!r}; known: {sorted(EXPERIMENTS)}") from None


# --------------------------------------------------------------------------- helpers for claims


def paired_rel(ep, policy: str, ref: str, metric: str, where=None) -> tuple[float, float, float, int]:
    """Per (scenario, seed) paired (y − z)/z of ``policy`` against ``ref``; (mean, lo, hi, n) t-interval."""
    d = ep if where is None else ep[where(ep)]
    a = d[d["policy"] == policy].set_index(["scenario", "seed"])[metric]
    b = d[d["policy"] == ref].set_index(["scenario", "seed"])[metric]
    j = a.to_frame("y").join(b.to_frame("z"), how="inner")
    r = ((j["y"] - j["z"]) / j["z"]).replace([np.inf, -np.inf], np.nan)
    m, lo, hi, _, n = t_interval(r.to_numpy(dtype=float))
    return m, lo, hi, n


def paired_across(ep, policy: str, scenario: str, ref: str, ref_scenario: str,
                  metric: str) -> tuple[float, float, float, int] | None:
    """:func:`paired_rel` of ``policy`` in ``scenario`` against ``ref`` in ``ref_scenario``, paired by seed (the
    same windows under two settings); None when either side has no episode."""
    import pandas as pd

    y = ep[(ep["policy"] == policy) & (ep["scenario"] == scenario)].assign(policy="y", scenario="pair")
    z = ep[(ep["policy"] == ref) & (ep["scenario"] == ref_scenario)].assign(policy="z", scenario="pair")
    if not (len(y) and len(z)):
        return None
    return paired_rel(pd.concat([y, z]), "y", "z", metric)


def ratio_of_means(ep, policy: str, ref: str, metric: str, where=None) -> float:
    d = ep if where is None else ep[where(ep)]
    y = d.loc[d["policy"] == policy, metric].mean()
    z = d.loc[d["policy"] == ref, metric].mean()
    return (y - z) / z if z else math.nan


def pct_ci(m, lo, hi, n) -> str:
    if not np.isfinite(m):
        return "–"
    if not np.isfinite(lo):
        return f"{fmt_pct(m)} (n={n})"
    return f"{fmt_pct(m)} [{fmt_pct(lo)}, {fmt_pct(hi)}] (n={n})"


def significance(lo: float, hi: float) -> str:
    """"significant" when a finite interval excludes 0, else "not significant" (claims without a paper number)."""
    return "significant" if np.isfinite(lo) and (lo > 0 or hi < 0) else "not significant"


def agree_range(m: float, lo: float, hi: float, paper_lo: float, paper_hi: float) -> str:
    """Direction (the interval excludes 0 on the paper's side) and size (the interval overlaps the paper's
    range)."""
    if not np.isfinite(m):
        return "no data"
    paper_sign = np.sign(paper_lo + paper_hi)
    same = np.sign(m) == paper_sign
    if not (np.isfinite(lo) and np.isfinite(hi)):  # fewer than two pairs: no interval, so no significance
        return "no interval (n < 2); " + ("value in the paper's direction" if same else "value opposite")
    significant = lo > 0 or hi < 0
    overlap = not (hi < min(paper_lo, paper_hi) or lo > max(paper_lo, paper_hi))
    if significant and same:
        return "yes (direction and size)" if overlap else "direction yes, size no"
    if significant:
        return "no (significant, opposite direction)"
    return ("no significant effect; " + ("trend in the paper's direction" if same else "trend opposite")
            + ("; paper's size inside the interval" if overlap else ""))


LIGHT = "clustergym/GPUClusterLight-v1"
# MLFS's experiments run on the contended default: mlfs-80, 100-job held-out Philly windows with MLFS's GPU
# counts; the load axis x compresses the windows' inter-arrival times so the offered load is x. MLFS's own
# 620·x-job windows (clustergym/MLFS80-x{x}-v1) take 4-8 min per run at x = 1 on this machine, beyond the
# 2-core budget of a sweep of 8 policies.
CONTENDED = "clustergym/GPUCluster-v1"
def contended_runs(policies, loads, seeds, label: str = "contended", **kwargs) -> list:
    """Runs of ``policies`` on held-out windows of the contended default at offered loads ``loads``
    (arrival compression), with extra EnvConfig ``kwargs`` (e.g. a mapping change) on every run; scenario
    labels ``{label}@x{load}``."""
    base = parse_scenario(f"{label}={CONTENDED}:split=test")
    base["kwargs"] = {**base["kwargs"], **kwargs}
    return make_runs([parse_policy(p) for p in policies], expand_loads([base], loads, "arrival"), seeds)
