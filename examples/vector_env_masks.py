"""Gymnasium vector envs with action masks: several clustergym envs stepped together, each action drawn
among the valid ones of its own env.

    python examples/vector_env_masks.py --num-envs 4 --steps 300
    python examples/vector_env_masks.py --mode async      # one process per env

The mask is part of the observation (``obs["action_mask"]``, batched like every other key), so a vector env
needs nothing special; ``envs.call("action_masks")`` gives the same masks. Episodes restart by themselves
(Gymnasium's next-step autoreset: the step after an episode's last one resets that env and ignores its
action). The env runs with ``invalid_action="raise"``, so an action outside the mask would stop the run.
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

import clustergym  # noqa: F401  (registers the env ids)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--num-envs", type=int, default=4)
    ap.add_argument("--steps", type=int, default=300, help="vector steps (each steps every env once)")
    ap.add_argument("--mode", choices=("sync", "async"), default="sync")
    ap.add_argument("--env-id", default="clustergym/GPUCluster-v1")
    ap.add_argument("--window-jobs", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    envs = gym.make_vec(args.env_id, num_envs=args.num_envs, vectorization_mode=args.mode,
                        window_jobs=args.window_jobs, invalid_action="raise")
    rng = np.random.default_rng(args.seed)
    obs, _ = envs.reset(seed=args.seed)  # env i gets seed + i
    episodes, jct = 0, []
    try:
        for _ in range(args.steps):
            masks = obs["action_mask"].astype(bool)  # (num_envs, n_actions)
            assert np.array_equal(masks, np.stack(envs.call("action_masks")))
            actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
            obs, rewards, terminated, truncated, info = envs.step(actions)
            for i in np.flatnonzero(terminated | truncated):
                episodes += 1
                jct.append(float(info["summary"]["mean_jct"][i]))
    finally:
        envs.close()
    out = {"vector_steps": args.steps, "num_envs": args.num_envs, "episodes_ended": episodes,
           "mean_jct_h": float(np.nanmean(jct)) / 3600 if jct else None}
    print(out)
    return out


if __name__ == "__main__":
    main()
