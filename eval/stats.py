"""Statistics of episode records: t-intervals across seeds, bootstrap intervals, MLFS-style relative
differences, the metrics of the results tables and which way each is better, and the tables themselves
(a sweep's long and wide tables; training's results and paired tables).

No SciPy: the Student-t quantile is computed from the regularised incomplete beta function (continued
fraction, Lentz's method) and inverted by bisection; accurate to ~1e-10, checked against table values in
tests/test_eval_stats.py.

    >>> round(t_quantile(0.975, 4), 4)
    2.7764
"""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import numpy as np

# --------------------------------------------------------------------------- Student t


def _betacf(a: float, b: float, x: float, max_iter: int = 300, eps: float = 1e-15) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, max_iter + 1):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    if df <= 0:
        raise ValueError("df must be > 0")
    x = df / (df + t * t)
    tail = 0.5 * betainc(df / 2.0, 0.5, x)
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on :func:`t_cdf`)."""
    if not 0.0 < p < 1.0:
        raise ValueError("p must be in (0, 1)")
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
        if hi > 1e12:
            return math.inf
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


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
    h = t_quantile(0.5 + conf / 2.0, n - 1) * s / math.sqrt(n)
    return (m, m - h, m + h, h, n)


def bootstrap_interval(x: Iterable[float], conf: float = 0.95, n_boot: int = 2000, seed: int = 0,
                       stat=np.mean) -> tuple[float, float, float]:
    """(statistic, lower, upper): percentile bootstrap of ``stat`` over the finite values of ``x``."""
    a = _clean(x)
    if len(a) == 0:
        return (math.nan, math.nan, math.nan)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(n_boot, len(a)))
    boots = np.apply_along_axis(stat, 1, a[idx]) if stat is not np.mean else a[idx].mean(axis=1)
    q = (1.0 - conf) / 2.0
    return (float(stat(a)), float(np.quantile(boots, q)), float(np.quantile(boots, 1.0 - q)))


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
    "not_submitted", "jobs", "decisions", "events", "sim_time", "decision_mean_us", "decision_p99_us",
    "agent_steps", "wall_s")

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
    "decision_p99_us": -1}
HIGHER_IS_BETTER = frozenset(m for m, d in DIRECTIONS.items() if d > 0)


def direction(metric: str) -> int:
    """+1 if a higher ``metric`` is better, -1 if lower; ValueError for a metric without a direction."""
    try:
        return DIRECTIONS[metric]
    except KeyError:
        raise ValueError(f"metric {metric!r} has no better direction; one of {sorted(DIRECTIONS)}") from None


# --------------------------------------------------------------------------- tables


def summarize(episodes, metrics: Sequence[str] | None = None, reference: str | None = None,
              conf: float = 0.95, group: Sequence[str] = ("scenario", "policy"), bootstrap: int = 0):
    """Long table, one row per (group..., metric): n, mean, std, t-interval (lo, hi, half width), optional
    bootstrap interval, and, if ``reference`` (a policy label) is given, ``rel_diff`` = (mean − ref mean) /
    ref mean (MLFS) plus the paired per-seed relative difference with its t-interval (``rel_paired_*``:
    same scenario and seed = same workload)."""
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
                _, blo, bhi = bootstrap_interval(vals, conf, bootstrap)
                r["boot_lo"], r["boot_hi"] = blo, bhi
            if reference is not None:
                z = ref_means.get((skey, m), math.nan)
                r["rel_diff"] = rel_diff(mean, z)
                per = ref_by_seed.get((skey, m), {})
                pr = [rel_diff(v, per.get(s, math.nan)) for s, v in zip(g["seed"], vals)]
                pm, plo, phi, _, _ = t_interval(pr, conf)
                r["rel_paired_mean"], r["rel_paired_lo"], r["rel_paired_hi"] = pm, plo, phi
            rows.append(r)
    return pd.DataFrame(rows)


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
    """A GitHub Markdown table (no tabulate dependency)."""
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in df.iterrows():
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in r.tolist()) + " |")
    return "\n".join(lines) + "\n"


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


def results_table(by_policy: dict[str, Sequence[dict]], metrics: Sequence[str] = TABLE_METRICS) -> tuple[list[dict], str]:
    """(CSV rows: policy, metric, mean, ci95_low, ci95_high, n; Markdown table of 'mean ± half-width')."""
    rows, stats = [], {}
    for p, recs in by_policy.items():
        stats[p] = metric_intervals(recs, metrics)
        for m, s in stats[p].items():
            rows.append({"policy": p, "metric": m, "mean": s["mean"], "ci95_low": s["lo"], "ci95_high": s["hi"],
                         "n": s["n"]})
    cols = [m for m in metrics if any(m in s for s in stats.values())]
    lines = ["| policy | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for p, s in stats.items():
        cells = [(fmt_ci(s[m]["mean"], s[m]["half"]) if m in s else "") for m in cols]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return rows, "\n".join(lines)


PAIRED_METRICS: tuple[str, ...] = ("mean_jct_censored", "deadline_ratio", "unfinished")


def paired_table(by_policy: dict[str, Sequence[dict]], reference: str = "agent",
                 metrics: Sequence[str] = PAIRED_METRICS) -> tuple[list[dict], str]:
    """The reference policy against each other policy on the *same* windows: per metric, the mean per-window
    difference (reference − other) with its 95 % t-interval, and on how many windows the reference is better,
    equal (within 1e-9 relative) or worse. Pairing removes the window-to-window spread that dominates the
    unpaired intervals of :func:`results_table`. Records are paired by ``seed``; a policy missing a seed
    the reference has is an error (a silent drop would bias the comparison)."""
    ref = {r["seed"]: r for r in by_policy[reference]}
    rows = []
    lines = [f"| vs | metric | mean difference ({reference} − vs) | 95 % interval | better / equal / worse |",
             "|---|---|---|---|---|"]
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
            lines.append(f"| {p} | {m} | {fmt_num(mean)} | [{fmt_num(lo)}, {fmt_num(hi)}] | "
                         f"{better} / {n - better - worse} / {worse} |")
    return rows, "\n".join(lines)
