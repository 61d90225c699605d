"""The training reward relative to a heuristic (agents/relative_reward.py): an input-dependent baseline."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from clustergym import baselines
from clustergym.scenarios import make_env
from clustergym.agents.relative_reward import RelativeToHeuristic

ENV_ID = "clustergym/GPUCluster-v1"
CFG = {"split": "train", "window_jobs": 15}


def _wrapped(cfg=CFG):
    return RelativeToHeuristic(make_env(ENV_ID, cfg), make_twin=partial(make_env, ENV_ID, dict(cfg)))


def _episode(env, choose, seed, env_rewards=None):
    obs, info = env.reset(seed=seed)
    rewards, done = [], False
    while not done:
        obs, r, term, trunc, info = env.step(choose(env, obs))
        rewards.append(r)
        if env_rewards is not None:
            env_rewards.append(info["env_reward"])
        done = term or trunc
    return np.array(rewards), info, term


def _heuristic(name):
    cache = {}

    def choose(env, obs):
        if env not in cache:
            cache[env] = baselines.make(name, env=env)
        return int(cache[env].predict(obs, action_masks=env.unwrapped.action_masks())[0])
    return choose


def test_the_heuristic_itself_earns_zero_at_every_step():
    env = _wrapped()
    for seed in (3, 4):
        r, info, term = _episode(env, _heuristic("mlf-h"), seed)
        assert term
        np.testing.assert_allclose(r, 0.0, atol=1e-9)
        assert abs(info["heuristic_return"]) > 1e-3  # ... while its own return on that window is not zero


@pytest.mark.parametrize("policy", ["fifo", "sjf"])
def test_terminated_return_is_the_objective_minus_the_heuristics(policy):
    seed = 5
    plain = make_env(ENV_ID, CFG)
    r_plain, _, _ = _episode(plain, _heuristic(policy), seed)
    r_mlfh, _, _ = _episode(make_env(ENV_ID, CFG), _heuristic("mlf-h"), seed)
    env_rewards: list[float] = []
    r_rel, info, term = _episode(_wrapped(), _heuristic(policy), seed, env_rewards)
    assert term
    assert r_rel.sum() == pytest.approx(r_plain.sum() - r_mlfh.sum(), rel=1e-9, abs=1e-9)
    assert info["heuristic_return"] == pytest.approx(r_mlfh.sum(), rel=1e-12)
    # the shift depends only on the window and simulated time: the env's own rewards are untouched
    np.testing.assert_array_equal(env_rewards, r_plain)


def test_seeding_is_deterministic_and_unseeded_resets_follow_the_first_seed():
    a, b = _wrapped(), _wrapped()
    a.reset(seed=11)
    b.reset(seed=11)
    for _ in range(2):  # later resets without a seed draw the same episode seeds
        ra, _, _ = _episode(a, _heuristic("fifo"), None)
        rb, _, _ = _episode(b, _heuristic("fifo"), None)
        np.testing.assert_array_equal(ra, rb)


def test_vector_reward_is_refused():
    with pytest.raises(ValueError, match="vector_reward"):
        RelativeToHeuristic(make_env(ENV_ID, {**CFG, "vector_reward": True}), make_twin=lambda: None)
