"""A teacher term for PPO: after each PPO update, one pass of the masked cross-entropy of a heuristic teacher's
actions on the states of the rollout just used, weighted by a coefficient that falls linearly to 0.

For a deterministic teacher, KL(teacher || policy) at a state is the policy's cross-entropy of the teacher's
action, so the term is KL-to-teacher regularisation (as in Rajeswaran et al.'s DAPG or the "BC loss" of
demonstration-augmented PPO); the annealing (to 0 by default) lets PPO's own objective take over. Our choices where such papers
vary: the term is a separate pass after PPO's epochs (SB3's ``train`` is left as it is, so the PPO part is
exactly SB3's), on the states the *learner* visited (labelled on-policy, as DAgger does), with PPO's optimizer,
minibatch size and gradient clipping.

- :class:`TeacherLabels` (a Gymnasium wrapper) labels every state its env shows with the teacher's action
  (``label``). Before each step it tells the teacher which action the learner took
  (:meth:`HeuristicAgent.record_taken`), so the teacher's next labels in the round build on the learner's moves.
  The teacher is set by name after the env is built (:meth:`TeacherLabels.set_teacher`, also through a vector
  env's ``env_method``), because the recipe picks it during the warm start.
- :class:`TeacherTerm` (an SB3 callback) collects the labels of the rollout's states and runs the pass.
  TensorBoard: ``teacher/coef``, ``teacher/cross_entropy`` (before the pass), ``teacher/agreement`` (greedy
  action equal to the teacher's, before the pass).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from .policies import masked_logits


class TeacherLabels(gym.Wrapper):
    """Puts the teacher's action for the state the env shows in ``self.label`` (-1 without a teacher)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.teacher: Any = None
        self.label = -1

    def set_teacher(self, name: str) -> None:
        from clustergym import baselines

        self.teacher = baselines.make(name, env=self.env)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self._label(obs)
        return obs, info

    def step(self, action):
        if self.teacher is not None:
            self.teacher.record_taken(int(action))
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._label(obs)
        return obs, reward, terminated, truncated, info

    def _label(self, obs) -> None:
        if self.teacher is None:
            self.label = -1
            return
        self.label = int(self.teacher.predict(obs, action_masks=self.env.unwrapped.action_masks())[0])


def teacher_coef(coef: float, step: int, horizon: int, end: float = 0.0) -> float:
    """The term's weight after ``step`` env steps: ``coef`` moving linearly to ``end`` at ``horizon`` steps, then
    ``end`` (``end == coef``: a constant weight)."""
    return float(end) + (float(coef) - float(end)) * max(0.0, 1.0 - step / max(1, horizon))


class TeacherTerm(BaseCallback):
    """Runs the teacher pass on each full rollout's states after PPO's update on them (at the next rollout's
    start; the last rollout of a ``learn`` call gets no pass). ``coef``, ``horizon``, ``end``: :func:`teacher_coef`."""

    def __init__(self, coef: float, horizon: int, seed: int = 0, end: float = 0.0):
        super().__init__()
        if not (coef >= 0 and end >= 0):
            raise ValueError(f"teacher coefficients must be >= 0, got {coef!r} and end {end!r}")
        self.coef, self.horizon, self.end = float(coef), int(horizon), float(end)
        self.rng = np.random.default_rng(seed)
        self._labels: list[np.ndarray] = []
        self._pending: tuple[dict[str, np.ndarray], np.ndarray] | None = None

    def _read_labels(self) -> np.ndarray:
        labels = np.asarray(self.training_env.get_attr("label"), dtype=np.int64)
        if (labels < 0).any():
            raise RuntimeError("TeacherTerm: an env shows no teacher label; wrap the training envs in TeacherLabels "
                               "and call env_method('set_teacher', name) before learn()")
        return labels

    def _on_rollout_start(self) -> None:
        if self._pending is not None:
            self._teacher_pass(*self._pending)
            self._pending = None
        self._labels = [self._read_labels()]

    def _on_step(self) -> bool:
        self._labels.append(self._read_labels())  # the states the envs show now: the next ones stored
        return True

    def _on_rollout_end(self) -> None:
        buf = self.model.rollout_buffer
        if not buf.full:
            return
        n = buf.buffer_size
        obs = {k: v.reshape(n * buf.n_envs, *v.shape[2:]).copy() for k, v in buf.observations.items()}
        self._pending = (obs, np.stack(self._labels[:n]).reshape(-1))

    def _teacher_pass(self, obs: dict[str, np.ndarray], labels: np.ndarray) -> None:
        coef = teacher_coef(self.coef, self.num_timesteps, self.horizon, self.end)
        self.logger.record("teacher/coef", coef)
        policy = self.model.policy
        ce, agree = self._measure(obs, labels)
        self.logger.record("teacher/cross_entropy", ce)
        self.logger.record("teacher/agreement", agree)
        if coef <= 0:
            return
        policy.set_training_mode(True)
        order = self.rng.permutation(len(labels))
        for start in range(0, len(order), self.model.batch_size):
            idx = order[start:start + self.model.batch_size]
            o, masks, acts = self._tensors(obs, labels, idx)
            loss = coef * th.nn.functional.cross_entropy(masked_logits(policy, o, masks), acts)
            policy.optimizer.zero_grad()
            loss.backward()
            th.nn.utils.clip_grad_norm_(policy.parameters(), self.model.max_grad_norm)
            policy.optimizer.step()
        policy.set_training_mode(False)

    def _tensors(self, obs, labels, idx) -> tuple[dict[str, th.Tensor], th.Tensor, th.Tensor]:
        device = self.model.policy.device
        o = {k: th.as_tensor(v[idx], dtype=th.float32, device=device) for k, v in obs.items()}
        return o, o["action_mask"] > 0.5, th.as_tensor(labels[idx], device=device)

    @th.no_grad()
    def _measure(self, obs, labels) -> tuple[float, float]:
        """Mean cross-entropy of the teacher's actions and the greedy action's agreement with them."""
        ce, agree = 0.0, 0.0
        for start in range(0, len(labels), 1024):
            o, masks, acts = self._tensors(obs, labels, slice(start, start + 1024))
            logits = masked_logits(self.model.policy, o, masks)
            ce += float(th.nn.functional.cross_entropy(logits, acts, reduction="sum"))
            agree += float((logits.argmax(-1) == acts).sum())
        return ce / len(labels), agree / len(labels)
