"""The objective registry (envs/reward.py): a sixth objective is one entry, and every consumer follows it."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the ids)
from clustergym import reward
from clustergym.config import ConfigError, EnvConfig
from clustergym.gym_env import ClusterEnv
from clustergym.reward import Objective
from clustergym.wrappers import MOReward

HETERO = "clustergym/Hetero-v1"
MIGRATIONS = Objective("migrations", "migrations", -1, 0.05, doc="task migrations (fewer is better)")


@pytest.fixture
def sixth():
    saved = list(reward.OBJECTIVES)
    reward.register(MIGRATIONS)
    yield MIGRATIONS
    reward.OBJECTIVES[:] = saved


def test_default_registry_is_mlfs_eq7_then_unisched_at_weight_0():
    assert reward.objective_names() == ("jct", "deadline", "bandwidth", "accuracy_met", "accuracy", "slo_miss",
                                        "be_jct")
    assert EnvConfig().reward_weights == (0.5, 0.55, 0.25, 0.15, 0.15, 0.0, 0.0)  # MLFS §4.1, UniSched off
    from clustergym.config import OBJECTIVE_NAMES

    assert OBJECTIVE_NAMES == reward.objective_names()


def test_a_sixth_objective_reaches_every_consumer(sixth):
    from clustergym.config import OBJECTIVE_NAMES

    assert OBJECTIVE_NAMES == ("jct", "deadline", "bandwidth", "accuracy_met", "accuracy", "slo_miss", "be_jct",
                               "migrations")
    assert EnvConfig().reward_weights == (0.5, 0.55, 0.25, 0.15, 0.15, 0.0, 0.0, 0.05)
    with pytest.raises(ConfigError, match="8 entries"):
        EnvConfig(reward_weights=(1, 0, 0, 0, 0, 0, 0))
    from clustergym.train.config import parse_weights

    assert parse_weights("1,0,0,0,0,0,0,2") == [1.0, 0, 0, 0, 0, 0, 0, 2.0]
    with pytest.raises(ConfigError, match="8 values"):
        parse_weights("1,0,0,0,0,0,0")

    # overload threshold 0.5: servers overload often, so random actions migrate
    kw = dict(window_jobs=20, max_steps=3000, sim={"overload_threshold": 0.5})
    env = ClusterEnv(vector_reward=True, **kw)
    assert env.reward_dim == 8 and env.reward_space.shape == (8,)
    _, info = env.reset(seed=0)
    assert info["objectives"].shape == (8,)
    beta = np.asarray(env.config.reward_weights)
    rng = np.random.default_rng(0)
    total, done = np.zeros(8), False
    while not done:  # random valid actions, a migration whenever one is valid (so the counter moves)
        valid = np.flatnonzero(env.action_masks()[:-1])
        mig = [a for a in valid if (c := env.window.command(int(a))) is not None and c.kind == "migrate"]
        pick = mig if mig else np.flatnonzero(env.action_masks())
        _, r, te, tr, info = env.step(int(rng.choice(pick)))
        assert r.dtype == np.float32 and r.shape == (8,)
        assert info["scalar_reward"] == pytest.approx(float(beta @ info["objectives"]), abs=1e-12)
        total += info["objectives"]
        done = te or tr
    s = info["summary"]
    assert s["migrations"] > 0
    assert total[7] == pytest.approx(-s["migrations"] / env.sim.n_jobs, rel=1e-12)
    np.testing.assert_allclose(env.objective_totals(), total, rtol=1e-9, atol=1e-12)

    mo = MOReward(gym.make(HETERO, **kw))
    assert mo.reward_space.shape == (8,) and mo.objective_names[-1] == "migrations"
    mo.reset(seed=0)
    assert mo.step(int(np.flatnonzero(mo.action_masks())[0]))[1].shape == (8,)


def test_the_env_keeps_the_objectives_of_its_construction(sixth):
    env = ClusterEnv(window_jobs=4)
    reward.OBJECTIVES.pop()
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.end_round_action)
    assert info["objectives"].shape == (8,)


def test_registry_errors_name_the_objective():
    with pytest.raises(ValueError, match="already registered"):
        reward.register(Objective("jct", "jobs_in_system_integral", -1, 1.0))
    with pytest.raises(ValueError, match="sign"):
        Objective("x", "migrations", 0, 1.0)
    saved = list(reward.OBJECTIVES)
    try:
        reward.register(Objective("odd_scale", "migrations", -1, 0.0, "no_such_field"))
        with pytest.raises(ValueError, match="odd_scale.*no_such_field"):
            ClusterEnv(window_jobs=4)
        reward.OBJECTIVES[-1] = Objective("no_counter", "no_such_counter", 1, 0.0)
        env = ClusterEnv(window_jobs=4)
        with pytest.raises(AttributeError, match="no_counter.*no_such_counter"):
            env.reset(seed=0)
    finally:
        reward.OBJECTIVES[:] = saved


def test_single_objective_weights_make_the_return_minus_mean_jct():
    """Weight 1 on "jct" and 0 elsewhere: a terminated episode's return is -mean JCT / time_scale (training's
    default reward weights)."""
    import numpy as np

    from clustergym.config import OBJECTIVE_NAMES
    from clustergym.reward import single_objective_weights
    from clustergym.scenarios import make_env

    w = single_objective_weights("jct")
    assert w == tuple(1.0 if n == "jct" else 0.0 for n in OBJECTIVE_NAMES)
    with pytest.raises(ValueError, match="unknown objective 'jc'"):
        single_objective_weights("jc")
    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": 8, "reward_weights": list(w)})
    obs, info = env.reset(seed=0)
    ret, done = 0.0, False
    while not done:
        obs, r, term, trunc, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
        ret, done = ret + r, term or trunc
    assert term and ret == pytest.approx(-info["summary"]["mean_jct"] / env.unwrapped.config.time_scale)
