"""The env-facing adapter: a heuristic with Stable-Baselines3's ``predict`` signature.

``HeuristicAgent(policy, env).predict(obs, action_masks=mask)`` reads the env's public helpers:
``env.unwrapped.sim`` (the Simulator), ``candidates`` (Task per window row, None = padding),
``candidate_kind`` ("place"/"migrate"/None per row), ``destinations`` (server id per column, -1 =
padding), ``action_for(tid, server)`` (int or None; server None = back to the queue) and
``end_round_action``. The policy sees only the window's tasks and the destination columns (so heuristics
and agents choose among the same candidates) and the full Simulator state for its scores. The first
preference the action mask allows is returned; if none is allowed, ``end_round_action``.

A new Simulator (env reset) is detected by identity and the policy's ``attach`` runs on it (MLFS-H+C adds
its MLF-C controller there). The random policy samples uniformly from the mask with its own Generator.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy


class HeuristicAgent:
    def __init__(self, policy: Policy, env: Any, max_preferences: int = 100_000):
        self.policy = policy
        self.env = env
        self.max_preferences = max_preferences
        self._sim = None
        self._view: ClusterView | None = None
        self.end_rounds = 0  # predict calls that ended the round (no allowed preference left)

    @property
    def name(self) -> str:
        return self.policy.name

    def _mask(self, action_masks) -> np.ndarray:
        if action_masks is None:
            fn = getattr(self.env, "action_masks", None) or self.env.unwrapped.action_masks
            action_masks = fn()
        m = np.asarray(action_masks, dtype=bool)
        return m.reshape(-1) if m.ndim > 1 and m.shape[0] == 1 else m

    def view(self) -> Candidates:
        u = self.env.unwrapped
        place, migrate = [], []
        can_preempt = False
        for t, kind in zip(u.candidates, u.candidate_kind):
            if t is None:
                continue
            if kind == "preempt":
                can_preempt = True
                continue
            (place if kind == "place" else migrate).append(t)
        servers = np.array(sorted({int(d) for d in u.destinations if int(d) >= 0}), dtype=np.int64)
        return Candidates(place, migrate, servers, can_preempt=can_preempt)

    def action_of(self, cmd: Command) -> int | None:
        u = self.env.unwrapped
        if cmd.kind in ("place", "migrate"):
            return u.action_for(cmd.tid, cmd.server)
        if cmd.kind == "requeue":
            return u.action_for(cmd.tid, None)
        if cmd.kind == "preempt":  # only offered with EnvConfig(preemption=True)
            for r, (t, kind) in enumerate(zip(u.candidates, u.candidate_kind)):
                if kind == "preempt" and t.job.jid == cmd.jid:
                    return u.encode(r, u.K)
        return None

    def predict(self, observation=None, state=None, episode_start=None, deterministic: bool = True,
                action_masks=None):
        u = self.env.unwrapped
        sim = u.sim
        mask = self._mask(action_masks)
        if sim is not self._sim:
            self._sim = sim
            self._view = ClusterView(sim)
            self.policy.attach(sim)
        end = int(u.end_round_action)
        if self.policy.uniform_over_mask:
            valid = np.flatnonzero(mask)
            a = int(self.policy.rng.choice(valid)) if len(valid) else end
            return np.int64(a), None
        self.policy.begin(self._view)
        cands = self.view()
        for i, cmd in enumerate(self.policy.preferences(self._view, cands)):
            if i >= self.max_preferences:
                break
            a = self.action_of(cmd)
            if a is not None and 0 <= a < len(mask) and mask[a]:
                self.policy.observe(self._view, cmd)
                return np.int64(a), None
        self.end_rounds += 1
        return np.int64(end), None
