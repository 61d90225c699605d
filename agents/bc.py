"""Warm start (MLFS §3.4: train on the heuristic's data first): roll out a heuristic, behaviour-clone it.

``collect(expert, env_id, config, seeds)`` records (observation, mask, action, discounted return) for every
step of the expert's episodes. ``behaviour_clone(policy, data, steps)`` minimises the masked cross-entropy
(logits of invalid actions at -inf) of the expert's actions, plus ``value_coef`` x Huber loss of the value head
against the expert's discounted returns (so PPO starts with a critic that matches the cloned actor).
``agreement(policy, data)`` is the fraction of states where the policy's greedy masked action equals the
expert's. ``collect_dagger(policy, expert, ...)`` (DAgger, Ross et al. 2011) rolls out the *learner* greedily and
labels every state it visits with the expert's action, so BC also sees the states its own mistakes lead to;
``merge`` concatenates datasets.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, Iterable

import numpy as np
import torch as th

from clustergym.scenarios import make_env

from .bc_data import StateBuffer, concat, dense, subset
from .decode import check_decode, with_decode
from .policies import actor_features, masked_logits
from .semi_mdp import discounted_returns, step_discounts


def imitation_error(name: str) -> str | None:
    """Why heuristic ``name`` cannot be a behaviour-cloning teacher (None if it can): it must act only through
    the env's actions, not attach a controller to the simulator (:meth:`Policy.attach`)."""
    from clustergym import baselines
    from clustergym.baselines.base import attaches_controller

    cls = baselines.REGISTRY.get(name)
    if cls is None:
        return f"{name!r} is not a heuristic; one of {baselines.available()}"
    if attaches_controller(cls):
        alt = " (use 'mlfs-h+c-act', MLF-C as stop-option actions)" if name == "mlfs-h+c" else ""
        return (f"{name!r} attaches a controller to the simulator, which acts between the agent's actions: an "
                f"agent cannot imitate it{alt}")
    return None


def _labelled_rollouts(env, seeds: Iterable[int], choose, gamma: float, max_steps: int | None,
                       gamma_hour: float | None = None) -> dict[str, Any]:
    """Run one episode per seed; ``choose(obs, mask) -> (label, action)`` gives the expert's label for the
    state and the action actually taken. Records (observation, mask, label, discounted return of the taken
    actions) for every step; the discount is PPO's (:func:`clustergym.agents.semi_mdp.step_discounts`: per
    step, or per simulated hour with ``gamma_hour``), so the cloned critic predicts what PPO will fit. The
    states are kept compactly (:mod:`clustergym.agents.bc_data`); :func:`observations` reads them back."""
    u = env.unwrapped
    obs_buf: dict[str, StateBuffer] = {}
    masks = StateBuffer(binary=True)
    actions, returns, episodes = [], [], 0
    for seed in seeds:
        obs, info = env.reset(seed=int(seed))
        rewards, elapsed = [], []
        done, steps = bool(info.get("summary")), 0
        while not done and (max_steps is None or steps < max_steps):
            m = u.action_masks()
            label, a = choose(obs, m)
            for k, v in obs.items():
                obs_buf.setdefault(k, StateBuffer(binary=k == "action_mask")).append(v)
            masks.append(m)
            actions.append(label)
            obs, r, term, trunc, info = env.step(a)
            rewards.append(float(r))
            elapsed.append(float(info["elapsed_s"]))
            done = term or trunc
            steps += 1
        returns.extend(discounted_returns(rewards, step_discounts(elapsed, gamma, gamma_hour)))
        episodes += 1
    env.close()
    return {"obs": {k: v.build() for k, v in obs_buf.items()}, "masks": masks.build(),
            "actions": np.asarray(actions, np.int64), "returns": np.asarray(returns, np.float32),
            "episodes": episodes}


def teacher_agent(expert: str | Callable[[Any], Any], env) -> Any:
    """The labelling agent on ``env``: heuristic ``expert``'s, or ``expert(env)`` (an object with ``predict``
    and ``record_taken``, e.g. :func:`clustergym.agents.search.search_teacher`)."""
    from clustergym import baselines

    return baselines.make(expert, env=env) if isinstance(expert, str) else expert(env)


def _env(env_id: str, config: dict | None, wrap: Callable | None):
    env = make_env(env_id, config)
    return wrap(env) if wrap is not None else env


def collect(expert: str | Callable[[Any], Any], env_id: str, config: dict | None, seeds: Iterable[int],
            gamma: float = 0.99, max_steps: int | None = 5000, wrap: Callable | None = None,
            gamma_hour: float | None = None) -> dict[str, Any]:
    """``wrap(env)``, if given, wraps the env the returns are computed on (the training reward, e.g.
    :class:`clustergym.agents.relative_reward.RelativeToHeuristic`), so the cloned critic matches what PPO will see.
    ``expert``: a heuristic's name or a teacher factory (:func:`teacher_agent`)."""
    env = _env(env_id, config, wrap)
    agent = teacher_agent(expert, env)

    def choose(obs, m):
        a = int(agent.predict(obs, action_masks=m)[0])
        return a, a

    return _labelled_rollouts(env, seeds, choose, gamma, max_steps, gamma_hour)


