"""Observation layout and builder for :class:`clustergym.gym_env.ClusterEnv` (MLFS §3.4 state).

All arrays are float32 with fixed shapes. Unbounded non-negative quantities are squashed with
``sq(x) = x / (1 + x)`` (0 -> 0, 1 -> 0.5, inf -> 1); signed ones with ``ssq(x) = x / (1 + |x|)``.
Times are first divided by ``time_scale`` (default 3600 s, so ``sq(t)`` = 0.5 at one hour).
The column names below (``TASK_COLUMNS`` etc.) are the documentation; docs/env.md repeats them with scales.
"""
from __future__ import annotations

import math

import numpy as np
from gymnasium import spaces

from . import kernels
from .core.accumulation import compute_factor
from .core.job import JOB_ACTIVE
from .core.state import GPU_TYPE_ORDER
from .core.workload import STOP_OPTIONS

# ---------------------------------------------------------------- task rows (W x F_task)
TASK_STATIC = ("is_ps", "gpu_mem_demand", "gpu_util_demand", "cpu_demand", "mem_demand", "partition_share",
               "dag_children", "dag_depth", "state_size")
TASK_DYNAMIC = ("present", "is_running", "task_waiting_time", "task_running_time", "on_overloaded_server",
                "job_row")
_OPT = tuple(o.replace("-", "_") for o in STOP_OPTIONS)  # run_all, opt_stop, requirement
# the job's stopping rules (MLFS §3.5): whether the system may change it, the user's own option (one-hot) and
# each option's target as a fraction of max_iterations; the current option is a dynamic one-hot. ``slo_class``:
# UniSched's latency class, how strictly the job's deadline binds (:data:`SLO_CLASS_FEATURE`)
JOB_STATIC_TAIL = ("urgency", "max_iterations", "batch_size", "data_size", "n_tasks", "sync_ps",
                   "accuracy_requirement", "job_index", "stop_changeable") + tuple(
    f"own_stop_{o}" for o in _OPT) + tuple(f"target_{o}" for o in _OPT) + ("slo_class",)
# best-effort jobs have no deadline that counts, a soft-SLO job's value falls in steps after it, a strict one's to 0
SLO_CLASS_FEATURE: dict[str, float] = {"best-effort": 0.0, "soft": 0.5, "strict": 1.0}
JOB_DYNAMIC_HEAD = ("age", "deadline_slack", "progress", "finished_iterations", "target_progress",
                    "placed_share", "accuracy", "job_waiting_time", "job_running_time", "remaining_time") + tuple(
    f"stop_{o}" for o in _OPT)

SERVER_COLUMNS = ("present", "util_gpu", "util_cpu", "util_mem", "util_net", "free_gpu_mem", "free_cpu",
                  "free_mem", "n_gpus", "idle_gpus", "overloaded", "nic", "ideal_distance") + tuple(
    f"gpu_type_{t}" for t in GPU_TYPE_ORDER)
GLOBAL_COLUMNS = ("time_of_day_sin", "time_of_day_cos", "queue_beyond_window", "queue_tasks", "active_jobs",
                  "ended_jobs", "pending_jobs", "cluster_overload_degree", "overloaded_servers",
                  "migration_rows", "sim_time", "round_actions")


def sq(x: float) -> float:
    return x / (1.0 + x) if x > 0 else 0.0


# Columns whose position never depends on the configuration come first: a policy can read them by fixed
# index whatever the model catalogue or ``loss_history`` (the pairwise policy's row features do).
FIXED_TASK_COLUMNS = TASK_DYNAMIC + TASK_STATIC + JOB_STATIC_TAIL + JOB_DYNAMIC_HEAD


def task_columns(model_names: list[str], loss_history: int) -> tuple[str, ...]:
    return (FIXED_TASK_COLUMNS + tuple(f"loss_reduction_{i}" for i in range(loss_history))
            + tuple(f"model_{m}" for m in model_names))


