"""How contended is each registered scenario? One row per scenario, measured on seeded held-out windows.

    .venv/bin/python -m clustergym.eval.scenarios [--seeds 3] [--seed0 10000] [--split test] [--policy fifo]
        [--ids ID ...] [--scenarios SPEC ...] [--max-steps N] [--out scenarios.md]

For every registered id (:data:`clustergym.scenarios.SCENARIOS`, or ``--ids``; ``--scenarios`` adds
``[label=]env_id[:key=value,...]`` specs as in ``eval/compare.py``) it plays one episode per seed
(``reset(seed=seed0 + i)``) with ``--policy`` (FIFO by default) and reports, as ``mean [min, max]`` over the
windows:

- **offered load**: :func:`clustergym.core.traces.window_offered_load` of the episode's jobs: the sum of
  GPUs x reference run time (:func:`clustergym.core.mapping.reference_run_time`) over the cluster's GPUs x
  the arrival span (n mean inter-arrival gaps). For a generated workload the same measure of its window.
- **peak demand / capacity**: the largest number of GPUs the jobs would hold at once if each ran from its
  arrival for its reference run time (no queueing), over the cluster's GPUs: above 1, jobs that run their
  whole iteration budget must queue whatever the policy (a job that stops early needs less).
- **time with queued tasks**: the fraction of simulated time, from the first arrival to the end, during
  which some task had waited in the queue longer than one scheduling tick under the policy (the simulator's
  ``queued_fraction``; one long job that runs alone for days lowers it).
- the policy's **mean waiting** and **mean JCT** (hours) and the episode's **agent steps** and **wall
  time** (s, on this machine, with whatever else runs on it).

The table goes to stdout and to ``--out`` as Markdown; the command line is written above it.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from typing import Sequence

import numpy as np

# (record key, column header with {p} = the policy, number format)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("jobs", "jobs", "{:.0f}"),
    ("offered_load", "offered load", "{:.2f}"),
    ("peak_demand", "peak demand / capacity", "{:.2f}"),
    ("queued_fraction", "time with queued tasks ({p})", "{:.2f}"),
    ("mean_waiting_h", "{p} mean waiting (h)", "{:.2f}"),
    ("mean_jct_h", "{p} mean JCT (h)", "{:.2f}"),
    ("agent_steps", "{p} agent steps", "{:,.0f}"),
    ("wall_s", "wall (s)", "{:.1f}"),
)


def peak_demand(submit: Sequence[float], run_time: Sequence[float], gpus: Sequence[int]) -> int:
    """The most GPUs held at once if every job ran from ``submit`` for ``run_time`` without waiting (a job
    ending at the instant another arrives does not overlap it)."""
    s = np.asarray(submit, dtype=float)
    e = s + np.asarray(run_time, dtype=float)
    g = np.asarray(gpus, dtype=np.int64)
    times = np.concatenate([e, s])
    change = np.concatenate([-g, g])
    order = np.lexsort((change, times))  # at equal times, releases (negative) before arrivals
    return int(np.max(np.cumsum(change[order]), initial=0))


def window_measures(env) -> dict:
    """Offered load, peak demand / capacity and the job count of the episode ``env`` holds (after reset)."""
    from clustergym.core.mapping import MappingConfig, reference_run_time
    from clustergym.core.traces import window_offered_load

    u = env.unwrapped
    specs = [j.spec for j in u.sim.jobs]
    cluster, cfg = u._cluster, u.config
    mapping = MappingConfig(**cfg.mapping) if cfg.mapping else None
    run = np.array([reference_run_time(sp, mapping, cluster) for sp in specs])
    gpus = np.array([sp.n_gpus for sp in specs])
    submit = np.array([sp.submit_time for sp in specs])
    load = window_offered_load(submit, gpus * run, cluster.n_gpus) if len(specs) >= 2 else math.nan
    return {"jobs": len(specs), "offered_load": load,
            "peak_demand": peak_demand(submit, run, gpus) / cluster.n_gpus}


def characterise(env_id: str, kwargs: dict, seeds: Sequence[int], policy: str, max_steps: int | None,
                 bar=None) -> list[dict]:
    """One record per seed: :func:`window_measures` and the policy's episode (see the module docstring)."""
    from clustergym.eval.rollout import predictor, rollout
    from clustergym.scenarios import make_env

    kw = dict(kwargs)
    if max_steps is not None:
        kw["max_steps"] = int(max_steps)
    env = make_env(env_id, kw)
    out = []
    try:
        pred = predictor(policy, env)
        for seed in seeds:
            t0 = time.perf_counter()
            rec = rollout(env, pred, seed)
            out.append({**window_measures(env), "queued_fraction": rec["queued_fraction"],
                        "mean_waiting_h": rec["mean_waiting"] / 3600.0, "mean_jct_h": rec["mean_jct"] / 3600.0,
                        "agent_steps": rec["agent_steps"], "wall_s": time.perf_counter() - t0,
                        "truncated": rec["truncated"], "unfinished": rec["unfinished"]})
            if bar is not None:
                bar.update(1)
    finally:
        env.close()
    return out


