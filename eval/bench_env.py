"""Environment throughput: steps/s with random valid actions (and a greedy place-first policy), one core.

    .venv/bin/python eval/bench_env.py [--steps 20000] [--ids clustergym/GPUCluster-v0 clustergym/MLFS2474-v0]

Observation building, masks and the simulator are all included; the first reset (trace loading) is not timed.
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np

import envs  # noqa: F401


def greedy(u, rng):
    m = u.action_masks()
    for a in np.flatnonzero(m[:-1]):
        if u.candidate_kind[a // (u.K + 1)] == "place":
            return int(a)
    return u.end_round_action


def random_valid(u, rng):
    return int(rng.choice(np.flatnonzero(u.action_masks())))


def bench(env_id: str, steps: int, policy, seed: int = 0, **kw) -> dict:
    env = gym.make(env_id, **kw)
    u = env.unwrapped
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    n = eps = 0
    t_reset = 0.0
    t0 = time.perf_counter()
    while n < steps:
        _, _, te, tr, _ = env.step(policy(u, rng))
        n += 1
        if te or tr:
            eps += 1
            t1 = time.perf_counter()
            env.reset()
            t_reset += time.perf_counter() - t1
    dt = time.perf_counter() - t0
    return {"id": env_id, "policy": policy.__name__, "steps": n, "seconds": round(dt, 2),
            "steps_per_s": round(n / dt), "steps_per_s_excl_reset": round(n / max(1e-9, dt - t_reset)),
            "episodes_ended": eps, "sim_time_h": round(u.sim.now / 3600, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--ids", nargs="+", default=["clustergym/GPUCluster-v0", "clustergym/MLFS2474-v0"])
    args = ap.parse_args()
    for env_id in args.ids:
        for pol in (random_valid, greedy):
            print(bench(env_id, args.steps, pol), flush=True)


if __name__ == "__main__":
    main()
