"""The env-facing adapter: a heuristic with Stable-Baselines3's ``predict`` signature.

``HeuristicAgent(policy, env).predict(obs, action_masks=mask)`` reads ``env.unwrapped.sim`` through a
read-only :class:`~clustergym.core.view.ClusterView` (for the policy's scores) and ``env.unwrapped.window``
(:class:`clustergym.window.Window`: the task rows, their kinds and the destination columns). The policy's
candidates are the window's tasks and destination columns, so heuristics and agents choose among the same
candidates. Its preferences (placements, migrations, requeues, preemptions and stop-option changes) are
mapped to actions by ``window.action(cmd)``; the first one the action mask allows is returned, else "end
round". The adapter imposes no order of its own: a policy's preferences are tried in the policy's order.

What was done in a round the policy reads from the simulator's round record (``sim.round``,
:mod:`clustergym.core.rounds`: what the env executed), so ``predict`` twice on one state gives the same choice.
Policies with memory of their own commands (MLF-C's notes of the jobs it moved) are told which command was taken
at the next ``predict``: by default the one it returned; :meth:`HeuristicAgent.record_taken` replaces it when the
caller stepped the env with another action (DAgger, where the learner acts and the heuristic only labels).

A new Simulator (env reset) is detected by identity and the policy's ``attach`` runs on it (MLFS-H+C adds
its MLF-C controller there). The random policy samples uniformly from the mask with its own Generator.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from clustergym.core.view import ClusterView
from clustergym.window import action_index

from .base import Candidates, Command, Policy


class HeuristicAgent:
    def __init__(self, policy: Policy, env: Any, max_preferences: int = 100_000):
        self.policy = policy
        self.env = env
        self.max_preferences = max_preferences
        self._sim = None
        self._view: ClusterView | None = None
        self._taken: Command | None = None  # the command of the last action, told to the policy at the next predict
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
        """The policy's candidates: the window's waiting rows (to place), migration rows (to move) and
        destination columns; preemption when the window has running-job rows and preemption is on (which
        job may be preempted is the mask's business)."""
        w = self.env.unwrapped.window
        place, migrate = [], []
        running = False
        for t, kind in zip(w.tasks, w.kinds):
            if t is None:
                continue
            if kind == "running":
                running = True
            else:
                (place if kind == "place" else migrate).append(t)
        servers = np.array(sorted({int(d) for d in w.destinations if int(d) >= 0}), dtype=np.int64)
        return Candidates(place, migrate, servers, can_preempt=running and w.preemption)

    def record_taken(self, action: int) -> None:
        """The env is about to be stepped with ``action`` (an action of the current window), which may differ
        from the one the last ``predict`` returned: the policy takes that command, not its own choice, as done
        in this round (nothing, for "end round" or an action the mask forbids)."""
        w = self.env.unwrapped.window
        a = action_index(action)
        # a masked-out action is a no-op in the env (or raises there): nothing is taken
        self._taken = w.command(a) if 0 <= a < w.n_actions and w.mask[a] else None

    def predict(self, observation=None, state=None, episode_start=None, deterministic: bool = True,
                action_masks=None):
        u = self.env.unwrapped
        sim = u.sim
        mask = self._mask(action_masks)
        if sim is not self._sim:
            self._sim = sim
            self._view = ClusterView(sim)
            self._taken = None
            self.policy.attach(sim)
        elif self._taken is not None:
            self.policy.observe(self._view, self._taken)
        self._taken = None
        end = int(u.end_round_action)
        if self.policy.uniform_over_mask:
            valid = np.flatnonzero(mask)
            a = int(self.policy.rng.choice(valid)) if len(valid) else end
            return np.int64(a), None
        self.policy.begin(self._view)
        w = u.window
        for i, cmd in enumerate(self.policy.ranked(self._view, self.view())):
            if i >= self.max_preferences:
                break
            a = w.action(cmd)
            if a is not None and 0 <= a < len(mask) and mask[a]:
                self._taken = cmd
                return np.int64(a), None
        self.end_rounds += 1
        return np.int64(end), None
