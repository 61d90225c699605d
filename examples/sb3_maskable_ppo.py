"""Train SB3's MaskablePPO on clustergym for a few hundred steps, save it, and compare it with a heuristic on
held-out windows.

    python examples/sb3_maskable_ppo.py --steps 512 --out runs/example-ppo.zip
    python eval/compare.py --protocol core-v1 --policies runs/example-ppo.zip mlf-h   # then on the protocol

MaskablePPO reads the valid actions from ``env.action_masks()``. The network is clustergym's permutation-
invariant ``pairwise`` policy (``clustergym.agents.policies``; ``"MultiInputPolicy"`` also works, with
weights tied to the window size). A few hundred steps only show the wiring: ``make train`` is the recipe
that learns (behaviour cloning from MLF-H, then PPO; docs/training.md).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from sb3_contrib import MaskablePPO

from clustergym.agents.policies import overload_threshold, policy_spec
from clustergym.eval.rollout import evaluate
from clustergym.scenarios import make_env

ENV_ID = "clustergym/GPUCluster-v1"


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=512, help="PPO env steps")
    ap.add_argument("--window-jobs", type=int, default=10)
    ap.add_argument("--episodes", type=int, default=3, help="held-out windows to compare on")
    ap.add_argument("--out", default="runs/example-ppo.zip")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)  # a small network: one thread is faster than threads contending for the cores
    config = {"window_jobs": args.window_jobs}
    env = make_env(ENV_ID, {**config, "split": "train"})  # train on the training windows
    policy, kwargs = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    model = MaskablePPO(policy, env, policy_kwargs=kwargs, n_steps=min(128, args.steps), batch_size=32,
                        seed=args.seed, device="cpu", verbose=0)
    model.learn(total_timesteps=args.steps)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    model.save(args.out)
    seeds = range(30_000, 30_000 + args.episodes)  # evaluate() plays held-out windows (split="test") by default
    out = {"saved": args.out, "steps": int(model.num_timesteps)}
    for name, policy_ in (("ppo", model), ("fifo", "fifo")):
        recs = evaluate(policy_, ENV_ID, config, seeds, name=name)
        out[name] = {"mean_jct_h": float(np.mean([r["mean_jct_censored"] for r in recs]) / 3600),
                     "unfinished": int(sum(r["unfinished"] for r in recs))}
    print(out)
    return out


if __name__ == "__main__":
    main()
