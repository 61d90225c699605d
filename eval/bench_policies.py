"""Per-decision latency of every heuristic baseline through the env (mean and p99 microseconds per
``predict`` call), on the default scenario.

    .venv/bin/python eval/bench_policies.py [--env clustergym/GPUCluster-v0] [--seed 0] [--window-jobs 50]
        [--policies mlf-h,fifo,...] [--max-steps 20000]

Each policy plays one seeded episode (the env's own steps are not timed, only ``predict``)."""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

from clustergym import baselines
import clustergym  # noqa: F401  (registers the ids)


def bench(env_id: str, name: str, seed: int, window_jobs: int | None, max_steps: int) -> dict:
    kw = {"invalid_action": "raise", "max_steps": max_steps}
    if window_jobs:
        kw["window_jobs"] = window_jobs
    env = gym.make(env_id, **kw)
    agent = baselines.make(name, env)
    obs, info = env.reset(seed=seed)
    lat, done, t0 = [], False, time.perf_counter()
    while not done:
        t = time.perf_counter()
        a, _ = agent.predict(obs, action_masks=env.unwrapped.action_masks())
        lat.append(time.perf_counter() - t)
        obs, _, term, trunc, info = env.step(a)
        done = term or trunc
    s = info["summary"]
    us = np.array(lat) * 1e6
    return {"policy": name, "calls": len(us), "mean_us": float(us.mean()), "p99_us": float(np.percentile(us, 99)),
            "episode_s": time.perf_counter() - t0, "mean_jct": s["mean_jct"], "deadline_ratio": s["deadline_ratio"],
            "truncated": bool(trunc)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="clustergym/GPUCluster-v0")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window-jobs", type=int, default=None)
    ap.add_argument("--policies", default=",".join(baselines.available()))
    ap.add_argument("--max-steps", type=int, default=50_000)
    a = ap.parse_args()
    print(f"{'policy':11s} {'calls':>7s} {'mean_us':>9s} {'p99_us':>9s} {'episode_s':>9s} {'mean_jct':>10s} deadline")
    for name in a.policies.split(","):
        r = bench(a.env, name, a.seed, a.window_jobs, a.max_steps)
        print(f"{r['policy']:11s} {r['calls']:7d} {r['mean_us']:9.0f} {r['p99_us']:9.0f} {r['episode_s']:9.1f} "
              f"{r['mean_jct']:10.0f} {r['deadline_ratio']:.3f}{' (truncated)' if r['truncated'] else ''}", flush=True)


if __name__ == "__main__":
    main()
