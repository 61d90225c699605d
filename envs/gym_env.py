"""The Gymnasium environment (:class:`ClusterEnv`): the Gymnasium contract (reset, step, render, action masks)
over the simulator (:mod:`clustergym.core`), the candidate window and action translation
(:mod:`clustergym.window`), the objectives (:mod:`clustergym.reward`) and the observation builder
(:mod:`clustergym.observation`). MLFS-style observations, masked placement/migration actions, MLFS Eq. (7)
reward."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import MAX_ACTIONS, ConfigError, EmptyEpisodeError, EnvConfig
from .core.commands import Command, execute
from .core.engine import SimConfig, Simulator
from .core.job import JobState
from .observation import ObservationBuilder
from .render import EpisodeRecord, render_ansi, render_rgb
from .reward import Reward, objectives
from .window import InvalidAction, Window, action_index

__all__ = ["ClusterEnv", "InvalidAction"]


class ClusterEnv(gym.Env):
    """A GPU cluster running DAG-structured training jobs; the agent places, migrates, requeues and preempts
    tasks and changes jobs' stopping rules.

    .. code-block:: python

        import gymnasium as gym
        import numpy as np
        import clustergym  # registers the ids

        env = gym.make("clustergym/GPUCluster-v1", window_jobs=20)      # any EnvConfig field as a keyword
        obs, info = env.reset(seed=0)
        done = False
        while not done:
            action = int(np.flatnonzero(obs["action_mask"])[0])         # a policy picks among the valid actions
            obs, reward, terminated, truncated, info = env.step(action)
            done = terminated or truncated
        print(info["summary"]["mean_jct"])

    **Decision points.** ``reset`` and every round end advance the simulator (``sim.next_decision()``) to the
    next scheduling tick where a decision is possible (a ready task fits somewhere, or a server is overloaded:
    an overload the policy left alone is offered again only when the set of overloaded servers changes or
    ``sim.overload_recheck_s`` later).
    A round is a sequence of steps at the same simulated time; each step applies *one* command. The action
    ``end_round_action`` (the last index) ends the round and lets time advance. Whenever the mask allows
    nothing but "end round" (nothing in the window fits any destination, no migration candidate is left),
    the env ends the round by itself and keeps advancing, so the agent never sees a state without a choice
    (except the terminal observation). A task placed, migrated or requeued in a round (every task of a
    preempted job) is not a candidate for another move in that round (no ping-pong), a job with such a task is
    not preempted in it, and a job's stopping rule changes at most once per round, so every round is finite (the
    simulator's round rule, :mod:`clustergym.core.rounds`, which core runs of the heuristics follow too).

    **The window** (:class:`clustergym.window.Window`, ``env.unwrapped.window``) holds the W rows and K
    destination columns of the current state, the action mask, and the one translation between action
    indices and simulator commands (``window.command(a)``, ``window.action(cmd)``). Rows, in order:
    migration candidates (running tasks on overloaded servers, by server index then task id; at most
    ``migrate_rows``, default 8, so a policy that does not migrate still sees the queue); running-job rows
    (one per fully placed running job that has a valid action: preemption while tasks wait (at any decision point
    with ``preempt_empty_queue``, the ``-v2`` ids), with
    ``preemption`` (on by default), or a stop-option change; at most ``running_rows``, default 16); then the
    waiting jobs: ready waiting tasks (``Task.is_ready()``) that fit at least one destination, in queue
    order, at most ``rows_per_job`` per job (default 1: one row per waiting job, so with W = 64 a policy
    reaches every waiting job of a contended 80-GPU cluster). When more qualify than rows remain, partly
    placed jobs come first and the others are drawn in turn from several orderings (arrival, fewest GPUs,
    least attained service, earliest deadline; for running jobs the reverse, their natural victims), so the
    window favours no heuristic's rule (:mod:`clustergym.window`). Destination
    columns: with ``n_servers <= K`` all servers in index order (padding -1); otherwise the K servers closest
    (Euclidean distance of the utilisation vector (gpu, cpu, mem, net)) to MLF-H's ideal virtual host, the
    element-wise minimum utilisation over underloaded servers (MLFS §3.3.2; all servers if none is
    underloaded), ordered by distance then index.

    **Observation** (``spaces.Dict``, float32 arrays of fixed shape, plus the mask; feature tables and scales
    in docs/env.md and :mod:`clustergym.observation`):

    - ``tasks`` (W, F): one row per window row, zeros for padding rows (``present`` = 0). Columns: task
      state/time features (``job_row`` = 1 on a running-job row), task demands and DAG position, the job's
      urgency, deadline slack, iterations, accuracy and remaining run time, its stopping rules (whether the
      system may change them, the user's option, each option's target, the current option)
      (``FIXED_TASK_COLUMNS``: at the same index whatever the configuration),
      then the last ``loss_history`` loss reductions normalised as in MLFS Eq. (2):
      ``(l(I-j-1) - l(I-j)) / (l(0) - l(I))``, then the job's model one-hot (over ``model_names()``). Ready
      tasks not shown count in ``global.queue_beyond_window``.
    - ``servers`` (K, 20): one row per destination column: utilisation of GPU/CPU/memory/network (actual use,
      clipped at 2), free GPU memory (largest free on one GPU), free CPU and memory (nominal), GPU count, idle
      GPUs, overload flag, NIC speed, distance to the ideal virtual host, GPU-type one-hot
      (``GPU_TYPE_ORDER``). Padding rows are zero.
    - ``gpu_loads`` (K, G): per-GPU load (sum of utilisation of the jobs on it, clipped at 4) of each
      destination, -1 where the server has fewer than G GPUs or the column is padding.
    - ``global`` (12,): time of day (sin, cos), queue beyond the window, queue length, active/ended/pending job
      fractions, cluster overload degree (``sim.cluster_overload_degree()``), overloaded-server fraction,
      migration rows, simulated time, actions in this round.
    - ``affinity`` (W, K): for each (row task, destination) the share of the task's DAG neighbours (parents,
      children, its parameter server) already placed on that server: the pair feature behind MLF-H's
      bandwidth term; 0 for padding.
    - ``action_mask`` (n_actions,) int8: the same mask as ``action_masks()``.

    **Action** ``Discrete(W*C+1)``, ``C = D + 1 + 3 + n`` with ``D = K`` destination columns (``K x G`` with
    ``gpu_actions``), the 3 stop options (none with ``stop_option_actions=False``) and ``n =
    sub_batch_actions`` (default 0): ``a = row*C + col``. ``col < D``: put the row's task on destination
    ``col`` (a waiting task: ``sim.place`` on the least-loaded GPU with room, or with ``gpu_actions`` on GPU
    slot ``col % G`` of server column ``col // G``, slot 0 for a parameter server; a migration row:
    ``sim.migrate``); ``col == D``: back to the queue (``sim.requeue`` for migration rows; ``sim.preempt`` of
    the whole job for running-job rows; not valid for waiting tasks); ``col == D + 1 + o``: the row's job's
    stopping rule becomes ``STOP_OPTIONS[o]`` (run-all, opt-stop, requirement; ``sim.set_stop_option``);
    ``col == D + 4 + i``: a waiting job (no task placed) trains with 2^i sub-batches per iteration
    (``Command("sub-batch")``, gradient accumulation; its tasks' GPU memory follows); ``a = W*C``: end the
    round. ``step`` takes an integer index (a Python int, a numpy integer or a one-element integer array);
    anything else raises :class:`InvalidAction`. ``action_masks()`` (bool) is True exactly where: the row is
    a real candidate and the column a real destination; the task fits by nominal demand (CPU, memory and,
    except for a PS, GPU memory on one GPU: ``sim.feasible_servers``; with ``gpu_actions``, on that GPU);
    dependencies hold (only ready tasks are rows); for migrations the destination is not the task's own
    server and is not overloaded; ``col == D`` on migration rows, and on running-job rows with
    ``preemption``, tasks waiting (or ``preempt_empty_queue``) and no task of the job moved in this round; a stop option where
    ``sim.stop_option_error`` allows it (only towards a cheaper option the user allowed, run-all -> opt-stop
    -> requirement, or back to the user's own) and the job's rule has not changed in this round; a sub-batch
    where ``accumulation.set_steps_error`` allows it (a power of two up to the batch, not the job's current
    one, the model has a fixed share) and the job's sub-batch has not changed in this round; end round
    always. With ``sub_batch_actions`` a waiting job that fits no destination at its current batch is still
    a row while a sub-batch is allowed (it may fit only with a smaller one).

    **Invalid actions.** By default (``invalid_action="penalty"``) an index the mask forbids (or out of
    range) is a no-op: the state does not change, the reward is ``invalid_penalty`` (default -0.1) plus what
    accrued since the last step, and ``info["invalid_action"]`` says why. With ``invalid_action="raise"``
    it raises :class:`InvalidAction` naming the action, its row/column and task, and the reason.

    **Reward** ``r = sum_i beta_i g_i`` (MLFS Eq. 7) from the change of the simulator's cumulative counters
    during the step (including the time advanced); the objectives g are the registry of
    :mod:`clustergym.reward` and ``beta`` is ``reward_weights``. By default:
    ``g1 = -d(integral of jobs in system) / (n_jobs * time_scale)``, ``g2 = d(deadlines met) / n_jobs``,
    ``g3 = -d(cross-server MB) / (n_jobs * bytes_scale)``, ``g4 = d(accuracy requirements met) / n_jobs``,
    ``g5 = d(sum of accuracy by deadline) / n_jobs``, ``beta = (0.5, 0.55, 0.25, 0.15, 0.15)`` (MLFS §4.1).
    Over a terminated episode the sums are ``-mean_jct/time_scale``, ``deadline_ratio``,
    ``-bandwidth_mb/(n_jobs*bytes_scale)``, ``accuracy_ratio`` and ``mean_accuracy`` of ``sim.summary()``
    (``objective_totals()``); what accrues before the first decision point is paid with the first step.
    ``info["objectives"]`` is the vector g (float64) of the step; the invalid-action penalty is not in it.
    With ``vector_reward=True`` the reward *is* that vector (float32, one entry per objective, in registry
    order), the env has ``reward_space`` Box(n) and ``reward_dim`` n (MO-Gymnasium's convention, read from
    ``env.unwrapped``), and ``info["scalar_reward"]`` carries ``beta . g`` plus any invalid-action penalty.

    **Termination**: every job of the episode's window finished or was stopped. **Truncation**: the simulated
    time reached ``max_sim_time`` (the simulator's horizon) or ``max_steps`` agent steps were taken. The info of
    the final step (either way) carries ``sim.summary()`` as ``info["summary"]``, and ``info["stalled"]`` (the
    reason) when the simulator ended the run because nothing progressed for ``sim.stall_timeout_s``. Stepping after the end returns
    the terminal observation again with reward 0 (a zero vector with ``vector_reward``).

    **Info** on reset and every step: ``action_mask`` (bool), ``objectives``, ``sim_time``, ``steps``,
    ``round_actions``; on every step ``elapsed_s`` (the simulated seconds the step advanced: 0 for a step
    within a round; what a semi-MDP discount per simulated second needs, ``clustergym.agents.semi_mdp``); on reset also ``episode`` (window start, seeds, ``dropped_jobs``: ids of mapped jobs
    left out because they can never run on the cluster; with ``load`` also ``offered_load``,
    ``trace_offered_load`` and ``arrival_scale``). **Seeding**: only ``reset(seed=...)``;
    the window, mapping seed and simulator seed are drawn from ``self.np_random``.

    **Rendering**: ``"ansi"`` (text: cluster, queue, window) and ``"rgb_array"`` (GPU occupancy over the
    public, bounded ``episode_record``; :mod:`clustergym.render`).

    **Version History**

    - v0: every registered id (:mod:`clustergym.scenarios`). A change of dynamics, observation, action or
      reward gets a new version of the ids it affects; ``eval/trajectory_hash.py`` detects such changes.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: EnvConfig | dict | str | None = None, render_mode: str | None = None, *,
                 scenario: str | None = None, cluster_spec=None,
                 job_specs: Sequence | Callable[[np.random.Generator], Sequence] | None = None,
                 models: Callable | None = None, model_names: Sequence[str] | None = None, **fields: Any):
        from . import scenarios

        # a registered id passes its name as `scenario`: its fields lie under `config` and the keywords
        base = scenarios.scenario_fields(scenario) if scenario is not None else None
        self.config = cfg = EnvConfig.build(config, base=base, **fields)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        self._cluster = cluster_spec if cluster_spec is not None else scenarios.cluster_spec(cfg)
        if job_specs is None:  # a trace file's errors name its file, row and column before any episode
            scenarios.check_trace(cfg, self._cluster)
        if job_specs is not None and cfg.load is not None:
            raise ConfigError("load scales the arrivals of the env's own trace windows; job_specs= are used as "
                              "given (scale their submit times before passing them)")
        self._job_specs = job_specs
        self._models = models
        if model_names is None:
            if models is not None:
                raise ValueError("pass model_names= together with models=")
            from .core.catalogue_data import model_names as _mn

            model_names = _mn()
        self.model_names = list(model_names)
        self.W, self.K = int(cfg.window_size), int(cfg.n_destinations)
        self.G = int(cfg.max_gpus_per_server or max(s.n_gpus for s in self._cluster.servers))
        if max(s.n_gpus for s in self._cluster.servers) > self.G:
            raise ValueError(f"max_gpus_per_server={self.G} is smaller than the largest server of the cluster")
        self.window = Window.from_config(cfg, self.G)
        if self.window.n_actions > MAX_ACTIONS:
            raise ConfigError(f"window_size x {self.window.C} columns + 1 = {self.window.n_actions} actions exceeds "
                              f"{MAX_ACTIONS} (gpu_actions: {self.K} destinations x {self.G} GPU slots)", "gpu_actions")
        self.n_actions = self.window.n_actions
        self.end_round_action = self.window.end_round_action
        self.action_space = spaces.Discrete(self.n_actions)
        self.reward_fn = Reward(objectives(), cfg.reward_weights, cfg)
        if cfg.vector_reward:  # only then: TorchRL and MO-Gymnasium read reward_space as "the reward is a vector"
            self.reward_space = self.reward_fn.space()
            self.reward_dim = self.reward_fn.dim
        self.obs_builder = ObservationBuilder(self.W, self.K, self.G, self.model_names, cfg.loss_history, cfg.time_scale)
        self.observation_space = self.obs_builder.space(self.n_actions)
        sim_kw = {"record_series": False, **cfg.sim}  # the env does not need the per-decision series
        sim_kw["horizon_s"] = float(cfg.max_sim_time)
        self.sim_config = SimConfig(**sim_kw)  # the simulator's configuration (thresholds, tick, ...)
        self.episode_record = EpisodeRecord(cfg.render_history)
        self._recording = render_mode == "rgb_array"  # the record's only reader
        self.sim: Simulator | None = None
        self._done = True

    def action_masks(self) -> np.ndarray:
        """The valid actions now (bool, ``n_actions``; a copy): what MaskablePPO reads."""
        return self.window.mask.copy()

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        cfg = self.config
        options = dict(options or {})
        bad = set(options) - {"window_start", "split"}
        if bad:
            raise ValueError(f"unknown reset option(s) {sorted(bad)}; known: ['split', 'window_start']")
        if options:
            cfg = cfg.replace(**options)
        rng = self.np_random
        if self._job_specs is not None:
            specs = self._job_specs(rng) if callable(self._job_specs) else list(self._job_specs)
            ep = {"window_start": 0.0, "clock_offset": 0.0}
        else:
            from .scenarios import episode_jobs

            specs, ep = episode_jobs(cfg, self._cluster, rng)
        if not specs and not cfg.allow_empty_episode:
            self._refuse_empty(cfg, ep)
        sim_seed = int(rng.integers(2**62))
        ep["sim_seed"] = sim_seed
        ep["n_jobs"] = len(specs)
        self.episode = ep
        self._clock_offset = float(ep.get("clock_offset", 0.0))
        self.sim = Simulator(self._cluster, specs, self.sim_config, seed=sim_seed, models=self._models)
        self.obs_builder.reset(self.sim)
        self.window.reset(self.sim)
        self.reward_fn.reset(self.sim.metrics, max(1, self.sim.n_jobs))
        self._steps = 0
        self._round_actions = 0
        self._done = False
        self._terminated = self._truncated = False
        self.episode_record.clear()
        # what accrues before the first decision point (jobs waiting for the first tick) is paid with the first
        # step, so an episode's rewards sum exactly to its objective values
        self._advance(first=True)
        obs = self._make_obs()
        info = self._info(np.zeros(self.reward_fn.dim))
        info["episode"] = dict(ep)
        if self._done:
            info.update(self._end_info())
        return obs, info

    def step(self, action: Any) -> tuple[dict, Any, bool, bool, dict]:
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        # InvalidAction for anything but an integer, whatever the invalid-action rule
        a = action if type(action) is int else action_index(action)
        if self._done:
            zero = np.zeros(self.reward_fn.dim, np.float32) if self.config.vector_reward else 0.0
            return (self._make_obs(), zero, self._terminated, self._truncated,
                    {**self._info(np.zeros(self.reward_fn.dim)), "elapsed_s": 0.0, **self._end_info()})
        self._steps += 1
        t0 = self.sim.now
        info_extra: dict[str, Any] = {}
        penalty = 0.0
        w = self.window
        if not (0 <= a < w.n_actions) or not w.mask[a]:
            reason = w.why_invalid(a, self.sim)
            if self.config.invalid_action == "raise":
                raise InvalidAction(reason)
            penalty = float(self.config.invalid_penalty)
            info_extra["invalid_action"] = reason
            obs = self._make_obs()  # the state did not change: the same observation, in new arrays
        else:
            if a == w.end_round_action:
                self._advance()
            else:
                self._apply(w.command(a))
            obs = self._make_obs()
        rf = self.reward_fn
        g = rf.step_values()
        reward = rf.scalar(g) + penalty
        if not self._done and self.config.max_steps is not None and self._steps >= self.config.max_steps:
            self._done = self._truncated = True
        info = self._info(g)
        info["elapsed_s"] = self.sim.now - t0  # simulated seconds this step advanced (semi-MDP discounting)
        if info_extra:
            info.update(info_extra)
        if self._done:
            info.update(self._end_info())
        if self.config.vector_reward:
            info["scalar_reward"] = reward
            return obs, g.astype(np.float32), self._terminated, self._truncated, info
        return obs, reward, self._terminated, self._truncated, info

    # ------------------------------------------------------------------ internals
    def _refuse_empty(self, cfg: EnvConfig, ep: dict) -> None:
        """An episode without jobs is an error unless ``allow_empty_episode``: say which setting selected none."""
        if self._job_specs is not None:
            why, field = "job_specs gave no job", "job_specs"
        else:
            from .scenarios import empty_episode_reason

            why, field = empty_episode_reason(cfg, ep)
        raise EmptyEpisodeError(f"empty episode: {why} (EnvConfig.allow_empty_episode=True allows it)", field)

    def objective_totals(self) -> np.ndarray:
        """Episode-to-date objective sums (what the per-step ``info["objectives"]`` add up to)."""
        return self.reward_fn.totals()

    def _end_info(self) -> dict:
        """The final step's extra info: the summary, and why the run stalled if it did (``sim.stalled``)."""
        return {"summary": self.sim.summary(), **({"stalled": self.sim.stalled} if self.sim.stalled else {})}

    def _info(self, g: np.ndarray) -> dict:
        return {"action_mask": self.window.mask.copy(), "objectives": g, "sim_time": self.sim.now,
                "steps": self._steps, "round_actions": self._round_actions}

    def _apply(self, cmd: Command) -> None:
        """Execute a command the mask allows, then rebuild the window (and end the round if nothing is left)."""
        sim, w = self.sim, self.window
        execute(sim, cmd)
        w.touch(sim, cmd)
        if cmd.kind == "sub-batch":  # the job's tasks need another GPU memory: their observed demands follow
            self.obs_builder.refresh_tasks(sim.job_by_id[cmd.jid])
        self._round_actions += 1
        if self._recording:
            self.episode_record.append(sim)
        w.build(sim)
        if not w.can_act:
            self._advance()

    def _advance(self, first: bool = False) -> None:
        """End the round (unless ``first``) and move to the next state with a real choice, or the end."""
        sim, w = self.sim, self.window
        while True:
            more = sim.next_decision()
            w.new_round(sim)
            self._round_actions = 0
            if not more:
                self._done = True
                self._terminated = all(j.state in (JobState.FINISHED, JobState.STOPPED) for j in sim.jobs)
                self._truncated = not self._terminated
                w.build(sim, empty=True)
                return
            if self._recording:
                self.episode_record.append(sim)
            w.build(sim)
            if w.can_act:
                return

    def _make_obs(self) -> dict:
        # the builder returns new arrays and the env keeps no reference to them: they are the caller's (a state
        # that must be shown again, after an invalid action or the end, is simply rebuilt)
        w = self.window
        return self.obs_builder.build(self.sim, w.tasks, w.kinds, w.dest, w.k, w.ideal_distance, w.utilisation,
                                      w.overload_degree, w.mask, w.queue_beyond, self._round_actions,
                                      self._clock_offset, w.free)

    # ------------------------------------------------------------------ rendering
    def save_timeline(self, path: str | os.PathLike, title: str | None = None) -> Path:
        """Write the episode so far as a timeline PNG (a Gantt of tasks on GPUs, the queue, GPU utilisation and
        overloads over time: :mod:`clustergym.timeline_figure`); needs ``sim={"record_timeline": True}``."""
        if self.sim is None:
            raise RuntimeError("call reset() before save_timeline()")
        if not self.sim.timeline.recording:
            raise RuntimeError("no timeline recorded: make the env with sim={'record_timeline': True}")
        from .timeline_figure import save_timeline

        return save_timeline(self.sim.timeline, self.sim.cluster, self.sim.now, path,
                             title if title is not None else f"{self.sim.n_jobs} jobs, t = {self.sim.now / 3600:.1f} h")

    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode")
            return None
        if self.sim is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "ansi":
            return render_ansi(self)
        return render_rgb(self)

