"""Rate-based job progress: placement plans, iteration time under contention, completion times.

A job progresses only while every task holds a slot, at ``rate = 1 / iteration time`` iterations per second
after any checkpoint/restore pause (``paused_until``). Between events progress is implicit: :func:`advance`
materialises it (the engine calls it at events), :func:`iters_at` and friends read it at any time without
changing the job.

The placement-dependent part of an iteration (transfers, synchronisation, cross-server bytes: a
:class:`~clustergym.core.dag.PlacementPlan`) is kept per job until a task is attached or detached, or the
NIC sharing on one of its cross-server links changes; a contention change only re-runs the critical path
(:func:`~clustergym.core.dag.critical_time`), and the iteration time of each set of contention factors met
under the current placement is kept too.

NIC sharing (README, "Overload and contention"): a server's NIC is shared equally by the jobs whose current
placement sends cross-server bytes through it (``flows[s]`` of them, this job included), so this job's
transfers between servers a and b run at ``min(nic_a / flows_a, nic_b / flows_b)``. The counts are the
resources layer's (:meth:`~clustergym.core.resources.Resources.move_traffic` keeps them and reports the other
jobs on a NIC whose count changed); a job without cross-server traffic never reads them.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from .accumulation import compute_factor
from .dag import critical_time, job_graph, link_plan, retime_shares
from .job import JOB_ACTIVE, Job, Task, TASK_WAITING
from .resource_kernels import NO_PAIRS

_NO_TRAFFIC = (0.0, frozenset(), NO_PAIRS)


class Pace:
    """The progress layer's private state of one job (``job._pace``); nothing else reads it."""

    __slots__ = ("graph", "plan", "nic_key", "unit_compute", "unit_array", "slots", "servers", "gpus", "slowdowns",
                 "slow_array", "slow_key", "iter_times", "cross_plan", "cross_total", "cross_servers", "cross_pairs",
                 "scheduled")

    def __init__(self, n_tasks: int) -> None:
        self.graph = None  # dag.JobGraph (placement-independent), built at the first full placement
        self.plan = None  # dag.PlacementPlan of the current placement (None: recompute)
        # (server, jobs sharing its NIC, ...) where > 1 that ``plan`` was timed with (nic_sharing); None: not yet timed
        self.nic_key: tuple | None = None
        # per task, while it is placed: compute share x iteration time on its GPU, and its (server, GPU)
        self.unit_compute = [0.0] * n_tasks
        self.slots = [(-1, -1)] * n_tasks
        # the same slots as the kernels read them (int64 per task: server, GPU)
        self.servers = np.full(n_tasks, -1, dtype=np.int64)
        self.gpus = np.full(n_tasks, -1, dtype=np.int64)
        # the contention factor of each task in its slot as last computed (None: compute): still right while the
        # slots stay and the resources layer reports no change of the job's slowdowns (``stale`` of refresh_rate)
        self.slowdowns: tuple | None = None
        # unit_compute and slowdowns as float64 arrays (the critical-path kernel's input), made when first needed
        self.unit_array: np.ndarray | None = None
        self.slow_array: np.ndarray | None = None
        self.slow_key: tuple | None = None  # contention factors the current rate was computed with
        self.iter_times: dict = {}  # slow_key -> iteration time, for the current plan
        self.cross_plan = None  # the plan whose cross-server bytes the job sends while running (None: none)
        self.cross_total = 0.0  # sum of ``cross``
        self.cross_servers: frozenset = frozenset()  # the servers in ``cross``'s pairs
        self.cross_pairs: tuple = NO_PAIRS  # ``cross`` as arrays: (servers (n, 2), MB (n,)), the same order
        self.scheduled: tuple | None = None  # (rate, target, paused_until) of the pending completion

    @property
    def cross(self) -> dict:
        """{(server a, server b): MB per iteration} of the current plan while running ({} without one)."""
        return {} if self.cross_plan is None else self.cross_plan.cross


def start(job: Job) -> None:
    """Give a new job its progress state."""
    job._pace = Pace(len(job.tasks))


