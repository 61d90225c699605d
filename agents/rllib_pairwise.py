"""The pairwise (permutation-invariant) policy of :mod:`clustergym.agents.policies` as an RLlib RLModule (new
API stack), so RLlib's PPO trains the project's agent (``train/rllib_ppo.py``).

:class:`PairwiseRLModule` holds the same :class:`~clustergym.agents.policies.PairwiseEncoder` as the SB3 policy and
the same value head (two ReLU layers of ``vf_hidden`` over the pooled embedding, then a linear output, as
SB3's ``_SplitHead`` + ``value_net`` with the encoder shared), on the env's own Dict observation (no
flattening). The encoder sets the logits of masked actions to -1e8, so RLlib's categorical distribution
gives them probability 0 in sampling, training and greedy inference alike (the env runs with
``invalid_action="raise"`` in training to prove it). Its ``model_config``: ``d`` (embedding width, default 64),
``overload_threshold`` (the env's h_r, required: :func:`~clustergym.agents.policies.overload_threshold`) and
``vf_hidden`` (default 64).

:func:`load_sb3_policy` copies an SB3 pairwise policy's weights (e.g. the behaviour-cloned warm start of
:mod:`clustergym.agents.bc`) into the module; the two then compute the same logits and values.

Imports Ray at module level: import it only where Ray is installed (the ``rllib`` extra).
"""
from __future__ import annotations

from typing import Any

import torch as th
from torch import nn

from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis import ValueFunctionAPI
from ray.rllib.core.rl_module.torch import TorchRLModule

from .policies import PairwiseEncoder, check_columns

DEFAULT_D = 64
DEFAULT_VF_HIDDEN = 64


def value_head(pooled_dim: int, hidden: int) -> nn.Sequential:
    """MLP(pooled embedding) -> value: the layers of SB3's ``_SplitHead.vf`` then ``value_net``."""
    return nn.Sequential(nn.Linear(pooled_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                         nn.Linear(hidden, 1))


class PairwiseRLModule(TorchRLModule, ValueFunctionAPI):
    """RLModule: Dict observation -> masked logits (``action_dist_inputs``) and, for PPO, values."""

    def setup(self) -> None:
        space, config = self.observation_space, dict(self.model_config or {})
        missing = [k for k in ("tasks", "servers", "global", "gpu_loads", "action_mask") if k not in space.spaces]
        if missing:
            raise ValueError(f"PairwiseRLModule needs the env's Dict observation; {missing} missing (do not flatten "
                             f"it, e.g. with MaskedFlatObservation)")
        if "overload_threshold" not in config:
            raise ValueError("PairwiseRLModule needs model_config['overload_threshold'] (the env's h_r, "
                             "clustergym.agents.policies.overload_threshold(env))")
        d = int(config.get("d", DEFAULT_D))
        layout = {k: int(config.get(k, 0)) for k in ("gpu_slots", "sub_batches")}  # the env's action_layout
        check_columns(space["action_mask"].shape[0], space["tasks"].shape[0], space["servers"].shape[0], **layout)
        self.encoder = PairwiseEncoder(space["tasks"].shape[1], space["servers"].shape[1], space["global"].shape[0],
                                       d, float(config["overload_threshold"]), **layout)
        self.vf = value_head(3 * d, int(config.get("vf_hidden", DEFAULT_VF_HIDDEN)))

    def _forward(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits, _ = self.encoder(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits}

    def _forward_train(self, batch: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        logits, pooled = self.encoder(batch[Columns.OBS])
        return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: pooled}  # PPO reuses the pooled embedding

    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> th.Tensor:
        if embeddings is None:
            _, embeddings = self.encoder(batch[Columns.OBS])
        return self.vf(embeddings).squeeze(-1)


def sb3_state_dict(policy: Any) -> dict[str, th.Tensor]:
    """The weights of an SB3 pairwise policy (shared encoder) under :class:`PairwiseRLModule`'s names."""
    if not getattr(policy, "share_features_extractor", False):
        raise ValueError("only a pairwise policy whose critic shares the encoder (share_encoder=True) maps onto "
                         "PairwiseRLModule")
    sd = policy.state_dict()
    out = {f"encoder.{k[len('features_extractor.encoder.'):]}": v for k, v in sd.items()
           if k.startswith("features_extractor.encoder.")}
    for i in (0, 2):  # the two Linear layers of _SplitHead.vf
        for p in ("weight", "bias"):
            out[f"vf.{i}.{p}"] = sd[f"mlp_extractor.vf.{i}.{p}"]
    for p in ("weight", "bias"):
        out[f"vf.4.{p}"] = sd[f"value_net.{p}"]
    return out


def load_sb3_policy(module: PairwiseRLModule, policy: Any) -> None:
    """Copy ``policy``'s weights (SB3 pairwise, shared encoder) into ``module``; every weight must match."""
    module.load_state_dict(sb3_state_dict(policy), strict=True)
