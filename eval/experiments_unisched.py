"""UniSched's headline comparison (Gao et al., IEEE TC 2024, §V-B, Fig. 6): on a MIX1 workload (strict-SLO and
best-effort jobs), UniSched's deadline miss rate R^slo and best-effort latency against deadline-aware and DL
schedulers, on UniSched's own testbed and on mlfs-80. ``python eval/compare.py --experiment unisched-mix
[--quick]``.

The paper's baselines (3Sigma, GENIE, Hydra, Optimus, Themis) are not in clustergym; the nearest ones stand in
and the claims say so: EDF (non-preemptive earliest deadline first: GENIE's least-laxity-first on SLO jobs is
its nearest rule) and SJF (shortest remaining time first: Hydra's rule inside each class) for the
deadline-aware group; Tiresias (2D-LAS) and Gavel (max-min fairness LP, the code base of the paper's Themis)
for the DL schedulers.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .experiment_kit import experiment, paired_rel, pct_ci, significance
from .specs import expand_loads, make_runs, parse_policy
from .stats import fmt_num

# MIX1 on UniSched's physical testbed (unisched-64, 200 Gbps NICs) and on mlfs-80 (10 Gbps NICs): -v2, where
# UniSched can suspend every running job through the env. (label, env id)
UNISCHED_CLUSTERS = (("testbed", "clustergym/UniSched64-v2"), ("mlfs80", "clustergym/UniSched-v2"))
DEADLINE_AWARE = ("edf", "sjf")  # stand-ins for GENIE (LLF) and Hydra (SRTF)
DL_SCHEDULERS = ("tiresias", "gavel")  # stand-ins for Optimus and Themis (run on Gavel's code in the paper)
# UniSched §V-B, MIX1/MIX2: R^slo 0.95-2.77x lower than the deadline-aware schedulers, 2.01-6.84x lower than the
# DL schedulers; best-effort latency 1.66-4.02x and 1.18-3.11x lower. As (baseline - unisched) / baseline:
# a factor f lower is a reduction of 1 - 1/f.
PAPER_SLO = {"deadline-aware": (0.95, 2.77), "dl": (2.01, 6.84)}
PAPER_BE = {"deadline-aware": (1.66, 4.02), "dl": (1.18, 3.11)}
# one mechanism of UniSched switched at a time (baselines/unisched.py): no profiling phase; the phase's time and
# GPUs with the reference estimates; the plan's allocations placed as before the cell rule (worst fit for the
# single-GPU cells, on whatever GPUs are free). (a, b, what a - b isolates), each as the paired (a - b) / b
UNISCHED_VARIANTS = ("unisched-noprof=unisched:profile_s=0", "unisched-refest=unisched:profiled_estimates=false",
                     "unisched-worstfit=unisched:place_as_planned=false,single_gpu_placement=worst-fit",
                     "unisched-profprog=unisched:profile_progress=true")
VARIANT_EFFECTS = (("unisched", "unisched-noprof", "the whole profiling phase"),
                   ("unisched-refest", "unisched-noprof", "profiling's time and GPUs (reference estimates)"),
                   ("unisched", "unisched-refest", "the profiled estimates (same time and GPUs)"),
                   ("unisched", "unisched-worstfit", "the cell rule: single-GPU cells best fit, planned cells free"),
                   ("unisched-profprog", "unisched", "profiling runs of jobs of at most 2 GPUs keep their progress"))


@experiment
def unisched_mix(out: Path, quick: bool = False, seeds=None) -> dict:
    """UniSched Fig. 6 (MIX1): R^slo and best-effort JCT of UniSched vs deadline-aware and DL schedulers, on
    UniSched's testbed and on mlfs-80."""
    jobs = 40 if quick else 100
    seeds = seeds or ([0, 1] if quick else list(range(8)))
    scen = expand_loads([{"label": label, "env_id": env_id, "kwargs": {"window_jobs": jobs}}
                         for label, env_id in UNISCHED_CLUSTERS], None)
    pols = [parse_policy(p) for p in ("unisched", *UNISCHED_VARIANTS, *DEADLINE_AWARE, *DL_SCHEDULERS)]
    notes = (f"UniSched's MIX1 ({jobs} generated jobs of 5-180 minutes at load 1, GPU requests in {{1, 2, 4, 8, 16}}, "
             f"half strict-SLO with deadlines U[1.1, 2] x run time, half best-effort, 5/10-minute leases) on "
             f"`testbed` (`clustergym/UniSched64-v2`: UniSched's 16 x 4 V100 with 200 Gbps InfiniBand) and `mlfs80` "
             f"(`clustergym/UniSched-v2`: 20 x 4 V100 with 10 Gbps NICs), seeds {seeds} (seed = workload + "
             f"simulator; every policy gets the same jobs). Stand-ins for the paper's baselines: EDF (GENIE) and SJF "
             f"(Hydra) for the deadline-aware group, Tiresias and Gavel (Themis's code base) for the DL schedulers. "
             f"Effects are paired per seed within a cluster: (baseline - unisched) / baseline, > 0 when UniSched is "
             f"lower. UniSched profiles every new job (5 minutes on at most 2 GPUs); `unisched-noprof` has no "
             f"profiling phase, `unisched-refest` pays the phase's time and GPUs but estimates from the reference "
             f"profile, `unisched-worstfit` places the plan's allocations as before the cell rule, `unisched-profprog` "
             f"profiles a job of at most 2 GPUs by running it (its profiling lease keeps its iterations).")
    return {"runs": make_runs(pols, scen, seeds), "reference": "unisched",
            "title": "unisched-mix: UniSched vs deadline-aware and DL schedulers (MIX1)", "notes": notes,
            "claims": _claims_mix}


