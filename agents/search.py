"""Decision-time search with copies of the simulator: a heuristic ``base`` policy, checked by lookahead where a
proposer disagrees with it.

At each decision the agent asks the base heuristic for its action and the proposer for one. Where they differ it
copies (env, base) once per candidate (:func:`fork`), plays the candidate and then the base until ``horizon_s``
simulated seconds have passed (or the episode ends), and takes the candidate whose copy had less job-time in the
system over that horizon (:func:`job_time_in_system`); a tie goes to the base. Summed over a window, job-time in
the system is the numerator of the mean JCT, so over a horizon it is the part of the window's mean JCT that the
two candidates can change before that horizon.

A copy holds the whole simulator, so the lookahead knows what no scheduler does: the jobs that arrive within the
horizon, each job's true iterations and learning curve, the noise as it will be drawn. The search is an oracle
reference and a teacher for a policy that sees only observations (``train/ppo.py --search-proposer``), not a
scheduler. ``foresight="none"`` plans with only what a scheduler knows: each copy drops the arrivals after now and
redraws the noise from a seed of the agent's own, the same for both candidates of a decision
(:meth:`Simulator.forget_future`); the jobs present keep the stopping points the scheduler's view already shows.
``foresight="arrivals"`` redraws the noise the same way but keeps the later arrivals: an ablation, not a
scheduler, which separates what knowing the arrivals gains from what knowing the noise does.

A one-hour horizon cannot see what a change of a job's stopping rule costs after it: with ``mlfs-h+c-act``
proposing, the search switched two jobs of load-6 window 10001 to OptStop and back within seven minutes, each
switch scoring lower over its hour, and the window's mean JCT went from 723 s to 2,407 s. ``terminal="remaining"``
adds to each candidate's score the run time its jobs still need at the horizon (:func:`remaining_run_time`).

``proposal="agent"`` proposes the proposer's action; ``"random"`` searches at the same decisions (where the
proposer disagrees with the base) but proposes a uniformly random other valid action, which isolates the
proposer's share of what the search gains (docs/training.md, "Decision-time search").
"""
from __future__ import annotations

import pickle
from typing import Any, Callable

import numpy as np

PROPOSALS = ("agent", "random")
TERMINALS = ("none", "remaining")
FORESIGHTS = ("oracle", "arrivals", "none")


def fork(state: Any) -> Any:
    """An independent copy of ``state`` (an env mid-episode with its policies) that continues exactly as the
    original: a pickle round trip, which copies the same object graph as :func:`copy.deepcopy` (both go through
    ``__reduce_ex__``/``__setstate__``) about five times faster; tests/test_env_copy.py checks both."""
    return pickle.loads(pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL))


def remaining_run_time(sim: Any) -> float:
    """Σ over the jobs submitted and not ended of the run time each still needs now
    (:meth:`ClusterView.remaining_time`: iterations left to its current stopping point x its model's mean
    single-GPU iteration time), without the queueing it will also meet."""
    from clustergym.core.view import ClusterView

    view = ClusterView(sim)
    return sum(view.remaining_time(job) for job in sim.jobs
               if job.spec.submit_time <= sim.now and job.record.end_time < 0)


def job_time_in_system(jobs, t0: float, t1: float) -> float:
    """Σ over ``jobs`` of the time each spends submitted and not ended within [t0, t1] (a job not ended yet has
    ``record.end_time`` < 0)."""
    total = 0.0
    for job in jobs:
        submit, end = job.spec.submit_time, job.record.end_time
        end = end if end >= 0 else np.inf
        total += max(0.0, min(end, t1) - max(submit, t0))
    return total


