"""agents/semi_mdp.py: the discount per simulated second, by hand; the buffer against SB3's own GAE; the env's
``info["elapsed_s"]``; a PPO rollout that stores the discount of every step."""
from __future__ import annotations

import numpy as np
import pytest
import torch as th

from clustergym.agents.semi_mdp import (LAMBDA_PER, SemiMDPCallback, SemiMDPMaskableDictBuffer,
                                        discounted_returns, gae, step_discounts, step_lambdas)
from clustergym.scenarios import make_env

ENV_ID = "clustergym/GPUCluster-v1"
TINY_ENV = {"window_jobs": 6, "cluster": "tiny-8", "window_size": 8, "n_destinations": 4}


def test_step_discounts_by_hand():
    # 0 s: no discount; 1 h: gamma_hour; 30 min: sqrt(gamma_hour); gamma multiplies each step
    d = step_discounts([0.0, 3600.0, 1800.0], 1.0, 0.81)
    assert d == pytest.approx([1.0, 0.81, 0.9])
    assert step_discounts([0.0, 3600.0], 0.5, 0.81) == pytest.approx([0.5, 0.405])
    assert step_discounts([0.0, 99.0], 0.97, None) == pytest.approx([0.97, 0.97])  # per step only
    with pytest.raises(ValueError, match="elapsed_s"):
        step_discounts([-1.0], 1.0, 0.9)
    with pytest.raises(ValueError, match="elapsed_s"):
        step_discounts([float("nan")], 1.0, 0.9)


def test_discounted_returns_by_hand():
    # r = (1, 2, 4), d = (1, 0.5, 0.25): G2 = 4, G1 = 2 + 0.5 x 4 = 4, G0 = 1 + 1 x 4 = 5
    assert discounted_returns([1.0, 2.0, 4.0], [1.0, 0.5, 0.25]) == pytest.approx([5.0, 4.0, 4.0])


def test_gae_by_hand_with_an_episode_end():
    # one env, 3 steps; an episode ends after step 1 (step 2 starts a new one); lambda 0.5
    r = np.array([[1.0], [2.0], [3.0]])
    v = np.array([[0.5], [1.0], [2.0]])
    d = np.array([[0.5], [0.9], [0.8]])
    starts = np.array([[0.0], [0.0], [1.0]])
    adv = gae(r, v, d, starts, np.array([4.0]), np.array([False]), 0.5)
    delta2 = 3.0 + 0.8 * 4.0 - 2.0          # bootstrapped with the last value
    delta1 = 2.0 + 0.0 - 1.0                # next step starts a new episode: no bootstrap
    delta0 = 1.0 + 0.5 * 1.0 - 0.5
    a2, a1 = delta2, delta1                 # the episode end cuts the trace
    a0 = delta0 + 0.5 * 0.5 * a1
    assert adv[:, 0] == pytest.approx([a0, a1, a2])