def collect_dagger(policy, expert: str | Callable[[Any], Any], env_id: str, config: dict | None, seeds: Iterable[int],
                   gamma: float = 0.99, max_steps: int | None = 2000, wrap: Callable | None = None,
                   gamma_hour: float | None = None, decode: str = "joint") -> dict[str, Any]:
    """Roll out ``policy`` (an SB3 policy, its deterministic masked action read with ``decode``, as evaluations
    read it: :mod:`clustergym.agents.decode`) and label each visited state with ``expert``'s action (DAgger).
    Same format as :func:`collect`; ``returns`` are the learner's discounted returns."""
    env = _env(env_id, config, wrap)
    agent = teacher_agent(expert, env)
    policy.set_training_mode(False)
    learner = _greedy(policy, decode, env)

    def choose(obs, m):
        a_exp = int(agent.predict(obs, action_masks=m)[0])
        a = learner(obs, m)
        agent.record_taken(a)  # the expert's later labels in this round build on the learner's move, not its own
        return a_exp, a

    return _labelled_rollouts(env, seeds, choose, gamma, max_steps, gamma_hour)


def _greedy(policy, decode: str, env) -> Callable[[dict, np.ndarray], int]:
    """``(obs, mask) -> action``: ``policy``'s deterministic action in one state, decoded with ``decode``."""
    if check_decode(decode) != "joint":
        agent = with_decode(SimpleNamespace(policy=policy), decode, env)
        return lambda obs, m: int(agent.predict(obs, action_masks=m[None])[0])

    def joint(obs, m):
        with th.no_grad():
            o = {k: th.as_tensor(v[None], dtype=th.float32, device=policy.device) for k, v in obs.items()}
            return int(masked_logits(policy, o, th.as_tensor(m[None], device=policy.device)).argmax(-1)[0])
    return joint


def merge(*datasets: dict) -> dict[str, Any]:
    """Concatenate datasets of :func:`collect` / :func:`collect_dagger` (empty ones are skipped)."""
    ds = [d for d in datasets if d is not None and len(d["actions"])]
    return {"obs": {k: concat([d["obs"][k] for d in ds]) for k in ds[0]["obs"]},
            "masks": concat([d["masks"] for d in ds]), "actions": np.concatenate([d["actions"] for d in ds]),
            "returns": np.concatenate([d["returns"] for d in ds]), "episodes": sum(d["episodes"] for d in ds)}


