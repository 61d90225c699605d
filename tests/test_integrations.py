"""The env inside other RL libraries' tooling: TorchRL (GymWrapper + ActionMask) and MO-Gymnasium's
wrappers on the ``vector_reward=True`` env. Both libraries are dev dependencies, so these run in `make test`."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the ids)
from clustergym.config import OBJECTIVE_NAMES

DEFAULT = "clustergym/GPUCluster-v1"


def test_torchrl_gym_wrapper_with_action_mask():
    torch = pytest.importorskip("torch")
    from torchrl.envs import GymWrapper, TransformedEnv
    from torchrl.envs.transforms import ActionMask
    from torchrl.envs.utils import check_env_specs

    base = gym.make(DEFAULT, window_jobs=8, invalid_action="raise")  # a masked-out action would raise
    env = TransformedEnv(GymWrapper(base, categorical_action_encoding=True), ActionMask())
    assert set(env.observation_spec.keys()) >= {"tasks", "servers", "gpu_loads", "global", "affinity", "action_mask"}
    check_env_specs(env)
    env.set_seed(0)
    ro = env.rollout(200, break_when_any_done=True)
    mask = ro["action_mask"].bool()
    assert bool(mask[torch.arange(len(ro)), ro["action"]].all())  # random actions drawn inside the mask
    assert ro["next", "reward"].shape == (len(ro), 1)


def test_torchrl_sees_the_vector_reward():
    pytest.importorskip("torch")
    from torchrl.envs import GymWrapper

    env = GymWrapper(gym.make(DEFAULT, window_jobs=6, vector_reward=True, disable_env_checker=True),
                     categorical_action_encoding=True)
    assert env.reward_spec.shape[-1] == len(OBJECTIVE_NAMES)
    env.set_seed(0)
    assert env.rollout(5)["next", "reward"].shape == (5, len(OBJECTIVE_NAMES))


def test_mo_gymnasium_wrappers():
    mo_gym = pytest.importorskip("mo_gymnasium")
    from mo_gymnasium import wrappers as mo_wrappers

    # mo_gymnasium.make = gym.make without the passive checker (which insists on a scalar reward)
    env = mo_wrappers.MORecordEpisodeStatistics(mo_gym.make(DEFAULT, window_jobs=6, vector_reward=True), gamma=1.0)
    u = env.unwrapped
    assert u.reward_dim == len(OBJECTIVE_NAMES) and u.reward_space.shape == (len(OBJECTIVE_NAMES),)
    env.reset(seed=0)
    done, total = False, np.zeros(len(OBJECTIVE_NAMES))
    while not done:
        _, r, term, trunc, info = env.step(int(np.flatnonzero(u.action_masks())[0]))
        assert r.dtype == np.float32 and r.shape == (len(OBJECTIVE_NAMES),)
        np.testing.assert_allclose(np.dot(u.config.reward_weights, r), info["scalar_reward"], rtol=1e-5, atol=1e-7)
        total += r
        done = term or trunc
    np.testing.assert_allclose(info["episode"]["r"], total, rtol=1e-6)
    np.testing.assert_allclose(total, u.objective_totals(), rtol=1e-5, atol=1e-6)
    # after the end: a zero vector, not a scalar
    assert np.array_equal(env.step(u.end_round_action)[1], np.zeros(len(OBJECTIVE_NAMES), np.float32))

    beta = np.asarray(u.config.reward_weights, np.float32)
    lin = mo_wrappers.LinearReward(mo_gym.make(DEFAULT, window_jobs=6, vector_reward=True), weight=beta)
    lin.reset(seed=0)
    _, r, *_, info = lin.step(lin.unwrapped.end_round_action)
    assert r == pytest.approx(info["scalar_reward"], rel=1e-5, abs=1e-7)  # beta . g, the env's scalar reward


def test_scalar_env_has_no_reward_space():
    # TorchRL and MO-Gymnasium take a reward_space on the env to mean "vector reward"
    assert not hasattr(gym.make(DEFAULT).unwrapped, "reward_space")


def test_masked_flat_observation_layout():
    from gymnasium.utils.env_checker import check_env

    from clustergym.wrappers import MaskedFlatObservation

    env = MaskedFlatObservation(gym.make(DEFAULT, window_jobs=6))
    obs, _ = env.reset(seed=0)
    raw = env.unwrapped._make_obs()  # the unwrapped observation of the same state
    assert env.observation_space.contains(obs)
    assert np.array_equal(obs["action_mask"], raw["action_mask"].astype(np.float32))
    assert np.array_equal(obs["observations"], np.concatenate([raw[k].ravel() for k in env.feature_keys]))
    assert env.feature_keys == ("affinity", "global", "gpu_loads", "servers", "tasks")
    check_env(env, skip_render_check=True)


@pytest.mark.rllib
def test_rllib_ppo_trains_with_masks(tmp_path):
    pytest.importorskip("ray.rllib")
    from clustergym.train.rllib_ppo import main

    # invalid_action="raise" inside make_env: one masked-out action would fail the iteration
    out = main(["--env", '{"window_jobs": 8}', "--policy", "mlp", "--net-arch", "[32, 32]", "--bc-steps", "0",
                "--timesteps", "512", "--n-steps", "256", "--batch-size", "64", "--n-epochs", "1",
                "--train-max-steps", "100", "--final-eval-episodes", "0", "--num-cpus", "2", "--no-progress",
                "--out", str(tmp_path / "run")])
    assert out["iteration"] == 2 and out["env_steps"] >= 512 and out["episodes"] > 0
    assert (tmp_path / "run" / "rllib_checkpoint" / "rllib_checkpoint.json").exists()