class ObservationBuilder:
    """Builds the observation arrays from the simulator; ``build`` returns new arrays on every call."""

    def __init__(self, W: int, K: int, G: int, model_names: list[str], loss_history: int, time_scale: float):
        self.W, self.K, self.G, self.H = W, K, G, loss_history
        self.model_names = list(model_names)
        self.model_index = {m: i for i, m in enumerate(self.model_names)}
        self.ts = float(time_scale)
        self.task_cols = task_columns(self.model_names, loss_history)
        self.n_dyn = len(TASK_DYNAMIC)
        self.n_tstat = len(TASK_STATIC)
        self.n_jstat = len(JOB_STATIC_TAIL)
        self.n_jdyn = len(JOB_DYNAMIC_HEAD) + loss_history
        self.F = len(self.task_cols)
        self._o_tstat = self.n_dyn
        self._o_jstat = self._o_tstat + self.n_tstat
        self._o_jdyn = self._o_jstat + self.n_jstat
        self._o_model = self._o_jdyn + self.n_jdyn
        self._curves: dict[tuple[str, float], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}

    def space(self, n_actions: int) -> spaces.Dict:
        W, K, G = self.W, self.K, self.G
        return spaces.Dict({
            "tasks": spaces.Box(-1.0, 1.0, (W, self.F), np.float32),
            "servers": spaces.Box(-1.0, 2.0, (K, len(SERVER_COLUMNS)), np.float32),
            "gpu_loads": spaces.Box(-1.0, 4.0, (K, G), np.float32),
            "global": spaces.Box(-1.0, 1.0, (len(GLOBAL_COLUMNS),), np.float32),
            "affinity": spaces.Box(0.0, 1.0, (W, K), np.float32),
            "action_mask": spaces.MultiBinary(n_actions),
        })

    # ------------------------------------------------------------------ per-episode setup
    def reset(self, sim) -> None:
        """Precompute cluster-wide normalisers and clear caches (called once per episode)."""
        c = sim.cluster
        self.cluster = c
        self._job_consts: dict = {}  # Job -> (submit, deadline, max iterations, mean iteration time, curves)
        # the dynamic job columns of every job, one row each, valid while the job's key is the one recorded
        # (see _refresh_job_row); kernels.task_window copies them into the window's rows
        self._job_index = {job: i for i, job in enumerate(sim.jobs)}
        self._job_rows = np.zeros((max(1, len(sim.jobs)), self.n_jdyn), np.float32)
        self._job_keys: list = [None] * len(sim.jobs)
        # every task's DAG neighbours (parents, then children; for a worker its PS is a parent) by task id, as
        # CSR arrays for the affinity kernel: neighbours of task t are nb_tid[nb_ptr[t]:nb_ptr[t + 1]]
        ptr, nb = [0], []
        for task in sim.tasks:
            jt = task.job.tasks
            nb.extend(jt[i].tid for i in task.t.parents + task.t.children)
            ptr.append(len(nb))
        self._nb_ptr = np.array(ptr, np.int64)
        self._nb_tid = np.array(nb, np.int64)
        self.max_gmem = float(c.gpu_mem_cap.max())
        self.max_cpu = float(c.cpu_cap.max())
        self.max_mem = float(c.mem_cap.max())
        self.n_jobs = max(1, sim.n_jobs)
        S = c.n_servers
        self.type_onehot = np.zeros((S, len(GPU_TYPE_ORDER)), np.float32)
        self.type_onehot[np.arange(S), c.server_type_id] = 1.0
        self.n_gpus_f = (c.server_n_gpus / self.G).astype(np.float32)
        self.nic_f = np.minimum(c.nic_gbps / 100.0, 2.0).astype(np.float32)
        self._S = S
        # one row per task (by task id) with its static columns (task, job, model one-hot) filled once per
        # episode: kernels.task_window copies a candidate's row and writes its dynamic columns in
        rows = np.zeros((len(sim.tasks), self.F), np.float32)
        static_of_job: dict[int, tuple[np.ndarray, int | None]] = {}  # jid -> (static columns, model column)
        for k, task in enumerate(sim.tasks):
            job = task.job
            jr = static_of_job.get(job.jid)
            if jr is None:
                jr = static_of_job[job.jid] = (self._jstat(job), self.model_index.get(job.spec.model))
            rows[k, self._o_tstat:self._o_jstat] = self._tstat(task)
            rows[k, self._o_jstat:self._o_jdyn] = jr[0]
            if jr[1] is not None:
                rows[k, self._o_model + jr[1]] = 1.0
        self._static_rows = rows
        self._gpu_template = np.full((self.K, self.G), -1.0, np.float32)
        self._gmax = np.array([self.max_gmem, self.max_cpu, self.max_mem])  # normalisers of `free`

    # ------------------------------------------------------------------ caches
    def refresh_tasks(self, job) -> None:
        """After a sub-batch change of ``job``: its tasks' static columns again (their GPU memory differs) and its
        dynamic row at the next build (its iteration time differs)."""
        for task in job.tasks:
            self._static_rows[task.tid, self._o_tstat:self._o_jstat] = self._tstat(task)
        self._job_consts.pop(job, None)
        self._job_keys[self._job_index[job]] = None

    def _tstat(self, task) -> np.ndarray:
        """The task's static columns (computed once per episode into the static rows)."""
        t = task.t
        return np.array([
            1.0 if task.is_ps else 0.0,
            t.gpu_memory_gb / self.max_gmem,
            min(1.0, t.gpu_util),
            min(1.0, t.cpu_cores / self.max_cpu),
            min(1.0, t.memory_gb / self.max_mem),
            t.share,
            min(1.0, len(t.children) / 8.0),
            min(1.0, t.depth / 8.0),
            sq(t.state_mb / 1000.0),
        ], np.float32)

    def _jstat(self, job) -> np.ndarray:
        """The job's static columns (computed once per episode into the static rows)."""
        s, m = job.spec, job.model
        return np.array((
            s.urgency / 10.0,
            min(1.0, math.log1p(s.max_iterations) / math.log1p(1e7)),
            min(1.0, math.log2(max(1, m.batch_size)) / 12.0),
            min(1.0, s.data_size_mb / 1000.0),
            min(1.0, job.n_tasks / 64.0),
            1.0 if s.sync == "ps" else 0.0,
            s.accuracy_requirement,
            self._job_index[job] / self.n_jobs,  # the job's position in the episode (arrival order)
            1.0 if s.stop_changeable else 0.0,
            *(1.0 if o == s.stop_option else 0.0 for o in STOP_OPTIONS),
            *(job.target_for(o) / s.max_iterations for o in STOP_OPTIONS),
            SLO_CLASS_FEATURE[s.slo_class],
        ), np.float32)

    def _curve(self, job) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The job's learning curve as float64 arrays (x, loss, accuracy), converted once per model and pace."""
        key = (job.model.name, job.spec.curve_pace)
        cv = self._curves.get(key)
        if cv is None:
            c = job.curve
            cv = self._curves[key] = (np.array(c.x, np.float64), np.array(c.loss, np.float64),
                                                 np.array(c.accuracy, np.float64))
        return cv

    def _refresh_job_row(self, job, row: int, key: tuple, now: float) -> None:
        """Compute the job's dynamic columns (JOB_DYNAMIC_HEAD and the loss reductions) into row ``row``
        (:func:`clustergym.kernels.job_dynamic`)."""
        per_job = self._job_consts.get(job)
        if per_job is None:  # the job's curves and mean iteration time, looked up once per episode
            cx, closs, cacc = self._curve(job)
            s = job.spec
            # a job training with sub-batches runs each iteration compute_factor times as long (accumulation)
            mean_it = self.cluster.mean_iter_time(job.model) * compute_factor(job.model, job.accum_steps)
            per_job = self._job_consts[job] = (float(s.submit_time), float(s.deadline), float(s.max_iterations),
                                               mean_it, cx, closs, cacc)
        submit, deadline, maxit, mean_it, cx, closs, cacc = per_job
        # progress not yet materialised (a fully placed active job running since its last update) is
        # extrapolated to now: the kernel does it when given a positive rate
        n_tasks = len(job.tasks)
        rate = job.rate if job.n_placed == n_tasks and job.state == JOB_ACTIVE else 0.0
        kernels.job_dynamic(self._job_rows, row, now, self.ts, submit, deadline, maxit, job.iters, rate,
                            job.last_update, job.paused_until, job.target_iters, job.n_placed, n_tasks,
                            job.waiting_time, job.running_time, mean_it, STOP_OPTIONS.index(job.stop_option),
                            cx, closs, cacc, self.H)
        self._job_keys[row] = key

    def _task_rows(self, sim, candidates, kinds, rows, dest: np.ndarray, k: int) -> tuple:
        """The ``tasks`` and ``affinity`` arrays of the candidate ``rows``, and how many of them run (migration
        candidates and running-job rows)."""
        now, ts, W = sim.now, self.ts, self.W
        over = sim.cluster.overloaded
        n_mig = 0
        # per row: window row, task id, job row, then the TASK_DYNAMIC values -- one list, one conversion
        vals: list = []
        job_index, job_keys = self._job_index, self._job_keys
        prev_job = None  # a job's tasks often fill consecutive rows
        j = 0
        for r in rows:
            task = candidates[r]
            job = task.job
            if job is not prev_job:
                prev_job = job
                j = job_index[job]
                # everything the job's dynamic columns depend on besides its spec: a placement, pause, progress
                # update or stopping-rule change inside a decision round (same `now`) must not serve a stale row
                key = (now, job.n_placed, job.iters, job.last_update, job.paused_until, job.state, job.stop_option)
                if job_keys[j] != key:
                    self._refresh_job_row(job, j, key, now)
            # sq() inlined (x / (1 + x), 0 for x <= 0): a handful of calls per row add up
            kind = kinds[r]
            if kind != "place":  # running: a migration candidate or a running-job row
                n_mig += 1
                w = task.waited / ts
                x = (now - task.placed_at) / ts
                vals += (r, task.tid, j, 1.0, 1.0, w / (1.0 + w) if w > 0 else 0.0,
                         x / (1.0 + x) if x > 0 else 0.0, 1.0 if over[task.server] else 0.0,
                         1.0 if kind == "running" else 0.0)
            else:
                w = (task.waited + now - task.queued_since) / ts
                vals += (r, task.tid, j, 1.0, 0.0, w / (1.0 + w) if w > 0 else 0.0, 0.0, 0.0, 0.0)
        # affinity (W, K): share of the row task's DAG neighbours (parents, children, its PS) running on each
        # destination -- the pair feature behind MLF-H's bandwidth term and MLFS's bandwidth objective
        T, A = kernels.task_window(self._static_rows, self._job_rows, np.array(vals, np.float64), W, self.n_dyn,
                                   self._o_jdyn, self._nb_ptr, self._nb_tid, sim.task_server, dest, k, self._S)
        return T, A, n_mig

    # ------------------------------------------------------------------ build
    def build(self, sim, candidates, kinds, dest: np.ndarray, k: int, dist: np.ndarray, U: np.ndarray,
              overload_degree: float, mask: np.ndarray, queue_beyond: int, round_actions: int,
              clock_offset: float, free: np.ndarray) -> dict:
        """The observation of the current state, as new arrays the caller owns (nothing is shared with the
        builder). From the env's step: the destination servers ``dest`` (the first ``k`` real), every server's
        clipped utilisation ``U`` (S, 4) and distance to the ideal host ``dist`` (S,), the cluster overload
        degree of ``U``, and ``free`` (3, >= k): largest free GPU memory, free CPU cores and free memory of
        the destinations (see :func:`clustergym.kernels.destinations`)."""
        now = sim.now
        ts = self.ts
        c = sim.cluster
        W = self.W
        over = c.overloaded
        # the candidate rows (the env fills rows 0..n-1 and pads after them: a range then)
        n = W - candidates.count(None)
        rows = range(n) if None not in candidates[:n] else [r for r, t in enumerate(candidates) if t is not None]
        if n:
            T, A, n_mig = self._task_rows(sim, candidates, kinds, rows, dest, k)
        else:
            T = np.zeros((W, self.F), np.float32)
            A = np.zeros((W, self.K), np.float32)
            n_mig = 0

        # servers and per-GPU loads of the destination columns (padding rows: zeros and -1)
        Sv = np.zeros((self.K, len(SERVER_COLUMNS)), np.float32)
        G = self._gpu_template.copy()
        kernels.server_features(dest, k, U, free, self._gmax, c.server_idle_gpus, c.overloaded, dist,
                                self.n_gpus_f, self.nic_f, self.type_onehot, c.gpu_load, c.server_first_gpu,
                                c.server_n_gpus, Sv, G)

        # global
        tod = 2.0 * math.pi * ((clock_offset + now) % 86400.0) / 86400.0
        nj = self.n_jobs
        ended = sim.metrics.jobs_ended
        active = len(sim.active_jobs)
        gl = np.array((math.sin(tod), math.cos(tod), sq(queue_beyond / W), sq(len(sim.queue) / W),
                       active / nj, ended / nj, (nj - ended - active) / nj, min(1.0, overload_degree),
                       sim.n_overloaded / len(over), n_mig / W, sq(now / (24.0 * ts)), sq(round_actions / W)),
                      np.float32)
        return {"tasks": T, "servers": Sv, "gpu_loads": G, "global": gl, "affinity": A,
                "action_mask": mask.astype(np.int8)}
