"""Warm start (MLFS §3.4: train on the heuristic's data first): roll out a heuristic, behaviour-clone it.

``collect(expert, env_id, config, seeds)`` records (observation, mask, action, discounted return) for every
step of the expert's episodes. ``behaviour_clone(policy, data, steps)`` minimises the masked cross-entropy
(logits of invalid actions at -inf) of the expert's actions, plus ``value_coef`` x Huber loss of the value head
against the expert's discounted returns (so PPO starts with a critic that matches the cloned actor).
``agreement(policy, data)`` is the fraction of states where the policy's greedy masked action equals the
expert's.
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np
import torch as th

from .evaluate import make_env
from .policies import masked_logits


def collect(expert: str, env_id: str, config: dict | None, seeds: Iterable[int], gamma: float = 0.99,
            max_steps: int | None = 5000) -> dict[str, Any]:
    import baselines

    env = make_env(env_id, config)
    u = env.unwrapped
    agent = baselines.make(expert, env=env)
    obs_buf: dict[str, list] = {}
    masks, actions, returns, episodes = [], [], [], 0
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        rewards = []
        done, steps = bool(info.get("summary")), 0
        while not done and (max_steps is None or steps < max_steps):
            m = u.action_masks()
            a = int(agent.predict(obs, action_masks=m)[0])
            for k, v in obs.items():
                obs_buf.setdefault(k, []).append(v)
            masks.append(m)
            actions.append(a)
            obs, r, term, trunc, info = env.step(a)
            rewards.append(float(r))
            done = term or trunc
            steps += 1
        g, ret = 0.0, []
        for r in reversed(rewards):
            g = r + gamma * g
            ret.append(g)
        returns.extend(reversed(ret))
        episodes += 1
    env.close()
    return {"obs": {k: np.stack(v) for k, v in obs_buf.items()}, "masks": np.stack(masks).astype(bool),
            "actions": np.asarray(actions, np.int64), "returns": np.asarray(returns, np.float32),
            "episodes": episodes}


def _batch(data: dict, idx: np.ndarray, device) -> tuple[dict, th.Tensor, th.Tensor, th.Tensor]:
    obs = {k: th.as_tensor(v[idx], dtype=th.float32, device=device) for k, v in data["obs"].items()}
    return (obs, th.as_tensor(data["masks"][idx], device=device), th.as_tensor(data["actions"][idx], device=device),
            th.as_tensor(data["returns"][idx], device=device))


def behaviour_clone(policy, data: dict, steps: int, batch_size: int = 256, lr: float = 1e-3,
                    value_coef: float = 0.5, seed: int = 0, callback=None) -> list[float]:
    """Train ``policy`` (an SB3 ActorCriticPolicy) in place; returns the loss per step."""
    n = len(data["actions"])
    if n == 0 or steps <= 0:
        return []
    rng = np.random.default_rng(seed)
    opt = th.optim.Adam(policy.parameters(), lr=lr)
    policy.set_training_mode(True)
    losses = []
    for i in range(int(steps)):
        idx = rng.integers(0, n, size=min(batch_size, n))
        obs, masks, acts, rets = _batch(data, idx, policy.device)
        logits = masked_logits(policy, obs, masks)
        ce = th.nn.functional.cross_entropy(logits, acts)
        loss = ce
        if value_coef > 0:
            v = policy.predict_values(obs).squeeze(-1)
            loss = ce + value_coef * th.nn.functional.smooth_l1_loss(v, rets)
        opt.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        losses.append(float(ce.detach()))
        if callback is not None:
            callback(i, float(ce.detach()), float(loss.detach()))
    policy.set_training_mode(False)
    return losses


@th.no_grad()
def agreement(policy, data: dict, batch_size: int = 1024, exclude_end: bool = False) -> float:
    """Fraction of states where argmax of the masked logits equals the expert's action (``exclude_end``: only
    states where the expert did not end the round, i.e. its placements/migrations)."""
    if exclude_end:
        keep = data["actions"] != data["masks"].shape[1] - 1
        data = {"obs": {k: v[keep] for k, v in data["obs"].items()}, "masks": data["masks"][keep],
                "actions": data["actions"][keep], "returns": data["returns"][keep]}
    n = len(data["actions"])
    if n == 0:
        return float("nan")
    policy.set_training_mode(False)
    hits = 0
    for s in range(0, n, batch_size):
        idx = np.arange(s, min(n, s + batch_size))
        obs, masks, acts, _ = _batch(data, idx, policy.device)
        hits += int((masked_logits(policy, obs, masks).argmax(-1) == acts).sum())
    return hits / n
