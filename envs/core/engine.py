"""The discrete-event simulator: a GPU cluster running DAG-structured training jobs.

Drive it directly (no Gymnasium needed)::

    sim = Simulator(cluster_preset("mlfs-80"), specs, SimConfig(), seed=0)
    while sim.next_decision():          # advances time to the next point where a decision is possible
        for task in sim.ready_tasks():
            server = ...                 # your policy
            sim.place(task.tid, server)
    print(sim.summary())

Time advances only through events (arrivals, completions, deadline crossings, resource-use changes, checkpoint/
restore ends, gang timeouts, lease ends and ticks); idle time is skipped. Progress is rate-based between events
(:mod:`clustergym.core.progress`). Admission, use, overload and contention: :mod:`clustergym.core.resources`;
leases: :mod:`clustergym.core.lease`; the metrics (:mod:`clustergym.core.metrics`) receive the events.
"""
from __future__ import annotations

from heapq import heapify, heappop, heappush
import math
from typing import Callable, Iterable, Protocol

import numpy as np

from .catalogue import ModelProfile
from .config import SimConfig, SimConfigError  # noqa: F401  (re-exported: part of the engine API)
from .decisions import DecisionPoints
from .hardware import ClusterSpec
from .job import (JOB_ACTIVE, TASK_RUNNING, TASK_WAITING, InvalidCommand, Job, JobState, Task,  # noqa: F401
                  TaskState, make_jobs)  # (InvalidCommand: part of the engine API)
from .lease import LeaseError, Leases, checkpoint_s  # noqa: F401  (LeaseError: part of the engine API)
from .metrics import Metrics, job_records
from .nas import NasControl
from .progress import (advance, cancel_completion, completion_time, on_attach, on_detach, refresh_rate,
                       start as start_progress, stop as stop_progress)
from .ready import ReadyQueue
from .resources import Changes, Resources
from .rounds import RoundRecord
from .stall import StallWarning, StallWatch  # noqa: F401  (StallWarning: part of the engine API)
from .state import ClusterState
from .timeline import make_timeline
from .workload import JobSpec

# event kinds, in tie-break order at equal times: state changes before the tick that reacts to them; the first
# two carry the job's completion epoch (a stale one is skipped)
EV_COMPLETE, EV_RUNG, EV_RESUME, EV_USAGE, EV_DEADLINE, EV_GANG, EV_ARRIVAL, EV_LEASE, EV_TICK = range(9)


class UnplaceableJob(ValueError):
    """A job no policy could ever run on the cluster (refused when the simulator is built); ``job_id`` names it."""

    def __init__(self, job_id: int, why: str) -> None:
        self.job_id = job_id
        super().__init__(why)


class Controller(Protocol):
    """Pluggable logic run at every scheduling tick, after the policy's decision round (e.g. MLF-C)."""

    def on_tick(self, sim: "Simulator") -> None: ...


