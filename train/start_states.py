"""Training episodes that start part-way through a window, where the teacher has brought it.

A training env of the default recipe advances 16 steps per rollout, so 30 rollouts take each of its 64 envs
480 decisions into a window whose episode is 1,300-3,300 decisions long: without this, PPO never sees the
middle or the end of a window, where the queue is long and the big jobs wait, and no training episode ends
(docs/training.md, "Where training episodes start").

:class:`TeacherStart` begins every episode after the teacher (a heuristic, by name) has played a number of
steps drawn uniformly from ``[0, max_steps)`` of the window; the learner takes over at that state. This is the
"reference state initialisation" of imitation-seeded RL: the start-state distribution covers the whole
trajectory of a good policy. The prefix is inside the env as the learner sees it: its steps, rewards and
infos are not the learner's (a Monitor outside counts only the learner's part; the env's own step cap,
``max_steps``, counts both). If the window ends within the prefix, the next window is drawn; after
``tries`` such windows the episode starts at step 0.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class TeacherStart(gym.Wrapper):
    """Episodes start after ``teacher`` has played ``k ~ U{0, ..., max_steps - 1}`` steps (``k`` in
    ``info["start_steps"]``). The teacher is set by name after the env is built (:meth:`set_start_teacher`,
    also through a vector env's ``env_method``); without one, episodes start at step 0. The draws come from
    the wrapper's own generator, seeded by the first seeded reset, so the env's own draws (which window) are
    the same as without the wrapper."""

    def __init__(self, env: gym.Env, max_steps: int, tries: int = 3):
        super().__init__(env)
        if max_steps < 1 or tries < 1:
            raise ValueError(f"max_steps and tries must be >= 1, got {max_steps!r} and {tries!r}")
        self.max_steps, self.tries = int(max_steps), int(tries)
        self.teacher: Any = None
        self.rng = np.random.default_rng(0)

    def set_start_teacher(self, name: str) -> None:
        from clustergym import baselines

        self.teacher = baselines.make(name, env=self.env)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        for _ in range(self.tries if self.teacher is not None else 0):
            obs, info = self.env.reset(seed=seed, options=options)
            seed = None  # the next window is the env's next draw
            k = int(self.rng.integers(self.max_steps))
            obs, ended = self._play_teacher(obs, k)
            if not ended:
                return obs, {**info, "start_steps": k}
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, {**info, "start_steps": 0}

    def _play_teacher(self, obs: Any, k: int) -> tuple[Any, bool]:
        """``k`` steps of the teacher from ``obs``; the last observation and whether the episode ended."""
        masks = self.env.unwrapped.action_masks
        for _ in range(k):
            a = int(self.teacher.predict(obs, action_masks=masks())[0])
            obs, _, terminated, truncated, _ = self.env.step(a)
            if terminated or truncated:
                return obs, True
        return obs, False
