"""Wrappers for :class:`clustergym.gym_env.ClusterEnv`.

:class:`MOReward` turns the scalar reward into the objective vector (MO-Gymnasium convention: the reward is a
``np.ndarray`` float32 of shape (n,) and the wrapper has a ``reward_space`` Box(n,)), without needing
mo-gymnasium; n and the order are the env's objectives (``env.unwrapped.reward_fn.names``: by default jct,
deadline, bandwidth, accuracy_met, accuracy, the g_1..g_5 of MLFS Eq. (7); :mod:`clustergym.reward`). The scalar reward (with any
invalid-action penalty) stays available as ``info["scalar_reward"]``.

For MO-Gymnasium's own wrappers (which read ``reward_space`` from ``env.unwrapped``) make the env with
``vector_reward=True`` instead: the base env then returns the same vector and carries ``reward_space``.

:class:`MaskedFlatObservation` gives the ``{"action_mask", "observations"}`` layout RLlib's masking RLModule
expects (``train/rllib_ppo.py``).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces


class MOReward(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        rf = env.unwrapped.reward_fn
        self.reward_space = rf.space()
        self.reward_dim = rf.dim
        self.objective_names = rf.names

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        info = dict(info)
        info["scalar_reward"] = r
        return obs, np.asarray(info["objectives"], dtype=np.float32), term, trunc, info

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()


class MaskedFlatObservation(gym.ObservationWrapper, gym.utils.RecordConstructorArgs):
    """The observation as ``{"action_mask": float32 (n_actions,), "observations": float32 (D,)}``: every
    array but the mask flattened (row-major) and concatenated in the key order of the env's observation
    space, which Gymnasium sorts: ``affinity``, ``global``, ``gpu_loads``, ``servers``, ``tasks``
    (``feature_keys``). This is the layout RLlib's
    action-masking RLModule (and similar "mask + features" policies) expect; ``train/rllib_ppo.py`` uses it.
    ``action_masks()`` still gives the boolean mask."""

    def __init__(self, env: gym.Env):
        gym.utils.RecordConstructorArgs.__init__(self)  # lets env checkers re-create the wrapped env
        gym.ObservationWrapper.__init__(self, env)
        space = env.observation_space
        self.feature_keys = tuple(k for k in space.spaces if k != "action_mask")
        parts = [space[k] for k in self.feature_keys]
        low = np.concatenate([np.broadcast_to(p.low, p.shape).ravel() for p in parts]).astype(np.float32)
        high = np.concatenate([np.broadcast_to(p.high, p.shape).ravel() for p in parts]).astype(np.float32)
        n_actions = int(space["action_mask"].n)
        self.observation_space = spaces.Dict({
            "action_mask": spaces.Box(0.0, 1.0, (n_actions,), np.float32),
            "observations": spaces.Box(low, high, dtype=np.float32),
        })

    def observation(self, observation: dict) -> dict:
        return {"action_mask": observation["action_mask"].astype(np.float32),
                "observations": np.concatenate([observation[k].ravel() for k in self.feature_keys])}

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()