def on_attach(task: Task, server: int, gpu: int, gpu_type: str | None) -> None:
    """``task`` got a slot (``gpu_type``: its GPU's type, None for a PS): the job's plan is stale."""
    job, t = task.job, task.t
    p = job._pace
    p.unit_compute[t.index] = (t.compute_share * job.model.iter_time(gpu_type) * compute_factor(job.model, job.accum_steps)
                               if gpu >= 0 else 0.0)
    p.slots[t.index] = (server, gpu)
    p.servers[t.index] = server
    p.gpus[t.index] = gpu
    p.plan = None
    p.slowdowns = None


def on_detach(task: Task) -> None:
    p = task.job._pace
    p.plan = None
    p.slowdowns = None


# ---------------------------------------------------------------------------------------- materialising
def advance(job: Job, now: float, on_bytes: Callable[[dict, float], None]) -> None:
    """Materialise the job's progress from ``last_update`` to ``now``: iterations, running and waiting time,
    cross-server bytes (also reported as ``on_bytes(per-iteration bytes, iterations)``)."""
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
            p = job._pace
            if p.cross_servers:  # some cross-server bytes (adding 0 bytes changes nothing)
                job.record.cross_mb += di * p.cross_total
                on_bytes(p.cross, di)
        job.waiting_time += (now - job.last_update) - dt
    else:
        job.waiting_time += now - job.last_update
    job.last_update = now


# -------------------------------------------------------------------------------------------- the rate
def refresh_rate(job: Job, intra: np.ndarray, nic: np.ndarray, flows: list[int], server_slow: list[float],
                 gpu_slow: list[float], gpu_xi: list[dict], stale: set) -> tuple | None:
    """Recompute ``job.rate`` from its placement, the NIC shares of its cross-server links (``flows``: jobs
    crossing each server's NIC, as the resources layer counts them) and the slowdowns of its slots (each task
    runs at the largest of its server's contention, its GPU's over-commit contention and its job's co-location
    interference ratio on that GPU, ``gpu_xi[g]``: :mod:`clustergym.core.interference`; ``stale``: the jobs
    whose slowdowns may have changed since they were last read, as the resources layer reports them: the
    others keep the slowdowns read under their current slots). Returns (old traffic, new traffic), each (rate,
    the servers of its cross-server pairs, the pairs as arrays: servers (n, 2), MB per iteration (n,)), when the
    job's NIC traffic changed, else None."""
    p = job._pace
    old_plan, old_servers, old_pairs = p.cross_plan, p.cross_servers, p.cross_pairs
    old_rate = rate = job.rate
    if job.n_placed == len(job.tasks):
        plan = p.plan
        if plan is None:
            if p.graph is None:
                p.graph = job_graph([t.t for t in job.tasks], job.spec)
            p.plan = plan = link_plan(p.graph, p.servers, p.gpus)
            p.unit_array = np.array(p.unit_compute, dtype=np.float64)
            p.nic_key = None  # not yet timed
        # the NIC shares of its cross-server links (most jobs have none: nothing to share)
        key = nic_sharing(plan.cross_order, old_servers, flows) if plan.cross_order else ()
        if key != p.nic_key:
            p.plan = plan = retime_shares(plan, intra, nic, np.array(key, dtype=np.int64).reshape(-1, 2))
            p.nic_key = key
            p.slow_key = None
            p.iter_times = {}
        slow_key = p.slowdowns
        if slow_key is None or job in stale:
            stale.discard(job)
            p.slowdowns = slow_key = tuple([max(server_slow[s], gpu_slow[g], gpu_xi[g].get(job, 1.0)) if g >= 0
                                            else server_slow[s] for s, g in p.slots])
            p.slow_array = None
        if slow_key != p.slow_key:
            p.slow_key = slow_key
            # contention factors move among a few rounded values as resource use varies: keep the iteration
            # time of each for the current placement
            T = p.iter_times.get(slow_key)
            if T is None:
                if p.slow_array is None:
                    p.slow_array = np.array(slow_key, dtype=np.float64)
                T = p.iter_times[slow_key] = critical_time(plan, p.unit_array, p.slow_array)
            job.rate = rate = 1.0 / T if T > 0 else math.inf
            if old_plan is not plan:
                p.cross_plan = plan
                p.cross_servers = plan.cross_servers
                p.cross_pairs = (plan.cross_ab, plan.cross_mb)
                p.cross_total = sum(plan.cross_mb.tolist())  # (the dict's values, in its order)
    else:
        job.rate = rate = 0.0
        p.cross_plan = None
        p.cross_servers = frozenset()
        p.cross_pairs = NO_PAIRS
        p.cross_total = 0.0
    # NIC loads change only for a job with cross-server traffic before or after (most jobs have none)
    if (old_servers or p.cross_servers) and (old_rate != rate or old_plan is not p.cross_plan):
        return (old_rate, old_servers, old_pairs), (rate, p.cross_servers, p.cross_pairs)
    return None


