"""HLAS's task placement (Hare, Chen et al., IEEE TCC 2024, §II-B.3, §IV): earliest finish time with relaxed
synchronisation, over the GPUs a job may use now.

A round's tasks go one by one to the GPU where they would finish first (Fig. 10's rule, :func:`eft_split` in
:mod:`clustergym.baselines.hlas`); a GPU may run several tasks of the round one after another (relaxed
scale-fixed synchronisation: the simulator times a job whose workers share a GPU by their summed compute,
:func:`clustergym.core.dag.critical_time`). Hare runs one job per GPU at a time (its x_{n,m}^t), so a job may
use:

- an idle GPU, for as many of its tasks as the GPU's memory holds, when no other job runs on the server (the
  simulator puts a task on the server's least-loaded GPU, the one with the fewest tasks on a tie, so extra
  tasks spread evenly over the job's own GPUs and never land on another job's);
- an idle GPU of a server where other jobs run, for one task (a second would go to the least-loaded GPU,
  possibly another job's);
- the GPUs it already holds (its own tasks' compute counts as busy time there).

``freed`` jobs count as gone: the GPUs they hold are what a round-level reschedule could give to others.
Times are compute only (Hare assumes synchronisation shorter than training, T^c > T^s).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

from clustergym.core.job import Job, Task, TaskState
from clustergym.core.resources import fits
from clustergym.core.view import ClusterView


@dataclass
class Gpu:
    """One GPU as a job's plan sees it."""

    server: int
    busy: float  # compute seconds per round of the job's own tasks on it
    slots: int  # tasks of the job it may still take
    host: list[float]  # [CPU cores, GB host memory] still free on its server (shared by the server's GPUs)


@dataclass
class Plan:
    """Where a job's unplaced tasks would go: ``servers[i]`` for ``tasks[i]``, and the job's round time."""

    tasks: list[Task]
    servers: list[int]
    round_time: float


class Occupancy:
    """Who holds each GPU now: per GPU, the jobs with a task on it and their number of tasks there."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.jobs_on: list[dict[int, int]] = [{} for _ in range(len(view.gpu_server))]
        for s in range(view.n_servers):
            for t in view.running_tasks(s):
                if t.gpu >= 0:
                    d = self.jobs_on[t.gpu]
                    d[t.job.jid] = d.get(t.job.jid, 0) + 1

    def gpus(self, job: Job, servers: Iterable[int], freed: frozenset[int], relaxed: bool,
             idle: bool = False, unplaced: bool = False) -> list[Gpu]:
        """The GPUs of ``servers`` the job may use (module docstring), with its own busy time on them.
        ``idle``: as if nothing ran (the job's plan on an idle group); ``unplaced``: as if the job's own tasks
        were back in the queue."""
        view = self.view
        own = job.jid
        busy = _own_busy(view, job) if not (idle or unplaced) else {}
        need = _worker_memory(job)
        out: list[Gpu] = []
        for s in servers:
            first, n = int(view.server_first_gpu[s]), int(view.server_n_gpus[s])
            host = self.host_free(job, s, freed, idle, unplaced)
            others = [self._others(g, own, freed) for g in range(first, first + n)] if not idle else [0] * n
            alone = not any(others)
            for g in range(first, first + n):
                if others[g - first]:
                    continue
                mine = 0 if idle or unplaced else self.jobs_on[g].get(own, 0)
                fit = int(view.gpu_mem_cap[g] // need) if need > 0 else n
                cap = (fit if relaxed and alone else 1) - mine
                if cap > 0 or mine:
                    out.append(Gpu(s, busy.get(g, 0.0), max(cap, 0), host))
        return out

    def host_free(self, job: Job, s: int, freed: frozenset[int], idle: bool, unplaced: bool) -> list[float]:
        """[CPU cores, GB host memory] free on server ``s`` once the ``freed`` jobs (and, ``unplaced``, the job
        itself) are gone; the whole server when ``idle``."""
        view = self.view
        if idle:
            return [float(view.cpu_cap[s]), float(view.mem_cap[s])]
        cpu, mem = float(view.cpu_cap[s] - view.cpu_alloc[s]), float(view.mem_cap[s] - view.mem_alloc[s])
        for t in view.running_tasks(s):
            if t.job.jid in freed or (unplaced and t.job is job):
                cpu += t.t.cpu_cores
                mem += t.t.memory_gb
        return [cpu, mem]

    def _others(self, g: int, own: int, freed: frozenset[int]) -> int:
        return sum(1 for j in self.jobs_on[g] if j != own and j not in freed)


def _worker_memory(job: Job) -> float:
    return max((t.t.gpu_memory_gb for t in job.tasks if not t.is_ps), default=0.0)


def _own_busy(view: ClusterView, job: Job) -> dict[int, float]:
    """Per GPU the job holds: the summed compute seconds per round of its tasks there."""
    busy: dict[int, float] = {}
    for t in job.tasks:
        if t.state == TaskState.RUNNING and t.gpu >= 0:
            busy[t.gpu] = busy.get(t.gpu, 0.0) + t.t.compute_share * job.model.iter_time(view.gpu_type[t.gpu])
    return busy


def task_time(view: ClusterView, task: Task, server: int) -> float:
    """Compute seconds of one round of ``task`` on ``server``'s GPU type."""
    return task.t.compute_share * task.job.model.iter_time(view.server_gpu_type[server])


def eft_plan(view: ClusterView, tasks: Sequence[Task], gpus: list[Gpu],
             prefer: frozenset[int] = frozenset()) -> Plan | None:
    """Earliest-finish-time split of the job's unplaced ``tasks`` over ``gpus`` (ties: servers in ``prefer``
    first, then the lower server index), each within its server's free CPU and host memory; a parameter server
    goes to the server that takes most of the workers. None if they do not all fit. Round time: the largest
    busy time of a GPU the job uses."""
    workers = sorted((t for t in tasks if not t.is_ps), key=lambda t: (-t.t.compute_share, t.tid))
    where: dict[int, int] = {}
    used: list[Gpu] = [g for g in gpus if g.busy > 0]
    for w in workers:
        best, key = None, None
        for g in gpus:
            if g.slots <= 0 or not _host_fits(g.host, w):
                continue
            k = (g.busy + task_time(view, w, g.server), g.server not in prefer, g.server)
            if key is None or k < key:
                best, key = g, k
        if best is None:
            return None
        best.busy, best.slots = key[0], best.slots - 1
        best.host[0] -= w.t.cpu_cores
        best.host[1] -= w.t.memory_gb
        used.append(best)
        where[w.tid] = best.server
    for ps in (t for t in tasks if t.is_ps):
        hosts = {g.server: g.host for g in gpus}
        counts = [(-list(where.values()).count(s), s) for s in hosts if _host_fits(hosts[s], ps)]
        if not counts:
            return None
        where[ps.tid] = min(counts)[1]
    return Plan(list(tasks), [where[t.tid] for t in tasks], max((g.busy for g in used), default=0.0))


def _host_fits(host: list[float], task: Task) -> bool:
    return fits(host[0], task.t.cpu_cores) and fits(host[1], task.t.memory_gb)


def current_round_time(view: ClusterView, job: Job) -> float:
    """A running job's round time under its placement (compute only, as :func:`eft_plan` times it)."""
    return max(_own_busy(view, job).values(), default=0.0)
