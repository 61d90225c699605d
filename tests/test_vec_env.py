"""train/vec_env.py: the grouped worker-process vector env steps every env as DummyVecEnv does (auto-reset,
terminal observations, masks), answers queries in index order, and a PPO run on it trains the same weights."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch as th
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from clustergym.train import ppo
from clustergym.train.config import load_config
from clustergym.train.vec_env import GroupedSubprocVecEnv

SMALL = {"window_jobs": 6, "max_steps": 40}  # short episodes, so auto-resets happen within the test


def _vec(cls, n: int = 3, **kw):
    return make_vec_env(ppo.worker_env if cls is GroupedSubprocVecEnv else ppo.make_env, n_envs=n, seed=7,
                        vec_env_cls=cls, vec_env_kwargs=kw or None,
                        env_kwargs={"env_id": "clustergym/GPUCluster-v1", "config": SMALL})


def _valid_actions(masks: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(m)) for m in masks])


def test_grouped_workers_step_every_env_as_the_dummy_vec_env_does():
    dummy, grouped = _vec(DummyVecEnv), _vec(GroupedSubprocVecEnv, n_workers=2)
    try:
        assert [len(g) for g in grouped.groups] == [2, 1]  # contiguous groups: envs 0-1 and 2
        a, b = dummy.reset(), grouped.reset()
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(120):
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            masks = dummy.env_method("action_masks")
            np.testing.assert_array_equal(np.stack(masks), np.stack(grouped.env_method("action_masks")))
            actions = _valid_actions(masks, rng)
            a, ra, da, ia = dummy.step(actions)
            b, rb, db, ib = grouped.step(actions)
            np.testing.assert_array_equal(ra, rb)
            np.testing.assert_array_equal(da, db)
            for x, y in zip(ia, ib):
                assert x.keys() == y.keys() and x["elapsed_s"] == y["elapsed_s"]
                assert x["TimeLimit.truncated"] == y["TimeLimit.truncated"]
                if "terminal_observation" in x:
                    np.testing.assert_array_equal(x["terminal_observation"]["tasks"], y["terminal_observation"]["tasks"])
            ends += int(da.sum())
        assert ends > 0  # some episodes ended and were reset inside the workers
        assert grouped.get_attr("sim_config", indices=[2, 0]) == dummy.get_attr("sim_config", indices=[2, 0])
        assert grouped.env_method("action_masks", indices=[2])[0].shape == masks[2].shape
        assert grouped.env_is_wrapped(type(dummy.envs[0])) == [True] * 3
    finally:
        dummy.close()
        grouped.close()
        grouped.close()  # a second close is a no-op


def test_bad_worker_counts_are_refused_by_name():
    with pytest.raises(ValueError, match="n_workers must be >= 1"):
        GroupedSubprocVecEnv([lambda: None], n_workers=0)
    with pytest.raises(ValueError, match="at least one env"):
        GroupedSubprocVecEnv([], n_workers=2)


def _trained_weights(vec_env: str) -> dict[str, th.Tensor]:
    th.manual_seed(0)
    cfg = load_config(overrides={"env": {"window_jobs": 6}, "n_envs": 3, "vec_env": vec_env, "env_workers": 2,
                                 "train_max_steps": 60, "n_steps": 32, "batch_size": 48, "n_epochs": 2,
                                 "bc_steps": 0, "progress_bar": False, "d": 16})
    env = ppo.training_envs(cfg)
    try:
        model = ppo.new_model(cfg, env, None)
        from clustergym.agents.semi_mdp import callbacks

        model.learn(192, callback=callbacks(model))
        return {k: v.clone() for k, v in model.policy.state_dict().items()}
    finally:
        env.close()


def test_ppo_on_grouped_workers_trains_the_same_weights_as_in_one_process():
    dummy, grouped = _trained_weights("dummy"), _trained_weights("grouped")
    assert dummy.keys() == grouped.keys()
    for k in dummy:
        assert th.equal(dummy[k], grouped[k]), k


def test_the_fast_setting_and_the_grouped_option_load_and_bad_values_are_named():
    from pathlib import Path

    from clustergym.config import ConfigError

    fast = load_config(str(Path(__file__).resolve().parent.parent / "train" / "fast.yaml"))
    assert (fast.n_envs, fast.n_steps, fast.n_epochs) == (32, 32, 1) and fast.n_envs * fast.n_steps == 1024
    assert load_config(overrides={"vec_env": "grouped", "env_workers": 3}).env_workers == 3
    with pytest.raises(ConfigError, match="env_workers"):
        load_config(overrides={"env_workers": 0})
    with pytest.raises(ConfigError, match="vec_env"):
        load_config(overrides={"vec_env": "threads"})
