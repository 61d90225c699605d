"""Train PPO with Ray RLlib (new API stack) on a clustergym scenario, with action masking.

    pip install -e ".[rllib]"      # or: make test-rllib (installs the extra and runs its test)
    python train/rllib_ppo.py --iterations 20 --num-env-runners 2
    python train/rllib_ppo.py --address auto ...   # join a running Ray cluster (multi-machine sampling)

The env is wrapped in :class:`clustergym.wrappers.MaskedFlatObservation` (``{"action_mask", "observations"}``) and
RLlib's action-masking PPO module (``ray.rllib.examples.rl_modules.classes.action_masking_rlm``) sets the
logits of masked actions to the float minimum, so sampled actions are always valid; the env runs with
``invalid_action="raise"`` to prove it. The policy is RLlib's default MLP over the flattened observation
(not the permutation-invariant network of ``train/ppo.py``, which is SB3-specific), there is no behaviour
cloning warm start, and no comparison table: this is the scaling path, ``train/ppo.py`` is the main one.
Each iteration prints one line; the final checkpoint goes to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Sequence


def make_env(config: dict[str, Any]):
    """RLlib env creator: the scenario id and EnvConfig overrides come in ``config`` (picklable)."""
    from clustergym.scenarios import make_env as make_scenario
    from clustergym.wrappers import MaskedFlatObservation

    overrides = {k: v for k, v in config.items() if k != "scenario"}
    return MaskedFlatObservation(make_scenario(config["scenario"], overrides, invalid_action="raise"))


def build_config(args: argparse.Namespace):
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule
    from ray.tune.registry import register_env

    register_env("clustergym", make_env)
    env_config = {"scenario": args.scenario, **json.loads(args.env)}
    return (PPOConfig()
            .environment("clustergym", env_config=env_config)
            .env_runners(num_env_runners=args.num_env_runners)
            .training(train_batch_size_per_learner=args.batch, minibatch_size=min(args.minibatch, args.batch),
                      num_epochs=args.epochs, lr=args.lr, gamma=args.gamma)
            .rl_module(rl_module_spec=RLModuleSpec(module_class=ActionMaskingTorchRLModule,
                                                   model_config={"fcnet_hiddens": args.hidden}))
            .debugging(seed=args.seed))


def main(argv: Sequence[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default="clustergym/GPUCluster-v1")
    ap.add_argument("--env", default="{}", help='EnvConfig overrides as JSON, e.g. \'{"window_jobs": 20}\'')
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--num-env-runners", type=int, default=0, help="0 = sample in the driver process")
    ap.add_argument("--address", default=None, help="Ray cluster address ('auto' = the running one); None = local")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of a local Ray instance")
    ap.add_argument("--batch", type=int, default=2048, help="env steps per training iteration")
    ap.add_argument("--minibatch", type=int, default=128)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--gamma", type=float, default=0.99)
    ap.add_argument("--hidden", type=int, nargs="+", default=[256, 256])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="runs/rllib", help="checkpoint folder")
    args = ap.parse_args(argv)
    try:
        import ray
    except ImportError:
        raise SystemExit("Ray RLlib is not installed: pip install -e '.[rllib]'") from None

    ray.init(address=args.address, num_cpus=args.num_cpus if args.address is None else None,
             include_dashboard=False, log_to_driver=False)
    algo = build_config(args).build_algo()
    last: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        for i in range(1, args.iterations + 1):
            result = algo.train()
            runners = result.get("env_runners", {})
            last = {"iteration": i,
                    "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0)),
                    "episode_return_mean": runners.get("episode_return_mean"),
                    "episodes": int(runners.get("num_episodes_lifetime", 0)),
                    "seconds": round(time.perf_counter() - t0, 1)}
            print(json.dumps(last), flush=True)
        out = Path(args.out).resolve()
        out.mkdir(parents=True, exist_ok=True)
        last["checkpoint"] = str(algo.save_to_path(str(out)))
        print(f"checkpoint: {last['checkpoint']}", flush=True)
    finally:
        algo.stop()
        ray.shutdown()
    return last


if __name__ == "__main__":
    main()
