"""What PPO's updates do to the policy, in TensorBoard: fixed probe states and the rollout's advantages.

The curves SB3 logs (``train/approx_kl``, ``train/entropy_loss``, ...) are measured on each rollout's own states,
which move with the policy, so they cannot show a drift that builds up over many small updates. This callback
adds two groups, both logged at every ``every``-th rollout's end (the policy that collected that rollout, before
its update):

``probe/*``, on a fixed sample of states from the teacher's own rollouts on training windows the warm start
holds out (its agreement windows; PPO's envs may draw the same windows, and reach other states there):

- ``kl_from_start``: mean KL(policy at PPO's start || policy now), the distance from the clone;
- ``entropy``: mean entropy of the masked action distribution;
- ``agreement``: share of states whose most probable action is the teacher's; ``teacher_cross_entropy``;
- ``end_prob_teacher_acts`` / ``end_prob_teacher_ends``: mean probability of "end round" on the states where the
  teacher places, migrates or sets a stop option, and on those where it ends the round;
- ``ends_where_teacher_acts``: share of the teacher's acting states where "end round" carries at least half of
  the probability (the ``act-first`` decoding would end the round there).

``rollout/*``, on the rollout just collected, with the advantages PPO is about to train on:

- ``end_share``: share of its actions that end a round;
- ``advantage_end`` / ``advantage_act``: mean advantage of those actions and of the others, in units of the
  rollout's advantage standard deviation and relative to its mean. SB3 normalises the advantages per minibatch
  the same way, so a positive ``advantage_end`` is what pushes "end round" up in the update.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import torch as th
from stable_baselines3.common.callbacks import BaseCallback

from clustergym.agents.policies import masked_logits


def probe_states(teacher: str, env_id: str, config: dict, seeds: Iterable[int], n: int, seed: int) -> dict[str, Any]:
    """``n`` states drawn (without replacement, by ``seed``) from ``teacher``'s rollouts on the windows ``seeds``:
    ``obs`` (numpy arrays), ``masks`` and the teacher's ``actions``."""
    from clustergym.agents.bc import action_masks, collect, observations

    data = collect(teacher, env_id, config, seeds)
    total = len(data["actions"])
    idx = np.sort(np.random.default_rng(seed).choice(total, size=min(n, total), replace=False))
    return {"obs": observations(data, idx), "masks": action_masks(data, idx), "actions": data["actions"][idx]}


@th.no_grad()
def log_probs(policy, data: dict[str, Any], batch_size: int = 512) -> th.Tensor:
    """Masked log-probabilities (n, A) of ``policy`` on the probe states (-inf where masked)."""
    policy.set_training_mode(False)
    out = []
    for s in range(0, len(data["actions"]), batch_size):
        obs = {k: th.as_tensor(v[s:s + batch_size], dtype=th.float32, device=policy.device)
               for k, v in data["obs"].items()}
        masks = th.as_tensor(data["masks"][s:s + batch_size], device=policy.device)
        out.append(th.log_softmax(masked_logits(policy, obs, masks), -1).cpu())
    return th.cat(out)


def probe_stats(logp: th.Tensor, start: th.Tensor, actions: np.ndarray) -> dict[str, float]:
    """The ``probe/*`` values of log-probabilities ``logp`` against those at PPO's start, ``start``, and the
    teacher's ``actions`` (the last action index is "end round")."""
    p = logp.exp()
    safe = th.where(th.isfinite(logp), logp, th.zeros_like(logp))  # masked actions have p = 0: no term
    safe0 = th.where(th.isfinite(start), start, th.zeros_like(start))
    acts = th.as_tensor(actions)
    ends = np.asarray(actions) == logp.shape[1] - 1  # the last action index is "end round"
    end_p = p[:, -1].numpy()
    return {"kl_from_start": float((start.exp() * (safe0 - safe)).sum(-1).mean()),
            "entropy": float(-(p * safe).sum(-1).mean()),
            "agreement": float((logp.argmax(-1) == acts).float().mean()),
            "teacher_cross_entropy": float(-logp.gather(1, acts[:, None]).mean()),
            "end_prob_teacher_acts": _mean_where(end_p, ~ends),
            "end_prob_teacher_ends": _mean_where(end_p, ends),
            "ends_where_teacher_acts": _mean_where(end_p >= 0.5, ~ends)}


def _mean_where(x: np.ndarray, sel: np.ndarray) -> float:
    """Mean of ``x`` where ``sel``; NaN (no mean, not 0) where nothing is selected."""
    return float(np.mean(x[sel])) if sel.any() else float("nan")


def rollout_stats(actions: np.ndarray, advantages: np.ndarray, end: int) -> dict[str, float]:
    """The ``rollout/*`` values of a rollout's ``actions`` and ``advantages`` (any equal shapes; ``end`` is the
    "end round" action index)."""
    a, adv = np.asarray(actions).reshape(-1), np.asarray(advantages, np.float64).reshape(-1)
    ends = a == end
    z = (adv - adv.mean()) / (adv.std() + 1e-8)  # as SB3 normalises a minibatch's advantages
    return {"end_share": float(ends.mean()), "advantage_end": _mean_where(z, ends), "advantage_act": _mean_where(z, ~ends)}


class PolicyProbe(BaseCallback):
    """Logs ``probe/*`` and ``rollout/*`` (module docstring) at every ``every``-th rollout's end, on the probe
    states ``data`` (:func:`probe_states`). "Start" is the policy when this ``learn`` call began (the clone in a
    new run; the checkpoint's policy when resumed). Only reads the policy: training is the same with or without it."""

    def __init__(self, data: dict[str, Any], every: int = 1):
        super().__init__()
        if every < 1:
            raise ValueError(f"every must be >= 1, got {every!r}")
        self.data, self.every = data, int(every)
        self.start: th.Tensor | None = None
        self.rollouts = 0

    def _on_training_start(self) -> None:
        self.start = log_probs(self.model.policy, self.data)

    def _on_step(self) -> bool:
        return True

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if (self.rollouts - 1) % self.every:
            return
        for k, v in probe_stats(log_probs(self.model.policy, self.data), self.start, self.data["actions"]).items():
            self.logger.record(f"probe/{k}", v)
        buf = self.model.rollout_buffer
        end = self.data["masks"].shape[1] - 1
        for k, v in rollout_stats(buf.actions, buf.advantages, end).items():
            self.logger.record(f"rollout/{k}", v)
