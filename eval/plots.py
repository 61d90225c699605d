"""Figures of a sweep in the style of MLFS Figs. 4-5 (matplotlib, Agg backend), each written as PNG (150 dpi)
and PDF side by side.

- ``jct_cdf_<scenario>``: CDF of per-job JCT in hours, one line per policy (all seeds pooled); every policy
  has its own colour, line style and marker (markers staggered), so identical policies stay visible.
- ``metrics_<scenario>``: bars with 95 % t-interval error bars per policy: mean JCT (h), deadline guarantee
  ratio, mean waiting time (min), mean accuracy by deadline, accuracy guarantee ratio, cross-server traffic
  (GB, or TB when the largest mean reaches 1 TB), decision time per ``predict`` call (µs, log scale),
  overload occurrences.
- ``load_<base>``: the same metrics against the load factor x (one line per policy, each shifted a little
  sideways) for load sweeps, and ``load_rel_<base>`` their relative difference to the reference.
- An experiment's own figures draw with :func:`x_curves` (metrics against a numeric setting, e.g. an
  interference ratio) and :func:`interval_bars` (paired relative differences with their intervals).

Every interval drawn is clipped to its metric's feasible range by :func:`clipped_errors` (the one rule of
every figure: times, traffic and counts >= 0; ratios and accuracies in [0, 1]; relative differences >= -1);
the tables keep the raw
intervals. Linear axes show plain numbers, without the offset or ×10^k text that would overlap a title.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .files import atomic_write, safe_name  # noqa: E402

DPI = 150
FORMATS = ("png", "pdf")  # the PNG for reports, the PDF (vector) for papers

# metric, panel title, unit (a key of :func:`unit_scale`)
PANELS: tuple[tuple[str, str, str], ...] = (
    ("mean_jct", "mean JCT", "h"),
    ("deadline_ratio", "deadline guarantee ratio", ""),
    ("mean_waiting", "mean waiting time", "min"),
    ("mean_accuracy", "mean accuracy by deadline", ""),
    ("accuracy_ratio", "accuracy guarantee ratio", ""),
    ("bandwidth_mb", "cross-server traffic", "traffic"),
    ("decision_mean_us", "decision time", "µs"),
    ("overload_occurrences", "overload occurrences", ""),
)
# the metrics that are fractions (of jobs, or an accuracy); every other panel metric is a time, an amount of
# traffic or a count, so >= 0
UNIT_INTERVAL = frozenset({"deadline_ratio", "accuracy_ratio", "mean_accuracy"})
SIGNED = frozenset({"episode_return"})  # and every objective_<name>

MARKERS = ("o", "s", "^", "D", "v", "P", "X", "<", ">", "*")
LINESTYLES = ("-", "--", ":", "-.", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 3)))


def feasible_range(metric: str) -> tuple[float, float]:
    """The values ``metric`` can take: [0, 1] for ratios and accuracies, unbounded for the return and the
    objectives, [-1, inf) for a relative difference (``rel_<metric>``), [0, inf) for everything else (times,
    traffic, counts)."""
    if metric in UNIT_INTERVAL:
        return (0.0, 1.0)
    if metric in SIGNED or metric.startswith("objective_"):
        return (-math.inf, math.inf)
    if metric.startswith("rel_"):  # a relative difference (y - z) / z of a metric >= 0
        return (-1.0, math.inf)
    return (0.0, math.inf)


def clipped_errors(metric: str, mean, lo, hi) -> np.ndarray:
    """Error-bar lengths (2 x n: below, above ``mean``) of the intervals [lo, hi] clipped to ``metric``'s
    feasible range; a missing bound (nan, e.g. one seed) draws no bar on that side."""
    a, b = feasible_range(metric)
    mean = np.asarray(mean, dtype=float)
    lo = np.clip(np.where(np.isfinite(lo), lo, mean), a, b)
    hi = np.clip(np.where(np.isfinite(hi), hi, mean), a, b)
    return np.vstack([np.clip(mean - lo, 0, None), np.clip(hi - mean, 0, None)])


def unit_scale(unit: str, largest: float) -> tuple[str, float]:
    """(label, factor) turning a metric's own unit (seconds, MB, a fraction) into ``unit``; ``"traffic"`` is GB,
    or TB when ``largest`` (MB) reaches 1 TB; ``"%"`` a fraction in percent."""
    if unit == "h":
        return "h", 1 / 3600
    if unit == "min":
        return "min", 1 / 60
    if unit == "traffic":
        return ("TB", 1e-6) if largest >= 1e6 else ("GB", 1e-3)
    if unit == "%":
        return "%", 100.0
    return unit, 1.0


def _panel_title(title: str, unit: str) -> str:
    return f"{title} ({unit})" if unit else title


def styles(order: Sequence[str]) -> dict[str, dict]:
    """Colour, line style and marker of every policy, in ``order`` (no two alike among the first 70)."""
    cmap = plt.get_cmap("tab10" if len(order) <= 10 else "tab20")
    return {p: {"color": cmap(i % cmap.N), "marker": MARKERS[i % len(MARKERS)],
                "linestyle": LINESTYLES[i % len(LINESTYLES)]} for i, p in enumerate(order)}


def _plain_numbers(ax) -> None:
    """Plain tick labels on the linear axes: no offset or ×10^k text above the axis."""
    from matplotlib.ticker import ScalarFormatter

    for axis in (ax.xaxis, ax.yaxis):
        fmt = axis.get_major_formatter()
        if isinstance(fmt, ScalarFormatter) and axis.get_scale() == "linear":
            fmt.set_useOffset(False)
            fmt.set_scientific(False)


def _save(fig, path: Path) -> Path:
    """Write ``fig`` as ``path`` (PNG) and beside it in every other format of :data:`FORMATS`; returns ``path``."""
    try:
        for fmt in FORMATS:
            atomic_write(path.with_suffix(f".{fmt}"), lambda f, fmt=fmt: fig.savefig(f, format=fmt, dpi=DPI,
                                                                                     bbox_inches="tight"),
                         binary=True)
        return path
    finally:
        plt.close(fig)


def jct_cdf(jobs, scenario: str, path: Path, order: Sequence[str]) -> Path | None:
    d = jobs[(jobs["scenario"] == scenario)]
    if d.empty or "jct" not in d:
        return None
    fig, ax = plt.subplots(figsize=(5.6, 3.8))
    sty = styles(order)
    for i, p in enumerate(order):
        x = np.sort(d.loc[d["policy"] == p, "jct"].dropna().to_numpy() / 3600)
        if len(x) == 0:
            continue
        # markers every tenth of the axes' diagonal, each policy's shifted, so equal curves show every marker
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=p, lw=1.2, ms=4, alpha=0.9,
                markevery=(0.1 * i / max(1, len(order)), 0.1), **sty[p])
    ax.set_xscale("log")
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("JCT (h, log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title(f"JCT CDF: {scenario} (jobs of all seeds)", fontsize=9)
    ax.grid(alpha=0.3)
    _plain_numbers(ax)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def _panel_unit(d, metric: str, unit: str) -> tuple[str, float]:
    """The unit of a panel of ``metric`` in the long table ``d`` (traffic by the largest mean there)."""
    means = d.loc[d["metric"] == metric, "mean"].to_numpy(float)
    largest = float(np.nanmax(means)) if np.isfinite(means).any() else 0.0
    return unit_scale(unit, largest)


def _axes_grid(n: int, ncol: int, width: float, height: float):
    nrow = int(np.ceil(n / ncol))
    return plt.subplots(nrow, ncol, figsize=(width * ncol, height * nrow), squeeze=False)


def _style_panel(ax, metric: str, title: str) -> None:
    ax.set_title(title, fontsize=8)
    if metric == "decision_mean_us":
        ax.set_yscale("log")
    ax.tick_params(axis="y", labelsize=7)
    _plain_numbers(ax)


def metric_bars(long, scenario: str, path: Path, order: Sequence[str], panels=PANELS) -> Path | None:
    d = long[long["scenario"] == scenario]
    panels = [p for p in panels if p[0] in set(d["metric"])]
    if d.empty or not panels:
        return None
    fig, axes = _axes_grid(len(panels), 4, 3.0, 2.7)
    sty = styles(order)
    pols = [p for p in order if p in set(d["policy"])]
    for ax, (m, title, unit) in zip(axes.flat, panels):
        label, k = _panel_unit(d, m, unit)
        g = d[d["metric"] == m].set_index("policy").reindex(pols)
        mean = g["mean"].to_numpy(float)
        err = clipped_errors(m, mean, g["ci_lo"].to_numpy(float), g["ci_hi"].to_numpy(float))
        ax.bar(range(len(pols)), mean * k, yerr=err * k, color=[sty[p]["color"] for p in pols], capsize=2)
        ax.set_xticks(range(len(pols)))
        ax.set_xticklabels(pols, rotation=60, ha="right", fontsize=7)
        ax.grid(axis="y", alpha=0.3)
        _style_panel(ax, m, _panel_title(title, label))
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"{scenario}: mean ± 95% t-interval over seeds (clipped to each metric's range)", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def dodge(order: Sequence[str]) -> dict[str, float]:
    """Per policy, a factor on the load x that shifts its points sideways by up to ±0.12 of a doubling on the
    log2 load axis, so policies with equal values stand side by side instead of on top of each other."""
    n = len(order)
    return {p: 2.0 ** (0.24 * ((i / (n - 1)) - 0.5) if n > 1 else 0.0) for i, p in enumerate(order)}


def _load_axis(ax, xs: Sequence[float], label: str) -> None:
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"{x:g}" for x in xs], fontsize=7)
    ax.set_xlabel(label, fontsize=7)
    ax.grid(alpha=0.3)


def _interval_lines(ax, g, metric: str, x: str, k: float, order: Sequence[str], sty: dict,
                    place: Callable) -> None:
    """One line per policy of ``order`` that has rows in ``g`` (columns policy, ``x``, mean, ci_lo, ci_hi): its
    means times ``k`` in ``x`` order with their intervals clipped to ``metric``'s range (:func:`clipped_errors`),
    drawn at ``place(i, policy, x values)`` (``i`` its position in ``order``: the sideways shift of each figure).
    The one drawing rule of :func:`load_curves` and :func:`x_curves`."""
    for i, p in enumerate(order):
        gp = g[g["policy"] == p].sort_values(x)
        if gp.empty:
            continue
        y = gp["mean"].to_numpy(float)
        err = clipped_errors(metric, y, gp["ci_lo"].to_numpy(float), gp["ci_hi"].to_numpy(float))
        ax.errorbar(place(i, p, gp[x]), y * k, yerr=err * k, label=p, ms=3, lw=1, capsize=2, alpha=0.85, **sty[p])


def load_curves(load_long, base: str, path: Path, order: Sequence[str], panels=PANELS) -> Path | None:
    d = load_long[load_long["scenario_base"] == base]
    panels = [p for p in panels if p[0] in set(d["metric"])]
    if d.empty or d["load"].nunique() < 2:
        return None
    fig, axes = _axes_grid(len(panels), 4, 3.0, 2.6)
    sty, shift = styles(order), dodge(order)
    xs = sorted(d["load"].unique())
    for ax, (m, title, unit) in zip(axes.flat, panels):
        label, k = _panel_unit(d, m, unit)
        _interval_lines(ax, d[d["metric"] == m], m, "load", k, order, sty, lambda i, p, x: x * shift[p])
        _load_axis(ax, xs, "load factor x (jobs per window × x)")
        _style_panel(ax, m, _panel_title(title, label))
    return _finish_panels(fig, axes, len(panels), f"{base}: metrics over load (mean ± 95% t-interval, clipped to "
                                                  f"each metric's range)", path)


REL_PANELS: tuple[tuple[str, str], ...] = (
    ("mean_jct", "mean JCT"), ("deadline_ratio", "deadline guarantee ratio"),
    ("accuracy_ratio", "accuracy guarantee ratio"), ("mean_accuracy", "mean accuracy by deadline"),
    ("bandwidth_mb", "cross-server traffic"), ("mean_waiting", "mean waiting time"))


def load_rel_curves(load_long, base: str, path: Path, order: Sequence[str], reference: str) -> Path | None:
    """MLFS's relative difference (y − z)/z of the seed means to the reference policy against load (no
    intervals: per-seed ratios blow up where the reference is near 0, e.g. bandwidth of tiny windows; the
    intervals of the means are in the absolute figure and the tables)."""
    d = load_long[load_long["scenario_base"] == base]
    if d.empty or d["load"].nunique() < 2 or "rel_diff" not in d:
        return None
    panels = [p for p in REL_PANELS if p[0] in set(d["metric"])]
    fig, axes = _axes_grid(len(panels), 3, 3.4, 2.7)
    sty, shift = styles(order), dodge(order)
    xs = sorted(d["load"].unique())
    for ax, (m, label) in zip(axes.flat, panels):
        g = d[d["metric"] == m]
        for p in order:
            gp = g[g["policy"] == p].sort_values("load")
            if gp.empty or p == reference:
                continue
            ax.plot(gp["load"] * shift[p], 100 * gp["rel_diff"].to_numpy(float), label=p, ms=3, lw=1, alpha=0.9, **sty[p])
        ax.axhline(0, color="k", lw=0.8)
        _load_axis(ax, xs, "load factor x")
        _style_panel(ax, m, f"{label}: (y − {reference})/{reference} %")
    return _finish_panels(fig, axes, len(panels),
                          f"{base}: relative difference of the seed means to {reference}, (y − z)/z (MLFS)", path)


def x_curves(panels, x_label: str, title: str, path: Path, order: Sequence[str]) -> Path | None:
    """Metrics against a numeric setting of an experiment (e.g. an interference ratio): one panel per
    (metric, panel title, unit, table), the table with columns policy, x, mean, ci_lo, ci_hi; one line per
    policy with its interval, each shifted a little sideways so equal values stay visible."""
    panels = [p for p in panels if not p[3].empty]
    if not panels:
        return None
    fig, axes = _axes_grid(len(panels), len(panels), 4.0, 3.0)
    sty = styles(order)
    for ax, (metric, name, unit, d) in zip(axes.flat, panels):
        xs = sorted(d["x"].unique())
        step = 0.015 * (max(xs) - min(xs) if len(xs) > 1 else 1.0)
        label, k = _panel_unit(d.assign(metric=metric), metric, unit)
        _interval_lines(ax, d, metric, "x", k, order, sty, lambda i, p, x: x + step * (i - (len(order) - 1) / 2))
        if metric.startswith("rel_"):
            ax.axhline(0, color="k", lw=0.8)
        ax.set_xticks(xs)
        ax.set_xlabel(x_label, fontsize=7)
        ax.grid(alpha=0.3)
        _style_panel(ax, metric, _panel_title(name, label))
    return _finish_panels(fig, axes, len(panels), title, path)


def interval_bars(rows: Sequence[tuple[str, float, float, float]], x_label: str, title: str, path: Path,
                  marks: Sequence[float] | None = None, marks_label: str = "") -> Path | None:
    """Horizontal bars of relative differences (label, mean, lo, hi), in %, each with its interval (clipped to
    a relative difference's range), and a line at 0; ``marks`` (one value per row, nan for none, e.g. a paper's
    value) drawn as diamonds labelled ``marks_label``."""
    if not rows:
        return None
    labels = [r[0] for r in rows]
    mean, lo, hi = (np.array([r[i] for r in rows], dtype=float) for i in (1, 2, 3))
    fig, ax = plt.subplots(figsize=(6.8, 1.0 + 0.32 * len(rows)))
    y = np.arange(len(rows))[::-1]
    ax.barh(y, 100 * mean, xerr=100 * clipped_errors("rel_", mean, lo, hi), color=plt.get_cmap("tab10")(0),
            capsize=2, height=0.6)
    ax.axvline(0, color="k", lw=0.8)
    if marks is not None:
        ax.plot(100 * np.asarray(marks, dtype=float), y, "D", color="k", ms=5, label=marks_label)
        ax.legend(fontsize=7)
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlabel(x_label, fontsize=7)
    ax.set_title(title, fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    _plain_numbers(ax)
    fig.tight_layout()
    return _save(fig, path)


def _finish_panels(fig, axes, n_used: int, title: str, path: Path) -> Path:
    """Blank the unused panels, one shared legend below, the title, save."""
    for ax in list(axes.flat)[n_used:]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
    if lab:  # a sweep of the reference policy alone draws no curves
        fig.legend(h, lab, loc="lower center", ncol=min(len(lab), 8), fontsize=7, bbox_to_anchor=(0.5, -0.04))
    fig.suptitle(title, fontsize=9)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, path)


def all_figures(episodes, jobs, long, load_long, fig_dir: Path, order: Sequence[str],
                reference: str | None = None) -> list[Path]:
    fig_dir = Path(fig_dir)
    out: list[Path] = []
    scen = list(dict.fromkeys(episodes["scenario"]))
    for s in scen:
        if jobs is not None and not jobs.empty:
            p = jct_cdf(jobs, s, fig_dir / f"jct_cdf_{safe_name(s)}.png", order)
            if p:
                out.append(p)
        p = metric_bars(long, s, fig_dir / f"metrics_{safe_name(s)}.png", order)
        if p:
            out.append(p)
    if load_long is not None:
        for b in dict.fromkeys(load_long["scenario_base"]):
            p = load_curves(load_long, b, fig_dir / f"load_{safe_name(b)}.png", order)
            if p:
                out.append(p)
            if reference is not None:
                p = load_rel_curves(load_long, b, fig_dir / f"load_rel_{safe_name(b)}.png", order, reference)
                if p:
                    out.append(p)
    return out