def reduction(factor: float) -> float:
    """A metric ``factor`` times lower, as (baseline - ours) / baseline."""
    return 1.0 - 1.0 / factor


def _claims_mix(agg) -> list[dict]:
    ep = agg["episodes"]
    rows = []
    present = set(ep["scenario"])
    known = [c for c, _ in UNISCHED_CLUSTERS if c in present]
    for label in known + sorted(present - set(known)):  # the experiment's clusters in its order, then any other
        here = ep[ep["scenario"] == label]
        rows += _claims_baselines(here, label) + _claims_variants(here, label)
    return rows


def _claims_baselines(ep, label: str) -> list[dict]:
    """The paper's comparison on one cluster: UniSched against each stand-in, both metrics."""
    rows = []
    present = set(ep["policy"])
    for group, members in (("deadline-aware", DEADLINE_AWARE), ("dl", DL_SCHEDULERS)):
        for metric, paper in (("slo_miss_rate", PAPER_SLO[group]), ("mean_be_jct", PAPER_BE[group])):
            lo_p, hi_p = reduction(paper[0]), reduction(paper[1])
            for other in (p for p in members if p in present and "unisched" in present):
                # paired (unisched - other) / other; its negation is the paper's "reduction"
                m, lo, hi, n = paired_rel(ep, "unisched", other, metric)
                red, red_lo, red_hi = -m, -hi, -lo
                ours = ep.loc[ep["policy"] == "unisched", metric].mean()
                theirs = ep.loc[ep["policy"] == other, metric].mean()
                rows.append({
                    "claim": f"{label}: {metric}: UniSched lower than {other} ({group})",
                    "paper": f"{paper[0]:g}-{paper[1]:g}x lower (reduction {lo_p:.0%} to {hi_p:.0%})",
                    "measured": f"reduction {pct_ci(red, red_lo, red_hi, n)}; means {fmt_num(ours)} vs "
                                f"{fmt_num(theirs)}",
                    "agrees": _agree(red, red_lo, red_hi, lo_p, hi_p)})
    return rows


