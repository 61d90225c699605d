"""The Gymnasium environment: MLFS-style observations, masked placement/migration actions, MLFS Eq. (7) reward."""
from __future__ import annotations

from collections import deque
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .config import OBJECTIVE_NAMES, EnvConfig
from .core.engine import SimConfig, Simulator
from . import kernels
from .core.job import JobState
from .core.resources import FIT_EPS
from .observation import ObservationBuilder

_EPS = FIT_EPS  # the admission rule's float allowance (clustergym.core.resources.fits)


class InvalidAction(ValueError):
    """An action the current mask forbids (invalid-action rule "raise"); the message names the action index,
    its decoded row/column, the task and the reason."""


class ClusterEnv(gym.Env):
    """A GPU cluster running DAG-structured training jobs; the agent places, migrates and requeues tasks.

    **Decision points.** ``reset`` and every round end advance the simulator (``sim.next_decision()``) to the
    next scheduling tick where a decision is possible (a ready task fits somewhere, or a server is overloaded:
    an overload the policy left alone is offered again only when the set of overloaded servers changes or
    ``sim.overload_recheck_s`` later).
    A round is a sequence of steps at the same simulated time; each step applies *one* command. The action
    ``end_round_action`` (the last index) ends the round and lets time advance. Whenever the mask allows
    nothing but "end round" (nothing in the window fits any destination, no migration candidate is left),
    the env ends the round by itself and keeps advancing, so the agent never sees a state without a choice
    (except the terminal observation). A task placed, migrated or requeued in a round is not a migration
    candidate again in that round (no ping-pong), so every round is finite.

    **Observation** (``spaces.Dict``, float32 arrays of fixed shape, plus the mask; feature tables and scales
    in docs/env.md and :mod:`clustergym.observation`):

    - ``tasks`` (W, F): one row per candidate task, zeros for padding rows (``present`` = 0). Row order:
      migration candidates first (running tasks on overloaded servers, by server index then task id; at most
      ``migrate_rows``, default 8, so a policy that does not migrate still sees the queue), then
      ready waiting tasks (``Task.is_ready()``) that fit at least one destination, in queue order (= arrival
      order), at most ``rows_per_job`` of them per job (so one wide job cannot fill the window and hide the
      others). Ready tasks not shown count in ``global.queue_beyond_window``. With ``preemption=True`` and
      tasks waiting, up to ``preempt_rows`` preemption candidates (one row per fully placed running job, its
      first task, most attained GPU service first) come between the migration candidates and the ready tasks.
      Columns: task state/time features, task demands and DAG position, the job's urgency, deadline slack,
      iterations, accuracy and remaining run time (``FIXED_TASK_COLUMNS``: at the same index whatever the
      configuration), then the last ``loss_history`` loss reductions normalised as in MLFS Eq. (2):
      ``(l(I-j-1) - l(I-j)) / (l(0) - l(I))``, then the job's model one-hot (over ``model_names()``).
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

    **Destinations.** With ``n_servers <= K`` the K columns are all servers in index order (padding -1).
    Otherwise the K servers closest (Euclidean distance of the utilisation vector (gpu, cpu, mem, net)) to
    MLF-H's ideal virtual host, the element-wise minimum utilisation over underloaded servers (MLFS §3.3.2;
    all servers if none is underloaded), ordered by distance then index.

    **Action** ``Discrete(W*(K+1)+1)``: ``a = row*(K+1) + col``. ``col < K``: put the row's task on
    destination ``col`` (a waiting task: ``sim.place`` on the least-loaded GPU with room; a running task:
    ``sim.migrate``); ``col == K``: back to the queue (``sim.requeue`` for migration rows; ``sim.preempt`` of the whole job for
    preemption rows, which allow nothing else; not valid for waiting tasks); ``a = W*(K+1)``:
    end the round. ``action_masks()`` (bool) is True exactly where: the row is a real candidate and the column
    a real destination; the task fits by nominal demand (CPU, memory and, except for a PS, GPU memory on
    one GPU: ``sim.feasible_servers``); dependencies hold (only ready tasks are rows); for migrations the
    destination is not the task's own server and is not overloaded; ``col == K`` only for migration rows; end
    round always. An invalid action either raises :class:`InvalidAction` (``invalid_action="raise"``) or is a
    no-op with reward ``invalid_penalty`` and ``info["invalid_action"]`` = the reason ("penalty").

    **Reward** ``r = sum_i beta_i g_i`` (MLFS Eq. 7) from the change of the simulator's cumulative counters
    during the step (including the time advanced): ``g1 = -d(integral of jobs in system) / (n_jobs * time_scale)``,
    ``g2 = d(deadlines met) / n_jobs``, ``g3 = -d(cross-server MB) / (n_jobs * bytes_scale)``,
    ``g4 = d(accuracy requirements met) / n_jobs``, ``g5 = d(sum of accuracy by deadline) / n_jobs``.
    Over a terminated episode the sums are ``-mean_jct/time_scale``, ``deadline_ratio``,
    ``-bandwidth_mb/(n_jobs*bytes_scale)``, ``accuracy_ratio`` and ``mean_accuracy`` of ``sim.summary()``.
    ``info["objectives"]`` is the 5-vector (float64) of the step; the invalid-action penalty is not in it.
    With ``vector_reward=True`` the reward *is* that vector (float32, shape (5,), order ``OBJECTIVE_NAMES``),
    the env has ``reward_space`` Box(5,) and ``reward_dim`` 5 (MO-Gymnasium's convention, read from
    ``env.unwrapped``), and ``info["scalar_reward"]`` carries ``beta . g`` plus any invalid-action penalty.

    **Termination**: every job of the episode's window finished or was stopped. **Truncation**: the simulated
    time reached ``max_sim_time`` (the simulator's horizon) or ``max_steps`` agent steps were taken. The info of
    the final step (either way) carries ``sim.summary()`` as ``info["summary"]``. Stepping after the end returns
    the terminal observation again with reward 0.

    **Info** on reset and every step: ``action_mask`` (bool), ``objectives``, ``sim_time``, ``steps``,
    ``round_actions``; on reset also ``episode`` (window start, seeds, ``dropped_jobs``: ids of mapped jobs
    left out because their tasks together exceed the cluster). **Seeding**: only ``reset(seed=...)``;
    the window, mapping seed and simulator seed are drawn from ``self.np_random``.
    """

    metadata = {"render_modes": ["ansi", "rgb_array"], "render_fps": 4}

    def __init__(self, config: EnvConfig | dict | str | None = None, render_mode: str | None = None, *,
                 cluster_spec=None, job_specs: Sequence | Callable[[np.random.Generator], Sequence] | None = None,
                 models: Callable | None = None, model_names: Sequence[str] | None = None, **fields: Any):
        self.config = cfg = EnvConfig.build(config, **fields)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}")
        self.render_mode = render_mode
        from . import scenarios

        self._cluster = cluster_spec if cluster_spec is not None else scenarios.cluster_spec(cfg)
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
        self.n_actions = self.W * (self.K + 1) + 1
        self.end_round_action = self.n_actions - 1
        self.action_space = spaces.Discrete(self.n_actions)
        if cfg.vector_reward:  # only then: TorchRL and MO-Gymnasium read reward_space as "the reward is a vector"
            self.reward_space = spaces.Box(-np.inf, np.inf, (len(OBJECTIVE_NAMES),), np.float32)
            self.reward_dim = len(OBJECTIVE_NAMES)
        self.obs_builder = ObservationBuilder(self.W, self.K, self.G, self.model_names, cfg.loss_history, cfg.time_scale)
        self.observation_space = self.obs_builder.space(self.n_actions)
        self._beta = np.asarray(cfg.reward_weights, dtype=np.float64)
        sim_kw = {"record_series": False, **cfg.sim}  # the env does not need the per-decision series
        sim_kw["horizon_s"] = float(cfg.max_sim_time)
        self._sim_config = SimConfig(**sim_kw)
        self._mask = np.zeros(self.n_actions, bool)
        self._mask2 = self._mask[:-1].reshape(self.W, self.K + 1)
        self._history: deque = deque(maxlen=max(1, int(cfg.render_history)))
        self.sim: Simulator | None = None
        self.candidates: list = [None] * self.W
        self.candidate_kind: list = [None] * self.W
        self.destinations: list[int] = [-1] * self.K
        self._dest = np.full(self.K, -1, np.int64)
        self._done = True
        self._carry = None

    # ------------------------------------------------------------------ public helpers
    def encode(self, row: int, col: int) -> int:
        if not (0 <= row < self.W and 0 <= col <= self.K):
            raise ValueError(f"row must be in 0..{self.W - 1} and col in 0..{self.K}, got ({row}, {col})")
        return row * (self.K + 1) + col

    def decode(self, action: int) -> tuple[int, int] | None:
        a = int(action)
        if a == self.end_round_action:
            return None
        if not 0 <= a < self.end_round_action:
            raise ValueError(f"action {a} out of range 0..{self.n_actions - 1}")
        return divmod(a, self.K + 1)

    def action_for(self, tid: int, server: int | None) -> int | None:
        """The action putting task ``tid`` on ``server`` (None = back to the queue), or None if that task
        or server is not in the current window/destinations (validity is the mask's business)."""
        row = next((r for r, t in enumerate(self.candidates) if t is not None and t.tid == tid), None)
        if row is None:
            return None
        if server is None:
            return self.encode(row, self.K)
        try:
            col = self.destinations.index(int(server))
        except ValueError:
            return None
        return self.encode(row, col)

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
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
        sim_seed = int(rng.integers(2**62))
        ep["sim_seed"] = sim_seed
        ep["n_jobs"] = len(specs)
        self.episode = ep
        self._clock_offset = float(ep.get("clock_offset", 0.0))
        self.sim = Simulator(self._cluster, specs, self._sim_config, seed=sim_seed, models=self._models)
        self.obs_builder.reset(self.sim)
        tasks = self.sim.tasks
        self._S = self.sim.cluster.n_servers
        # per-step buffers of the compiled kernels (the observation copies what it needs)
        self._U = np.empty((self._S, 4))  # utilisation, clipped at 2
        self._dist_all = np.empty(self._S)  # distance of every server to the ideal host
        self._free = np.empty((3, self.K))  # (largest free GPU memory, free CPU, free memory) per destination
        self._gpu_scratch = np.empty(self.sim.cluster.n_gpus)
        self._ok_buf = np.empty((self.W, self.K + 1), bool)
        # (GPU memory, CPU, memory) demand per task for the fit mask; -inf GPU memory for a PS (takes no GPU)
        self._t_demand = np.array([(-np.inf if t.is_ps else t.t.gpu_memory_gb, t.t.cpu_cores, t.t.memory_gb)
                                   for t in tasks], dtype=np.float64).reshape(-1, 3)
        self._n_jobs = max(1, self.sim.n_jobs)
        self._steps = 0
        self._round_actions = 0
        self._touched: set[int] = set()
        self._round = 0  # decision rounds so far (keys the per-round cache of movable tasks)
        self._movable: list[tuple[int, int, list]] = [(-1, -1, [])] * self._S
        self._done = False
        self._terminated = self._truncated = False
        self._history.clear()
        self._counters0 = self._counters()
        self._advance(first=True)
        # objectives accrued before the first decision point (jobs waiting for the first tick) are paid out
        # with the first step, so an episode's rewards still sum exactly to its objective values
        self._carry = self._counters0
        obs = self._make_obs()
        info = self._info(np.zeros(5))
        info["episode"] = dict(ep)
        if self._done:
            info["summary"] = self.sim.summary()
        return obs, info

    def step(self, action):
        if self.sim is None:
            raise RuntimeError("call reset() before step()")
        a = int(action)
        if self._done:
            zero = np.zeros(len(OBJECTIVE_NAMES), np.float32) if self.config.vector_reward else 0.0
            return (self._make_obs(), zero, self._terminated, self._truncated,
                    {**self._info(np.zeros(5)), "summary": self.sim.summary()})
        self._steps += 1
        before = self._carry if self._carry is not None else self._counters()
        self._carry = None
        info_extra: dict[str, Any] = {}
        penalty = 0.0
        if not (0 <= a < self.n_actions) or not self._mask[a]:
            reason = self._why_invalid(a)
            if self.config.invalid_action == "raise":
                raise InvalidAction(reason)
            penalty = float(self.config.invalid_penalty)
            info_extra["invalid_action"] = reason
            obs = self._make_obs()  # the state did not change: the same observation, in new arrays
        else:
            if a == self.end_round_action:
                self._advance()
            else:
                self._apply(a)
            obs = self._make_obs()
        g = self._objectives(before)
        reward = float(self._beta @ g) + penalty
        if not self._done and self.config.max_steps is not None and self._steps >= self.config.max_steps:
            self._done = self._truncated = True
        info = self._info(g)
        info.update(info_extra)
        if self._done:
            info["summary"] = self.sim.summary()
        if self.config.vector_reward:
            info["scalar_reward"] = reward
            return obs, g.astype(np.float32), self._terminated, self._truncated, info
        return obs, reward, self._terminated, self._truncated, info

    # ------------------------------------------------------------------ internals
    def _counters(self) -> tuple[float, ...]:
        # Python floats: the same float64 arithmetic as numpy, without five tiny-array calls per step
        m = self.sim.metrics
        return (float(m.jobs_in_system_integral), float(m.deadlines_met), float(m.cross_mb), float(m.accuracy_met),
                float(m.accuracy_sum))

    def _objectives(self, before: tuple[float, ...]) -> np.ndarray:
        a0, a1, a2, a3, a4 = self._counters()
        b0, b1, b2, b3, b4 = before
        n, cfg = self._n_jobs, self.config
        return np.array((-(a0 - b0) / (n * cfg.time_scale), (a1 - b1) / n, -(a2 - b2) / (n * cfg.bytes_scale),
                         (a3 - b3) / n, (a4 - b4) / n))

    def objective_totals(self) -> np.ndarray:
        """Episode-to-date objective sums (what the per-step ``info["objectives"]`` add up to)."""
        return self._objectives(self._counters0)

    def _info(self, g: np.ndarray) -> dict:
        return {"action_mask": self._mask.copy(), "objectives": g, "sim_time": self.sim.now, "steps": self._steps,
                "round_actions": self._round_actions}

    def _apply(self, a: int) -> None:
        row, col = divmod(a, self.K + 1)
        task = self.candidates[row]
        sim = self.sim
        kind = self.candidate_kind[row]
        if kind == "place":
            sim.place(task.tid, int(self._dest[col]))
        elif kind == "preempt":
            sim.preempt(task.job.jid)
            self._touched.update(t.tid for t in task.job.tasks)
        elif col == self.K:
            sim.requeue(task.tid)
        else:
            sim.migrate(task.tid, int(self._dest[col]))
        self._touched.add(task.tid)
        self._round_actions += 1
        self._record()
        self._build()
        if not self._can_act:
            self._advance()

    def _advance(self, first: bool = False) -> None:
        """End the round (unless ``first``) and move to the next state with a real choice, or the end."""
        sim = self.sim
        while True:
            more = sim.next_decision()
            self._touched.clear()
            self._round += 1
            self._round_actions = 0
            if not more:
                self._done = True
                self._terminated = all(j.state in (JobState.FINISHED, JobState.STOPPED) for j in sim.jobs)
                self._truncated = not self._terminated
                self._build(empty=True)
                return
            self._record()
            self._build()
            if self._can_act:
                return

    def _build(self, empty: bool = False) -> None:
        """Choose the destinations and the window rows, and fill the action mask (vectorised)."""
        sim, W, K = self.sim, self.W, self.K
        c = sim.cluster
        over = c.overloaded
        # utilisation (clipped at 2: network/CPU use can exceed capacity), distances to MLF-H's ideal host,
        # destinations and their free resources in one compiled call (envs/kernels.py: numpy's arithmetic)
        k, self._ocd = kernels.destinations(
            c.gpu_load, c.server_first_gpu, c.server_n_gpus, c.cpu_use, c.cpu_cap, c.mem_use, c.mem_cap,
            c.net_mbps, c.net_cap_mbps, over, sim.n_overloaded, c.server_max_free_gpu_mem, c.cpu_alloc,
            c.mem_alloc, self._gpu_scratch, self._U, self._dist_all, self._dest, self._free)
        dest = self._dest  # written by the kernel: servers 0..S-1 then -1 padding, or the nearest K
        self.destinations = dest.tolist()
        self._k = k
        mask, m2 = self._mask, self._mask2
        mask.fill(False)
        mask[-1] = True
        cands: list = [None] * W
        kinds: list = [None] * W
        r = 0
        n_place = 0
        if not empty:
            touched = self._touched
            rows: list = []
            n_pre = 0
            mig_cap = W if self.config.migrate_rows is None else min(W, self.config.migrate_rows)
            if sim.n_overloaded and mig_cap:
                version, movable, rnd = c.server_version, self._movable, self._round
                for s in over.nonzero()[0].tolist():
                    # the server's tasks not yet moved in this round, by task id. Cached per (server's task-set
                    # version, round): a task joins `touched` only by a command that attaches it to or detaches
                    # it from a server, which bumps that server's version
                    hit = movable[s]
                    if hit[0] != version[s] or hit[1] != rnd:
                        hit = movable[s] = (version[s], rnd, [t for t in c.tasks_by_id(s) if t.tid not in touched])
                    rows.extend(hit[2][:mig_cap - len(rows)])
                    if len(rows) == mig_cap:
                        break
            n_over = len(rows)
            if self.config.preemption and sim.queue and len(rows) < W:
                # one row per running job (its first task), most attained GPU service first (the natural
                # victims of least-attained-service policies), then job id; col K preempts the whole job
                cap = min(W - len(rows), self.config.preempt_rows or W)
                seen = {t.job.jid for t in rows}
                for job in sorted(sim.active_jobs.values(), key=_attained):
                    if job.jid in seen or not job.fully_placed or any(t.tid in touched for t in job.tasks):
                        continue
                    rows.append(job.tasks[0])
                    n_pre += 1
                    if n_pre >= cap:
                        break
            n_mig = len(rows)
            if n_mig < W and sim.queue:
                rows.extend([t for t in sim.queue.values() if t.is_ready()])
            if rows:
                n = len(rows)
                ok = self._ok_buf
                if ok.shape[0] < n:  # grows with the ready queue; (n, K + 1): column k flags "fits somewhere"
                    ok = self._ok_buf = np.empty((2 * n, K + 1), bool)
                tids = np.array([t.tid for t in rows], np.int64)
                n_fit = kernels.fit_mask(tids, self._t_demand, self._free, k, _EPS, n_mig, n_over, sim.task_server,
                                         over, dest, m2, ok)
                if n_mig:
                    cands[:n_mig] = rows[:n_mig]
                    kinds[:n_mig] = ["migrate"] * n_over + ["preempt"] * (n_mig - n_over)
                r = n_mig
                if n_fit:
                    sel = ok[n_mig:n, k].nonzero()[0].tolist()
                    cap = self.config.rows_per_job
                    room = W - n_mig
                    if cap:  # at most `cap` rows per job, so one wide gang cannot fill the window
                        per_job: dict[int, int] = {}
                        keep = []
                        for i in sel:
                            jid = rows[n_mig + i].job.jid
                            n_j = per_job.get(jid, 0)
                            if n_j < cap:
                                per_job[jid] = n_j + 1
                                keep.append(i)
                                if len(keep) == room:
                                    break
                        sel = keep
                    del sel[room:]
                    n_place = len(sel)
                    if n_place:
                        m2[r:r + n_place, :k] = ok[n_mig:n, :k].take(sel, axis=0)
                        for i in sel:
                            cands[r] = rows[n_mig + i]
                            kinds[r] = "place"
                            r += 1
        self.candidates, self.candidate_kind = cands, kinds
        self._can_act = r > 0  # == mask[:-1].any(): every row filled above allows at least one action
        self._queue_beyond = len(sim.queue) - n_place

    def _make_obs(self) -> dict:
        # the builder returns new arrays and the env keeps no reference to them: they are the caller's (a state
        # that must be shown again, after an invalid action or the end, is simply rebuilt)
        return self.obs_builder.build(self.sim, self.candidates, self.candidate_kind, self._dest, self._k,
                                      self._dist_all, self._U, self._ocd, self._mask, self._queue_beyond,
                                      self._round_actions, self._clock_offset, self._free)

    def _why_invalid(self, a: int) -> str:
        if not 0 <= a < self.n_actions:
            return f"action {a} out of range 0..{self.n_actions - 1}"
        row, col = divmod(a, self.K + 1)
        head = f"action {a} (row {row}, col {col})"
        task = self.candidates[row]
        if task is None:
            return f"{head}: row {row} is padding (only {sum(t is not None for t in self.candidates)} candidate rows)"
        kind = self.candidate_kind[row]
        head += f", task {task.tid} of job {task.job.jid} ({kind})"
        if col == self.K:
            return f"{head}: 'back to the queue' is only for migration candidates (running tasks)"
        server = int(self._dest[col])
        if server < 0:
            return f"{head}: destination column {col} is padding"
        if kind == "migrate":
            if server == task.server:
                return f"{head}: server {server} is the task's own server"
            if self.sim.cluster.overloaded[server]:
                return f"{head}: destination server {server} is overloaded"
        reason = self.sim.fit_reason(task, server, moving=(kind == "migrate"))
        return f"{head}: {reason or 'not allowed by the mask'}"

    # ------------------------------------------------------------------ rendering
    def _record(self) -> None:
        if self.render_mode != "rgb_array":
            return
        c = self.sim.cluster
        occ = np.array([g[0].job.jid if g else -1 for g in c.gpu_tasks], dtype=np.int64)
        self._history.append((self.sim.now, occ, c.overloaded.copy()))

    def render(self):
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode")
            return None
        from .render import render_ansi, render_rgb

        if self.sim is None:
            raise RuntimeError("call reset() before render()")
        if self.render_mode == "ansi":
            return render_ansi(self)
        return render_rgb(self)


def _attained(j) -> tuple[float, int]:
    return (-j.running_time * j.spec.n_gpus, j.jid)
