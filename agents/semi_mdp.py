"""Discounting per simulated second (a semi-MDP), for PPO's returns and advantages and for behaviour cloning's
value targets.

Why. The env's decisions are not evenly spaced in time: a round is a run of zero-time steps (placements,
migrations, stop-option changes) at one simulated instant, and "end round" advances the clock by anything
from one tick to hours. With a discount per agent step, a round of twenty placements discounts the JCT cost
that accrues when it ends by gamma^20, so the same hour of waiting costs less the more zero-time actions
precede it. Decima (Mao et al., SIGCOMM 2019) discounts by the time between decisions instead; so does this
module: the discount between decision k and k + 1 is

    d_k = gamma x gamma_hour ^ (dt_k / 3600)

with ``dt_k`` the simulated seconds step k advanced (``info["elapsed_s"]`` of the env), ``gamma`` the
per-step factor (1.0 by default in training, so zero-time steps are not discounted at all) and ``gamma_hour``
the discount per simulated hour. GAE (Schulman et al. 2016) becomes, with V the critic:

    delta_k = r_k + d_k V(s_{k+1}) - V(s_k),     A_k = delta_k + d_k lambda A_{k+1}

(lambda is not a discount of the objective: it weighs the estimators). ``lambda_per="step"`` (the default) applies
lambda at every step. ``lambda_per="time"`` applies it only across steps that advance the clock (``dt_k > 0``) and
uses 1 across zero-time steps. Then every action of a round is credited with what happens up to the round's end
(``A_k = sum of the round's deltas from k on + lambda A`` of the first step after it), where per-step lambda
gives a round of n zero-time actions the realised cost only with weight lambda^n and leaves the critic's
differences between same-instant states to judge them. A truncated episode's last step is bootstrapped with
d_k V(s_T) too.

How it is wired into SB3 (sb3-contrib's MaskablePPO or SB3's PPO, which take ``rollout_buffer_class``):
:class:`SemiMDPCallback` reads each step's ``elapsed_s`` and the env's reward from the infos before SB3
stores the step, and hands them to the buffer (:class:`SemiMDPDictBuffer`, or the maskable one); the buffer
keeps the discount of every step and computes the returns with it. SB3 adds ``gamma x V(s_T)`` to the reward
of a step cut by a time limit before storing it; the buffer swaps that factor for ``d_k``.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch as th
from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer
from stable_baselines3.common.buffers import DictRolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback

HOUR_S = 3600.0


def step_discounts(elapsed_s: np.ndarray | Sequence[float], gamma: float, gamma_hour: float | None) -> np.ndarray:
    """The discount d_k = gamma x gamma_hour^(dt_k / 3600) of each step (float64); ``gamma_hour=None``: the
    per-step discount ``gamma`` alone. Negative or non-finite elapsed times are refused by name."""
    dt = np.asarray(elapsed_s, dtype=np.float64)
    if gamma_hour is None:
        return np.full(dt.shape, float(gamma))
    if not np.all(np.isfinite(dt)) or np.any(dt < 0):
        raise ValueError(f"elapsed_s must be finite and >= 0 (simulated seconds of a step), got {dt[~(dt >= 0)][:3]}")
    return float(gamma) * np.power(float(gamma_hour), dt / HOUR_S)


def discounted_returns(rewards: Sequence[float], discounts: Sequence[float]) -> np.ndarray:
    """G_k = r_k + d_k G_{k+1} over one episode (G after the last step = 0)."""
    g, out = 0.0, np.empty(len(rewards), dtype=np.float64)
    for k in range(len(rewards) - 1, -1, -1):
        g = float(rewards[k]) + float(discounts[k]) * g
        out[k] = g
    return out


LAMBDA_PER = ("step", "time")  # train/config.py offers the same choices


def step_lambdas(elapsed_s: np.ndarray, gae_lambda: float, lambda_per: str) -> np.ndarray:
    """GAE's lambda of each step: ``gae_lambda`` everywhere (``lambda_per="step"``), or only on steps that
    advanced the clock and 1 on zero-time steps (``"time"``; module docstring)."""
    dt = np.asarray(elapsed_s, dtype=np.float64)
    if lambda_per == "step":
        return np.full(dt.shape, float(gae_lambda))
    if lambda_per == "time":
        return np.where(dt > 0, float(gae_lambda), 1.0)
    raise ValueError(f"lambda_per must be one of {LAMBDA_PER}, got {lambda_per!r}")


def gae(rewards: np.ndarray, values: np.ndarray, discounts: np.ndarray, episode_starts: np.ndarray,
        last_values: np.ndarray, dones: np.ndarray, gae_lambda: float | np.ndarray) -> np.ndarray:
    """GAE advantages (n_steps, n_envs) with a discount per step (``discounts[k]`` between s_k and s_{k+1})
    and a lambda per step (a number, or an array shaped like ``rewards``: :func:`step_lambdas`); the layout and
    the end-of-episode handling of SB3's ``RolloutBuffer.compute_returns_and_advantage``."""
    n = rewards.shape[0]
    lam = np.broadcast_to(np.asarray(gae_lambda, dtype=np.float64), rewards.shape)
    adv = np.zeros_like(rewards, dtype=np.float32)
    last = np.zeros(rewards.shape[1], dtype=np.float64)
    for k in reversed(range(n)):
        if k == n - 1:
            nonterminal, next_values = 1.0 - dones.astype(np.float64), last_values
        else:
            nonterminal, next_values = 1.0 - episode_starts[k + 1], values[k + 1]
        delta = rewards[k] + discounts[k] * next_values * nonterminal - values[k]
        last = delta + discounts[k] * lam[k] * nonterminal * last
        adv[k] = last
    return adv