def test_lambda_per_time_credits_a_round_with_its_end():
    """lambda_per="time": lambda 1 across zero-time steps, so an action at a round's start gets the round's whole
    realised reward; per step, lambda^2 of it."""
    elapsed = np.array([[0.0], [0.0], [600.0]])  # two zero-time actions, then the round ends
    assert step_lambdas(elapsed, 0.5, "time")[:, 0] == pytest.approx([1.0, 1.0, 0.5])
    assert step_lambdas(elapsed, 0.5, "step")[:, 0] == pytest.approx([0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="lambda_per"):
        step_lambdas(elapsed, 0.5, "round")
    r = np.array([[0.0], [0.0], [-3.0]])
    v = np.array([[-1.0], [-1.0], [-2.0]])
    d = step_discounts(elapsed[:, 0], 1.0, 0.81)[:, None]
    starts, last, dones = np.zeros((3, 1)), np.array([-4.0]), np.array([False])
    delta = [0.0 + 1.0 * -1.0 + 1.0, 0.0 + 1.0 * -2.0 + 1.0, -3.0 + d[2, 0] * -4.0 + 2.0]
    by_time = gae(r, v, d, starts, last, dones, step_lambdas(elapsed, 0.5, "time"))[:, 0]
    assert by_time == pytest.approx([delta[0] + delta[1] + delta[2], delta[1] + delta[2], delta[2]])
    by_step = gae(r, v, d, starts, last, dones, 0.5)[:, 0]
    assert by_step == pytest.approx([delta[0] + 0.5 * delta[1] + 0.25 * delta[2], delta[1] + 0.5 * delta[2],
                                     delta[2]])


def test_lambda_per_choices_are_the_configs():
    from clustergym.config import ConfigError
    from clustergym.train.config import _CHOICES, load_config

    assert tuple(_CHOICES["lambda_per"]) == LAMBDA_PER
    assert load_config(overrides={"lambda_per": "time"}).lambda_per == "time"
    with pytest.raises(ConfigError, match="lambda_per: time needs gamma_hour"):
        load_config(overrides={"lambda_per": "time", "gamma_hour": None})
    with pytest.raises(ConfigError, match="lambda_per must be one of"):
        load_config(overrides={"lambda_per": "round"})
    with pytest.raises(ValueError, match="lambda_per"):
        SemiMDPMaskableDictBuffer(2, None, None, lambda_per="hour")


def test_constant_discount_equals_sb3_gae():
    """With gamma_hour None the buffer's GAE is SB3's own (same discount at every step)."""
    from stable_baselines3.common.buffers import RolloutBuffer

    rng = np.random.default_rng(0)
    n, e = 7, 2
    rew, val = rng.normal(size=(n, e)), rng.normal(size=(n, e))
    starts = (rng.random((n, e)) < 0.3).astype(np.float32)
    last, dones = rng.normal(size=e), np.array([True, False])
    import gymnasium as gym

    buf = RolloutBuffer(n, gym.spaces.Box(-1, 1, (1,)), gym.spaces.Discrete(2), gamma=0.9, gae_lambda=0.8, n_envs=e)
    buf.rewards, buf.values, buf.episode_starts = rew.astype(np.float32), val.astype(np.float32), starts
    buf.compute_returns_and_advantage(th.as_tensor(last), dones)
    ours = gae(rew.astype(np.float32).astype(np.float64), val.astype(np.float32).astype(np.float64),
               np.full((n, e), 0.9), starts, last.astype(np.float64), dones, 0.8)
    assert ours == pytest.approx(buf.advantages, abs=1e-5)


def test_env_reports_elapsed_seconds_per_step():
    env = make_env(ENV_ID, TINY_ENV)
    obs, info = env.reset(seed=0)
    u = env.unwrapped
    t, done, steps, rounds = info["sim_time"], False, 0, 0
    while not done and steps < 300:
        a = u.end_round_action if steps % 3 == 2 else int(np.flatnonzero(u.action_masks())[0])
        obs, r, term, trunc, info = env.step(a)
        assert info["elapsed_s"] == pytest.approx(info["sim_time"] - t) and info["elapsed_s"] >= 0
        rounds += info["elapsed_s"] > 0
        t, done, steps = info["sim_time"], term or trunc, steps + 1
    assert rounds > 0 and rounds < steps  # some steps advance time, some (within a round) do not
    assert env.step(0)[4]["elapsed_s"] == 0.0  # after the end


def test_ppo_rollout_stores_time_discounts(tmp_path):
    """A MaskablePPO rollout with the semi-MDP buffer keeps d_k = gamma_hour^(dt_k / 1 h) per step, read from
    the env's infos; without the callback the buffer refuses to store a step."""
    from sb3_contrib import MaskablePPO

    from clustergym.agents.policies import overload_threshold, policy_spec

    env = make_env(ENV_ID, TINY_ENV)
    cls, kw = policy_spec("pairwise", "maskable", d=16, overload_threshold=overload_threshold(env))
    seen = []

    class Spy(SemiMDPCallback):
        def _on_step(self) -> bool:
            seen.append(float(self.locals["infos"][0]["elapsed_s"]))
            return super()._on_step()

    model = MaskablePPO(cls, env, n_steps=64, batch_size=32, n_epochs=1, gamma=1.0, policy_kwargs=kw, seed=0,
                        rollout_buffer_class=SemiMDPMaskableDictBuffer, rollout_buffer_kwargs={"gamma_hour": 0.5})
    model.learn(64, callback=Spy())
    d = model.rollout_buffer.discounts[:, 0]
    assert d == pytest.approx(0.5 ** (np.array(seen) / 3600.0))
    assert (d < 1).any() and (d == 1).any()
    with pytest.raises(RuntimeError, match="SemiMDPCallback"):
        MaskablePPO(cls, env, n_steps=64, batch_size=32, n_epochs=1, policy_kwargs=kw, seed=0,
                    rollout_buffer_class=SemiMDPMaskableDictBuffer, rollout_buffer_kwargs={"gamma_hour": 0.5}).learn(64)


def test_truncation_bootstrap_uses_the_steps_discount():
    """SB3 adds gamma x V(s_T) to a step cut by a time limit; the buffer replaces gamma by d_k."""
    import gymnasium as gym

    obs_space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (1,))})
    buf = SemiMDPMaskableDictBuffer(2, obs_space, gym.spaces.Discrete(2), gamma=0.5, gae_lambda=1.0, n_envs=1,
                                    gamma_hour=0.25)
    buf.stage(np.array([3600.0]), np.array([1.0]))  # d = 0.5 x 0.25 = 0.125
    v_terminal = 8.0
    buf.add({"x": np.zeros((1, 1))}, np.zeros((1, 1)), np.array([1.0 + 0.5 * v_terminal]), np.array([1.0]),
            th.zeros(1), th.zeros(1), action_masks=np.ones((1, 2)))
    assert buf.rewards[0, 0] == pytest.approx(1.0 + 0.125 * v_terminal)
    assert buf.discounts[0, 0] == pytest.approx(0.125)


def test_buffer_applies_lambda_per_time():
    """The buffer keeps each step's simulated seconds and computes GAE with lambda 1 across zero-time steps."""
    import gymnasium as gym

    obs_space = gym.spaces.Dict({"x": gym.spaces.Box(-1, 1, (1,))})
    advantages = {}
    for rule in LAMBDA_PER:
        buf = SemiMDPMaskableDictBuffer(3, obs_space, gym.spaces.Discrete(2), gamma=1.0, gae_lambda=0.5, n_envs=1,
                                        gamma_hour=0.81, lambda_per=rule)
        for dt, r, v in ((0.0, 0.0, -1.0), (0.0, 0.0, -1.0), (600.0, -3.0, -2.0)):
            buf.stage(np.array([dt]), np.array([r]))
            buf.add({"x": np.zeros((1, 1))}, np.zeros((1, 1)), np.array([r]), np.array([0.0]), th.tensor([v]),
                    th.zeros(1), action_masks=np.ones((1, 2)))
        buf.compute_returns_and_advantage(th.tensor([-4.0]), np.array([False]))
        assert buf.elapsed[:, 0] == pytest.approx([0.0, 0.0, 600.0])
        advantages[rule] = buf.advantages[:, 0]
    assert advantages["step"][2] == pytest.approx(advantages["time"][2])
    assert advantages["time"][0] == pytest.approx(advantages["time"][1] + 0.0)  # delta_0 = 0: V(s_1) = V(s_0)
    assert advantages["time"][0] != pytest.approx(advantages["step"][0])