def _cell(values: list[float], fmt: str) -> str:
    v = np.asarray(values, dtype=float)
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(np.mean(v))} [{fmt.format(np.min(v))}, {fmt.format(np.max(v))}]"


def markdown(rows: list[tuple[str, list[dict]]], policy: str) -> str:
    head = ["scenario"] + [c[1].format(p=policy) for c in COLUMNS] + ["truncated"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, recs in rows:
        cells = [_cell([r[k] for r in recs], fmt) for k, _, fmt in COLUMNS]
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {sum(r['truncated'] for r in recs)} |")
    return "\n".join(lines)


def _targets(args) -> list[tuple[str, str, dict]]:
    from clustergym.eval.specs import parse_scenario
    from clustergym.scenarios import SCENARIOS

    ids = args.ids if args.ids is not None else ([] if args.scenarios else list(SCENARIOS))
    unknown = [i for i in ids if i not in SCENARIOS]
    if unknown:
        raise SystemExit(f"unknown scenario id(s) {unknown}; registered: {list(SCENARIOS)}")
    out = [(i.split("/")[-1], i, {"split": args.split}) for i in ids]
    for spec in args.scenarios or []:
        sc = parse_scenario(spec)
        out.append((sc["label"], sc["env_id"], {"split": args.split, **sc["kwargs"]}))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from tqdm import tqdm

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3, help="windows per scenario (default 3)")
    ap.add_argument("--seed0", type=int, default=10_000, help="first reset seed (default 10000)")
    ap.add_argument("--split", default="test", choices=("train", "test"), help="trace part (default: held-out)")
    ap.add_argument("--policy", default="fifo", help="heuristic that plays the episodes (default fifo)")
    ap.add_argument("--ids", nargs="+", default=None, help="registered ids (default: every one)")
    ap.add_argument("--scenarios", nargs="+", default=None, metavar="SPEC", help="[label=]env_id[:key=value,...]")
    ap.add_argument("--max-steps", type=int, default=None, help="agent-step cap per episode (default: the scenario's)")
    ap.add_argument("--out", default="scenarios.md", help="Markdown file to write (default scenarios.md)")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        ap.error("--seeds must be >= 1")
    targets = _targets(args)
    seeds = [args.seed0 + i for i in range(args.seeds)]
    rows = []
    with tqdm(total=len(targets) * len(seeds), desc="episodes", unit="ep", dynamic_ncols=True) as bar:
        for label, env_id, kw in targets:
            bar.set_postfix_str(label)
            rows.append((label, characterise(env_id, kw, seeds, args.policy, args.max_steps, bar)))
    command = "python -m clustergym.eval.scenarios " + " ".join(sys.argv[1:] if argv is None else argv)
    text = (f"`{command.strip()}`: {args.seeds} {args.split} window(s) per scenario (reset seeds {seeds[0]}.."
            f"{seeds[-1]}), policy {args.policy}; mean [min, max] over the windows.\n\n"
            + markdown(rows, args.policy) + "\n")
    with open(args.out, "w") as f:
        f.write(text)
    print(text)
    print(f"table written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