def observations(data: dict, idx: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The observations of the states ``idx`` (all if None) as the env gave them: one numpy array per key."""
    if idx is None:
        idx = np.arange(len(data["actions"]))
    return {k: dense(v, idx) for k, v in data["obs"].items()}


def action_masks(data: dict, idx: np.ndarray | None = None) -> np.ndarray:
    """The action masks (bool) of the states ``idx`` (all if None)."""
    return dense(data["masks"], np.arange(len(data["actions"])) if idx is None else idx)


def _batch(data: dict, idx: np.ndarray, device) -> tuple[dict, th.Tensor, th.Tensor, th.Tensor]:
    obs = {k: th.as_tensor(v, dtype=th.float32, device=device) for k, v in observations(data, idx).items()}
    return (obs, th.as_tensor(action_masks(data, idx), device=device),
            th.as_tensor(data["actions"][idx], device=device), th.as_tensor(data["returns"][idx], device=device))


def behaviour_clone(policy, data: dict, steps: int, batch_size: int = 256, lr: float = 1e-3,
                    value_coef: float = 0.5, seed: int = 0, callback=None, end_coef: float = 0.0) -> list[float]:
    """Train ``policy`` (an SB3 ActorCriticPolicy) in place; returns the cross-entropy per step.

    ``end_coef`` weighs an auxiliary binary cross-entropy on the round-ending decision alone: whether the
    expert ended the round (the last action) or did anything else, with P(anything else) the summed
    probability of every other valid action. The joint cross-entropy spreads the "act" mass over hundreds
    of (row, destination) actions, so a clone unsure *where* to place can still put most mass on ending
    the round; this term trains *whether* to act on its own."""
    n = len(data["actions"])
    if n == 0 or steps <= 0:
        return []
    rng = np.random.default_rng(seed)
    opt = th.optim.Adam(policy.parameters(), lr=lr)
    # cosine decay of the learning rate to 0 over the steps: the last steps settle instead of jittering
    sched = th.optim.lr_scheduler.LambdaLR(opt, lambda i: 0.5 * (1.0 + np.cos(np.pi * min(i, steps) / steps)))
    policy.set_training_mode(True)
    losses = []
    for i in range(int(steps)):
        idx = rng.integers(0, n, size=min(batch_size, n))
        obs, masks, acts, rets = _batch(data, idx, policy.device)
        if value_coef > 0 and getattr(policy, "share_features_extractor", False):
            # one encoder pass for both heads (the pairwise encoder dominates the cost)
            features = actor_features(policy, obs)
            logits = policy.action_net(policy.mlp_extractor.forward_actor(features))
            logits = logits.masked_fill(~masks.bool(), float("-inf"))
            v = policy.value_net(policy.mlp_extractor.forward_critic(features)).squeeze(-1)
        else:
            logits = masked_logits(policy, obs, masks)
            v = policy.predict_values(obs).squeeze(-1) if value_coef > 0 else None
        ce = th.nn.functional.cross_entropy(logits, acts)
        loss = ce
        if v is not None:
            loss = ce + value_coef * th.nn.functional.smooth_l1_loss(v, rets)
        if end_coef > 0:
            loss = loss + end_coef * end_decision_loss(logits, acts)
        opt.zero_grad()
        loss.backward()
        th.nn.utils.clip_grad_norm_(policy.parameters(), 10.0)
        opt.step()
        sched.step()
        losses.append(float(ce.detach()))
        if callback is not None:
            callback(i, float(ce.detach()), float(loss.detach()))
    policy.set_training_mode(False)
    return losses


def end_decision_loss(logits: th.Tensor, actions: th.Tensor) -> th.Tensor:
    """Mean binary cross-entropy of "end the round" (the last action) against "act" (any other valid action)
    under the masked ``logits``, over the states that have that choice (ending and some other action valid)."""
    finite = th.isfinite(logits)
    decides = finite[:, -1] & finite[:, :-1].any(dim=-1)
    log_p = th.log_softmax(logits[decides], dim=-1)  # rows without the choice dropped: their -inf would NaN the grad
    lp_end, lp_act = log_p[:, -1], th.logsumexp(log_p[:, :-1], dim=-1)
    nll = -th.where(actions[decides] == logits.shape[1] - 1, lp_end, lp_act)
    return nll.sum() / max(int(decides.sum()), 1)


@th.no_grad()
def agreement(policy, data: dict, batch_size: int = 1024, exclude_end: bool = False) -> float:
    """Fraction of states where argmax of the masked logits equals the expert's action (``exclude_end``: only
    states where the expert did not end the round, i.e. its placements/migrations)."""
    if exclude_end:
        keep = data["actions"] != data["masks"].shape[1] - 1
        data = {"obs": {k: subset(v, keep) for k, v in data["obs"].items()}, "masks": subset(data["masks"], keep),
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


# how an action differs from the expert's: the codes of disagreement_kinds
DISAGREEMENTS: tuple[str, ...] = ("agree", "end", "row", "destination")


def disagreement_kinds(pred: np.ndarray, label: np.ndarray, end: int, columns: int) -> np.ndarray:
    """Per state, the index in :data:`DISAGREEMENTS` of how action ``pred`` differs from ``label`` (flat actions
    ``row * columns + column``, ``end`` = "end round"): ``end`` (one of the two ends the round and the other does
    not), ``row`` (both act, on different rows) or ``destination`` (same row, other column: server, "back to the
    queue" or a stop option)."""
    p, a = np.asarray(pred), np.asarray(label)
    pe, ae = p == end, a == end
    same_row = p // columns == a // columns
    return np.select([p == a, pe != ae, ~same_row], [0, 1, 2], default=3)


@th.no_grad()
def disagreement_split(policy, data: dict, batch_size: int = 1024) -> dict[str, float]:
    """Shares of states (summing to 1 - agreement) where the greedy masked action differs from the expert's, by
    kind (:func:`disagreement_kinds`)."""
    n = len(data["actions"])
    if n == 0:
        return {k: float("nan") for k in DISAGREEMENTS[1:]}
    policy.set_training_mode(False)
    preds = []
    for s in range(0, n, batch_size):
        idx = np.arange(s, min(n, s + batch_size))
        obs, masks, _, _ = _batch(data, idx, policy.device)
        preds.append(masked_logits(policy, obs, masks).argmax(-1).cpu().numpy())
    end = data["masks"].shape[1] - 1
    cols = end // int(data["obs"]["tasks"].shape[1])  # C columns per row (actions W * C, then "end round")
    kinds = disagreement_kinds(np.concatenate(preds), data["actions"], end, cols)
    return {k: float(np.mean(kinds == i)) for i, k in enumerate(DISAGREEMENTS) if i}
