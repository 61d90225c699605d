"""Ray RLlib on clustergym: PPO with RLlib's action-masking module for a couple of iterations, then the
checkpoint evaluated on held-out windows like any other policy.

    pip install 'clustergym[rllib]'        # Ray pins other versions: use a venv of its own (make test-rllib)
    python examples/rllib_ppo.py --iterations 2 --out runs/example-rllib
    python eval/compare.py --protocol core-v1 --policies runs/example-rllib mlf-h   # the checkpoint as a spec

RLlib sees the env through ``clustergym.wrappers.MaskedFlatObservation`` (``{"action_mask", "observations"}``),
the layout of its ``ActionMaskingTorchRLModule``; ``train/rllib_ppo.py`` is the full script (more settings,
Ray clusters). ``clustergym.agents.rllib.RLlibPolicy`` loads the saved module for evaluation without Ray running.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def env_creator(config: dict):
    """RLlib's env factory: the scenario and its keywords come in ``config``."""
    from clustergym.scenarios import make_env
    from clustergym.wrappers import MaskedFlatObservation

    kw = {k: v for k, v in config.items() if k != "scenario"}
    return MaskedFlatObservation(make_env(config["scenario"], kw, invalid_action="raise"))


def train(iterations: int, batch: int, window_jobs: int, out: Path, seed: int) -> Path:
    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env("clustergym-masked", env_creator)
    config = (PPOConfig()
              .environment("clustergym-masked", env_config={"scenario": "clustergym/GPUCluster-v1",
                                                            "window_jobs": window_jobs, "split": "train"})
              .env_runners(num_env_runners=0)  # sample in this process
              .training(train_batch_size_per_learner=batch, minibatch_size=min(64, batch), num_epochs=1)
              .rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                                     model_config={"fcnet_hiddens": [64, 64]}))
              .debugging(seed=seed))
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    algo = config.build_algo()
    try:
        for i in range(iterations):
            result = algo.train()
            print(f"iteration {i + 1}: return {result['env_runners'].get('episode_return_mean')}")
        out.mkdir(parents=True, exist_ok=True)
        algo.save_to_path(str(out.resolve()))
    finally:
        algo.stop()
        ray.shutdown()
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=2)
    ap.add_argument("--batch", type=int, default=512, help="env steps per iteration")
    ap.add_argument("--window-jobs", type=int, default=8)
    ap.add_argument("--episodes", type=int, default=2, help="held-out windows to evaluate on")
    ap.add_argument("--out", default="runs/example-rllib")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise SystemExit("this example needs Ray RLlib: pip install 'clustergym[rllib]'") from None
    from clustergym.agents.rllib import RLlibPolicy
    from clustergym.eval.rollout import evaluate
    from clustergym.scenarios import make_env

    ckpt = train(args.iterations, args.batch, args.window_jobs, Path(args.out), args.seed)
    config = {"window_jobs": args.window_jobs}  # evaluate() plays held-out windows (split="test") by default
    layout = make_env("clustergym/GPUCluster-v1", config)  # RLlibPolicy reads its observation space only
    policy = RLlibPolicy(ckpt, layout)
    layout.close()
    recs = evaluate(policy, "clustergym/GPUCluster-v1", config, range(30_000, 30_000 + args.episodes), name="rllib")
    out = {"checkpoint": str(ckpt), "episodes": len(recs),
           "mean_jct_h": float(np.mean([r["mean_jct_censored"] for r in recs])) / 3600,
           "unfinished": int(sum(r["unfinished"] for r in recs))}
    print(out)
    return out


if __name__ == "__main__":
    main()
