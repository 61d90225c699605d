"""The recipe over several training seeds: one `train/ppo.py` run per seed, then the table across seeds.

    python train/seeds.py --seeds 0 1 2 3 4 --jobs 2 --out runs/seeds [-- <train/ppo.py flags>]
    python train/seeds.py --out runs/seeds --table-only

Each seed trains in its own run folder ``<out>/seed-<k>`` (log ``<out>/seed-<k>.log``), ``--jobs`` at a time
(one per core: every run keeps torch on one thread). Started again, the command skips finished runs and
continues unfinished ones with ``--resume``; a folder stopped before its first checkpoint holds nothing to
resume and is started again. The runs share ``<out>/baseline-cache.json`` (``--baseline-cache``, unless a
flag after ``--`` sets it): the heuristics' validation scores are the same for every seed, so the first run
to need one computes it and the others read it (``train/baseline_cache.py``). Every run's final table uses
the same held-out windows (``eval_seed``), so the agent is compared with each heuristic on the same windows in
every run.

The table across seeds (``seeds.csv``, ``seeds.md``): per run, the relative mean-JCT difference of the agent
against each heuristic on that run's final windows, ``(mean agent − mean other) / mean other`` of
``mean_jct_censored`` (negative: the agent is faster), and the difference of the deadline ratio; across runs,
their mean with the 95 % Student-t interval over seeds, and on how many seeds the agent is at least
``--target`` (10 %) faster.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from clustergym.eval.experiment_kit import ratio_of_means
from clustergym.eval.files import atomic_write_csv, atomic_write_text
from clustergym.train.rundir import RunFolder
from clustergym.eval.stats import fmt_num, t_interval, to_markdown

PPO = Path(__file__).with_name("ppo.py")
JCT, DEADLINE = "mean_jct_censored", "deadline_ratio"
RESERVED = ("--seed", "--out", "--resume")
BASELINE_CACHE = "baseline-cache.json"  # train/baseline_cache.py: shared by the runs of one --out


def seed_folder(out: Path, seed: int) -> Path:
    return out / f"seed-{seed}"


def run_command(out: Path, seed: int, extra: Sequence[str]) -> list[str] | None:
    """The command that brings seed ``seed``'s run to its end: None if it finished, ``--resume`` if it has a
    state to continue from, else a fresh start (an unstarted or never-checkpointed folder is removed first)."""
    folder = seed_folder(out, seed)
    if _finished(folder):
        return None
    if (folder / "state.json").exists():
        return [sys.executable, str(PPO), "--resume", str(folder), "--no-progress"]
    if folder.exists():
        with RunFolder(folder).lock():  # RunLocked if a run is live in it (e.g. before its first checkpoint)
            pass
        shutil.rmtree(folder)
    cache = [] if any(f.split("=")[0] == "--baseline-cache" for f in extra) else [
        "--baseline-cache", str(out / BASELINE_CACHE)]  # the heuristics' validation scores, computed once
    return [sys.executable, str(PPO), "--seed", str(seed), "--out", str(folder), "--no-progress", *cache, *extra]


def _finished(folder: Path) -> bool:
    state = folder / "state.json"
    return state.exists() and bool(json.loads(state.read_text()).get("finished"))


def launch(out: Path, seeds: Sequence[int], jobs: int, extra: Sequence[str]) -> dict[int, int]:
    """Run every seed's command, ``jobs`` at a time; returns seed -> exit code (0 for runs already finished).
    Ctrl-C sends SIGTERM to the running ones, which checkpoint and stop (the next call resumes them)."""
    todo = [(s, run_command(out, s, extra)) for s in seeds]
    codes = {s: 0 for s, cmd in todo if cmd is None}
    queue = [(s, cmd) for s, cmd in todo if cmd is not None]
    running: dict[int, tuple[subprocess.Popen, object]] = {}
    try:
        while queue or running:
            while queue and len(running) < jobs:
                s, cmd = queue.pop(0)
                log = open(out / f"seed-{s}.log", "a")
                print(f"seed {s}: {' '.join(cmd[1:])}  (log {log.name})", flush=True)
                running[s] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
            time.sleep(2.0)
            for s, (proc, log) in list(running.items()):
                if proc.poll() is not None:
                    log.close()
                    codes[s] = proc.returncode
                    print(f"seed {s}: exit {proc.returncode}", flush=True)
                    del running[s]
    except KeyboardInterrupt:
        for proc, _ in running.values():
            proc.terminate()
        for s, (proc, log) in running.items():
            codes[s] = proc.wait()
            log.close()
        raise
    return codes


def seed_rows(folder: Path, seed: int) -> list[dict]:
    """One row per heuristic of the run's final table: the agent's relative mean-JCT difference and deadline-ratio
    difference against it on the run's windows."""
    ep = pd.read_csv(folder / "episodes.csv")
    means = ep.groupby("policy")[[JCT, DEADLINE]].mean()
    n = ep[ep["policy"] == "agent"]["seed"].nunique()
    a = means.loc["agent"]
    return [{"seed": seed, "vs": p, "windows": n, "agent_jct": a[JCT], "other_jct": means.loc[p, JCT],
             "rel_jct": ratio_of_means(ep, "agent", p, JCT),
             "deadline_diff": a[DEADLINE] - means.loc[p, DEADLINE]} for p in means.index if p != "agent"]


