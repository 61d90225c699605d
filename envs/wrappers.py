"""Wrappers for :class:`envs.gym_env.ClusterEnv`.

:class:`MOReward` turns the scalar reward into MLFS's five objectives (MO-Gymnasium convention: the reward is a
``np.ndarray`` float32 of shape (5,) and the wrapper has a ``reward_space`` Box(5,)), without needing
mo-gymnasium. Objective order: ``OBJECTIVE_NAMES`` = (jct, deadline, bandwidth, accuracy_met, accuracy), the
g_1..g_5 of MLFS Eq. (7) as the env computes them (see the env docstring). The scalar reward (with any
invalid-action penalty) stays available as ``info["scalar_reward"]``.

For MO-Gymnasium's own wrappers (which read ``reward_space`` from ``env.unwrapped``) make the env with
``vector_reward=True`` instead: the base env then returns the same vector and carries ``reward_space``.
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import OBJECTIVE_NAMES


class MOReward(gym.Wrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.reward_space = spaces.Box(-np.inf, np.inf, (len(OBJECTIVE_NAMES),), np.float32)
        self.reward_dim = len(OBJECTIVE_NAMES)
        self.objective_names = OBJECTIVE_NAMES

    def step(self, action):
        obs, r, term, trunc, info = self.env.step(action)
        info = dict(info)
        info["scalar_reward"] = r
        return obs, np.asarray(info["objectives"], dtype=np.float32), term, trunc, info

    def action_masks(self) -> np.ndarray:
        return self.env.unwrapped.action_masks()