class LookaheadAgent:
    """The ``predict`` API of the baselines (``predict(obs, action_masks=...) -> (action, None)``) for ``env``,
    the env it is stepped in (one episode at a time, like a heuristic agent). ``proposer`` is a function
    ``(obs, mask) -> action`` or a policy with ``predict(obs, action_masks=...)`` (a heuristic's agent is told
    the action taken, which may not be its own, through its ``record_taken``). ``searches`` lists, per searched
    decision of the current episode, (base action, proposed action, base score, proposal score);
    :meth:`episode_stats` counts them for the episode's record."""

    def __init__(self, env: Any, proposer: Callable[[dict, np.ndarray], int] | Any, base: str = "mlf-h-req",
                 horizon_s: float = 3600.0, proposal: str = "agent", seed: int = 0, terminal: str = "none",
                 foresight: str = "oracle") -> None:
        from clustergym import baselines

        if proposal not in PROPOSALS:
            raise ValueError(f"proposal must be one of {list(PROPOSALS)}, not {proposal!r}")
        if foresight not in FORESIGHTS:
            raise ValueError(f"foresight must be one of {list(FORESIGHTS)}, not {foresight!r}")
        if terminal not in TERMINALS:
            raise ValueError(f"terminal must be one of {list(TERMINALS)}, not {terminal!r}")
        if not horizon_s >= 0:
            raise ValueError(f"horizon_s must be a number >= 0, not {horizon_s!r}")
        _refuse_controllers(base, proposer)
        self.env, self.horizon_s, self.proposal, self.terminal = env, float(horizon_s), proposal, terminal
        self.foresight = foresight
        self.proposer = _proposal_function(proposer)
        self._tell_proposer = getattr(proposer, "record_taken", None)
        self.base = baselines.make(base, env=env)
        self.rng = np.random.default_rng(seed)
        self._noise_rng = np.random.default_rng([seed, 1])  # apart from the proposals': one foresight's ablation
        self.searches: list[tuple[int, int, float, float]] = []
        self._sim: Any = None

    def predict(self, observation: dict, state: Any = None, episode_start: Any = None, deterministic: bool = True,
                action_masks: np.ndarray | None = None) -> tuple[np.ndarray, None]:
        if self.env.unwrapped.sim is not self._sim:  # a new episode
            self._sim, self.searches = self.env.unwrapped.sim, []
        mask = np.asarray(self.env.unwrapped.action_masks() if action_masks is None else action_masks, bool)
        mask = mask.reshape(-1)
        chosen = int(self.base.predict(observation, action_masks=mask)[0])
        proposed = int(self.proposer(observation, mask))
        if proposed != chosen and self.proposal == "random":
            others = np.flatnonzero(mask)
            proposed = int(self.rng.choice(others[others != chosen]))
        if proposed != chosen:
            t1 = self.env.unwrapped.sim.now + self.horizon_s
            if self.foresight != "oracle":  # both candidates meet the same redrawn noise
                self._noise_seed = int(self._noise_rng.integers(2**62))
            kept, alternative = self._score(chosen, t1), self._score(proposed, t1)
            self.searches.append((chosen, proposed, kept, alternative))
            if alternative < kept:
                chosen = proposed
        self.record_taken(chosen)
        return np.int64(chosen), None

    def record_taken(self, action: int) -> None:
        """The env is about to be stepped with ``action``, which may not be the one :meth:`predict` returned (a
        DAgger learner's): the base and the proposer build on it, as a heuristic's agent does."""
        self.base.record_taken(action)
        if self._tell_proposer is not None:
            self._tell_proposer(action)

    def episode_stats(self) -> dict[str, int]:
        """The current episode's searched decisions and how many of them took the proposal."""
        return {"searches": len(self.searches),
                "proposals_taken": sum(alternative < kept for _, _, kept, alternative in self.searches)}

    def _score(self, first: int, t1: float) -> float:
        """Job-time in the system until ``t1`` in a copy of the env where ``first`` is played, then the base;
        with ``terminal="remaining"`` plus the run time the jobs still need where the copy stops (its first
        decision at or after ``t1``; :func:`remaining_run_time`)."""
        t0 = self.env.unwrapped.sim.now
        env, base = fork((self.env, self.base))
        if self.foresight != "oracle":
            env.unwrapped.sim.forget_future(self._noise_seed, arrivals=self.foresight == "arrivals")
        base.record_taken(first)
        obs, _, term, trunc, _ = env.step(first)
        while not (term or trunc) and env.unwrapped.sim.now < t1:
            mask = env.unwrapped.action_masks()
            a = int(base.predict(obs, action_masks=mask)[0])
            base.record_taken(a)
            obs, _, term, trunc, _ = env.step(a)
        sim = env.unwrapped.sim
        tail = remaining_run_time(sim) if self.terminal == "remaining" else 0.0
        return job_time_in_system(sim.jobs, t0, t1) + tail


def _refuse_controllers(base: str, proposer: Any) -> None:
    """ValueError if the base or a heuristic proposer adds a controller to the simulator: it would act in the
    episode (and its copies) between the search's actions."""
    from clustergym.agents.bc import imitation_error
    from clustergym.baselines.agent import HeuristicAgent
    from clustergym.baselines.base import attaches_controller

    why = imitation_error(base)
    if why is not None:
        raise ValueError(f"base: {why}")
    if isinstance(proposer, HeuristicAgent) and attaches_controller(proposer.policy):
        raise ValueError(f"proposer {proposer.name!r} attaches a controller to the simulator, which would act in "
                         f"the episode between the search's actions; propose with one that acts only through "
                         f"actions (e.g. 'mlfs-h+c-act')")


def _proposal_function(proposer: Any) -> Callable[[dict, np.ndarray], int]:
    """``proposer`` as a function ``(obs, mask) -> action``."""
    predict = getattr(proposer, "predict", None)
    if predict is None:
        if not callable(proposer):
            raise TypeError(f"proposer must be a function (obs, mask) -> action or have predict(obs, "
                            f"action_masks=...), not a {type(proposer).__name__}")
        return proposer
    return lambda obs, mask: int(np.asarray(predict(obs, action_masks=mask[None])[0]).reshape(-1)[0])


def search_teacher(env: Any, base: str, proposer: str, horizon_s: float = 3600.0, proposal: str = "agent",
                   terminal: str = "none", foresight: str = "oracle") -> LookaheadAgent:
    """A :class:`LookaheadAgent` on ``env`` with heuristics for base and proposer: a teacher for behaviour
    cloning (``train/ppo.py --search-proposer``), whose labels are the search's choices."""
    from clustergym import baselines

    return LookaheadAgent(env, baselines.make(proposer, env=env), base=base, horizon_s=horizon_s, proposal=proposal,
                          terminal=terminal, foresight=foresight)