def across_seeds(rows: pd.DataFrame, target: float) -> pd.DataFrame:
    """Per heuristic: mean and 95 % t-interval over seeds of ``rel_jct`` and ``deadline_diff``, and the number of
    seeds with ``rel_jct <= -target``."""
    out = []
    for p, g in rows.groupby("vs", sort=False):
        m, lo, hi, _, n = t_interval(g["rel_jct"])
        dm, dlo, dhi, _, _ = t_interval(g["deadline_diff"])
        out.append({"vs": p, "seeds": n, "rel_jct_mean": m, "rel_jct_low": lo, "rel_jct_high": hi,
                    "seeds_at_target": int((g["rel_jct"] <= -target).sum()),
                    "deadline_diff_mean": dm, "deadline_diff_low": dlo, "deadline_diff_high": dhi})
    return pd.DataFrame(out)


def _pct(x: float) -> str:
    return "nan" if not np.isfinite(x) else f"{100 * x:+.1f} %"


def markdown(summary: pd.DataFrame, target: float) -> str:
    table = pd.DataFrame({
        "vs": summary["vs"], "seeds": summary["seeds"],
        "agent mean JCT vs other (mean over seeds)": summary["rel_jct_mean"].map(_pct),
        "95 % interval": [f"[{_pct(lo)}, {_pct(hi)}]"
                          for lo, hi in zip(summary["rel_jct_low"], summary["rel_jct_high"])],
        f"seeds >= {100 * target:.0f} % faster": summary["seeds_at_target"],
        "deadline ratio, agent − other": [f"{fmt_num(m)} [{fmt_num(lo)}, {fmt_num(hi)}]" for m, lo, hi in
                                         zip(summary["deadline_diff_mean"], summary["deadline_diff_low"],
                                             summary["deadline_diff_high"])]})
    return to_markdown(table)


def table(out: Path, seeds: Sequence[int] | None, target: float) -> str:
    """Write ``seeds.csv`` (per run) and ``seeds.md`` (across runs) for the finished runs under ``out``; returns
    the Markdown. Seeds whose run has no final table are named, not silently left out."""
    seeds = list(seeds) if seeds else sorted(int(p.name.split("-", 1)[1]) for p in out.glob("seed-*") if p.is_dir())
    done = [s for s in seeds if (seed_folder(out, s) / "episodes.csv").exists()]
    missing = [s for s in seeds if s not in done]
    if not done:
        raise SystemExit(f"no finished run under {out} (looked for seed-<k>/episodes.csv for seeds {seeds})")
    rows = pd.DataFrame([r for s in done for r in seed_rows(seed_folder(out, s), s)])
    atomic_write_csv(rows, out / "seeds.csv")
    md = (f"# The agent against each heuristic across training seeds {done}\n\n"
          f"Per seed: (mean agent − mean other) / mean other of `{JCT}` on the run's final held-out windows; "
          f"mean and 95 % t-interval over seeds.\n\n" + markdown(across_seeds(rows, target), target))
    if missing:
        md += f"\n\nSeeds without a final table (not in the table): {missing}\n"
    atomic_write_text(out / "seeds.md", md)
    return md


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, type=Path, help="folder of the runs (seed-<k>/) and the table")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--jobs", type=int, default=2, help="runs at a time (one per core)")
    ap.add_argument("--target", type=float, default=0.10, help="the relative mean-JCT margin counted per seed")
    ap.add_argument("--table-only", action="store_true", help="only (re)write the table of the finished runs")
    a = ap.parse_args(own)
    bad = [f for f in extra if f.split("=")[0] in RESERVED]
    if bad:
        ap.error(f"{bad}: train/seeds.py sets --seed, --out and --resume per run itself")
    if a.jobs < 1:
        ap.error(f"--jobs must be >= 1 (got {a.jobs})")
    a.out.mkdir(parents=True, exist_ok=True)
    codes = {} if a.table_only else launch(a.out, a.seeds, a.jobs, extra)
    failed = {s: c for s, c in codes.items() if c != 0}
    print(table(a.out, a.seeds, a.target))
    if failed:
        print(f"runs that failed (exit codes; logs in {a.out}): {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
