"""The discrete-event simulator: a GPU cluster running DAG-structured training jobs.

Drive it directly (no Gymnasium needed)::

    sim = Simulator(cluster_preset("mlfs-80"), specs, SimConfig(), seed=0)
    while sim.next_decision():          # advances time to the next point where a decision is possible
        for task in sim.ready_tasks():
            server = ...                 # your policy
            sim.place(task.tid, server)
    print(sim.summary())

Time advances only through events (arrivals, completions, deadline crossings, resource-use changes,
checkpoint/restore ends, gang timeouts and scheduling ticks); idle time is skipped, never stepped through.
Job progress is rate-based between events, so a job costs a handful of events whatever its iteration count.

Contention model (README, "Overload and contention"): admission checks *nominal* demands (GPU memory,
CPU cores, host memory must fit; GPU memory is never over-committed). Actual usage varies around the
demand (a per-job factor resampled at exponential intervals). A server is overloaded when any resource's
actual utilisation (CPU, memory, NIC) exceeds ``h_r``, or any of its GPUs shared by several jobs has a
summed utilisation above ``h_r`` (one job alone keeps a GPU busy, it does not overload it). Tasks slow down in
proportion to over-commitment: a GPU shared by several jobs whose summed utilisation ``u`` exceeds 1 runs
each of them at ``1/u``; a server whose CPU or memory use exceeds capacity slows all its tasks by the
largest ratio. Network over-commitment is reported (and counts as overload) but does not slow transfers.
"""
from __future__ import annotations

from heapq import heappop, heappush
import math
from typing import Callable, Iterable, Protocol

import numpy as np

from .catalogue import ModelProfile
from .config import SimConfig, SimConfigError  # noqa: F401  (re-exported: part of the engine API)
from .dag import critical_time, job_graph, plan_placement
from .hardware import ClusterSpec
from .job import JOB_ACTIVE, TASK_RUNNING, TASK_WAITING, Job, JobState, Task, TaskState, make_job
from .metrics import Metrics
from .state import ClusterState
from .workload import STOP_OPTIONS, JobSpec

# event kinds, in tie-break order at equal times: state changes before the tick that reacts to them
EV_COMPLETE, EV_RESUME, EV_USAGE, EV_DEADLINE, EV_GANG, EV_ARRIVAL, EV_TICK = range(7)


class InvalidCommand(ValueError):
    """A scheduler command the simulator refuses; the message says exactly why."""


class Controller(Protocol):
    """Pluggable logic run at every scheduling tick, after the policy's decision round (e.g. MLF-C)."""

    def on_tick(self, sim: "Simulator") -> None: ...


def cluster_totals(cluster: ClusterSpec) -> tuple[float, float, float]:
    """(CPU cores, GB host memory, GB GPU memory) of the whole cluster."""
    return (sum(s.cpu_cores for s in cluster.servers), sum(s.memory_gb for s in cluster.servers),
            sum(s.n_gpus * s.gpu_memory_gb for s in cluster.servers))


def gang_shortfall(tasks: list, cluster: ClusterSpec, totals: tuple[float, float, float] | None = None) -> str | None:
    """Why a job with these task templates can never run on ``cluster``, or None. A job runs only with
    every task holding its slot at once, so its summed CPU cores, host memory and GPU memory must fit the
    cluster's totals (the GPU count is not checked: tasks may share GPUs). ``totals``: cluster_totals(cluster),
    when already computed."""
    have = totals or cluster_totals(cluster)
    want = (sum(t.cpu_cores for t in tasks), sum(t.memory_gb for t in tasks),
            sum(t.gpu_memory_gb for t in tasks if t.kind != "ps"))
    for what, w, h in zip(("CPU cores", "GB host memory", "GB GPU memory"), want, have):
        if w > h + 1e-9:
            return f"its {len(tasks)} tasks need {w:.1f} {what} at once; cluster {cluster.name!r} has {h:.1f}"
    return None


