"""Statistics of episode records: t-intervals across seeds, interquartile means with stratified bootstrap
intervals, MLFS-style relative differences, the metrics of the results tables and which way each is better,
and the tables themselves (a sweep's long and wide tables; training's results and paired tables).

Quantiles, trimmed means and the bootstrap come from SciPy; Markdown tables from pandas (``tabulate``).
The interquartile mean (IQM, the mean of the middle 50 %) with a stratified percentile bootstrap is the
aggregate Agarwal et al. (NeurIPS 2021, "Deep RL at the edge of the statistical precipice") recommend for
few-seed RL results. Their ``rliable`` package is not used: its dependency ``arch`` fails to import next to
pandas 3 (the version this project resolves), and ``scipy.stats.bootstrap`` with one sample per stratum is
the same stratified resampling (each sample is resampled within itself). Written here, as no library has
them: MLFS's relative difference, the paired per-window comparison and the tables' layout.

    >>> m, lo, hi, half, n = t_interval([1.0, 2.0, 3.0, 4.0, 5.0])
    >>> round(half, 4)
    1.9632
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np
from scipy import stats as sps

IQM_CUT = 0.25  # trim a quarter at each end: the interquartile mean

# --------------------------------------------------------------------------- intervals


def _clean(x: Iterable[float]) -> np.ndarray:
    a = np.asarray(list(x), dtype=float)
    return a[np.isfinite(a)]


def t_interval(x: Iterable[float], conf: float = 0.95) -> tuple[float, float, float, float, int]:
    """(mean, lower, upper, half_width, n) of the two-sided t-interval ``mean ± t_{(1+conf)/2, n-1} s/sqrt(n)``
    over the finite values of ``x``. n = 1 gives an infinite-free degenerate interval (half width nan);
    n = 0 gives all nan."""
    a = _clean(x)
    n = len(a)
    if n == 0:
        return (math.nan, math.nan, math.nan, math.nan, 0)
    m = float(a.mean())
    if n == 1:
        return (m, math.nan, math.nan, math.nan, 1)
    s = float(a.std(ddof=1))
    h = float(sps.t.ppf(0.5 + conf / 2.0, n - 1)) * s / math.sqrt(n)
    return (m, m - h, m + h, h, n)


def iqm(x: Iterable[float]) -> float:
    """Interquartile mean of the finite values of ``x`` (nan if none)."""
    a = _clean(x)
    return float(sps.trim_mean(a, IQM_CUT)) if len(a) else math.nan


def _pooled_iqm(*strata: np.ndarray, axis: int = -1) -> np.ndarray:
    return sps.trim_mean(np.concatenate(strata, axis=axis), IQM_CUT, axis=axis)


def _pooled_mean(*strata: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.concatenate(strata, axis=axis).mean(axis=axis)


_STATISTICS = {"iqm": _pooled_iqm, "mean": _pooled_mean}


def bootstrap_interval(strata: Sequence[Iterable[float]], conf: float = 0.95, n_boot: int = 2000, seed: int = 0,
                       statistic: str = "iqm") -> tuple[float, float, float]:
    """(statistic, lower, upper) of the values of all ``strata`` pooled: ``statistic`` is ``"iqm"`` or
    ``"mean"``; the interval is a stratified percentile bootstrap (each stratum, e.g. one scenario's seeds,
    resampled within itself, so every resample keeps the strata's sizes). Non-finite values are left out;
    a stratum left with one value is kept as a constant (nothing to resample); no stratum with two or more
    values gives a nan interval, no value at all gives all nan."""
    if statistic not in _STATISTICS:
        raise ValueError(f"statistic must be one of {sorted(_STATISTICS)}, got {statistic!r}")
    clean = [c for c in (_clean(s) for s in strata) if len(c)]
    if not clean:
        return (math.nan, math.nan, math.nan)
    fn = _STATISTICS[statistic]
    value = float(fn(*clean))
    varying = [c for c in clean if len(c) > 1]
    if not varying:
        return (value, math.nan, math.nan)
    fixed = [c for c in clean if len(c) == 1]

    def stat(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        shape = samples[0].shape[:-1]
        return fn(*samples, *(np.broadcast_to(c, shape + (1,)) for c in fixed), axis=axis)

    res = sps.bootstrap(tuple(varying), stat, n_resamples=n_boot, confidence_level=conf, method="percentile",
                        vectorized=True, paired=False, rng=np.random.default_rng(seed))
    return (value, float(res.confidence_interval.low), float(res.confidence_interval.high))


def rel_diff(y: float, z: float) -> float:
    """MLFS's relative difference (y − z) / z of a value y against the reference z (nan if z = 0)."""
    if z is None or not np.isfinite(z) or z == 0 or y is None or not np.isfinite(y):
        return math.nan
    return (y - z) / z


# --------------------------------------------------------------------------- metrics

# Every metric of an episode record (eval/rollout.py): the core's Metrics.summary plus the episode loop's own.
SUMMARY_METRICS: tuple[str, ...] = (
    "episode_return", "mean_jct", "mean_jct_censored", "p50_jct", "p99_jct", "makespan", "deadline_ratio",
    "mean_accuracy", "accuracy_ratio", "bandwidth_mb", "mean_waiting", "overload_occurrences",
    "overload_server_hours", "migrations", "preemptions", "gang_releases", "finished", "stopped", "unfinished",
    "not_submitted", "queued_fraction", "jobs", "decisions", "events", "sim_time", "slo_jobs", "slo_miss_rate",
    "slo_weighted_miss", "mean_be_jct", "decision_mean_us", "decision_p99_us", "agent_steps", "wall_s")

# The columns of the results tables (training's final table, a sweep's summary.md), in display order.
TABLE_METRICS: tuple[str, ...] = (
    "episode_return", "mean_jct", "mean_jct_censored", "p99_jct", "deadline_ratio", "accuracy_ratio",
    "mean_accuracy", "bandwidth_mb", "mean_waiting", "overload_occurrences", "migrations", "unfinished",
    "agent_steps", "decision_mean_us")

# Which way is better: +1 higher, -1 lower. The return is the objective an agent maximises and the ratios
# count requirements met; times, costs (cross-server traffic, overloads, migrations and preemptions, which
# MLFS counts as overheads), jobs left unfinished or stopped and decision latency are better low. Metrics
# that describe the episode rather than the policy (jobs, decisions, events, sim_time, agent_steps, wall_s)
# have no direction.
DIRECTIONS: dict[str, int] = {
    "episode_return": 1, "deadline_ratio": 1, "accuracy_ratio": 1, "mean_accuracy": 1, "finished": 1,
    "mean_jct": -1, "mean_jct_censored": -1, "p50_jct": -1, "p99_jct": -1, "makespan": -1, "mean_waiting": -1,
    "bandwidth_mb": -1, "overload_occurrences": -1, "overload_server_hours": -1, "migrations": -1,
    "preemptions": -1, "gang_releases": -1, "stopped": -1, "unfinished": -1, "decision_mean_us": -1,
    "decision_p99_us": -1, "slo_miss_rate": -1, "slo_weighted_miss": -1, "mean_be_jct": -1}
HIGHER_IS_BETTER = frozenset(m for m, d in DIRECTIONS.items() if d > 0)


def direction(metric: str) -> int:
    """+1 if a higher ``metric`` is better, -1 if lower; ValueError for a metric without a direction."""
    try:
        return DIRECTIONS[metric]
    except KeyError:
        raise ValueError(f"metric {metric!r} has no better direction; one of {sorted(DIRECTIONS)}") from None


def selection_score(means: dict[str, float], metric: str) -> tuple[float, float]:
    """Ranking of a policy by its mean metrics over windows (smaller is better): mean unfinished jobs per window
    first (a policy cannot look good by leaving jobs waiting until the step cap), then ``metric`` in its
    better direction; a missing or non-finite value ranks last. Training ranks its checkpoints and its
    teacher candidates with it (``train/ppo.py``, ``train/teacher.py``)."""
    v = float(means.get(metric, float("nan")))
    return float(means.get("unfinished", 0.0)), (-direction(metric) * v if np.isfinite(v) else float("inf"))


# --------------------------------------------------------------------------- tables


def summarize(episodes, metrics: Sequence[str] | None = None, reference: str | None = None,
              conf: float = 0.95, group: Sequence[str] = ("scenario", "policy"), bootstrap: int = 0):
    """Long table, one row per (group..., metric): n, mean, std, t-interval (lo, hi, half width), with
    ``bootstrap`` resamples the interquartile mean over the seeds and its percentile-bootstrap interval
    (``iqm``, ``iqm_lo``, ``iqm_hi``), and, if ``reference`` (a policy label) is given, ``rel_diff`` = (mean −
    ref mean) / ref mean (MLFS) plus the paired per-seed relative difference with its t-interval
    (``rel_paired_*``: same scenario and seed = same workload)."""
    import pandas as pd

    df = pd.DataFrame(episodes)
    if metrics is None:
        metrics = [m for m in SUMMARY_METRICS if m in df.columns]
    metrics = [m for m in metrics if m in df.columns]
    rows = []
    scen_cols = [g for g in group if g != "policy"]
    ref_means: dict = {}
    ref_by_seed: dict = {}
    if reference is not None and "policy" in group:
        ref = df[df["policy"] == reference]
        for key, g in ref.groupby(scen_cols, sort=False) if scen_cols else [((), ref)]:
            key = key if isinstance(key, tuple) else (key,)
            for m in metrics:
                ref_means[(key, m)] = float(pd.to_numeric(g[m], errors="coerce").mean())
                ref_by_seed[(key, m)] = dict(zip(g["seed"], pd.to_numeric(g[m], errors="coerce")))
    for key, g in df.groupby(list(group), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        kd = dict(zip(group, key))
        skey = tuple(kd[c] for c in scen_cols)
        for m in metrics:
            vals = pd.to_numeric(g[m], errors="coerce").to_numpy(dtype=float)
            mean, lo, hi, h, n = t_interval(vals, conf)
            r = {**kd, "metric": m, "n": n, "mean": mean, "std": float(np.nanstd(vals, ddof=1)) if n > 1 else math.nan,
                 "ci_lo": lo, "ci_hi": hi, "ci_half": h}
            if bootstrap:
                r["iqm"], r["iqm_lo"], r["iqm_hi"] = bootstrap_interval([vals], conf, bootstrap)
            if reference is not None:
                z = ref_means.get((skey, m), math.nan)
                r["rel_diff"] = rel_diff(mean, z)
                per = ref_by_seed.get((skey, m), {})
                pr = [rel_diff(v, per.get(s, math.nan)) for s, v in zip(g["seed"], vals)]
                pm, plo, phi, _, _ = t_interval(pr, conf)
                r["rel_paired_mean"], r["rel_paired_lo"], r["rel_paired_hi"] = pm, plo, phi
            rows.append(r)
    return pd.DataFrame(rows)


def paired_iqm(episodes, reference: str, metrics: Sequence[str], conf: float = 0.95, n_boot: int = 2000,
               seed: int = 0):
    """One row per (policy, metric) of every policy but ``reference``: the interquartile mean over all
    (scenario, seed) runs of the paired relative difference (y − z)/z to ``reference`` on the same scenario
    and seed (a normalised score, so scenarios of different scale pool), with a bootstrap interval stratified
    by scenario (``iqm``, ``iqm_lo``, ``iqm_hi``), and the number of pairs ``n`` and of scenarios. Runs whose
    reference value is 0 or missing have no ratio and are left out."""
    import pandas as pd

    df = pd.DataFrame(episodes)
    ref = df[df["policy"] == reference].set_index(["scenario", "seed"])
    rows = []
    for p, g in df[df["policy"] != reference].groupby("policy", sort=False):
        g = g.set_index(["scenario", "seed"])
        for m in metrics:
            if m not in g.columns or m not in ref.columns:
                continue
            y, z = pd.to_numeric(g[m], errors="coerce"), pd.to_numeric(ref[m], errors="coerce")
            z = z.reindex(y.index)
            r = ((y - z) / z.where(z != 0)).replace([np.inf, -np.inf], np.nan).dropna()
            strata = [v.to_numpy(float) for _, v in r.groupby(level="scenario", sort=False)]
            value, lo, hi = bootstrap_interval(strata, conf, n_boot, seed)
            rows.append({"policy": p, "metric": m, "iqm": value, "iqm_lo": lo, "iqm_hi": hi, "n": len(r),
                         "scenarios": len(strata)})
    return pd.DataFrame(rows, columns=["policy", "metric", "iqm", "iqm_lo", "iqm_hi", "n", "scenarios"])


def fmt_num(x: float, digits: int = 3) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    ax = abs(x)
    if ax >= 1e5:
        return f"{x:.3g}"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 1:
        return f"{x:.{max(0, digits - 1)}f}"
    return f"{x:.{digits}f}"


def fmt_ci(mean: float, half: float) -> str:
    if half is None or not np.isfinite(half):
        return fmt_num(mean)
    return f"{fmt_num(mean)} ± {fmt_num(half)}"


def fmt_pct(x: float) -> str:
    if x is None or not np.isfinite(x):
        return "–"
    return f"{100 * x:+.1f}%"


def wide_table(long_df, metrics: Sequence[str], index: Sequence[str] = ("scenario", "policy"),
               with_rel: bool | Sequence[str] = True):
    """Wide display table: one row per (scenario, policy), a "mean ± half" column per metric, and a
    "Δ metric" column (MLFS relative difference to the reference) when present."""
    import pandas as pd

    out = []
    for key, g in long_df.groupby(list(index), sort=False):
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(index, key))
        gm = g.set_index("metric")
        for m in metrics:
            if m not in gm.index:
                continue
            r = gm.loc[m]
            row[m] = fmt_ci(r["mean"], r["ci_half"])
            if with_rel and "rel_diff" in gm.columns and (with_rel is True or m in with_rel):
                row[f"Δ{m}"] = fmt_pct(r["rel_diff"])
        out.append(row)
    return pd.DataFrame(out)


def to_markdown(df) -> str:
    """A GitHub Markdown table of ``df`` (pandas + tabulate), cells as they are (no number re-formatting) with
    ``|`` escaped."""
    cells = df.astype(object).map(lambda v: str(v).replace("|", "\\|"))
    return cells.to_markdown(index=False, disable_numparse=True) + "\n"


def metric_intervals(records: Sequence[dict], metrics: Sequence[str] = TABLE_METRICS) -> dict[str, dict[str, float]]:
    """metric -> {mean, half (95 % t half-width), lo, hi, n} over the episode records that have it (non-finite
    values, e.g. the mean JCT of an episode where no job ended, are left out)."""
    out = {}
    for m in metrics:
        vals = [r[m] for r in records if r.get(m) is not None]
        if vals:
            mean, lo, hi, half, n = t_interval(vals)
            out[m] = {"mean": mean, "half": half, "lo": lo, "hi": hi, "n": n}
    return out


def episode_means(records: Sequence[dict], select_metric: str | None = None) -> dict[str, float]:
    """metric -> mean over the episode records that have it finite, for :data:`TABLE_METRICS` and a selection
    metric outside them (what :func:`selection_score` ranks by)."""
    metrics = TABLE_METRICS if select_metric in (None, *TABLE_METRICS) else (*TABLE_METRICS, select_metric)
    return {k: v["mean"] for k, v in metric_intervals(records, metrics).items()}


def results_table(by_policy: dict[str, Sequence[dict]], metrics: Sequence[str] = TABLE_METRICS) -> tuple[list[dict], str]:
    """(CSV rows: policy, metric, mean, ci95_low, ci95_high, n; Markdown table of 'mean ± half-width', one row
    per policy, one column per metric that any policy has)."""
    import pandas as pd

    rows, stats = [], {}
    for p, recs in by_policy.items():
        stats[p] = metric_intervals(recs, metrics)
        for m, s in stats[p].items():
            rows.append({"policy": p, "metric": m, "mean": s["mean"], "ci95_low": s["lo"], "ci95_high": s["hi"],
                         "n": s["n"]})
    cols = [m for m in metrics if any(m in s for s in stats.values())]
    table = pd.DataFrame([{"policy": p, **{m: fmt_ci(s[m]["mean"], s[m]["half"]) if m in s else "" for m in cols}}
                          for p, s in stats.items()], columns=["policy", *cols])
    return rows, to_markdown(table)


# The console's table of a training run: few columns, so it fits 100 characters; the full tables go to files.
COMPACT_METRICS: tuple[tuple[str, str, float], ...] = (
    ("episode_return", "return", 1.0), ("mean_jct_censored", "JCT (h)", 1 / 3600),
    ("deadline_ratio", "deadline", 1.0), ("unfinished", "unfinished", 1.0))


def compact_table(by_policy: dict[str, Sequence[dict]],
                  columns: Sequence[tuple[str, str, float]] = COMPACT_METRICS) -> str:
    """A short Markdown table for a terminal: per policy, 'mean ± half-width' of a few metrics (``columns``:
    metric, heading, scale), e.g. the censored mean JCT in hours."""
    import pandas as pd

    out = []
    for p, recs in by_policy.items():
        s = metric_intervals(recs, [m for m, _, _ in columns])
        out.append({"policy": p, **{h: fmt_ci(s[m]["mean"] * k, s[m]["half"] * k) if m in s else "–"
                                    for m, h, k in columns}})
    return to_markdown(pd.DataFrame(out))


PAIRED_METRICS: tuple[str, ...] = ("mean_jct_censored", "deadline_ratio", "unfinished")


def paired_table(by_policy: dict[str, Sequence[dict]], reference: str = "agent",
                 metrics: Sequence[str] = PAIRED_METRICS) -> tuple[list[dict], str]:
    """The reference policy against each other policy on the *same* windows: per metric, the mean per-window
    difference (reference − other) with its 95 % t-interval, and on how many windows the reference is better,
    equal (within 1e-9 relative) or worse. Pairing removes the window-to-window spread that dominates the
    unpaired intervals of :func:`results_table`. Records are paired by ``seed``; a policy missing a seed
    the reference has is an error (a silent drop would bias the comparison)."""
    import pandas as pd

    ref = {r["seed"]: r for r in by_policy[reference]}
    rows, table = [], []
    for p, recs in by_policy.items():
        if p == reference:
            continue
        other = {r["seed"]: r for r in recs}
        missing = sorted(set(ref) - set(other))
        if missing:
            raise ValueError(f"paired_table: policy {p!r} has no record for seed(s) {missing}")
        for m in metrics:
            pairs = [(ref[s][m], other[s][m]) for s in sorted(ref) if m in ref[s] and m in other[s]]
            pairs = [(a, b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]
            if not pairs:
                continue
            d = [a - b for a, b in pairs]
            mean, lo, hi, _, n = t_interval(d)
            tol = [1e-9 * max(1.0, abs(b)) for _, b in pairs]
            better = sum(direction(m) * x > t for x, t in zip(d, tol))
            worse = sum(direction(m) * x < -t for x, t in zip(d, tol))
            rows.append({"reference": reference, "vs": p, "metric": m, "mean_diff": mean, "ci95_low": lo,
                         "ci95_high": hi, "n": n, "better": better, "equal": n - better - worse, "worse": worse})
            table.append({"vs": p, "metric": m, **paired_cells(rows[-1])})
    table = pd.DataFrame(table, columns=["vs", "metric", *PAIRED_COLUMNS])
    return rows, to_markdown(table.rename(columns={"difference": f"{reference} − vs"}))


PAIRED_COLUMNS: tuple[str, ...] = ("difference", "95 % interval", "better/equal/worse")


def paired_cells(row: dict, scale: float = 1.0) -> dict[str, str]:
    """The :data:`PAIRED_COLUMNS` of one row of :func:`paired_table`, as its table and the protocol pages show
    them: the mean difference and its 95 % interval times ``scale`` (a unit), and the better/equal/worse counts.
    A missing value (None, a JSON NaN; or nan) shows as "–"."""
    def num(v: float | None) -> str:
        return fmt_num(None if v is None else v * scale)

    return {"difference": num(row["mean_diff"]), "95 % interval": f"[{num(row['ci95_low'])}, {num(row['ci95_high'])}]",
            "better/equal/worse": f"{row['better']}/{row['equal']}/{row['worse']}"}
