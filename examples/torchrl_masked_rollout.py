"""clustergym in TorchRL: the env through ``GymWrapper`` with an ``ActionMask`` transform, its observation
arrays flattened and concatenated by TorchRL transforms, and a small masked policy (an MLP sampling from a
``MaskedCategorical``) collecting a rollout.

    python examples/torchrl_masked_rollout.py --steps 200

Needs TorchRL (the ``torchrl`` extra: ``pip install 'clustergym[torchrl]'``). The env runs with
``invalid_action="raise"``, so one action outside the mask would stop the rollout.
"""
from __future__ import annotations

import argparse

import gymnasium as gym
import torch
from tensordict.nn import TensorDictModule
from torchrl.envs import GymWrapper, TransformedEnv
from torchrl.envs.transforms import ActionMask, CatTensors, Compose, DTypeCastTransform, FlattenObservation
from torchrl.envs.utils import check_env_specs
from torchrl.modules import MLP, MaskedCategorical, ProbabilisticActor

import clustergym  # noqa: F401  (registers the env ids)

TABLES = ["affinity", "gpu_loads", "servers", "tasks"]  # the 2-D observation arrays; "global" is 1-D


def make_env(window_jobs: int) -> TransformedEnv:
    base = gym.make("clustergym/GPUCluster-v1", window_jobs=window_jobs, invalid_action="raise")
    return TransformedEnv(GymWrapper(base, categorical_action_encoding=True), Compose(
        DTypeCastTransform(torch.int8, torch.bool, in_keys=["action_mask"]),  # MultiBinary is int8
        ActionMask(),  # the action spec follows the env's mask: random actions are drawn inside it
        FlattenObservation(-2, -1, in_keys=TABLES),
        CatTensors(in_keys=[*TABLES, "global"], out_key="observations", del_keys=False)))


def make_policy(env: TransformedEnv) -> ProbabilisticActor:
    n_obs = env.observation_spec["observations"].shape[-1]
    n_actions = env.action_spec.space.n
    net = TensorDictModule(MLP(in_features=n_obs, out_features=n_actions, num_cells=[64]),
                           in_keys=["observations"], out_keys=["logits"])
    return ProbabilisticActor(net, in_keys={"logits": "logits", "mask": "action_mask"}, out_keys=["action"],
                              distribution_class=MaskedCategorical, return_log_prob=True)


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=500, help="env steps to collect")
    ap.add_argument("--window-jobs", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    env = make_env(args.window_jobs)
    check_env_specs(env)
    env.set_seed(args.seed)
    policy = make_policy(env)
    with torch.no_grad():
        rollout = env.rollout(args.steps, policy, break_when_any_done=False)
    mask = rollout["action_mask"].bool()
    chosen_valid = bool(mask[torch.arange(len(rollout)), rollout["action"]].all())
    out = {"steps": len(rollout), "episodes_ended": int(rollout["next", "done"].sum()),
           "return": float(rollout["next", "reward"].sum()), "all_actions_in_mask": chosen_valid}
    print(out)
    return out


if __name__ == "__main__":
    main()
