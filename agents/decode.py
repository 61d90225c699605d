"""How a trained agent's deterministic action is read from its action distribution.

The env's flat action ``a = row * C + col`` (docs/env.md) splits one decision, *what to do with a row* (place
its task, send it back to the queue, set a stop option), over the K destination columns of a placement. On a
cluster with many interchangeable servers the policy spreads a placement's probability over their columns:
on a 2,474-GPU window with 32 rows and 32 idle destinations shown, placements carried 0.57 of the probability
in all but none more than 0.003, against 0.10 for one stop option, so the joint argmax set stop options and
ended rounds while 981 tasks waited on an idle cluster (docs/training.md, "Deterministic decoding").

Three decodings of the same distribution:

- ``joint`` (SB3's ``deterministic=True``, the default): the single most probable action index.
- ``row-kind``: the most probable (row, kind) decision, a placement's probability summed over its
  destination columns, then the most probable column of that decision. It is the mode of what the stochastic
  policy trained by PPO decides at the granularity of rows, so adding a copy of a destination does not
  change which row is acted on. Ties go to the lower index, placements before the row's other actions, and
  "end round" wins only if it is at least as probable as every decision.
- ``act-first``: first the mode of the policy's binary choice, end the round or act: the round ends only if
  "end round" carries at least half of the probability; otherwise the ``row-kind`` decision among the rest.
  Under ``row-kind`` a round also ends when acting is likely but spread over several rows (0.4 on "end
  round" against 0.6 over three waiting jobs ends it), which the sampled policy does with probability 0.4.

:class:`DecodedAgent` wraps a loaded SB3 model so that ``predict(obs, action_masks=..., deterministic=True)``
decodes with ``row-kind`` or ``act-first``; stochastic sampling is unchanged. :func:`greedy_action` decodes
one state's logits (RLlib checkpoints, ``agents/rllib.py``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch as th

DECODINGS: tuple[str, ...] = ("joint", "row-kind", "act-first")


def check_decode(decode: str) -> str:
    if decode not in DECODINGS:
        raise ValueError(f"unknown decode {decode!r}; choose one of {', '.join(DECODINGS)}")
    return decode


def row_kind_mode(probs: th.Tensor, W: int, C: int, K: int, decode: str = "row-kind") -> th.Tensor:
    """The ``row-kind`` (or, with ``decode="act-first"``, the ``act-first``) action (B,) of action
    probabilities ``probs`` (B, W*C+1) laid out as the env's (W rows x C columns, the first K of them
    destinations, then "end round"); masked actions have probability 0."""
    import torch as th  # here, so that configs can name the decodings without importing torch

    B = probs.shape[0]
    grid = probs[:, :-1].reshape(B, W, C)
    place = grid[:, :, :K].sum(-1, keepdim=True)  # (B, W, 1): the row's placement decision
    decisions = th.cat((place, grid[:, :, K:]), -1).reshape(B, -1)  # (B, W * (C - K + 1))
    best = decisions.argmax(-1)
    row, kind = best // (C - K + 1), best % (C - K + 1)
    column = th.where(kind == 0, grid[th.arange(B), row, :K].argmax(-1), K + kind - 1)
    action = row * C + column
    end_p = probs[:, -1]
    rival = probs.sum(-1) - end_p if check_decode(decode) == "act-first" else decisions.gather(1, best[:, None])[:, 0]
    end_wins = end_p >= rival
    return th.where(end_wins, th.full_like(action, W * C), action)


def layout(n_actions: int, tasks_shape: tuple, servers_shape: tuple) -> tuple[int, int, int]:
    """(W rows, C columns per row, K destination columns) of the env's flat action space of ``n_actions``
    actions, from the shapes of the observation's ``tasks`` (..., W, F) and ``servers`` (..., K, F) arrays."""
    W = tasks_shape[-2]
    return W, (n_actions - 1) // W, servers_shape[-2]


def greedy_action(logits: np.ndarray, mask: np.ndarray, obs: dict, decode: str) -> int:
    """The deterministic action of one state's action ``logits`` (n,) under ``mask`` (n,), decoded with
    ``decode``, the env's observation ``obs`` giving the layout (W task rows, K destination columns). For
    policies that give logits rather than an SB3 distribution (the RLlib checkpoints of ``agents/rllib.py``)."""
    masked = np.where(mask, np.asarray(logits, dtype=np.float64), -np.inf)
    if check_decode(decode) == "joint":
        return int(np.argmax(masked))
    import torch as th

    probs = np.exp(masked - masked.max())
    W, C, K = layout(len(mask), obs["tasks"].shape, obs["servers"].shape)
    return int(row_kind_mode(th.as_tensor(probs / probs.sum()).unsqueeze(0), W, C, K, decode)[0])


class DecodedAgent:
    """A loaded SB3 model whose deterministic action is decoded with ``decode``, ``row-kind`` or ``act-first``
    (module docstring); every other attribute is the model's. ``predict`` takes SB3's arguments
    and returns (actions, None).
    ``destinations``: the destination columns per row (the env window's ``D``: K x G with ``gpu_actions``);
    None reads K from the observation's ``servers``, which is right without GPU slots."""

    def __init__(self, model: Any, destinations: int | None = None, decode: str = "row-kind") -> None:
        self.model = model
        self.destinations = destinations
        if check_decode(decode) == "joint":  # the model's own predict: with_decode returns the model itself
            raise ValueError("DecodedAgent decodes row-kind or act-first; joint is the model's own predict")
        self.decode = decode

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)

    def predict(self, observation: dict, state: Any = None, episode_start: Any = None,
                deterministic: bool = True, action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:
        if not deterministic:
            return self.model.predict(observation, state, episode_start, deterministic=False,
                                      action_masks=action_masks)
        import torch as th
        from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

        policy = self.model.policy
        policy.set_training_mode(False)
        obs, vectorized = policy.obs_to_tensor(observation)
        with th.no_grad():  # a plain-PPO pairwise policy masks inside its network, from obs["action_mask"]
            dist = (policy.get_distribution(obs, action_masks=action_masks)
                    if isinstance(policy, MaskableActorCriticPolicy) else policy.get_distribution(obs))
            probs = dist.distribution.probs
        W, C, K = layout(probs.shape[-1], obs["tasks"].shape, obs["servers"].shape)
        actions = row_kind_mode(probs, W, C, self.destinations or K, self.decode)
        actions = actions.cpu().numpy()
        return (actions if vectorized else actions[0]), None


def with_decode(model: Any, decode: str, env: Any = None) -> Any:
    """``model`` as it decodes deterministic actions with ``decode`` (``joint``: the model itself). ``env`` (or,
    without it, the model's own env) gives the destination columns of ``row-kind`` and ``act-first``
    (:class:`DecodedAgent`)."""
    if check_decode(decode) == "joint":
        return model
    own = getattr(model, "get_env", lambda: None)
    return DecodedAgent(model, destinations=destination_columns(env if env is not None else own()),
                        decode=decode)


def destination_columns(env: Any) -> int | None:
    """The destination columns per row of ``env``'s window (``env`` as for
    :func:`clustergym.agents.policies.env_attribute`); None when there is no env."""
    if env is None:
        return None
    from clustergym.agents.policies import env_attribute  # here: this module does not import torch

    return int(env_attribute(env, "window").D)
