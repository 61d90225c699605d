"""The one episode loop: any policy on seeded episodes of a clustergym env, one record per episode.

Used by the sweep runner (:func:`clustergym.eval.compare.run_one`), training's periodic evaluation and final
table (``train/ppo.py``) and the scripts of ``eval/``; :class:`Episode` holds the record of every loop.

- :func:`predictor` turns a policy into ``act(obs, mask) -> int``: a heuristic name
  (``baselines.make(name, env)``), a saved or live SB3 model (MaskablePPO, PPO) or any object with a
  ``predict(obs, ...)`` method. ``predict`` gets ``deterministic=True`` and ``action_masks=mask``, each only
  if its signature accepts it (plain PPO takes no masks: the pairwise policy masks inside the network, and
  the env penalises or refuses an invalid action).
- :func:`rollout` plays one episode and returns its record.
- :func:`evaluate` makes the env and returns the records of one episode per seed.
- :func:`evaluate_lockstep` does the same for a model that scores a batch of observations, stepping one env
  per seed together with one batched ``predict`` per round (training's periodic evaluation).

Evaluation plays held-out windows: :data:`EVAL_DEFAULTS` (``split="test"``) lies under the config of
:func:`evaluate` and of every sweep run (:func:`clustergym.eval.specs.make_runs`), while ``EnvConfig``'s own
default, for training, is the training split.

A record holds ``policy``, ``env_id`` (the registered id with its version, None for an unregistered env),
``seed``, ``episode_return`` (sum of the env's scalar rewards, also with
``vector_reward=True``), ``objective_<name>`` (the episode's sum of ``info["objectives"]`` per objective of
``OBJECTIVE_NAMES``, unweighted: the return is their weighted sum plus any invalid-action penalties), ``agent_steps``,
``terminated``, ``truncated``, ``decision_mean_us`` / ``decision_p99_us`` (wall time of the ``predict``
calls only, not the env's steps), ``wall_s`` (the episode from ``reset``), ``window_start`` and
``n_jobs_window`` (from the reset info; NaN when the workload has none) and every numeric entry of
``info["summary"]`` (the core's ``Metrics.summary``). A policy with an ``episode_stats() -> dict`` method adds
its counts as ``policy_<name>`` (:func:`rollout` only; the decision-time search's searched decisions).
"""
from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from clustergym.config import OBJECTIVE_NAMES

Act = Callable[[Any, np.ndarray], int]

# what evaluation sets unless its config says otherwise: the held-out part of the trace
EVAL_DEFAULTS: dict[str, Any] = {"split": "test"}


@dataclass(frozen=True)
class Predictor:
    """A policy as the episode loop calls it: ``act(obs, mask) -> action index``; ``name`` labels its records."""

    name: str
    act: Act
    stats: Callable[[], dict] | None = None  # the policy's own counts for the episode's record


def predictor(policy: Any, env, name: str | None = None) -> Predictor:
    """The :class:`Predictor` of ``policy`` on ``env`` (see the module docstring for the kinds of policy)."""
    if isinstance(policy, str):
        from clustergym import baselines

        name = name or policy
        policy = baselines.make(policy, env=env)
    predict = policy.predict
    fixed, masked = _predict_arguments(predict)

    def act(obs, mask: np.ndarray) -> int:
        a = predict(obs, action_masks=mask, **fixed)[0] if masked else predict(obs, **fixed)[0]
        return int(np.asarray(a).reshape(-1)[0])

    return Predictor(_policy_name(policy, name), act, getattr(policy, "episode_stats", None))


def _policy_name(policy: Any, name: str | None) -> str:
    """The label of ``policy``'s records: ``name``, else the policy's own ``name``, else its class name."""
    return name or getattr(policy, "name", None) or type(policy).__name__


def _eval_config(config: dict | None, max_steps: int | None) -> dict:
    """The env config of an evaluation: :data:`EVAL_DEFAULTS` under ``config``, and the step cap if given."""
    cfg = {**EVAL_DEFAULTS, **(config or {})}
    if max_steps is not None:
        cfg["max_steps"] = int(max_steps)
    return cfg