def nic_sharing(servers: tuple[int, ...], registered: frozenset, flows: list[int]) -> tuple:
    """(server, n, server, n, ...), flat, for the ``servers`` (in server order) whose NIC this job shares with
    others: n = the jobs crossing it with this one counted (``flows`` counts the job only at the servers it is
    ``registered`` at), kept where n > 1. The empty tuple: every NIC is the job's alone. (Flat: one cheap
    conversion to the kernel's (s, n) rows.)"""
    key = []
    for s in servers:
        n = flows[s] if s in registered else flows[s] + 1
        if n > 1:
            key += (s, n)
    return tuple(key)


def stop(job: Job) -> tuple:
    """The job stops progressing for good (it ended): rate 0, no traffic. Returns (old traffic, new traffic)
    as :func:`refresh_rate`."""
    p = job._pace
    old = (job.rate, p.cross_servers, p.cross_pairs)
    job.rate = 0.0
    p.cross_plan, p.cross_servers, p.cross_pairs = None, frozenset(), NO_PAIRS
    return old, _NO_TRAFFIC


def completion_time(job: Job, now: float) -> float | None:
    """When a progressing job reaches its target at its current rate, if that changed since the last call;
    None when the pending completion still holds (rate, target and pause unchanged)."""
    sched = (job.rate, job.target_iters, job.paused_until)
    p = job._pace
    if sched == p.scheduled:
        return None
    p.scheduled = sched
    start = job.paused_until if job.paused_until > now else now  # max(now, paused_until)
    return start + (job.target_iters - job.iters) / job.rate


def cancel_completion(job: Job) -> None:
    """The job stopped progressing: no completion is pending."""
    job._pace.scheduled = None


# -------------------------------------------------------------------------------- reading at any time
def _progressing_since(job: Job) -> float | None:
    """When the job's unmaterialised progress starts (max(last update, pause end)), or None if it is not
    progressing (not fully placed, not active, or rate 0)."""
    if job.rate > 0 and job.n_placed == len(job.tasks) and job.state == JOB_ACTIVE:
        return max(job.last_update, job.paused_until)
    return None


def iters_at(job: Job, now: float) -> float:
    """Iterations done by ``now`` (not materialised: the job is unchanged)."""
    start = _progressing_since(job)
    if start is None:
        return job.iters
    return min(job.target_iters, job.iters + job.rate * max(0.0, now - start))


def remaining_iters_at(job: Job, now: float) -> float:
    """Iterations left to the job's current target at ``now``."""
    return max(0.0, job.target_iters - iters_at(job, now))


def running_time_at(job: Job, now: float) -> float:
    """Time the job has spent progressing, up to ``now``."""
    start = _progressing_since(job)
    return job.running_time if start is None else job.running_time + max(0.0, now - start)


def waiting_time_at(task: Task, now: float) -> float:
    """Time ``task`` has spent in the queue, up to ``now``."""
    return task.waited + (now - task.queued_since if task.state == TASK_WAITING else 0.0)
