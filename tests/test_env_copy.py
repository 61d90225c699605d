"""A deep copy of an env mid-episode (with its policy) continues exactly as the original: what decision-time
search and planning with copies of the simulator need. numpy copies a view as an array of its own, so every
object that keeps views of another's arrays rebuilds them after a copy (Window's mask, ClusterView)."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym import baselines
from clustergym.agents.search import fork
from clustergym.scenarios import make_env

ENV_ID = "clustergym/GPUCluster-v1"


def _play(env, agent, obs, steps: int) -> tuple[list[tuple], dict]:
    """``steps`` of ``agent`` from ``obs``: per step the action, reward, flags, mask and observation; and the
    last observation."""
    out = []
    for _ in range(steps):
        mask = env.unwrapped.action_masks()
        a = int(agent.predict(obs, action_masks=mask)[0])
        obs, r, term, trunc, _ = env.step(a)
        out.append((a, r, term, trunc, mask.tobytes(), obs["tasks"].tobytes(), obs["servers"].tobytes()))
        if term or trunc:
            break
    return out, obs


@pytest.mark.parametrize("env_id,policy,config", [
    (ENV_ID, "fifo", {"split": "test", "load": 6.0}),
    (ENV_ID, "mlf-h-req", {"split": "test", "load": 6.0}),
    (ENV_ID, "mlf-h", {"split": "test", "window_jobs": 30}),
    (ENV_ID, "tiresias", {"split": "test", "window_jobs": 30}),
    (ENV_ID, "fifo", {"split": "test", "window_jobs": 30, "gpu_actions": True}),
    ("clustergym/UniSched-v1", "unisched", {}),  # leases: their expiry events go to the copy's own queue
])
@pytest.mark.parametrize("copier", [copy.deepcopy, fork], ids=["deepcopy", "fork"])
def test_a_deep_copy_mid_episode_continues_like_the_original(env_id, policy, config, copier):
    env = make_env(env_id, config)
    agent = baselines.make(policy, env=env)
    obs, _ = env.reset(seed=10000)
    _, obs = _play(env, agent, obs, 150)
    twin_env, twin_agent, twin_obs = copier((env, agent, obs))
    assert twin_env.unwrapped.sim is not env.unwrapped.sim
    copied, _ = _play(twin_env, twin_agent, twin_obs, 300)  # the copy first: it must not touch the original
    original, _ = _play(env, agent, obs, 300)
    assert len(copied) == len(original) > 0
    first = next((i for i, (x, y) in enumerate(zip(copied, original)) if x != y), None)
    assert first is None, f"the copy parts from the original at step {first}"