class Simulator:
    """Event-driven GPU-cluster simulator. See the module docstring for the model."""

    def __init__(self, cluster: ClusterSpec, jobs: Iterable[JobSpec], config: SimConfig | None = None, seed: int = 0,
                 models: Callable[[str], ModelProfile] | None = None, controllers: Iterable[Controller] = ()):
        if models is None:
            from .catalogue_data import get_model as models  # noqa: N813
        self.config = config or SimConfig()
        self.cluster = ClusterState(cluster)
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.controllers: list[Controller] = list(controllers)
        self.jobs: list[Job] = []
        self.tasks: list[Task] = []
        self.job_by_id: dict[int, Job] = {}
        self._fit_cache: dict | None = None
        self._cluster_totals = cluster_totals(cluster)  # for the whole-gang check of every job
        specs = sorted(jobs, key=lambda s: (s.submit_time, s.job_id))
        for spec in specs:
            if spec.job_id in self.job_by_id:
                raise ValueError(f"duplicate job_id {spec.job_id}")
            job = make_job(spec, models(spec.model), len(self.tasks))
            self._check_fits_somewhere(job)
            self.jobs.append(job)
            self.job_by_id[spec.job_id] = job
            self.tasks.extend(job.tasks)
        self.queue: dict[int, Task] = {}  # waiting tasks by tid, in queue-entry order
        self.active_jobs: dict[int, Job] = {}
        # the server of every running task by task id, -1 for the others (kept by _attach/_detach: a task runs
        # exactly while attached), so the env's compiled affinity kernel reads placements without the objects
        self.task_server = np.full(len(self.tasks), -1, dtype=np.int64)
        self.metrics = Metrics(self.cluster.n_servers)
        # overload tests of _refresh_servers as Python scalars (h_r x capacity, same products as before), and
        # a count per server of its GPUs shared by several jobs above h_r, kept as GPU loads change
        c, h = self.cluster, self.config.overload_threshold
        self._cpu_cap = c.cpu_cap.tolist()
        self._mem_cap = c.mem_cap.tolist()
        self._cpu_limit = (h * c.cpu_cap).tolist()
        self._mem_limit = (h * c.mem_cap).tolist()
        self._net_limit = (h * c.nic_gbps * 125.0).tolist()
        self._gpu_server = c.gpu_server.tolist()
        # Python copies of the ClusterState arrays the engine reads one element at a time (numpy element reads
        # cost several times more); every write goes to both, the arrays stay what observers read
        self._cpu_alloc = c.cpu_alloc.tolist()
        self._mem_alloc = c.mem_alloc.tolist()
        self._gpu_mem_used = c.gpu_mem_used.tolist()
        self._max_free_gpu_mem = c.server_max_free_gpu_mem.tolist()
        self._gpu_load = c.gpu_load.tolist()
        self._cpu_use = c.cpu_use.tolist()
        self._mem_use = c.mem_use.tolist()
        self._net = c.net_mbps.tolist()
        self._over = c.overloaded.tolist()
        # per-server bandwidths for plan_placement and migrations, as Python floats (the same values; arithmetic
        # on them is the same IEEE arithmetic as on numpy scalars, several times cheaper)
        self._intra = c.intra_gbps.tolist()
        self._nic = c.nic_gbps.tolist()
        self._gpu_hot = [False] * c.n_gpus
        # per GPU: ((job, highest GPU utilisation of its tasks there), ...) in the order the jobs first appear
        # in gpu_tasks; None = rebuild (after a task is attached to or detached from the GPU)
        self._gpu_jobs: list[tuple | None] = [()] * c.n_gpus
        self._server_hot_gpus = [0] * c.n_servers
        self._events: list = []
        self._seq = 0
        self._dirty: dict[Job, None] = {}  # insertion-ordered: deterministic across processes
        self._tick_at = math.inf  # earliest pending tick
        self._last_tick = -math.inf  # time of the last tick processed
        self._n_overloaded = 0  # servers currently overloaded
        self._overload_offered: tuple = ()  # overloaded servers at the last overload-driven decision point
        self._overload_offered_at = -math.inf
        self._usage_pending: set[Job] = set()  # jobs with a resource-use change scheduled
        self._gang_token: dict[int, int] = {}
        self._done = False
        self.decision_count = 0
        self.events_processed = 0
        for job in self.jobs:
            self._push(job.spec.submit_time, EV_ARRIVAL, job)
            self._push(job.spec.deadline, EV_DEADLINE, job)

    # ------------------------------------------------------------------ queries
    @property
    def n_jobs(self) -> int:
        return len(self.jobs)

    def task(self, tid: int) -> Task:
        if not 0 <= tid < len(self.tasks):
            raise InvalidCommand(f"unknown task id {tid} (valid: 0..{len(self.tasks) - 1})")
        return self.tasks[tid]

    def job(self, jid: int) -> Job:
        try:
            return self.job_by_id[jid]
        except KeyError:
            raise InvalidCommand(f"unknown job id {jid}") from None

    def waiting_tasks(self) -> list[Task]:
        return list(self.queue.values())

    def ready_tasks(self) -> list[Task]:
        """Waiting tasks whose DAG parents all hold slots, in queue order."""
        return [t for t in self.queue.values() if t.is_ready()]

    def running_tasks(self, server: int | None = None) -> list[Task]:
        if server is None:
            return [t for j in self.active_jobs.values() for t in j.tasks if t.state == TASK_RUNNING]
        return list(self.cluster.tasks_by_id(server))

    @property
    def n_overloaded(self) -> int:
        """Number of overloaded servers (kept with the flags: == count_nonzero(cluster.overloaded))."""
        return self._n_overloaded

    def overloaded_servers(self) -> list[int]:
        if not self._n_overloaded:  # the common case, asked at every tick
            return []
        return [s for s, over in enumerate(self._over) if over]

    def is_done(self) -> bool:
        return self._done

    def fit_reason(self, task: Task, server: int, gpu: int | None = None, moving: bool = False) -> str | None:
        """Why ``task`` cannot be put on ``server`` (and ``gpu``), or None if it can."""
        return self._fit(task, server, gpu, moving)[0]

    def _fit(self, task: Task, server: int, gpu: int | None, moving: bool) -> tuple[str | None, int]:
        """(fit_reason, the GPU the task would get: -1 for a PS, ``gpu`` if given, else best_gpu), so a command
        looks for the best GPU once."""
        c = self.cluster
        if not 0 <= server < c.n_servers:
            return f"unknown server {server} (valid: 0..{c.n_servers - 1})", -1
        t = task.t
        cpu_free = self._cpu_cap[server] - self._cpu_alloc[server]
        mem_free = self._mem_cap[server] - self._mem_alloc[server]
        if moving and task.server == server:
            cpu_free += t.cpu_cores
            mem_free += t.memory_gb
        if t.cpu_cores > cpu_free + 1e-9:
            return f"server {server} has {cpu_free:.2f} free CPU cores, task {task.tid} needs {t.cpu_cores:.2f}", -1
        if t.memory_gb > mem_free + 1e-9:
            return f"server {server} has {mem_free:.2f} GB free memory, task {task.tid} needs {t.memory_gb:.2f}", -1
        if task.is_ps:
            if gpu is not None and gpu >= 0:
                return f"task {task.tid} is a parameter server and takes no GPU", -1
            return None, -1
        if gpu is None:
            g = self.best_gpu(task, server, moving)
            return (None, g) if g >= 0 else (
                f"no GPU on server {server} has {t.gpu_memory_gb:.2f} GB free for task {task.tid}", -1)
        if not (0 <= gpu < c.n_gpus and c.gpu_server[gpu] == server):
            return f"GPU {gpu} is not on server {server}", -1
        free = c.gpu_mem_cap[gpu] - c.gpu_mem_used[gpu] + (t.gpu_memory_gb if moving and task.gpu == gpu else 0.0)
        if t.gpu_memory_gb > free + 1e-9:
            return f"GPU {gpu} has {free:.2f} GB free, task {task.tid} needs {t.gpu_memory_gb:.2f}", -1
        return None, gpu

    def best_gpu(self, task: Task, server: int, moving: bool = False) -> int:
        """MLFS §3.3.2: the least-loaded GPU of the server that has room (ties: lowest index); -1 if none."""
        c = self.cluster
        need = task.t.gpu_memory_gb
        if self._max_free_gpu_mem[server] + (need if moving and task.server == server else 0.0) < need - 1e-9:
            return -1
        best, best_load = -1, math.inf
        r = c.server_gpus(server)
        a, b = r.start, r.stop
        used, loads = self._gpu_mem_used[a:b], self._gpu_load[a:b]
        own = task.gpu if moving else -1
        for i, cap in enumerate(c.gpu_mem_cap_list[a:b]):
            g = a + i
            free = cap - used[i] + (need if own == g else 0.0)
            if free + 1e-9 >= need:
                load = loads[i] - (self._task_gpu_use(task) if own == g else 0.0)
                if load < best_load - 1e-12:
                    best, best_load = g, load
        return best

    def feasible_servers(self, task: Task, moving: bool = False) -> np.ndarray:
        """Boolean mask over servers where ``task`` fits by nominal demand (vectorised)."""
        c, t = self.cluster, task.t
        cpu_free = c.cpu_cap - c.cpu_alloc
        mem_free = c.mem_cap - c.mem_alloc
        gfree = c.server_max_free_gpu_mem
        if moving and task.server >= 0:
            cpu_free = cpu_free.copy(); mem_free = mem_free.copy()
            cpu_free[task.server] += t.cpu_cores
            mem_free[task.server] += t.memory_gb
            if not task.is_ps:
                gfree = gfree.copy()
                g = task.gpu
                gfree[task.server] = max(gfree[task.server], c.gpu_mem_cap[g] - c.gpu_mem_used[g] + t.gpu_memory_gb)
        ok = (cpu_free + 1e-9 >= t.cpu_cores) & (mem_free + 1e-9 >= t.memory_gb)
        if not task.is_ps:
            ok &= gfree + 1e-9 >= t.gpu_memory_gb
        return ok

    def cluster_overload_degree(self) -> float:
        """MLFS §3.5 O_c: mean over servers of ||U_s||, here divided by sqrt(M) (the RMS) so it is on
        the same 0..1 scale as h_s = 0.9 (the printed norm of M=4 utilisations would reach 2)."""
        u = self.cluster.utilisation()
        m = np.stack([u["gpu"], u["cpu"], u["mem"], u["net"]])
        return float(np.mean(np.sqrt(np.mean(m * m, axis=0))))

    def cluster_overloaded(self) -> bool:
        """MLFS §3.5: tasks in the queue, or O_c > h_s."""
        return bool(self.queue) or self.cluster_overload_degree() > self.config.cluster_overload_threshold

    # ------------------------------------------------------------------ commands
    def place(self, tid: int, server: int, gpu: int | None = None) -> int:
        """Put a ready waiting task on ``server`` (its least-loaded GPU with room unless ``gpu`` is given).
        Returns the GPU used (-1 for a PS)."""
        task = self.task(tid)
        if task.state != TASK_WAITING:
            raise InvalidCommand(f"task {tid} is {task.state.name}, only WAITING tasks can be placed")
        if not task.is_ready():
            missing = [task.job.tasks[p].tid for p in task.t.parents if task.job.tasks[p].state != TaskState.RUNNING]
            raise InvalidCommand(f"task {tid} depends on tasks {missing} which are not placed yet")
        reason, g = self._fit(task, server, gpu, False)
        if reason:
            raise InvalidCommand(reason)
        self.queue.pop(tid)
        task.waited += self.now - task.queued_since
        job = task.job
        self._touch(job)
        was_placed = job.n_placed
        self._attach(task, server, g)
        if job.fully_placed:
            self._gang_token.pop(job.jid, None)
            if job.has_run:  # restarting after preemption or a requeue: restore from checkpoint
                job.paused_until = max(job.paused_until, self.now + self._resume_overhead(job))
                self._push(job.paused_until, EV_RESUME, job, job.epoch)
            job.has_run = True
            if job.first_start < 0:
                job.first_start = self.now
        elif was_placed == 0:
            token = self._gang_token.get(job.jid, 0) + 1
            self._gang_token[job.jid] = token
            self._push(self.now + self.config.gang_timeout_s, EV_GANG, job, token)
        self._flush()
        return g

    def migrate(self, tid: int, server: int, gpu: int | None = None) -> int:
        """Move a running task to another GPU/server. Its job pauses for checkpoint + transfer + restore
        (``migration_base_s`` + state size over the slower NIC) and the state bytes count as cross-server
        traffic."""
        task = self.task(tid)
        if task.state != TASK_RUNNING:
            raise InvalidCommand(f"task {tid} is {task.state.name}, only RUNNING tasks can be migrated")
        reason, g = self._fit(task, server, gpu, True)
        if reason:
            raise InvalidCommand(reason)
        if server == task.server and g == task.gpu:
            raise InvalidCommand(f"task {tid} already runs on server {server} GPU {g}")
        job = task.job
        self._touch(job)
        src = task.server
        self._detach(task)
        self._attach(task, server, g)
        c = self.cluster
        delay = self.config.migration_base_s
        if src != server:
            delay += task.t.state_mb / (min(self._nic[src], self._nic[server]) * 125.0)
            self.metrics.add_cross(src, server, task.t.state_mb)
            job.cross_mb += task.t.state_mb
        job.paused_until = max(job.paused_until, self.now + delay)
        job.migrations += 1
        self.metrics.migrations += 1
        self._push(job.paused_until, EV_RESUME, job, job.epoch)
        self._flush()
        return g

    def requeue(self, tid: int) -> None:
        """Take a running task off its GPU and put it back in the queue (MLFS: a migration candidate
        that found no destination). Its job stops progressing until the task is placed again."""
        task = self.task(tid)
        if task.state != TASK_RUNNING:
            raise InvalidCommand(f"task {tid} is {task.state.name}, only RUNNING tasks can be requeued")
        job = task.job
        self._touch(job)
        self._detach(task)
        self._enqueue(task)
        self._flush()

    def preempt(self, jid: int) -> None:
        """Suspend a job: every placed task returns to the queue; restarting costs the suspend/resume
        overhead (UniSched Eq. 1: suspension ~4 s plus resumption growing with the GPU count)."""
        job = self.job(jid)
        if job.state != JOB_ACTIVE:
            raise InvalidCommand(f"job {jid} is {job.state.name}, only ACTIVE jobs can be preempted")
        if job.n_placed == 0:
            raise InvalidCommand(f"job {jid} has no placed task to preempt")
        self._release(job)
        job.preemptions += 1
        self.metrics.preemptions += 1
        self._flush()

    def stop(self, jid: int) -> None:
        """End a job now; its accuracy is what it has reached."""
        job = self.job(jid)
        if job.state != JOB_ACTIVE:
            raise InvalidCommand(f"job {jid} is {job.state.name}, only ACTIVE jobs can be stopped")
        self._finish(job, JobState.STOPPED)
        self._flush()

    def set_stop_option(self, jid: int, option: str) -> None:
        """Change a job's effective stopping rule (MLF-C). The job finishes at once if it is already past
        the new target."""
        job = self.job(jid)
        if option not in STOP_OPTIONS:
            raise InvalidCommand(f"unknown stop option {option!r}; known: {STOP_OPTIONS}")
        if job.state != JOB_ACTIVE:
            raise InvalidCommand(f"job {jid} is {job.state.name}")
        self._touch(job)
        job.stop_option = option
        job.target_iters = job.target_for(option)
        if job.iters >= job.target_iters - 1e-9:
            self._finish(job, JobState.FINISHED)
        self._flush()

    # ------------------------------------------------------------------ driving
    def next_decision(self) -> bool:
        """Advance to the next decision point. Returns False once every job has finished (or the horizon
        is reached); the state then stays final."""
        if self._done:
            return False
        if self.decision_count > 0:
            self._after_round()
        events, horizon = self._events, self.config.horizon_s
        while events:
            t, kind, _, obj, token = heappop(events)
            if t > horizon:
                self._advance_clock(horizon)
                break
            if t > self.now:
                self._advance_clock(t)
            self.events_processed += 1
            if kind == EV_TICK:
                if t != self._tick_at:
                    continue
                self._tick_at = math.inf
                self._last_tick = t
                if self._decision_possible():
                    self.decision_count += 1
                    self.metrics.record_series(self)
                    return True
                self._after_round()
                continue
            if kind != EV_COMPLETE or token == obj.epoch:  # most completions were rescheduled since: nothing to do
                self._handle(kind, obj, token)
                if self._dirty:
                    self._flush()
            if not self.active_jobs and all(j.state != JobState.PENDING for j in self.jobs):
                break
        self._done = True
        self._finalise()
        return False

    def run(self, policy: Callable[["Simulator"], None]) -> dict:
        """Run to the end, calling ``policy(sim)`` at every decision point."""
        while self.next_decision():
            policy(self)
        return self.summary()

    def summary(self) -> dict:
        return self.metrics.summary(self)

    def job_records(self) -> list[dict]:
        return self.metrics.job_records(self)

    # ------------------------------------------------------------------ internals
    def _push(self, t: float, kind: int, obj, token: int = 0) -> None:
        self._seq += 1
        heappush(self._events, (t, kind, self._seq, obj, token))

    def _request_tick(self, earliest: float | None = None) -> None:
        tick = self.config.tick_s
        base = self.now if earliest is None else earliest
        t = math.ceil(base / tick - 1e-9) * tick
        if t <= self._last_tick:  # one decision round per tick: changes made in a round wait for the next
            t = self._last_tick + tick
        if t < self._tick_at:
            self._tick_at = t
            self._push(t, EV_TICK, None)

    def _advance_clock(self, t: float) -> None:
        if t > self.now:
            self.metrics.jobs_in_system_integral += len(self.active_jobs) * (t - self.now)
            self.metrics.overload_server_seconds += self._n_overloaded * (t - self.now)
            self.now = t

    def _handle(self, kind: int, job: Job, token: int) -> None:
        if kind == EV_ARRIVAL:
            job.state = JOB_ACTIVE
            job.last_update = self.now
            self.active_jobs[job.jid] = job
            for t in job.tasks:
                self._enqueue(t)
            self._request_tick()
        elif kind == EV_COMPLETE:
            if job.state == JOB_ACTIVE and token == job.epoch:
                self._touch(job)
                job.iters = max(job.iters, job.target_iters)  # absorb float shortfall of rate x time
                self._finish(job, JobState.FINISHED)
        elif kind == EV_DEADLINE:
            if job.state == JOB_ACTIVE:
                self._touch(job)
                job.acc_at_deadline = job.accuracy()
        elif kind == EV_RESUME:  # a checkpoint/restore pause ended: materialise progress, nothing else changes
            if job.state == JOB_ACTIVE:
                self._touch(job)
        elif kind == EV_USAGE:
            self._usage_pending.discard(job)
            if job.state == JOB_ACTIVE and job.n_placed > 0:
                cfg = self.config
                # == rng.normal(0.0, sigma) (numpy draws loc + scale * standard normal), without its argument checks
                f = float(np.exp(cfg.usage_sigma * self.rng.standard_normal()))
                f = f if f > cfg.usage_min else cfg.usage_min  # == min(usage_max, max(usage_min, f))
                f = f if f < cfg.usage_max else cfg.usage_max
                # apply the change per server (a wide job has many tasks on few servers)
                c, df = self.cluster, f - job.usage_factor
                cpu_use, mem_use = self._cpu_use, self._mem_use
                layout = job.usage_layout or self._usage_layout(job)
                for srv, cpu, mem in layout[0]:
                    c.cpu_use[srv] = cpu_use[srv] = cpu_use[srv] + cpu * df
                    c.mem_use[srv] = mem_use[srv] = mem_use[srv] + mem * df
                job.usage_factor = f
                self._refresh_servers(layout[1], layout[2])
                self._schedule_usage(job)
        elif kind == EV_GANG:
            if job.state == JOB_ACTIVE and self._gang_token.get(job.jid) == token and 0 < job.n_placed < job.n_tasks:
                self._release(job)
                job.gang_releases += 1
                self.metrics.gang_releases += 1
                self._request_tick()

    @staticmethod
    def _usage_layout(job: Job) -> tuple:
        """((server, CPU sum, memory sum) per server in task order, sorted servers, sorted GPUs) of the job's
        running tasks; cached on the job until its placement changes."""
        per_server: dict[int, list[float]] = {}
        gpus = set()
        for t in job.tasks:
            if t.state == TASK_RUNNING:
                acc = per_server.setdefault(t.server, [0.0, 0.0])
                acc[0] += t.t.cpu_cores
                acc[1] += t.t.memory_gb
                if t.gpu >= 0:
                    gpus.add(t.gpu)
        job.usage_layout = ([(s, cpu, mem) for s, (cpu, mem) in per_server.items()], sorted(per_server),
                            sorted(gpus))
        return job.usage_layout

    def _release(self, job: Job) -> None:
        """Every placed task of the job back to the queue (preemption, gang timeout)."""
        self._touch(job)
        for t in job.tasks:
            if t.state == TASK_RUNNING:
                self._detach(t)
                self._enqueue(t)

    def _schedule_usage(self, job: Job) -> None:
        mean = self.config.usage_change_mean_s
        if mean > 0 and job not in self._usage_pending:
            self._usage_pending.add(job)
            self._push(self.now + mean * self.rng.standard_exponential(), EV_USAGE, job)  # == rng.exponential(mean)

    def _enqueue(self, task: Task) -> None:
        task.state = TASK_WAITING
        task.queued_since = self.now
        self.queue[task.tid] = task

    def _task_gpu_use(self, task: Task) -> float:
        return min(1.0, task.t.gpu_util * task.job.usage_factor)

    def _apply_usage(self, task: Task, sign: float) -> None:
        c, f = self.cluster, task.job.usage_factor
        s = task.server
        c.cpu_use[s] = self._cpu_use[s] = self._cpu_use[s] + sign * task.t.cpu_cores * f
        c.mem_use[s] = self._mem_use[s] = self._mem_use[s] + sign * task.t.memory_gb * f

    def _attach(self, task: Task, server: int, gpu: int) -> None:
        c, t = self.cluster, task.t
        task.state = TASK_RUNNING
        task.server, task.gpu = server, gpu
        self.task_server[task.tid] = server
        task.placed_at = self.now
        c.cpu_alloc[server] = self._cpu_alloc[server] = self._cpu_alloc[server] + t.cpu_cores
        c.mem_alloc[server] = self._mem_alloc[server] = self._mem_alloc[server] + t.memory_gb
        c.server_tasks[server][task] = None
        c.server_version[server] += 1
        if gpu >= 0:
            self._change_gpu_memory(server, gpu, t.gpu_memory_gb)
            on_gpu = c.gpu_tasks[gpu]
            on_gpu.append(task)
            c.gpu_n_tasks[gpu] = len(on_gpu)
            if len(on_gpu) == 1:
                c.server_idle_gpus[server] -= 1
            self._gpu_jobs[gpu] = None
        self._apply_usage(task, +1.0)
        job = task.job
        job.n_placed += 1
        job.unit_compute[t.index] = t.compute_share * job.model.iter_time(c.gpu_type[gpu]) if gpu >= 0 else 0.0
        job.slots[t.index] = (server, gpu)
        job.plan = job.usage_layout = None
        job.placement_version += 1
        self._schedule_usage(job)
        self._refresh_servers((server,), (gpu,) if gpu >= 0 else ())

    def _change_gpu_memory(self, server: int, gpu: int, delta_gb: float) -> None:
        """Add ``delta_gb`` to a GPU's used memory and keep the server's largest free GPU memory (the max over
        its GPUs of capacity - used): it becomes that GPU's free memory if larger, and needs a scan of the
        server's GPUs only if that GPU held the largest and now has less."""
        c = self.cluster
        free_before = c.gpu_mem_cap_list[gpu] - self._gpu_mem_used[gpu]
        c.gpu_mem_used[gpu] = self._gpu_mem_used[gpu] = self._gpu_mem_used[gpu] + delta_gb
        free = c.gpu_mem_cap_list[gpu] - self._gpu_mem_used[gpu]
        largest = self._max_free_gpu_mem[server]
        if free > largest:
            largest = free
        elif free < free_before == largest:
            r = c.server_gpus(server)
            largest = max(map(float.__sub__, c.gpu_mem_cap_list[r.start:r.stop], self._gpu_mem_used[r.start:r.stop]))
        else:
            return
        c.server_max_free_gpu_mem[server] = self._max_free_gpu_mem[server] = largest

    def _detach(self, task: Task) -> None:
        c, t = self.cluster, task.t
        server, gpu = task.server, task.gpu
        self._apply_usage(task, -1.0)
        c.cpu_alloc[server] = self._cpu_alloc[server] = self._cpu_alloc[server] - t.cpu_cores
        c.mem_alloc[server] = self._mem_alloc[server] = self._mem_alloc[server] - t.memory_gb
        del c.server_tasks[server][task]
        c.server_version[server] += 1
        if gpu >= 0:
            self._change_gpu_memory(server, gpu, -t.gpu_memory_gb)
            on_gpu = c.gpu_tasks[gpu]
            on_gpu.remove(task)
            c.gpu_n_tasks[gpu] = len(on_gpu)
            if not on_gpu:
                c.server_idle_gpus[server] += 1
            self._gpu_jobs[gpu] = None
        task.server, task.gpu = -1, -1
        self.task_server[task.tid] = -1
        task.job.n_placed -= 1
        task.job.plan = task.job.usage_layout = None
        task.job.placement_version += 1
        self._refresh_servers((server,), (gpu,) if gpu >= 0 else ())

    def _refresh_servers(self, servers: Iterable[int], gpus: Iterable[int]) -> None:
        """Recompute GPU loads, overload flags and slowdowns; mark jobs whose speed may change.
        (Plain Python over the few GPUs of a server: numpy calls on 4-element slices cost more than they save.)"""
        c = self.cluster
        gpu_load, gpu_slow = c.gpu_load, c.gpu_slow
        h = self.config.overload_threshold
        gpu_hot, server_hot, gpu_jobs = self._gpu_hot, self._server_hot_gpus, self._gpu_jobs
        for g in gpus:
            on_gpu = gpu_jobs[g]
            if on_gpu is None:
                on_gpu = self._gpu_job_utils(g)
            if len(on_gpu) == 1:  # the common exclusive case
                job, util = on_gpu[0]
                load = util * job.usage_factor  # == _task_gpu_use of its tasks, inlined: the hottest loop
                if load > 1.0:
                    load = 1.0
                n_jobs = 1
            else:  # a job's tasks on one GPU count once, at their highest use (the same sum as a per-task scan)
                load = 0.0
                for job, util in on_gpu:
                    use = util * job.usage_factor
                    load += 1.0 if use > 1.0 else use
                n_jobs = len(on_gpu)
            gpu_load[g] = self._gpu_load[g] = load
            # a GPU is overloaded when jobs *share* it beyond h_r: one job alone at high utilisation is busy,
            # not contended, and moving it would not help (Gandiva's rule judges shared GPUs too)
            hot = load > h and n_jobs > 1
            if hot != gpu_hot[g]:
                gpu_hot[g] = hot
                server_hot[self._gpu_server[g]] += 1 if hot else -1
            slow = 1.0 if n_jobs == 1 or load <= 1.0 else self._contention(load)
            if slow != gpu_slow[g]:
                gpu_slow[g] = slow
                for job, _ in on_gpu:
                    self._touch(job)
        cpu_use, mem_use, server_slow = self._cpu_use, self._mem_use, c.server_slow
        for s in servers:
            cu, mu = cpu_use[s], mem_use[s]
            self._judge_overload(s)
            # within capacity (use <= capacity exactly when use / capacity <= 1.0) is the common case: no division
            if cu <= self._cpu_cap[s] and mu <= self._mem_cap[s]:
                slow = 1.0
            else:
                slow = self._contention(max(cu / self._cpu_cap[s], mu / self._mem_cap[s]))
            if slow != server_slow[s]:
                server_slow[s] = slow
                self._touch_jobs(c.server_tasks[s])

    def _gpu_job_utils(self, g: int) -> tuple:
        """Rebuild _gpu_jobs[g] (and the GPU's job count). A job's use of the GPU is its busiest task's:
        max(util) x usage factor, equal to the max over its tasks of util x factor (multiplying by a positive
        factor is monotone)."""
        per_job: dict[Job, float] = {}
        for t in self.cluster.gpu_tasks[g]:
            util = t.t.gpu_util
            if util > per_job.get(t.job, -1.0):
                per_job[t.job] = util
        self._gpu_jobs[g] = entries = tuple(per_job.items())
        self.cluster.gpu_n_jobs[g] = len(entries)
        return entries

    def _contention(self, ratio: float) -> float:
        """Slowdown factor of an over-committed resource: ``ratio`` (use / capacity) rounded up to the
        next ``contention_step``, 1 when not over-committed. The rounding keeps small usage wobbles from
        cascading rate recomputations across every job on a server (README, "Overload and contention")."""
        if ratio <= 1.0:
            return 1.0
        step = self.config.contention_step
        return math.ceil(ratio / step - 1e-9) * step if step > 0 else ratio

    def _touch(self, job: Job) -> None:
        """Materialise a job's progress up to now and mark its rate for recomputation."""
        now = self.now
        if job.last_update < now:
            if job.rate > 0 and job.n_placed == len(job.tasks):  # fully placed
                # max(last_update, paused_until), max(0, now - start) and min(rate x dt, max(0, iterations left))
                # spelled out (the same values: max keeps its first argument unless the second is larger)
                start = job.paused_until if job.paused_until > job.last_update else job.last_update
                dt = now - start
                if not dt > 0.0:
                    dt = 0.0
                left = job.target_iters - job.iters
                if not left > 0.0:
                    left = 0.0
                di = job.rate * dt
                if left < di:
                    di = left
                if di > 0:
                    job.iters += di
                    job.running_time += dt
                    if job.cross_mb_per_iter:  # (adding 0 bytes changes nothing)
                        job.cross_mb += di * job.cross_mb_rate_total
                        self.metrics.add_cross_per_iter(job.cross_mb_per_iter, di)
                job.waiting_time += (now - job.last_update) - dt
            else:
                job.waiting_time += now - job.last_update
            job.last_update = now
        self._dirty[job] = None

    def _touch_jobs(self, tasks: Iterable[Task]) -> None:
        """_touch the jobs of these tasks; a job's tasks usually come together, and touching a job again at
        the same time changes nothing, so runs of one job are touched once."""
        last = None
        for t in tasks:
            job = t.job
            if job is not last:
                self._touch(job)
                last = job

    def _flush(self) -> None:
        """Recompute rates of touched jobs and reschedule their completions.

        The placement-dependent part of a job's iteration (transfers, sync, cross-server bytes) is cached
        in ``job.plan`` until its placement changes; a contention change only re-runs the critical path,
        and a job whose rate, target and pause are all unchanged keeps its scheduled completion."""
        dirty = self._dirty
        server_slow, gpu_slow = self.cluster.server_slow, self.cluster.gpu_slow
        while dirty:
            job = next(iter(dirty))
            del dirty[job]
            if job.state != JOB_ACTIVE:
                continue
            old_cross, old_servers = job.cross_mb_per_iter, job.cross_servers
            old_rate = rate = job.rate
            tasks = job.tasks
            placed = job.n_placed == len(tasks)  # job.fully_placed; nothing below changes it
            if placed:
                plan = job.plan
                if plan is None:
                    servers = [t.server for t in tasks]
                    gpus = [t.gpu for t in tasks]
                    if job.graph is None:
                        job.graph = job_graph([t.t for t in tasks], job.spec)
                    job.plan = plan = plan_placement(job.graph, servers, gpus, self._intra, self._nic)
                    job.slow_key = None
                    job.iter_times = {}
                # each task runs at the larger of its server's and its GPU's slowdown
                slow_key = tuple([gpu_slow[g] if g >= 0 and gpu_slow[g] > server_slow[s] else server_slow[s]
                                  for s, g in job.slots])
                if slow_key != job.slow_key:
                    job.slow_key = slow_key
                    # contention factors move among a few rounded values as resource use varies: keep the
                    # iteration time of each for the current placement
                    T = job.iter_times.get(slow_key)
                    if T is None:
                        T = job.iter_times[slow_key] = critical_time(plan, job.unit_compute, slow_key)
                    job.iter_time = T
                    job.rate = rate = 1.0 / T if T > 0 else math.inf
                    if old_cross is not plan.cross:
                        job.cross_mb_per_iter = plan.cross
                        job.cross_servers = plan.cross_servers
                        job.cross_mb_rate_total = sum(plan.cross.values())
            else:
                job.iter_time = math.inf
                job.rate = rate = 0.0
                job.cross_mb_per_iter = {}
                job.cross_servers = frozenset()
                job.cross_mb_rate_total = 0.0
            # NIC loads change only for a job with cross-server traffic before or after (most jobs have none)
            if (old_cross or job.cross_mb_per_iter) and (old_rate != rate or old_cross is not job.cross_mb_per_iter):
                self._update_net(job, old_rate, old_cross, old_servers)
            if rate > 0 and placed:
                if job.iters >= job.target_iters - 1e-9:
                    self._finish(job, JobState.FINISHED)
                    continue
                sched = (rate, job.target_iters, job.paused_until)
                if sched != job.scheduled:  # otherwise the pending completion event is still right
                    job.scheduled = sched
                    job.epoch += 1
                    start = job.paused_until if job.paused_until > self.now else self.now  # max(now, paused_until)
                    self._push(start + (job.target_iters - job.iters) / rate, EV_COMPLETE, job, job.epoch)
            else:
                job.scheduled = None
                job.epoch += 1

    def _update_net(self, job: Job, old_rate: float, old_cross: dict, old_servers: frozenset) -> None:
        """Move the NIC loads of the job's servers from its old rate and cross-server bytes to the current ones
        (in place on the Python copy, pair by pair: the float operations of in-place updates of c.net_mbps)."""
        c = self.cluster
        net = self._net
        changed = frozenset()
        if old_rate > 0 and old_cross:
            for (a, b), mb in old_cross.items():
                d = mb * old_rate
                net[a] -= d
                net[b] -= d
            changed = old_servers
        rate, cross = job.rate, job.cross_mb_per_iter
        if rate > 0 and cross and job.n_placed == len(job.tasks):
            for (a, b), mb in cross.items():
                d = mb * rate
                net[a] += d
                net[b] += d
            changed = changed | job.cross_servers if changed else job.cross_servers
        for s in changed:  # the order does not matter: the tick request is the same for all
            v = net[s]
            if -1e-9 < v < 1e-9:  # abs(v) < 1e-9: float residue of cancelled terms
                net[s] = v = 0.0
            c.net_mbps[s] = v
            # re-judged both ways: NIC traffic that ends (the job finished, slowed down or moved) must also clear
            # an overload it caused, or a server left without tasks would stay overloaded for good
            self._judge_overload(s)

    def _judge_overload(self, s: int) -> None:
        """Set server ``s``'s overload flag from its current use (MLFS: any resource above h_r; a GPU counts
        only when shared, see _refresh_servers). A new overload counts as an occurrence and asks for a tick."""
        over = (self._cpu_use[s] > self._cpu_limit[s] or self._mem_use[s] > self._mem_limit[s]
                or self._net[s] > self._net_limit[s] or self._server_hot_gpus[s] > 0)
        if over == self._over[s]:
            return
        if over:
            self.metrics.overload_occurrences += 1
            self._request_tick()
        self._n_overloaded += 1 if over else -1
        self.cluster.overloaded[s] = self._over[s] = over

    def _finish(self, job: Job, state: JobState) -> None:
        self._touch(job)  # materialise progress (and bytes) up to now
        for t in job.tasks:
            if t.state == TASK_RUNNING:
                self._detach(t)
            elif t.state == TASK_WAITING:
                self.queue.pop(t.tid, None)
                t.waited += self.now - t.queued_since
            t.state = TaskState.DONE
        old_rate, old_cross, old_servers = job.rate, job.cross_mb_per_iter, job.cross_servers
        job.rate = 0.0
        job.cross_mb_per_iter = {}
        job.cross_servers = frozenset()
        self._update_net(job, old_rate, old_cross, old_servers)
        job.state = state
        job.end_time = self.now
        job.epoch += 1
        if job.acc_at_deadline < 0:
            job.acc_at_deadline = job.accuracy()
        self.active_jobs.pop(job.jid, None)
        self.metrics.on_job_end(job)
        self._dirty.pop(job, None)
        self._request_tick()

    def _resume_overhead(self, job: Job) -> float:
        cfg = self.config
        return cfg.suspend_s + cfg.resume_base_s + cfg.resume_per_gpu_s * job.spec.n_gpus

    def _decision_possible(self) -> bool:
        mode = self.config.decide_on
        if mode == "always":
            return bool(self.active_jobs)
        if mode == "queue" and self.queue:
            return True
        if self._some_ready_task_fits():
            return True
        if mode == "placement":
            return False
        return self._overload_decision_due()

    def _overload_decision_due(self) -> bool:
        """An overloaded server with tasks is a decision point when the set of overloaded servers differs
        from the one last offered, or ``overload_recheck_s`` after it was last offered: a policy that left
        an overload alone is not asked again every tick until something changes."""
        over = self.overloaded_servers()
        if not any(self.cluster.server_tasks[s] for s in over):
            return False
        key = tuple(over)
        if key != self._overload_offered or self.now - self._overload_offered_at >= self.config.overload_recheck_s:
            self._overload_offered, self._overload_offered_at = key, self.now
            return True
        return False

    def _some_ready_task_fits(self) -> bool:
        seen = set()
        for t in self.queue.values():
            key = (t.t.gpu_memory_gb, t.t.cpu_cores, t.t.memory_gb, t.is_ps)
            if key in seen or not t.is_ready():
                continue
            seen.add(key)
            if self.feasible_servers(t).any():
                return True
        return False

    def _after_round(self) -> None:
        """A tick's decision round ended (or the tick needed no decision): run the controllers on the
        state the policy left (MLF-C judges overload by what is *still* queued), then, if something is
        still actionable, look again at the next tick."""
        for ctl in self.controllers:
            ctl.on_tick(self)
        self._flush()
        if not self.active_jobs:
            return
        mode, tick = self.config.decide_on, self.config.tick_s
        if mode == "always" or (mode == "queue" and self.queue) or self._some_ready_task_fits():
            self._request_tick(self.now + tick)
        elif mode != "placement" and any(self.cluster.server_tasks[s] for s in self.overloaded_servers()):
            self._request_tick(max(self.now + tick, self._overload_offered_at + self.config.overload_recheck_s))

    def _check_fits_somewhere(self, job: Job) -> None:
        """Refuse a job with a task no server could ever host, or whose tasks together exceed the cluster
        (it would wait forever)."""
        c = self.cluster
        short = gang_shortfall([t.t for t in job.tasks], c.spec, self._cluster_totals)
        if short:
            raise ValueError(f"job {job.jid} ({job.model.name}): {short}")
        cache = self._fit_cache
        if cache is None:  # largest capacity of each kind, and the servers' (cpu, mem, gpu mem) triples
            self._fit_cache = cache = {"triples": sorted({(float(c.cpu_cap[i]), float(c.mem_cap[i]),
                                                           float(c.gpu_mem_cap[c.server_first_gpu[i]]))
                                                          for i in range(c.n_servers)}), "seen": set()}
        for t in job.tasks:
            tt = t.t
            key = (tt.cpu_cores, tt.memory_gb, 0.0 if t.is_ps else tt.gpu_memory_gb)
            if key in cache["seen"]:
                continue
            if not any(cpu >= key[0] and mem >= key[1] and gmem >= key[2] for cpu, mem, gmem in cache["triples"]):
                raise ValueError(
                    f"job {job.jid} ({job.model.name}) task {tt.index} needs {key[2]:.1f} GB GPU memory, "
                    f"{key[0]:.1f} CPU cores and {key[1]:.1f} GB memory: no server of cluster "
                    f"{c.spec.name!r} can ever host it")
            cache["seen"].add(key)

    def _finalise(self) -> None:
        for job in list(self.active_jobs.values()):
            self._touch(job)
        self._dirty.clear()
