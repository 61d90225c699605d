"""Training reward relative to a heuristic on the same window: an input-dependent baseline.

Why. A window's return is mostly decided by its input (how many jobs arrive, how large and long they are),
which the agent neither controls nor observes ahead of time: on the default scenario MLF-H's own return
ranges from -100.3 to +0.8 over training windows 100-119 (command below; -22.8 to +0.8 on the light scenario
``clustergym/GPUClusterLight-v1``). PPO's critic cannot predict that part from the state,
so its advantages are dominated by input noise (Mao et al., "Variance reduction for reinforcement learning in
input-driven environments", ICLR 2019, the problem Decima met). Subtracting what a reference heuristic earns
on the *same* input removes it.

How. :class:`RelativeToHeuristic` wraps a training env. Each ``reset`` picks the episode's seed (the one given,
else one drawn from the wrapper's own generator) and first runs the heuristic on a twin env reset with that
seed, the same window, job mapping and simulator seed, recording ``F(t)``: the heuristic's cumulative reward
after every step whose post-step simulated time is <= t. The agent's episode then uses the same seed; its step
reward becomes

    r'_k = r_k - (F(t_k) - F(t_{k-1}))        (t_k = simulated time after agent step k, F(t_0) := 0)

and, on termination, also ``- (F_total - F(t_k))``. Where the heuristic took several steps at one instant t,
the agent's j-th step at t owes the heuristic's cumulative reward after its j-th step there (its last, if the
agent takes more), and F(t) once the agent has moved past t. The shift depends on the window and on simulated time
only, not on the agent's choices, and telescopes: a terminated episode's rewards sum to the agent's objective
minus the heuristic's on that window (``info["heuristic_return"]`` carries the latter). A policy that acts
exactly like the heuristic earns 0 at every step. Per-step discounting makes the shift not exactly
potential-based, so the optimum can move slightly; the evaluation always uses the plain env.

The twin costs one heuristic episode per training episode (MLF-H: a median 2.2 s per 100-job window of the
default scenario on the shared 2-core development machine; 0.03 s per 50-job light window). The figures from::

    .venv/bin/python -c "from clustergym.eval.rollout import evaluate; import numpy as np;
    r = evaluate('mlf-h', 'clustergym/GPUCluster-v1', {}, range(100, 120));
    x = [e['episode_return'] for e in r]; print(min(x), max(x), np.median([e['wall_s'] for e in r]))"
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Any, Callable

import gymnasium as gym
import numpy as np


class RelativeToHeuristic(gym.Wrapper):
    """Reward = env reward minus the ``heuristic``'s reward over the same span of simulated time on the same
    window (see the module docstring). ``make_twin()`` must build an env identical to the wrapped one (same id
    and config); ``twin_max_steps`` caps the heuristic's episode (its F stays flat after the cap). Every step's
    ``info`` carries ``env_reward`` (the unshifted reward) and ``heuristic_return``."""

    def __init__(self, env: gym.Env, make_twin: Callable[[], gym.Env], heuristic: str = "mlf-h",
                 twin_max_steps: int = 20_000):
        super().__init__(env)
        if getattr(getattr(env.unwrapped, "config", None), "vector_reward", False):
            raise ValueError("RelativeToHeuristic needs the scalar reward; the env has vector_reward=True")
        self._make_twin = make_twin
        self.heuristic = heuristic
        self.twin_max_steps = int(twin_max_steps)
        self._twin: gym.Env | None = None
        self._policy = None
        self._rng: np.random.Generator | None = None
        self._times: list[float] = []
        self._cum: list[float] = []
        self._within: list[list[float]] = []  # per instant of _times: the cumulative reward after each step there
        self._instant = (-1.0, 0)  # (simulated time of the agent's last step, its steps at that time)
        self._paid = 0.0
        self._total = 0.0

    def _heuristic_curve(self, seed: int, options: dict | None) -> None:
        from clustergym import baselines

        if self._twin is None:
            self._twin = self._make_twin()
            self._policy = baselines.make(self.heuristic, env=self._twin)
        twin, pol = self._twin, self._policy
        u = twin.unwrapped
        obs, info = twin.reset(seed=seed, options=options)
        times, cum, within, total = [], [], [], 0.0
        done, steps = bool(info.get("summary")), 0
        while not done and steps < self.twin_max_steps:
            a, _ = pol.predict(obs, action_masks=u.action_masks())
            obs, r, term, trunc, info = twin.step(int(a))
            total += float(r)
            t = float(u.sim.now)
            if times and times[-1] == t:
                cum[-1] = total  # several steps at one instant: F keeps the last cumulative value
                within[-1].append(total)
            else:
                times.append(t)
                cum.append(total)
                within.append([total])
            done = term or trunc
            steps += 1
        self._times, self._cum, self._within, self._total = times, cum, within, total

    def _owed(self, t: float) -> float:
        """The heuristic's cumulative reward the agent owes after a step that ends at simulated time ``t``."""
        last, j = self._instant
        j = j + 1 if t == last else 1
        self._instant = (t, j)
        i = bisect_right(self._times, t)
        if i and self._times[i - 1] == t:  # the heuristic stepped at this instant too: match step for step
            at = self._within[i - 1]
            return at[min(j, len(at)) - 1]
        return self._cum[i - 1] if i else 0.0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
            ep_seed = int(seed)
        else:
            if self._rng is None:
                self._rng = np.random.default_rng()
            ep_seed = int(self._rng.integers(2**62))
        self._heuristic_curve(ep_seed, options)
        self._paid = 0.0
        self._instant = (-1.0, 0)
        obs, info = self.env.reset(seed=ep_seed, options=options)
        info["heuristic_return"] = self._total
        return obs, info

    def step(self, action) -> tuple[Any, float, bool, bool, dict]:
        obs, r, term, trunc, info = self.env.step(action)
        owed = self._total if term else self._owed(float(self.env.unwrapped.sim.now))
        shift, self._paid = owed - self._paid, owed
        info["env_reward"] = float(r)
        info["heuristic_return"] = self._total
        return obs, float(r) - shift, term, trunc, info

    def close(self) -> None:
        if self._twin is not None:
            self._twin.close()
            self._twin = None
        super().close()
