"""Per-decision latency of every heuristic baseline through the env (mean and p99 microseconds per
``predict`` call), on the default scenario.

    .venv/bin/python eval/bench_policies.py [--env clustergym/GPUCluster-v1] [--seed 0] [--window-jobs 50]
        [--policies mlf-h,fifo,...] [--max-steps 20000] [--out rows.json] [--no-progress]

Each policy plays one seeded episode (eval/rollout.py; the env's own steps are not timed, only ``predict``)."""
from __future__ import annotations

import argparse

from clustergym import baselines
from clustergym.eval.rollout import predictor, rollout
from clustergym.scenarios import make_env


def bench(env_id: str, name: str, seed: int, window_jobs: int | None, max_steps: int) -> dict:
    kw = {"invalid_action": "raise", "max_steps": max_steps}
    if window_jobs:
        kw["window_jobs"] = window_jobs
    env = make_env(env_id, kw)
    try:
        return rollout(env, predictor(name, env), seed)
    finally:
        env.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="clustergym/GPUCluster-v1")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window-jobs", type=int, default=None)
    ap.add_argument("--policies", default=",".join(baselines.available()))
    ap.add_argument("--max-steps", type=int, default=50_000)
    ap.add_argument("--out", default=None, help="also write every policy's episode record to this JSON file")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (stderr)")
    a = ap.parse_args()
    from tqdm import tqdm

    from clustergym.eval.files import report_results

    print(f"{'policy':11s} {'calls':>7s} {'mean_us':>9s} {'p99_us':>9s} {'episode_s':>9s} {'mean_jct':>10s} deadline")
    rows = []
    for name in tqdm(a.policies.split(","), desc="policies", unit="policy", disable=a.no_progress, dynamic_ncols=True):
        r = bench(a.env, name, a.seed, a.window_jobs, a.max_steps)
        rows.append(r)
        tqdm.write(f"{r['policy']:11s} {r['agent_steps']:7d} {r['decision_mean_us']:9.0f} {r['decision_p99_us']:9.0f} "
                   f"{r['wall_s']:9.1f} {r['mean_jct']:10.0f} {r['deadline_ratio']:.3f}"
                   f"{' (truncated)' if r['truncated'] else ''}")
    report_results(rows, a.out, "bench_policies")


if __name__ == "__main__":
    main()