def _claims_variants(ep, label: str) -> list[dict]:
    """What one mechanism of UniSched changes on one cluster, each isolated by a pair of UniSched variants."""
    rows = []
    present = set(ep["policy"])
    for a, b, what in VARIANT_EFFECTS:
        if a not in present or b not in present:
            continue
        for metric in ("slo_miss_rate", "mean_be_jct"):
            m, lo, hi, n = paired_rel(ep, a, b, metric)
            ya, yb = (ep.loc[ep["policy"] == p, metric].mean() for p in (a, b))
            rows.append({"claim": f"{label}: {metric}: {a} vs {b} ({what})",
                         "paper": "n/a (isolates one mechanism)",
                         "measured": f"{pct_ci(m, lo, hi, n)}; means {fmt_num(ya)} vs {fmt_num(yb)}",
                         "agrees": "n/a; " + significance(lo, hi)})
    return rows


def _agree(m: float, lo: float, hi: float, paper_lo: float, paper_hi: float) -> str:
    """Direction: the interval lies above 0 (UniSched lower, as the paper says); size: it meets the paper's range
    (a paper factor below 1, e.g. 0.95x, allows a small loss)."""
    if not np.isfinite(m):
        return "no data"
    lo_, hi_ = (lo, hi) if np.isfinite(lo) else (m, m)
    overlap = not (hi_ < paper_lo or lo_ > paper_hi)
    if lo_ > 0:
        return "yes (direction and size)" if overlap else "direction yes, size no"
    if hi_ < 0:
        return "no (significant, opposite direction)" + ("; inside the paper's range" if overlap else "")
    return "no significant effect" + ("; the paper's range overlaps the interval" if overlap else "")


# ------------------------------------------------------------------ what the profiling phase costs (jobs.csv)


def beyond_span(jobs) -> dict:
    """Per policy, the share of strict jobs whose running time alone exceeds their deadline span (deadline -
    submission), pooled over the episodes (of one cluster): deadlines no scheduler could have met once the job
    ran so long."""
    s = jobs[jobs["slo_class"] == "strict"]
    over = s["running_time"] > s["deadline"] - s["submit"]
    return {p: float(v) for p, v in over.groupby(s["policy"]).mean().items()}


def deadlines_lost(jobs, a: str = "unisched", b: str = "unisched-noprof") -> dict:
    """Strict jobs of one cluster, paired by (seed, job): met under ``b`` but missed under ``a`` ("lost"), the
    reverse ("won"), their number ("n"), and for the lost ones how early they finished under ``b`` (median of
    deadline - end, s) and the quartiles of their slack under ``b`` (deadline - submission - running time, s)."""
    s = jobs[jobs["slo_class"] == "strict"]
    x = s[s["policy"] == a].set_index(["seed", "job_id"])
    y = s[s["policy"] == b].set_index(["seed", "job_id"])
    j = x.merge(y, left_index=True, right_index=True, suffixes=("_a", "_b"))
    met_a, met_b = j["deadline_met_a"].astype(bool), j["deadline_met_b"].astype(bool)
    lost = j[met_b & ~met_a]
    slack = lost["deadline_b"] - lost["submit_b"] - lost["running_time_b"]
    return {"n": len(j), "lost": len(lost), "won": int((met_a & ~met_b).sum()),
            "lost_margin_median": float((lost["deadline_b"] - lost["end_b"]).median()),
            "lost_slack_quartiles": (float(slack.quantile(0.25)), float(slack.quantile(0.75)))}


if __name__ == "__main__":  # python -m clustergym.eval.experiments_unisched results/unisched-mix
    import sys

    import pandas as pd

    all_jobs = pd.read_csv(Path(sys.argv[1] if len(sys.argv) > 1 else "results/unisched-mix") / "jobs.csv")
    for cluster, jobs in all_jobs.groupby("scenario"):
        print(f"== {cluster}")
        over = {p: round(v, 3) for p, v in beyond_span(jobs).items()}
        print("strict jobs running longer than their deadline span:", over)
        print("unisched vs unisched-noprof:", deadlines_lost(jobs))
        be = jobs[jobs["slo_class"] == "best-effort"].groupby(["policy", "seed"])[["waiting_time", "running_time"]]
        print("best-effort jobs, episode means (s):")
        print(be.mean().groupby("policy").mean().round(0).to_string())
