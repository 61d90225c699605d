"""Figures of a sweep in the style of MLFS Figs. 4-5 (matplotlib, Agg backend, PNG).

- ``jct_cdf_<scenario>.png``: CDF of per-job JCT, one line per policy (all seeds pooled).
- ``metrics_<scenario>.png``: bars with 95 % t-interval error bars per policy: mean JCT, deadline guarantee
  ratio, mean waiting time, mean accuracy by deadline, accuracy guarantee ratio, bandwidth cost, decision
  time per ``predict`` call (log scale), overload occurrences.
- ``load_<base>.png``: the same metrics against the load factor x (one line per policy) for load sweeps.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .files import atomic_write, safe_name  # noqa: E402

PANELS: tuple[tuple[str, str, float], ...] = (
    ("mean_jct", "mean JCT (h)", 1 / 3600),
    ("deadline_ratio", "deadline guarantee ratio", 1.0),
    ("mean_waiting", "mean waiting time (h)", 1 / 3600),
    ("mean_accuracy", "mean accuracy by deadline", 1.0),
    ("accuracy_ratio", "accuracy guarantee ratio", 1.0),
    ("bandwidth_mb", "bandwidth cost (GB cross-server)", 1 / 1024),
    ("decision_mean_us", "decision time (µs / decision)", 1.0),
    ("overload_occurrences", "overload occurrences", 1.0),
)


def _colors(order: Sequence[str]) -> dict:
    cmap = plt.get_cmap("tab10" if len(order) <= 10 else "tab20")
    return {p: cmap(i % cmap.N) for i, p in enumerate(order)}


def _save(fig, path: Path) -> Path:
    try:
        return atomic_write(path, lambda f: fig.savefig(f, format="png", dpi=90, bbox_inches="tight"), binary=True)
    finally:
        plt.close(fig)


def jct_cdf(jobs, scenario: str, path: Path, order: Sequence[str]) -> Path | None:
    d = jobs[(jobs["scenario"] == scenario)]
    if d.empty or "jct" not in d:
        return None
    fig, ax = plt.subplots(figsize=(5.2, 3.6))
    col = _colors(order)
    for p in order:
        x = np.sort(d.loc[d["policy"] == p, "jct"].dropna().to_numpy() / 3600)
        if len(x) == 0:
            continue
        ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", label=p, color=col[p])
    ax.set_xscale("log")
    ax.set_xlabel("JCT (h, log)")
    ax.set_ylabel("CDF of jobs")
    ax.set_title(f"JCT CDF — {scenario}", fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")
    return _save(fig, path)


def metric_bars(long, scenario: str, path: Path, order: Sequence[str], panels=PANELS) -> Path | None:
    d = long[long["scenario"] == scenario]
    panels = [p for p in panels if p[0] in set(d["metric"])]
    if d.empty or not panels:
        return None
    ncol = 4
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol, 2.6 * nrow), squeeze=False)
    col = _colors(order)
    pols = [p for p in order if p in set(d["policy"])]
    for ax, (m, label, scale) in zip(axes.flat, panels):
        g = d[d["metric"] == m].set_index("policy")
        means = np.array([g.loc[p, "mean"] * scale if p in g.index else np.nan for p in pols])
        half = np.array([g.loc[p, "ci_half"] * scale if p in g.index else np.nan for p in pols])
        ax.bar(range(len(pols)), means, yerr=np.nan_to_num(half), color=[col[p] for p in pols], capsize=2)
        ax.set_xticks(range(len(pols)))
        ax.set_xticklabels(pols, rotation=60, ha="right", fontsize=7)
        ax.set_title(label, fontsize=8)
        if m == "decision_mean_us":
            ax.set_yscale("log")
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.suptitle(f"{scenario}: mean ± 95% t-interval over seeds", fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def load_curves(load_long, base: str, path: Path, order: Sequence[str], panels=PANELS) -> Path | None:
    d = load_long[load_long["scenario_base"] == base]
    panels = [p for p in panels if p[0] in set(d["metric"])]
    if d.empty or d["load"].nunique() < 2:
        return None
    ncol = 4
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.0 * ncol, 2.5 * nrow), squeeze=False)
    col = _colors(order)
    for ax, (m, label, scale) in zip(axes.flat, panels):
        g = d[d["metric"] == m]
        for p in order:
            gp = g[g["policy"] == p].sort_values("load")
            if gp.empty:
                continue
            y = gp["mean"].to_numpy(float) * scale
            lo = np.nan_to_num(gp["ci_lo"].to_numpy(float) * scale, nan=0.0)
            hi = np.nan_to_num(gp["ci_hi"].to_numpy(float) * scale, nan=0.0)
            lo = np.maximum(lo, 0.0)  # every panel is a non-negative quantity
            if m.endswith("_ratio"):
                hi = np.minimum(hi, 1.0)
            err = np.vstack([np.clip(y - lo, 0, None), np.clip(hi - y, 0, None)])
            ax.errorbar(gp["load"], y, yerr=err, label=p, color=col[p], marker="o", ms=3, lw=1, capsize=2, alpha=0.85)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(d["load"].unique()))
        ax.set_xticklabels([f"{x:g}" for x in sorted(d["load"].unique())], fontsize=7)
        ax.set_xlabel("load factor x (jobs per window × x)", fontsize=7)
        ax.set_title(label, fontsize=8)
        if m == "decision_mean_us":
            ax.set_yscale("log")
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    return _finish_panels(fig, axes, len(panels), f"{base}: metrics over load (mean ± 95% t-interval)", path)


REL_PANELS: tuple[tuple[str, str], ...] = (
    ("mean_jct", "mean JCT"), ("deadline_ratio", "deadline guarantee ratio"),
    ("accuracy_ratio", "accuracy guarantee ratio"), ("mean_accuracy", "mean accuracy by deadline"),
    ("bandwidth_mb", "bandwidth cost"), ("mean_waiting", "mean waiting time"))


def load_rel_curves(load_long, base: str, path: Path, order: Sequence[str], reference: str) -> Path | None:
    """MLFS's relative difference (y − z)/z of the seed means to the reference policy against load (no
    intervals: per-seed ratios blow up where the reference is near 0, e.g. bandwidth of tiny windows; the
    intervals of the means are in the absolute figure and the tables)."""
    d = load_long[load_long["scenario_base"] == base]
    if d.empty or d["load"].nunique() < 2 or "rel_diff" not in d:
        return None
    panels = [p for p in REL_PANELS if p[0] in set(d["metric"])]
    ncol = 3
    nrow = int(np.ceil(len(panels) / ncol))
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 2.6 * nrow), squeeze=False)
    col = _colors(order)
    xs = sorted(d["load"].unique())
    for ax, (m, label) in zip(axes.flat, panels):
        g = d[d["metric"] == m]
        for p in order:
            gp = g[g["policy"] == p].sort_values("load")
            if gp.empty or p == reference:
                continue
            y = 100 * gp["rel_diff"].to_numpy(float)
            ax.plot(gp["load"], y, label=p, color=col[p], marker="o", ms=3, lw=1, alpha=0.9)
        ax.axhline(0, color="k", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(xs)
        ax.set_xticklabels([f"{x:g}" for x in xs], fontsize=7)
        ax.set_xlabel("load factor x", fontsize=7)
        ax.set_title(f"{label}: (y − {reference})/{reference} %", fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.grid(alpha=0.3)
    return _finish_panels(fig, axes, len(panels),
                          f"{base}: relative difference of the seed means to {reference}, (y − z)/z (MLFS)", path)


def _finish_panels(fig, axes, n_used: int, title: str, path: Path) -> Path:
    """Blank the unused panels, one shared legend below, the title, save."""
    for ax in list(axes.flat)[n_used:]:
        ax.axis("off")
    h, lab = axes.flat[0].get_legend_handles_labels()
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