class Episode:
    """One episode's running totals from its reset, and its record (module docstring) once it has ended: the
    one home of the record, for :func:`rollout` and :func:`evaluate_lockstep`."""

    def __init__(self, env, seed: int, policy_name: str) -> None:
        self.env, self.seed, self.policy_name = env, int(seed), policy_name
        self.t0 = time.perf_counter()
        self.obs, info = env.reset(seed=self.seed)
        self.window = dict(info.get("episode", {}))
        self.ret, self.latencies, self.objectives = 0.0, [], np.zeros(len(OBJECTIVE_NAMES))
        self.info, self.terminated, self.truncated = info, False, False
        self.done = "summary" in info  # an episode can end at reset (nothing to decide)
        self.wall_s = time.perf_counter() - self.t0 if self.done else 0.0

    def step(self, action: int, latency: float) -> None:
        """Play ``action``, chosen in ``latency`` seconds of the policy's time."""
        self.latencies.append(latency)
        self.obs, r, self.terminated, self.truncated, self.info = self.env.step(action)
        self.ret += float(self.info.get("scalar_reward", r))  # the vector-reward env keeps the scalar one in info
        self.objectives += self.info["objectives"]
        self.done = self.terminated or self.truncated
        if self.done:
            self.wall_s = time.perf_counter() - self.t0

    def record(self) -> dict:
        """The ended episode's record (module docstring)."""
        summary, term, trunc = self.info["summary"], self.terminated, self.truncated
        if not self.latencies:  # ended at reset: terminated if no job is left, else cut by the horizon
            term = summary["unfinished"] + summary["not_submitted"] == 0
            trunc = not term
        us = np.asarray(self.latencies) * 1e6
        spec = self.env.spec
        rec = {"policy": self.policy_name, "env_id": spec.id if spec is not None else None, "seed": self.seed,
               "episode_return": self.ret, "agent_steps": len(us),
               "terminated": bool(term), "truncated": bool(trunc),
               "decision_mean_us": float(us.mean()) if len(us) else math.nan,
               "decision_p99_us": float(np.percentile(us, 99)) if len(us) else math.nan,
               "wall_s": self.wall_s,
               "window_start": float(self.window.get("window_start", math.nan)),
               "n_jobs_window": self.window.get("n_jobs", math.nan),
               **{f"objective_{n}": float(v) for n, v in zip(OBJECTIVE_NAMES, self.objectives)}}
        for k, v in summary.items():
            if isinstance(v, (int, float, np.integer, np.floating)):
                rec[k] = v.item() if isinstance(v, np.generic) else v
        return rec


def _predict_arguments(predict: Callable) -> tuple[dict, bool]:
    """What ``predict`` is given: ``deterministic=True`` if it takes it, and whether it takes ``action_masks``."""
    params = inspect.signature(predict).parameters
    any_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    return ({"deterministic": True} if any_kw or "deterministic" in params else {}), any_kw or "action_masks" in params


def rollout(env, policy: Predictor, seed: int) -> dict:
    """Play one episode of ``env`` from ``reset(seed=seed)`` with ``policy``; returns its record. The env stays
    open (the caller may read ``env.unwrapped.sim`` afterwards)."""
    u = env.unwrapped
    episode = Episode(env, seed, policy.name)
    while not episode.done:
        mask = u.action_masks()
        t = time.perf_counter()
        a = policy.act(episode.obs, mask)
        episode.step(a, time.perf_counter() - t)
    rec = episode.record()
    if policy.stats is not None:
        rec.update({f"policy_{k}": v for k, v in policy.stats().items()})
    return rec


def evaluate(policy: Any, env_id: str, config: dict | None, seeds: Iterable[int], *, name: str | None = None,
             max_steps: int | None = None) -> list[dict]:
    """Records of ``policy`` on ``env_id`` with env ``config`` (EnvConfig fields over :data:`EVAL_DEFAULTS`:
    held-out windows unless ``split="train"``), one episode per seed. ``max_steps`` caps the agent steps per
    episode (the env's own ``max_steps`` otherwise); a capped episode has ``truncated=True``."""
    from clustergym.scenarios import make_env

    env = make_env(env_id, _eval_config(config, max_steps))
    try:
        pred = predictor(policy, env, name)
        return [rollout(env, pred, seed) for seed in seeds]
    finally:
        env.close()


def evaluate_lockstep(model: Any, env_id: str, config: dict | None, seeds: Sequence[int], *,
                      name: str | None = None, max_steps: int | None = None,
                      on_episode_end: Callable[[dict], Any] | None = None) -> list[dict]:
    """:func:`evaluate` for a model whose ``predict`` takes a batch of observations (an SB3 model, a
    :class:`~clustergym.agents.decode.DecodedAgent`): one env per seed, all stepped together, with one batched
    ``predict`` per round over the episodes still running. The records are :func:`evaluate`'s, in the order of
    ``seeds``, except that ``decision_*_us`` charges each episode an equal share of a round's batched call and
    ``wall_s`` runs from the first reset to the episode's end. ``on_episode_end(record)`` is called as each
    episode ends (a progress bar).

    A batched forward pass can round differently from a single one, so where two actions' scores tie to the
    last bits (interchangeable servers under the permutation-invariant policy) an episode may take the other
    one than :func:`evaluate` would. The batch of each round is fixed by the model and the seeds, so the records
    are as deterministic as :func:`evaluate`'s."""
    from clustergym.scenarios import make_env

    cfg = _eval_config(config, max_steps)
    envs = [make_env(env_id, cfg) for _ in seeds]
    try:
        label = _policy_name(model, name)
        episodes = [Episode(env, seed, label) for env, seed in zip(envs, seeds)]
        fixed, masked = _predict_arguments(model.predict)
        for e in episodes:
            if e.done and on_episode_end is not None:  # ended at reset
                on_episode_end(e.record())
        live = [e for e in episodes if not e.done]
        while live:
            obs = {k: np.stack([e.obs[k] for e in live]) for k in live[0].obs}
            if masked:
                fixed["action_masks"] = np.stack([e.env.unwrapped.action_masks() for e in live])
            t = time.perf_counter()
            actions = model.predict(obs, **fixed)[0]
            share = (time.perf_counter() - t) / len(live)
            for e, a in zip(live, np.asarray(actions).reshape(len(live), -1)[:, 0]):
                e.step(int(a), share)
                if e.done and on_episode_end is not None:
                    on_episode_end(e.record())
            live = [e for e in live if not e.done]
        return [e.record() for e in episodes]
    finally:
        for env in envs:
            env.close()