class Simulator:
    """Event-driven GPU-cluster simulator: events, scheduler commands and decision points."""

    def __init__(self, cluster: ClusterSpec, jobs: Iterable[JobSpec], config: SimConfig | None = None, seed: int = 0,
                 models: Callable[[str], ModelProfile] | None = None, controllers: Iterable[Controller] = ()):
        if models is None:
            from .catalogue_data import get_model as models  # noqa: N813
        self.config = config or SimConfig()
        self.cluster = ClusterState(cluster)
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.controllers: list[Controller] = list(controllers)
        self.jobs: list[Job] = make_jobs(jobs, models, seed, self.config.optstop_error_sigma)
        self.tasks: list[Task] = [t for job in self.jobs for t in job.tasks]
        self.job_by_id: dict[int, Job] = {job.spec.job_id: job for job in self.jobs}
        self.nas = NasControl(self.jobs, self.config.nas_first_rung, self.config.nas_eta)  # NAS groups' controllers
        self.resources = Resources(self.cluster, self.config, len(self.tasks))
        for job in self.jobs:
            start_progress(job)
            why = self.resources.never_fits(job)
            if why:
                raise UnplaceableJob(job.jid, f"job {job.jid} ({job.model.name}): {why}")
        # UniSched's leases (off unless configured); bound methods, so a deep copy of the simulator pushes to its own
        self.leases = Leases(self.config, self.jobs, self._push_lease, self._request_tick)
        self.task_server = self.resources.task_server  # read by the env's affinity kernel
        # per server: when its current overload began (meaningful while it is overloaded)
        self.overloaded_since = [0.0] * self.cluster.n_servers
        self.queue: dict[int, Task] = {}  # waiting tasks by tid, in queue-entry order
        self.ready = ReadyQueue()  # the waiting tasks whose DAG parents hold slots, in queue order
        self.active_jobs: dict[int, Job] = {}
        self.metrics = Metrics(self.cluster.n_servers)
        self._on_bytes = self.metrics.add_cross_per_iter
        # per-server bandwidths for placement plans (the dag kernels' arrays)
        self._intra = self.cluster.intra_gbps
        self._nic = self.cluster.nic_gbps
        self._events: list = []
        self._seq = 0
        self._epoch = dict.fromkeys(self.jobs, 0)  # versions each job's completion events: stale ones are skipped
        self._dirty: dict[Job, None] = {}  # jobs whose rate may have changed; insertion-ordered: deterministic
        self._tick_at = math.inf  # earliest pending tick
        self._last_tick = -math.inf  # time of the last tick processed
        self.decisions = DecisionPoints(self.config)  # when to ask the policy (core/decisions.py)
        self.round = RoundRecord()  # what this decision round's commands touched (core/rounds.py)
        self._usage_pending: set[Job] = set()  # jobs with a resource-use change scheduled
        self._gang_token: dict[int, int] = {}  # the pending gang timeout of each partly placed job
        self._gang_seq = 0  # gang timeout tokens are unique: a stale timeout never matches a later one
        self._stall = StallWatch(self.config.stall_timeout_s)
        self.stalled: str | None = None  # why the run ended early, if it stalled (a StallWarning too)
        self._done = False
        self.timeline = make_timeline(self.config.record_timeline)  # core/timeline.py: the hooks do nothing if off
        self.decision_count = self.events_processed = 0
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
        return self.ready.tasks()

    def running_tasks(self, server: int | None = None) -> list[Task]:
        if server is None:
            return [t for j in self.active_jobs.values() for t in j.tasks if t.state == TASK_RUNNING]
        return list(self.cluster.tasks_by_id(server))

    @property
    def n_overloaded(self) -> int:
        """Number of overloaded servers (== count_nonzero(cluster.overloaded))."""
        return self.resources.n_overloaded

    def overloaded_servers(self) -> list[int]:
        return self.resources.overloaded_servers()

    def is_done(self) -> bool:
        return self._done

    def fit_reason(self, task: Task, server: int, gpu: int | None = None, moving: bool = False) -> str | None:
        """Why ``task`` cannot be put on ``server`` (and ``gpu``), or None if it can."""
        return self.resources.fit(task, server, gpu, moving)[0]

    def best_gpu(self, task: Task, server: int, moving: bool = False) -> int:
        """MLFS §3.3.2: the least-loaded GPU of the server that has room, -1 if none
        (:meth:`clustergym.core.resources.Resources.best_gpu` has the tie rule)."""
        return self.resources.best_gpu(task, server, moving)

    def feasible_servers(self, task: Task, moving: bool = False) -> np.ndarray:
        """Boolean mask over servers where ``task`` fits by nominal demand (vectorised)."""
        return self.resources.feasible_servers(task, moving)

    def cluster_overload_degree(self) -> float:
        """MLFS §3.5 O_c (:meth:`clustergym.core.state.ClusterState.overload_degree`)."""
        return self.cluster.overload_degree()

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
        reason, g = self.resources.fit(task, server, gpu, False)
        if reason:
            raise InvalidCommand(reason)
        self.queue.pop(tid)
        task.waited += self.now - task.queued_since
        job = task.job
        self._touch(job)
        self._attach(task, server, g)
        self._gang_timer(job)
        if job.fully_placed:
            if job.record.first_start >= 0:  # restarting after preemption or a requeue: restore from checkpoint
                job.paused_until = max(job.paused_until, self.now + checkpoint_s(self.config, job.spec.n_gpus))
                self._push(job.paused_until, EV_RESUME, job, self._epoch[job])
            else:
                job.record.first_start = self.now
            self.leases.grant(job, self.now)
        self._flush()
        return g

    def migrate(self, tid: int, server: int, gpu: int | None = None) -> int:
        """Move a running task to another GPU/server. Its job pauses for checkpoint + transfer + restore
        (``migration_base_s`` + state size over the smaller of the two NICs' shares, each NIC shared by the
        transfer and the other jobs crossing it: :meth:`Resources.nic_share`) and the state bytes count as
        cross-server traffic."""
        task = self.task(tid)
        if task.state != TASK_RUNNING:
            raise InvalidCommand(f"task {tid} is {task.state.name}, only RUNNING tasks can be migrated")
        reason, g = self.resources.fit(task, server, gpu, True)
        if reason:
            raise InvalidCommand(reason)
        if server == task.server and g == task.gpu:
            raise InvalidCommand(f"task {tid} already runs on server {server} GPU {g}")
        job = task.job
        self._touch(job)
        src = task.server
        self._detach(task)
        self._attach(task, server, g)
        delay = self.config.migration_base_s
        if src != server:
            res = self.resources
            delay += task.t.state_mb / (min(res.nic_share(src, job), res.nic_share(server, job)) * 125.0)
            job.record.cross_mb += task.t.state_mb
        self.metrics.on_migration(src, server, task.t.state_mb)
        job.paused_until = max(job.paused_until, self.now + delay)
        job.record.migrations += 1
        self._push(job.paused_until, EV_RESUME, job, self._epoch[job])
        self._flush()
        return g

    def requeue(self, tid: int) -> None:
        """Take a running task off its GPU and put it back in the queue (MLFS: a migration candidate
        that found no destination). Its job pauses until the task is placed again: its other tasks, DAG
        children included, keep their slots at rate 0, for at most ``gang_timeout_s`` (the job is partly placed
        again: its gang timeout starts now, and releases every slot if the task is not placed back by then)."""
        task = self.task(tid)
        if task.state != TASK_RUNNING:
            raise InvalidCommand(f"task {tid} is {task.state.name}, only RUNNING tasks can be requeued")
        self._touch(task.job)
        self._detach(task)
        self.leases.release(task.job)  # a lease is held while fully placed; placing the task back grants a new one
        self._enqueue(task)
        self._gang_timer(task.job)
        self._flush()

    def preempt(self, jid: int) -> None:
        """Suspend a job: every placed task returns to the queue; restarting costs the suspend/resume
        overhead (UniSched Eq. 1: suspension ~4 s plus resumption growing with the GPU count)."""
        job = self.job(jid)
        why = self.leases.preempt_error(job)  # the one rule, which command_error reports too
        if why:
            raise InvalidCommand(why)
        self._release(job)
        job.record.preemptions += 1
        self.metrics.on_preemption()
        self._flush()

    def stop(self, jid: int) -> None:
        """End a job now; its accuracy is what it has reached."""
        job = self.job(jid)
        if job.state != JOB_ACTIVE:
            raise InvalidCommand(f"job {jid} is {job.state.name}, only ACTIVE jobs can be stopped")
        self._finish(job, JobState.STOPPED, "command")
        self._flush()

    def stop_option_error(self, jid: int, option: str | None) -> str | None:
        """Why job ``jid``'s stopping rule may not become ``option`` now (None if it may): :meth:`Job.stop_option_error`."""
        job = self.job_by_id.get(jid)
        return f"unknown job id {jid}" if job is None else job.stop_option_error(option)

    def set_stop_option(self, jid: int, option: str) -> None:
        """Change a job's effective stopping rule (MLF-C, or a policy's "stop-option" command) under the rule
        of :meth:`stop_option_error`. The job finishes at once if it is already past the new target."""
        reason = self.stop_option_error(jid, option)
        if reason:
            raise InvalidCommand(reason)
        job = self.job(jid)
        self._touch(job)
        job.stop_option = option
        job.target_iters = job.target_for(option)
        if job.iters >= job.target_iters - 1e-9:
            self._finish(job, JobState.FINISHED)
        self._flush()

    def forget_future(self, seed: int, arrivals: bool = False) -> None:
        """Keep only what a scheduler knows of what comes next, for a copy that plans (decision-time search
        without foresight): the arrivals after now are dropped (those jobs never arrive) unless ``arrivals``, and
        the noise from here on is drawn from ``seed`` instead of the run's own stream, the times of the pending
        resource-use changes included (exponential, so drawn again from now). The jobs present keep their
        stopping points. ``arrivals=True`` keeps the later arrivals: the ablation that separates knowing them
        from knowing the noise."""
        self.rng = np.random.default_rng(seed)
        kinds = (EV_USAGE,) if arrivals else (EV_ARRIVAL, EV_USAGE)
        later = [e for e in self._events if e[0] > self.now and e[1] in kinds]
        self._events = [e for e in self._events if not (e[0] > self.now and e[1] in kinds)]
        heapify(self._events)
        mean = self.config.usage_change_mean_s
        for _, kind, _, job, _ in sorted(later, key=lambda e: e[2]):  # by push order: deterministic
            if kind == EV_USAGE:
                self._push(self.now + mean * self.rng.standard_exponential(), EV_USAGE, job)

    # ------------------------------------------------------------------ driving
    def next_decision(self) -> bool:
        """Advance to the next decision point. Returns False once every job has finished (or the horizon
        is reached, or the run stalled: :attr:`stalled`); the state then stays final."""
        if self._done:
            return False
        if self.decision_count > 0:
            self._after_round()
        events, horizon, epoch, stall = self._events, self.config.horizon_s, self._epoch, self._stall
        while events:
            t, kind, _, obj, token = heappop(events)
            if t > horizon:
                self._advance_clock(horizon)
                break
            if t > self.now:
                self._advance_clock(t)
            if t >= stall.check_at:
                self.stalled = stall.check(self.now, self.active_jobs, self.metrics.jobs_ended)
                if self.stalled:
                    break
            self.events_processed += 1
            if kind == EV_TICK:
                if t != self._tick_at:
                    continue
                self._tick_at = math.inf
                self._last_tick = t
                if self.decisions.possible(self):
                    self.decision_count += 1
                    self.round.clear()
                    if self.config.record_series:
                        self.metrics.record_series(self.now, len(self.queue), len(self.active_jobs), self.cluster)
                    return True
                self._after_round()
                continue
            if kind > EV_RUNG or token == epoch[obj]:  # most completions were rescheduled since: nothing to do
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
        return self.metrics.summary(self.jobs, self.now, self.decision_count, self.events_processed)

    def job_records(self) -> list[dict]:
        return job_records(self.jobs)

    # ------------------------------------------------------------------ events
    def _push_lease(self, t: float, job: Job, token: int) -> None:
        self._push(t, EV_LEASE, job, token)

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
            self.timeline.sample(self)  # the state that held since the clock last moved
            queued_dt = 0.0
            if self.queue:  # the first queue entry is the longest waiting: it passes one tick of waiting at `late`
                late = next(iter(self.queue.values())).queued_since + self.config.tick_s
                queued_dt = t - max(self.now, late) if t > late else 0.0
            self.metrics.on_clock(t - self.now, len(self.active_jobs), self.resources.n_overloaded, queued_dt)
            self.now = t

    def _handle(self, kind: int, job: Job, token: int) -> None:
        if kind == EV_USAGE:  # a running job's actual resource use changes (the most frequent event)
            if job.state != JOB_ACTIVE or job.n_placed == 0:
                self._usage_pending.discard(job)  # the next placement schedules its next change
            else:
                cfg = self.config  # a new factor: log-normal around 1, clipped to [usage_min, usage_max]
                # == rng.normal(0.0, sigma) (numpy draws loc + scale * standard normal), without its argument checks
                f = float(np.exp(cfg.usage_sigma * self.rng.standard_normal()))
                f = f if f > cfg.usage_min else cfg.usage_min  # == min(usage_max, max(usage_min, f))
                changes = self.resources.change_usage(job, f if f < cfg.usage_max else cfg.usage_max)
                if changes.jobs or changes.began or changes.ended:
                    self._absorb(changes)
                # the job's next change (it stays in _usage_pending: == rng.exponential(mean))
                self._push(self.now + self.config.usage_change_mean_s * self.rng.standard_exponential(), EV_USAGE, job)
        elif kind == EV_COMPLETE:
            if job.state == JOB_ACTIVE:
                self._touch(job)
                job.iters = max(job.iters, job.target_iters)  # absorb float shortfall of rate x time
                self._finish(job, JobState.FINISHED)
        elif kind == EV_RUNG:  # a NAS trial reached a rung: its group's controller keeps or stops it
            if job.state == JOB_ACTIVE:
                self._touch(job)
                if self.nas.judge(job):
                    self._push_rung(job)
                else:
                    self._finish(job, JobState.STOPPED, "nas")
        elif kind == EV_RESUME:  # a checkpoint/restore pause ended: materialise progress, nothing else changes
            if job.state == JOB_ACTIVE:
                self._touch(job)
        elif kind == EV_ARRIVAL:
            job.state = JOB_ACTIVE
            job.last_update = self.now
            self.active_jobs[job.jid] = job
            self.metrics.on_arrival(job)
            for t in job.tasks:
                self._enqueue(t)
            self._request_tick()
        elif kind == EV_DEADLINE:
            if job.state == JOB_ACTIVE:
                self._touch(job)
                job.record.acc_at_deadline = job.accuracy()
                self.metrics.on_deadline_passed(job)
        elif kind == EV_LEASE:
            self.leases.expire(job, token)
        elif kind == EV_GANG:
            if job.state == JOB_ACTIVE and self._gang_token.get(job.jid) == token and 0 < job.n_placed < job.n_tasks:
                self._release(job)
                job.record.gang_releases += 1
                self.metrics.on_gang_release()
                self._request_tick()

    def _schedule_usage(self, job: Job) -> None:
        mean = self.config.usage_change_mean_s
        if mean > 0 and job not in self._usage_pending:
            self._usage_pending.add(job)
            self._push(self.now + mean * self.rng.standard_exponential(), EV_USAGE, job)  # == rng.exponential(mean)

    # ------------------------------------------------------------------ tasks and jobs
    def _release(self, job: Job) -> None:
        """Every placed task of the job back to the queue (preemption, gang timeout)."""
        self._touch(job)
        self.leases.release(job)
        for t in job.tasks:
            if t.state == TASK_RUNNING:
                self._detach(t)
                self._enqueue(t)
        self._gang_timer(job)

    def _gang_timer(self, job: Job) -> None:
        """Keep the job's gang timeout in step with its placement: a partly placed job (some tasks hold slots,
        not all: it cannot progress) releases every slot ``gang_timeout_s`` after it became partly placed, by
        its first placement or by a requeue of a fully placed job's task; a job placed fully or not at all has
        no pending timeout."""
        if not 0 < job.n_placed < len(job.tasks):
            self._gang_token.pop(job.jid, None)
        elif job.jid not in self._gang_token:
            self._gang_seq += 1
            self._gang_token[job.jid] = self._gang_seq
            if self.config.gang_timeout_s < math.inf:
                self._push(self.now + self.config.gang_timeout_s, EV_GANG, job, self._gang_seq)

    def _enqueue(self, task: Task) -> None:
        task.state = TASK_WAITING
        task.queued_since = self.now
        self.queue[task.tid] = task
        self.ready.entered(task)

    def _attach(self, task: Task, server: int, gpu: int) -> None:
        task.state = TASK_RUNNING
        self.ready.attached(task)
        task.placed_at = self.now
        self.timeline.start(self.now, task, server, gpu)
        job = task.job
        job.n_placed += 1
        on_attach(task, server, gpu, self.cluster.gpu_type[gpu] if gpu >= 0 else None)
        self._schedule_usage(job)
        changes = self.resources.attach(task, server, gpu)
        if changes.jobs or changes.began or changes.ended:
            self._absorb(changes)

    def _detach(self, task: Task) -> None:
        task.job.n_placed -= 1
        self.timeline.stop(self.now, task)
        on_detach(task)
        changes = self.resources.detach(task)
        if changes.jobs or changes.began or changes.ended:
            self._absorb(changes)

    def _absorb(self, changes: Changes) -> None:
        """Act on what a resource update changed (and empty the report): materialise the progress of jobs
        whose speed changed and mark them for a new rate; count overloads that began and ask for a tick to
        react to them."""
        jobs = changes.jobs
        if jobs:
            last = None
            for job in jobs:  # a job's tasks usually come together: touch each run once
                if job is not last:
                    self._touch(job)
                    last = job
            jobs.clear()
        if changes.began:
            self.metrics.on_overloads_began(len(changes.began))
            for s in changes.began:
                self.overloaded_since[s] = self.now
            self._request_tick()
            changes.began.clear()
        changes.ended.clear()

    def _touch(self, job: Job) -> None:
        """Materialise a job's progress up to now and mark its rate for recomputation."""
        if job.last_update < self.now:
            advance(job, self.now, self._on_bytes)
        self._dirty[job] = None

    def _flush(self) -> None:
        """Recompute the rates of touched jobs, move their NIC loads, and (re)schedule their completions;
        a job whose rate, target and pause are all unchanged keeps its scheduled completion."""
        dirty, c, resources = self._dirty, self.cluster, self.resources
        while dirty:
            job = next(iter(dirty))
            del dirty[job]
            if job.state != JOB_ACTIVE:
                continue
            moved = refresh_rate(job, self._intra, self._nic, resources.nic_flows, c.server_slow, c.gpu_slow,
                                 resources.gpu_xi, resources.slow_changed)
            if moved is not None:
                self._absorb(resources.move_traffic(job, *moved))
            if job.rate > 0 and job.n_placed == len(job.tasks):
                if job.iters >= job.target_iters - 1e-9:
                    self._finish(job, JobState.FINISHED)
                    continue
                when = completion_time(job, self.now)
                if when is not None:  # otherwise the pending completion event is still right
                    self._epoch[job] += 1
                    self._push(when, EV_COMPLETE, job, self._epoch[job])
                    if job.spec.nas_group is not None:
                        self._push_rung(job)
            else:
                cancel_completion(job)
                self._epoch[job] += 1

    def _push_rung(self, job: Job) -> None:
        """Schedule the NAS trial's next rung at its current rate, under its current completion epoch."""
        at = self.nas.rung_time(job, self.now)
        if at is not None:
            self._push(at, EV_RUNG, job, self._epoch[job])

    def _finish(self, job: Job, state: JobState, by: str = "") -> None:
        """End the job in ``state``; ``by``: who stopped a STOPPED job ("command" or "nas")."""
        self._touch(job)  # materialise progress (and bytes) up to now
        for t in job.tasks:
            if t.state == TASK_RUNNING:
                self._detach(t)
            elif t.state == TASK_WAITING:
                self.queue.pop(t.tid, None)
                self.ready.left(t)
                t.waited += self.now - t.queued_since
            t.state = TaskState.DONE
        self._absorb(self.resources.move_traffic(job, *stop_progress(job)))
        job.state = state
        job.record.end_time = self.now
        job.record.stopped_by = by
        self._epoch[job] += 1
        if job.record.acc_at_deadline < 0:
            job.record.acc_at_deadline = job.accuracy()
        self.active_jobs.pop(job.jid, None)
        self._gang_token.pop(job.jid, None)
        self.leases.release(job)
        self.metrics.on_job_end(job)
        self._dirty.pop(job, None)
        self._request_tick()

    # ------------------------------------------------------------------ decision points
    def _after_round(self) -> None:
        """A tick's decision round ended (or the tick needed no decision): run the controllers on the
        state the policy left (MLF-C judges overload by what is *still* queued), then, if something is
        still actionable, look again at the next tick."""
        for ctl in self.controllers:
            ctl.on_tick(self)
        self.leases.renew_due(self.now)
        self._flush()
        if not self.active_jobs:
            return
        at = self.decisions.next_look(self)
        if at is not None:
            self._request_tick(at)

    def _finalise(self) -> None:
        for job in list(self.active_jobs.values()):
            self._touch(job)
        self._dirty.clear()
