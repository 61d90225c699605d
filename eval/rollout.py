"""The one episode loop: any policy on seeded episodes of a clustergym env, one record per episode.

Used by the sweep runner (:func:`clustergym.eval.compare.run_one`), training's periodic evaluation and final
table (``train/ppo.py``) and the scripts of ``eval/``.

- :func:`predictor` turns a policy into ``act(obs, mask) -> int``: a heuristic name
  (``baselines.make(name, env)``), a saved or live SB3 model (MaskablePPO, PPO) or any object with a
  ``predict(obs, ...)`` method. ``predict`` gets ``deterministic=True`` and ``action_masks=mask``, each only
  if its signature accepts it (plain PPO takes no masks: the pairwise policy masks inside the network, and
  the env penalises or refuses an invalid action).
- :func:`rollout` plays one episode and returns its record.
- :func:`evaluate` makes the env and returns the records of one episode per seed.

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
``info["summary"]`` (the core's ``Metrics.summary``).
"""
from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable

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


def predictor(policy: Any, env, name: str | None = None) -> Predictor:
    """The :class:`Predictor` of ``policy`` on ``env`` (see the module docstring for the kinds of policy)."""
    if isinstance(policy, str):
        from clustergym import baselines

        name = name or policy
        policy = baselines.make(policy, env=env)
    predict = policy.predict
    params = inspect.signature(predict).parameters
    any_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    fixed = {"deterministic": True} if any_kw or "deterministic" in params else {}
    masked = any_kw or "action_masks" in params

    def act(obs, mask: np.ndarray) -> int:
        a = predict(obs, action_masks=mask, **fixed)[0] if masked else predict(obs, **fixed)[0]
        return int(np.asarray(a).reshape(-1)[0])

    return Predictor(name or getattr(policy, "name", None) or type(policy).__name__, act)


def rollout(env, policy: Predictor, seed: int) -> dict:
    """Play one episode of ``env`` from ``reset(seed=seed)`` with ``policy``; returns its record. The env stays
    open (the caller may read ``env.unwrapped.sim`` afterwards)."""
    u = env.unwrapped
    t0 = time.perf_counter()
    obs, info = env.reset(seed=int(seed))
    episode = dict(info.get("episode", {}))
    ret, lat, objectives = 0.0, [], np.zeros(len(OBJECTIVE_NAMES))
    done = "summary" in info  # an episode can end at reset (nothing to decide)
    term = trunc = False
    while not done:
        mask = u.action_masks()
        t = time.perf_counter()
        a = policy.act(obs, mask)
        lat.append(time.perf_counter() - t)
        obs, r, term, trunc, info = env.step(a)
        ret += float(info.get("scalar_reward", r))  # the vector-reward env keeps the scalar one in info
        objectives += info["objectives"]
        done = term or trunc
    summary = info["summary"]
    if not lat:  # ended at reset: terminated if no job is left, else cut by the horizon
        term = summary["unfinished"] + summary["not_submitted"] == 0
        trunc = not term
    us = np.asarray(lat) * 1e6
    rec = {"policy": policy.name, "env_id": env.spec.id if env.spec is not None else None, "seed": int(seed),
           "episode_return": ret, "agent_steps": len(lat),
           "terminated": bool(term), "truncated": bool(trunc),
           "decision_mean_us": float(us.mean()) if len(us) else math.nan,
           "decision_p99_us": float(np.percentile(us, 99)) if len(us) else math.nan,
           "wall_s": time.perf_counter() - t0,
           "window_start": float(episode.get("window_start", math.nan)),
           "n_jobs_window": episode.get("n_jobs", math.nan),
           **{f"objective_{n}": float(v) for n, v in zip(OBJECTIVE_NAMES, objectives)}}
    for k, v in summary.items():
        if isinstance(v, (int, float, np.integer, np.floating)):
            rec[k] = v.item() if isinstance(v, np.generic) else v
    return rec


def evaluate(policy: Any, env_id: str, config: dict | None, seeds: Iterable[int], *, name: str | None = None,
             max_steps: int | None = None) -> list[dict]:
    """Records of ``policy`` on ``env_id`` with env ``config`` (EnvConfig fields over :data:`EVAL_DEFAULTS`:
    held-out windows unless ``split="train"``), one episode per seed. ``max_steps`` caps the agent steps per
    episode (the env's own ``max_steps`` otherwise); a capped episode has ``truncated=True``."""
    from clustergym.scenarios import make_env

    cfg = {**EVAL_DEFAULTS, **(config or {})}
    if max_steps is not None:
        cfg["max_steps"] = int(max_steps)
    env = make_env(env_id, cfg)
    try:
        pred = predictor(policy, env, name)
        return [rollout(env, pred, seed) for seed in seeds]
    finally:
        env.close()