class _SemiMDPMixin:
    """Keeps the discount of every stored step; see the module docstring."""

    def __init__(self, *args: Any, gamma_hour: float | None = None, lambda_per: str = "step", **kwargs: Any):
        step_lambdas(np.zeros(1), 0.0, lambda_per)  # a bad rule stops here, by name
        super().__init__(*args, **kwargs)
        self.gamma_hour = gamma_hour
        self.lambda_per = lambda_per
        self._staged: tuple[np.ndarray, np.ndarray] | None = None

    def reset(self) -> None:
        super().reset()
        self.discounts = np.zeros((self.buffer_size, self.n_envs), dtype=np.float64)
        self.elapsed = np.zeros((self.buffer_size, self.n_envs), dtype=np.float64)

    def stage(self, elapsed_s: np.ndarray, env_rewards: np.ndarray) -> None:
        """The step about to be stored: its simulated seconds and the reward the env returned (per env)."""
        self._staged = (np.asarray(elapsed_s, dtype=np.float64), np.asarray(env_rewards, dtype=np.float64))

    def add(self, obs, action, reward, episode_start, value, log_prob, **kwargs) -> None:
        if self._staged is None:
            raise RuntimeError("semi-MDP buffer: no elapsed time staged for this step; pass SemiMDPCallback to "
                               "learn() (it reads info['elapsed_s'] of each step)")
        elapsed, env_reward = self._staged
        self._staged = None
        d = step_discounts(elapsed, self.gamma, self.gamma_hour)
        reward = np.asarray(reward, dtype=np.float64)
        # SB3 added gamma x V(s_T) to the reward of a step cut by a time limit: the factor becomes d_k
        reward = env_reward + (reward - env_reward) * (d / self.gamma)
        self.discounts[self.pos] = d
        self.elapsed[self.pos] = elapsed
        super().add(obs, action, reward.astype(np.float32), episode_start, value, log_prob, **kwargs)

    def compute_returns_and_advantage(self, last_values: th.Tensor, dones: np.ndarray) -> None:
        last = last_values.clone().cpu().numpy().flatten().astype(np.float64)
        self.advantages = gae(self.rewards.astype(np.float64), self.values.astype(np.float64), self.discounts,
                              self.episode_starts, last, dones,
                              step_lambdas(self.elapsed, self.gae_lambda, self.lambda_per))
        self.returns = self.advantages + self.values


class SemiMDPMaskableDictBuffer(_SemiMDPMixin, MaskableDictRolloutBuffer):
    """MaskablePPO's buffer for Dict observations, discounting per simulated second."""


class SemiMDPDictBuffer(_SemiMDPMixin, DictRolloutBuffer):
    """PPO's buffer for Dict observations, discounting per simulated second."""


class SemiMDPCallback(BaseCallback):
    """Hands each step's ``info["elapsed_s"]`` and the env's reward to the semi-MDP buffer before SB3 stores
    the step (SB3 calls ``on_step`` between ``env.step`` and ``rollout_buffer.add``). A step without
    ``elapsed_s`` in its info is an error naming the key."""

    def _on_step(self) -> bool:
        infos, rewards = self.locals["infos"], self.locals["rewards"]
        try:
            elapsed = np.array([float(i["elapsed_s"]) for i in infos])
        except KeyError:
            raise KeyError("info['elapsed_s'] missing: the semi-MDP discount needs the simulated seconds of each "
                           "step (clustergym's ClusterEnv puts them there)") from None
        self.model.rollout_buffer.stage(elapsed, np.array(rewards, dtype=np.float64))
        return True


def callbacks(model) -> list[BaseCallback]:
    """The callbacks ``model.learn`` needs for its rollout buffer: :class:`SemiMDPCallback` when the buffer is a
    semi-MDP one (put it before any callback that may stop a rollout), else none."""
    return [SemiMDPCallback()] if isinstance(model.rollout_buffer, _SemiMDPMixin) else []


def buffer_class(algo: str) -> type:
    """The semi-MDP rollout buffer for ``--algo`` maskable|ppo (Dict observations)."""
    return SemiMDPMaskableDictBuffer if algo == "maskable" else SemiMDPDictBuffer
