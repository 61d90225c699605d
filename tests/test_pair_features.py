"""The agents' pair features restate MLF-H's ideal-host rule: their distance is the core rule's
(clustergym.core.placement) applied to what the observation shows."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401  (registers the ids)
from clustergym import baselines
from clustergym.agents.policies import S_UTIL, pair_features
from clustergym.core.placement import host_distances, ideal_host

DIST, CAND = 3, 2  # feature positions in pair_features' stack (fit, head, cand, dist, ...)


def _states(n: int, seed: int) -> list[dict]:
    env = gym.make("clustergym/GPUCluster-v1", window_jobs=30)
    agent = baselines.make("mlf-h", env=env)
    obs, _ = env.reset(seed=seed)
    out = []
    while len(out) < n:
        out.append({k: v.copy() for k, v in obs.items()})
        obs, _, te, tr, _ = env.step(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0])
        if te or tr:
            obs, _ = env.reset()
    env.close()
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_pair_distance_is_the_core_ideal_host_rule(seed):
    checked = 0
    for obs in _states(60, seed):
        t = {k: th.as_tensor(v[None]) for k, v in obs.items()}
        packed, idx = pair_features(t, 0.9)
        f = np.zeros((obs["tasks"].shape[0], obs["servers"].shape[0], packed.shape[1]))
        f[idx[:, 1].numpy(), idx[:, 2].numpy()] = packed.double().numpy()  # invalid pairs: all zero (not cand)
        util = obs["servers"][:, S_UTIL].astype(np.float64)
        aff = obs["affinity"].astype(np.float64)
        for row in range(f.shape[0]):
            cand = f[row, :, CAND] > 0.5
            if not cand.any():
                continue
            idx = np.flatnonzero(cand)
            comm = np.where(cand, aff[row], 0.0)  # the bandwidth coordinate is normalised over the candidates
            want = host_distances(util[idx], ideal_host(util, idx), comm[idx])
            got = f[row, idx, DIST]
            np.testing.assert_allclose(got, np.minimum(want, 4.0), rtol=1e-4, atol=1e-5)
            checked += 1
    assert checked > 50
