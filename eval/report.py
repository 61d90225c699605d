"""One-page Markdown report of a sweep (tables + figures), and the claims table of a reproduction."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

from .files import atomic_write_csv, atomic_write_text, safe_name

REPORT_METRICS: tuple[str, ...] = ("mean_jct", "deadline_ratio", "mean_accuracy", "accuracy_ratio", "bandwidth_mb",
                                   "mean_waiting", "overload_occurrences", "decision_mean_us")
REL_METRICS: tuple[str, ...] = ("mean_jct", "deadline_ratio", "accuracy_ratio", "bandwidth_mb")


def _rel(path: Path, base: Path) -> str:
    return os.path.relpath(path, base).replace(os.sep, "/")


def _total(episodes, column: str) -> int | str:
    """The column's sum over the episodes, or "n/a" when the runs do not record it (core runs have no env
    truncation)."""
    return int(episodes[column].sum()) if column in episodes else "n/a"


def load_pivot(long, metric: str, order: Sequence[str]):
    """Policies x load table of "mean ± half" for one metric (long table grouped by scenario_base/load)."""
    import pandas as pd

    from .stats import fmt_ci

    d = long[long["metric"] == metric]
    rows = []
    for (base, p), g in d.groupby(["scenario_base", "policy"], sort=False):
        r = {"scenario": base, "policy": p}
        for _, x in g.sort_values("load").iterrows():
            r[f"x={x['load']:g}"] = fmt_ci(x["mean"], x["ci_half"])
        rows.append(r)
    df = pd.DataFrame(rows)
    if not df.empty:
        df["_o"] = df["policy"].map({p: i for i, p in enumerate(order)})
        df = df.sort_values(["scenario", "_o"]).drop(columns="_o")
    return df


def iqm_table(iqm, order: Sequence[str]):
    """Policies x metrics table of "IQM [lo, hi]" (percent) of the paired relative differences."""
    import pandas as pd

    from .stats import fmt_pct

    rows = []
    for p in [p for p in order if p in set(iqm["policy"])]:
        g = iqm[iqm["policy"] == p].set_index("metric")
        rows.append({"policy": p, **{m: f"{fmt_pct(r['iqm'])} [{fmt_pct(r['iqm_lo'])}, {fmt_pct(r['iqm_hi'])}]"
                                     for m, r in g.iterrows()}})
    return pd.DataFrame(rows)


def write_report(out_dir, title: str, episodes, long, figures: Sequence[Path], reference: str | None = None,
                 notes: str = "", meta: dict | None = None, order: Sequence[str] | None = None, iqm=None) -> Path:
    from .stats import summarize, to_markdown, wide_table

    out_dir = Path(out_dir)
    meta = meta or {}
    order = list(order or dict.fromkeys(episodes["policy"]))
    n_seeds = episodes.groupby(["scenario", "policy"])["seed"].nunique()
    lines = [f"# {title}", ""]
    if notes:
        lines += [notes.strip(), ""]
    lines += [f"- runs: {len(episodes)} episodes; policies: {', '.join(order)}; scenarios: "
              f"{episodes['scenario'].nunique()}; seeds per cell: {n_seeds.min()}–{n_seeds.max()}",
              "- intervals: mean ± half width of the 95 % Student-t interval across seeds"
              + (f"; Δ = (y − z)/z against **{reference}** (MLFS's relative difference)" if reference else ""),
              f"- episodes truncated (max_steps / horizon): {_total(episodes, 'truncated')}; "
              f"jobs left unfinished in total: {_total(episodes, 'unfinished')}"]
    if meta.get("command"):
        lines.append(f"- command: `{meta['command']}` ({meta.get('runs')} runs, {meta.get('executed')} executed "
                     f"now in {meta.get('sweep_wall_s')} s with {meta.get('workers')} workers)")
    lines.append("")
    loads = episodes.groupby("scenario_base")["load"].nunique().max() if "load" in episodes else 1
    metrics = [m for m in REPORT_METRICS if m in episodes.columns]
    if loads > 1:
        ll = summarize(episodes, group=("scenario_base", "load", "policy"), reference=reference,
                       metrics=["mean_jct", "deadline_ratio", "accuracy_ratio", "bandwidth_mb"])
        for m in ("mean_jct", "deadline_ratio", "accuracy_ratio", "bandwidth_mb"):
            lines += [f"## {m} by load factor x", "", to_markdown(load_pivot(ll, m, order)), ""]
        lines += ["Full per-scenario table: `summary.md` / `summary_long.csv`.", ""]
    else:
        wide = wide_table(long, metrics, with_rel=REL_METRICS)
        wide["_o"] = wide["policy"].map({p: i for i, p in enumerate(order)})
        wide = wide.sort_values(["scenario", "_o"]).drop(columns="_o")
        lines += ["## Summary", "", to_markdown(wide), ""]
    if iqm is not None and not iqm.empty:
        lines += [f"## Interquartile mean of (y − {reference})/{reference} over all scenarios and seeds", "",
                  "Per run, the relative difference to the reference on the same scenario and seed; the "
                  "interquartile mean over the runs with a 95 % bootstrap interval stratified by scenario "
                  "(Agarwal et al., 2021). `summary_iqm.csv` has the numbers.", "",
                  to_markdown(iqm_table(iqm, order)), ""]
    lines += ["## Figures", ""]
    # one page: load curves first; of the per-scenario figures only those of load 1 (or all if no sweep)
    figs = [Path(f) for f in figures]
    keep = [f for f in figs if f.name.startswith("load_")]
    if loads > 1:
        ones = {s for s, x in zip(episodes["scenario"], episodes["load"]) if float(x) == 1.0}
        keep += [f for f in figs if not f.name.startswith("load_") and any(f.stem.endswith(safe_name(s)) for s in ones)]
    else:
        keep += [f for f in figs if not f.name.startswith("load_")]
    for f in keep:
        lines += [f"![{f.stem}]({_rel(f, out_dir)})", ""]
    others = [f for f in figs if f not in keep]
    if others:
        lines += ["Other figures: " + ", ".join(f"[{f.stem}]({_rel(f, out_dir)})" for f in others), ""]
    path = out_dir / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path


def write_claims(out_dir, claims: list[dict]) -> Path:
    """claims.md / claims.csv: one row per paper claim (paper value, measured value with interval, agreement);
    the report is re-written to include it."""
    import pandas as pd

    from .stats import to_markdown

    out_dir = Path(out_dir)
    df = pd.DataFrame(claims)
    atomic_write_csv(df, out_dir / "claims.csv")
    atomic_write_text(out_dir / "claims.md", to_markdown(df))
    rep = out_dir / "report.md"
    if rep.exists():
        text = rep.read_text().split("## Paper claims")[0].rstrip()
        atomic_write_text(rep, text + "\n\n## Paper claims\n\n" + to_markdown(df) + "\n")
    return out_dir / "claims.md"
