"""The baselines' sanity directions (tests/test_baselines_env.py) as Markdown tables, per seed, so the numbers
in docs/baselines.md can be reproduced with one command.

    .venv/bin/python eval/sanity_table.py [--seeds 0 1 2]

Each cell is one env-level episode (``HeuristicAgent``, masked actions, rule "raise") with the same settings
as the tests; values are listed seed by seed ("a / b / c") with their mean last. Three settings:

1. ``clustergym/MLFS80-Philly-v1``, 30-job training windows: mlf-h (with and without migration), fifo, fair,
   edf, hypersched: mean JCT, deadline ratio, overload occurrences, migrations.
2. the same scenario, 90-job held-out (``split="test"``) windows: edf, hypersched, fifo: deadline ratio.
3. ``clustergym/Hetero-v1``, 40-job windows: hlas, tiresias (both with ``preemption=False``, as HLAS is
   non-preemptive), and tiresias with the env's preemption: mean JCT.
4. ``--contended``: ``clustergym/GPUClusterLight-v1`` with generated 120-job windows at offered load 1.5
   (``workload="generator"``), held-out style seeds 10000-10004: every heuristic with its own ordering rule,
   plus mlfs-h+c: mean JCT, preemptions, migrations (the whole-queue directions).
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from clustergym import baselines
from clustergym.eval.rollout import predictor, rollout
from clustergym.scenarios import make_env

MLFS = "clustergym/MLFS80-Philly-v1"
HETERO = "clustergym/Hetero-v1"
# the generated contended windows run on the light id (the contended default sets a trace load)
LIGHT = "clustergym/GPUClusterLight-v1"
CONTENDED = {"workload": "generator", "window_jobs": 120, "generator": {"load": 1.5}, "split": "test"}
ORDERING = ("fifo", "sjf", "edf", "tiresias", "gavel", "slaq", "hypersched", "hlas", "graphene", "gandiva", "fair",
            "mlf-h", "mlfs-h+c")


def episode(env_id: str, name: str, seed: int, params: dict | None = None, max_steps: int = 50_000, **kw) -> dict:
    env = make_env(env_id, invalid_action="raise", max_steps=max_steps, **kw)
    try:
        return rollout(env, predictor(baselines.make(name, env, **(params or {})), env, name), seed)
    finally:
        env.close()


def _fmt(v: float, kind: str) -> str:
    if kind == "ratio":
        return f"{v:.3f}"
    if kind == "int":
        return f"{v:.0f}"
    return f"{v:,.0f}"


def cell(values: list[float], kind: str) -> str:
    """Seed by seed, then the mean (counts: the sum)."""
    per_seed = " / ".join(_fmt(v, kind) for v in values)
    if kind == "int":
        return f"{per_seed} (sum {_fmt(float(np.sum(values)), kind)})"
    return f"{per_seed} (mean {_fmt(float(np.mean(values)), kind)})"


def table(rows: list[tuple[str, str, dict]], env_id: str, seeds, cols: list[tuple[str, str, str]], **kw) -> str:
    head = "| policy | " + " | ".join(c[1] for c in cols) + " |"
    out = [head, "|" + "---|" * (len(cols) + 1)]
    for label, name, params in rows:
        runs = [episode(env_id, name, s, params, **kw) for s in seeds]
        trunc = sum(r["truncated"] for r in runs)
        unfinished = sum(r["unfinished"] for r in runs)
        note = (f" (truncated {trunc})" if trunc else "") + (f" (unfinished jobs {unfinished})" if unfinished else "")
        out.append(f"| {label}{note} | " + " | ".join(cell([r[k] for r in runs], kind) for k, _, kind in cols) + " |")
        print(f"  done {label}", flush=True, file=sys.stderr)
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--contended", action="store_true", help="only setting 4 (seeds 10000-10004)")
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.contended:
        print(f"### {LIGHT}, generated 120-job windows at load 1.5, seeds 10000-10004\n")
        print(table([(n, n, {}) for n in ORDERING], LIGHT, range(10_000, 10_005),
                    [("mean_jct", "mean JCT (s)", "float"), ("preemptions", "preemptions", "int"),
                     ("migrations", "migrations", "int")], **CONTENDED))
        print(f"\n(wall time {time.perf_counter() - t0:.0f} s)")
        return
    seeds = tuple(a.seeds)
    print(f"### {MLFS}, 30-job training windows, seeds {', '.join(map(str, seeds))}\n")
    print(table([("mlf-h", "mlf-h", {}), ("mlf-h, migrate=False", "mlf-h", {"migrate": False}),
                 ("fifo", "fifo", {}), ("fair", "fair", {}), ("edf", "edf", {}), ("hypersched", "hypersched", {})],
                MLFS, seeds, [("mean_jct", "mean JCT (s)", "float"), ("deadline_ratio", "deadline ratio", "ratio"),
                              ("overload_occurrences", "overload occurrences", "int"),
                              ("migrations", "migrations", "int")], window_jobs=30))
    print(f"\n### {MLFS}, 90-job held-out windows (split=test), seeds {', '.join(map(str, seeds))}\n")
    print(table([("edf", "edf", {}), ("hypersched", "hypersched", {}), ("fifo", "fifo", {})], MLFS, seeds,
                [("deadline_ratio", "deadline ratio", "ratio"), ("mean_jct", "mean JCT (s)", "float")],
                window_jobs=90, split="test"))
    print(f"\n### {HETERO}, 40-job windows (preemption off unless said), seeds {', '.join(map(str, seeds))}\n")
    cols = [("mean_jct", "mean JCT (s)", "float"), ("deadline_ratio", "deadline ratio", "ratio")]
    print(table([("hlas", "hlas", {}), ("tiresias", "tiresias", {})], HETERO, seeds, cols, window_jobs=40,
                preemption=False))
    # one more row in the same table (its header lines dropped): Tiresias with the env's default preemption
    on = table([("tiresias, preemption on", "tiresias", {})], HETERO, seeds, cols, window_jobs=40)
    print("\n".join(on.splitlines()[2:]))
    print(f"\n(wall time {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
