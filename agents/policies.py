"""Policies for Stable-Baselines3 on :class:`envs.gym_env.ClusterEnv` (see docs/training.md, "Architecture").

Two networks, each usable with ``sb3_contrib.MaskablePPO`` (default, masks from ``env.action_masks()``) and
with plain ``stable_baselines3.PPO``:

``mlp``
    :class:`FlatObsExtractor` concatenates the flattened ``tasks``, ``servers``, ``gpu_loads``, ``global`` and ``affinity``
    arrays (not ``action_mask``) and SB3's MLP heads (``net_arch``) map it to ``W*(K+1)+1`` logits and a value.
    Its weights are tied to W, K and the feature widths.

``pairwise``
    :class:`PairwiseMaskablePolicy` / :class:`PairwisePPOPolicy`. A permutation-invariant encoder
    (:class:`PairwiseEncoder`): per-row task MLP, per-column server MLP (server features + summary statistics
    of the per-GPU loads, so the GPU count G does not matter), a global MLP, masked mean pooling over present
    rows/columns (deep sets), one round of context mixing (each task sees the pooled servers and vice versa),
    then

    - logit(row, col) = w . tanh(A h_row + B h_col + c)   (additive pair scorer, col < K)
    - logit(row, K)   = MLP(h_row)                         ("back to the queue")
    - logit(end)      = MLP([pool_tasks, pool_servers, g])  (learned end-round logit)
    - value           = MLP([pool_tasks, pool_servers, g])

    Invalid actions (``obs["action_mask"] == 0``) get logit -1e8 inside the network, so even plain PPO with
    this policy never picks one. No weight depends on W or K, so a trained network can be loaded into a
    policy for another window size or cluster (``policy.load_state_dict``; tests/test_agents.py checks it).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from torch import nn

from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

OBS_KEYS = ("tasks", "servers", "gpu_loads", "global", "affinity")
MASKED_LOGIT = -1e8
N_GPU_STATS = 4  # mean, max, min load over real GPUs, idle-GPU fraction


class FlatObsExtractor(BaseFeaturesExtractor):
    """Concatenate the flattened observation arrays (the mask is left out; MaskablePPO applies it)."""

    def __init__(self, observation_space: gym.spaces.Dict):
        dim = int(sum(np.prod(observation_space[k].shape) for k in OBS_KEYS))
        super().__init__(observation_space, features_dim=dim)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([obs[k].flatten(1) for k in OBS_KEYS], dim=1)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def _masked_mean(x: th.Tensor, present: th.Tensor) -> th.Tensor:
    w = present.unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp_min(1.0)


def gpu_stats(gpu_loads: th.Tensor) -> th.Tensor:
    """(B, K, G) per-GPU loads with -1 padding -> (B, K, 4): mean, max, min load and idle fraction."""
    real = (gpu_loads >= 0).float()
    n = real.sum(-1).clamp_min(1.0)
    load = gpu_loads.clamp_min(0.0)
    mean = (load * real).sum(-1) / n
    mx = (load * real).amax(-1)
    mn = th.where(real > 0, load, th.full_like(load, 1e4)).amin(-1)
    mn = th.where(real.sum(-1) > 0, mn, th.zeros_like(mn))
    idle = ((load <= 1e-6).float() * real).sum(-1) / n
    return th.stack((mean, mx, mn, idle), dim=-1)


class PairwiseEncoder(nn.Module):
    """obs dict -> (logits (B, W*(K+1)+1), value embedding (B, 3d)). Weights are independent of W, K, G."""

    def __init__(self, task_dim: int, server_dim: int, global_dim: int, d: int = 64):
        super().__init__()
        self.d = d
        self.task_in = _mlp(task_dim, d, d)
        self.server_in = _mlp(server_dim + N_GPU_STATS, d, d)
        self.glob_in = _mlp(global_dim, d, d)
        self.task_ctx = _mlp(3 * d, d, d)
        self.server_ctx = _mlp(3 * d, d, d)
        dp = max(8, d // 2)  # pair-scorer width: the (B, W, K, dp) tensor dominates the cost
        self.pair_t = nn.Linear(d, dp)
        self.pair_s = nn.Linear(d, dp, bias=False)
        self.pair_a = nn.Linear(1, dp, bias=False)  # the (task, server) affinity feature enters the pair scorer
        self.pair_out = nn.Linear(dp, 1)
        self.requeue = _mlp(d, d, 1)
        self.end = _mlp(3 * d, d, 1)

    def forward(self, obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
        tasks, servers, glob = obs["tasks"], obs["servers"], obs["global"]
        B, W, _ = tasks.shape
        K = servers.shape[1]
        tp = (tasks[..., 0] > 0.5).float()  # column 0 is "present" in both tables
        sp = (servers[..., 0] > 0.5).float()
        ht = self.task_in(tasks)
        hs = self.server_in(th.cat((servers, gpu_stats(obs["gpu_loads"])), -1))
        g = self.glob_in(glob)
        pt, ps = _masked_mean(ht, tp), _masked_mean(hs, sp)
        ht = ht + self.task_ctx(th.cat((ht, ps.unsqueeze(1).expand(B, W, -1), g.unsqueeze(1).expand(B, W, -1)), -1))
        hs = hs + self.server_ctx(th.cat((hs, pt.unsqueeze(1).expand(B, K, -1), g.unsqueeze(1).expand(B, K, -1)), -1))
        pt, ps = _masked_mean(ht, tp), _masked_mean(hs, sp)
        pre = self.pair_t(ht).unsqueeze(2) + self.pair_s(hs).unsqueeze(1)  # (B, W, K, dp)
        aff = obs.get("affinity")
        if aff is not None:
            pre = pre + self.pair_a(aff.unsqueeze(-1))
        pair = th.tanh(pre)
        scores = self.pair_out(pair).squeeze(-1)  # (B, W, K)
        req = self.requeue(ht)  # (B, W, 1)
        pooled = th.cat((pt, ps, g), -1)
        end = self.end(pooled)  # (B, 1)
        logits = th.cat((th.cat((scores, req), -1).reshape(B, W * (K + 1)), end), -1)
        mask = obs.get("action_mask")
        if mask is not None and mask.shape[-1] == logits.shape[-1]:
            logits = th.where(mask > 0.5, logits, th.full_like(logits, MASKED_LOGIT))
        return logits, pooled


class PairwiseExtractor(BaseFeaturesExtractor):
    """Runs :class:`PairwiseEncoder`; features = [logits, pooled embedding] (split again by the head)."""

    def __init__(self, observation_space: gym.spaces.Dict, d: int = 64):
        n_actions = int(observation_space["action_mask"].shape[0])
        super().__init__(observation_space, features_dim=n_actions + 3 * d)
        self.n_actions = n_actions
        self.encoder = PairwiseEncoder(observation_space["tasks"].shape[1], observation_space["servers"].shape[1],
                                       observation_space["global"].shape[0], d)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        logits, pooled = self.encoder(obs)
        return th.cat((logits, pooled), -1)


class _SplitHead(nn.Module):
    """Stands in for SB3's MlpExtractor: latent_pi = the logits, latent_vf = MLP(pooled embedding)."""

    def __init__(self, n_actions: int, pooled_dim: int, hidden: int = 64):
        super().__init__()
        self.n = n_actions
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        self.vf = nn.Sequential(nn.Linear(pooled_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return features[:, :self.n]

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.vf(features[:, self.n:])


class _PairwiseMixin:
    def __init__(self, observation_space, action_space, lr_schedule, *args, d: int = 64, **kwargs: Any):
        kwargs.setdefault("features_extractor_class", PairwiseExtractor)
        kwargs.setdefault("features_extractor_kwargs", {"d": d})
        kwargs.setdefault("ortho_init", False)
        kwargs.setdefault("share_features_extractor", True)
        self._d = d
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        n = int(self.action_space.n)
        self.mlp_extractor = _SplitHead(n, self.features_dim - n).to(self.device)

    def _build(self, lr_schedule) -> None:
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the encoder already outputs the logits
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["d"] = self._d
        return data


class PairwiseMaskablePolicy(_PairwiseMixin, MaskableActorCriticPolicy):
    """MaskablePPO policy with the pairwise (task, destination) scorer."""


class PairwisePPOPolicy(_PairwiseMixin, ActorCriticPolicy):
    """Plain-PPO policy with the pairwise scorer (masks applied inside the network from obs["action_mask"])."""


def policy_spec(policy: str, algo: str, net_arch: list[int] | None = None, d: int = 64) -> tuple[type, dict]:
    """(policy class, policy_kwargs) for ``--policy`` mlp|pairwise and ``--algo`` maskable|ppo."""
    if policy == "mlp":
        cls = MaskableActorCriticPolicy if algo == "maskable" else ActorCriticPolicy
        arch = list(net_arch or [256, 256])
        return cls, {"features_extractor_class": FlatObsExtractor, "net_arch": {"pi": arch, "vf": arch}}
    if policy == "pairwise":
        return (PairwiseMaskablePolicy if algo == "maskable" else PairwisePPOPolicy), {"d": int(d)}
    raise ValueError(f"unknown policy {policy!r}; choose 'mlp' or 'pairwise'")


def masked_logits(policy, obs: dict[str, th.Tensor], masks: th.Tensor | None) -> th.Tensor:
    """Action logits of an SB3 actor-critic policy, invalid actions at -inf (for BC and agreement)."""
    features = policy.extract_features(obs, policy.pi_features_extractor)
    logits = policy.action_net(policy.mlp_extractor.forward_actor(features))
    if masks is not None:
        logits = logits.masked_fill(~masks.bool(), float("-inf"))
    return logits
