"""A policy's read-only view of a running simulation.

:class:`ClusterView` is what heuristics (``clustergym.baselines``) read: the queue, the jobs' spec and progress
*now*, the servers' and GPUs' capacity, allocation, actual use and overload, and the simulator's rules (the
fit rule, a task's resource use, overloaded GPUs and resources, whether a command would be accepted). Its
arrays are read-only numpy views of the live cluster state: they follow the simulation without copying. Jobs
and tasks are the simulator's own objects; read their spec (``job.spec``, ``job.model``, ``task.t``) and
placement (``task.state``, ``task.server``, ``job.n_placed``) from them, and their progress through the view.

Build one view per simulator (``ClusterView(sim)``); two views of the same simulator compare equal.
"""
from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from . import progress
from .commands import Command, command_error
from .interference import Factor
from .job import Job, JobState, Task
from .lease import checkpoint_s
from .resources import gpu_overloaded, gpu_use

if TYPE_CHECKING:
    from .engine import Simulator


def _read_only(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class ClusterView:
    """Read-only view of ``sim`` for policies (see the module docstring)."""

    def __init__(self, sim: "Simulator"):
        self._sim = sim
        c = sim.cluster
        self.overload_threshold: float = sim.config.overload_threshold  # h_r
        self.tick_s: float = sim.config.tick_s
        self.n_servers: int = c.n_servers
        self.n_gpus: int = c.n_gpus
        # servers (one row per server)
        self.server_gpu_type: tuple[str, ...] = tuple(c.server_gpu_type)
        self.server_first_gpu, self.server_n_gpus = _read_only(c.server_first_gpu), _read_only(c.server_n_gpus)
        self.cpu_cap, self.mem_cap, self.nic_gbps = _read_only(c.cpu_cap), _read_only(c.mem_cap), _read_only(c.nic_gbps)
        self.intra_gbps = _read_only(c.intra_gbps)
        self.cpu_alloc, self.mem_alloc = _read_only(c.cpu_alloc), _read_only(c.mem_alloc)  # nominal demand placed
        self.cpu_use, self.mem_use = _read_only(c.cpu_use), _read_only(c.mem_use)  # actual use
        self.net_mbps = _read_only(c.net_mbps)  # cross-server MB/s through the NIC
        self.max_free_gpu_mem = _read_only(c.server_max_free_gpu_mem)  # largest free GPU memory on one GPU
        self.idle_gpus = _read_only(c.server_idle_gpus)  # GPUs without a task
        self.overloaded = _read_only(c.overloaded)  # MLFS's overload flag (any resource above h_r)
        # GPUs (one row per GPU)
        self.gpu_server = _read_only(c.gpu_server)
        self.gpu_type: tuple[str, ...] = tuple(c.gpu_type)
        self.gpu_mem_cap, self.gpu_mem_used = _read_only(c.gpu_mem_cap), _read_only(c.gpu_mem_used)
        self.gpu_load = _read_only(c.gpu_load)  # summed utilisation of the jobs on the GPU
        self.gpu_n_tasks, self.gpu_n_jobs = _read_only(c.gpu_n_tasks), _read_only(c.gpu_n_jobs)

    def __reduce__(self) -> tuple:
        # rebuilt on its simulator: a copy or unpickling of the arrays would be frozen, not views of that simulator
        return ClusterView, (self._sim,)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterView) and other._sim is self._sim

    def __hash__(self) -> int:
        return id(self._sim)

    # -------------------------------------------------------------------------------------- time, queue
    @property
    def now(self) -> float:
        return self._sim.now

    @property
    def decisions(self) -> int:
        """Decision points reached so far (a decision round is one (decisions, now) pair)."""
        return self._sim.decision_count

    @property
    def placement_version(self) -> int:
        """A count of task attachments and detachments so far: while it is unchanged, every task is where it
        was (no placement, migration, requeue, preemption or end of a job in between), so a policy may keep
        what it derived from the placement alone."""
        return self._sim.cluster.placement_version

    @property
    def round_moved_tasks(self) -> set[int]:
        """Ids of the tasks placed, moved or requeued in this decision round (every task of a preempted job):
        the round rule (:mod:`clustergym.core.rounds`) forbids moving them again in it. Read only."""
        return self._sim.round.moved_tasks

    def ready_tasks(self) -> list[Task]:
        """Waiting tasks whose DAG parents all hold slots, in queue order."""
        return self._sim.ready_tasks()

    def waiting_tasks(self) -> list[Task]:
        """Every task in the queue, in queue order."""
        return self._sim.waiting_tasks()

    def active_jobs(self) -> list[Job]:
        """Submitted, unfinished jobs, in arrival order."""
        return list(self._sim.active_jobs.values())

    def job(self, jid: int) -> Job:
        return self._sim.job(jid)

    def task(self, tid: int) -> Task:
        return self._sim.task(tid)

    def running_tasks(self, server: int) -> tuple[Task, ...]:
        """The tasks on ``server``, by task id."""
        return self._sim.cluster.tasks_by_id(server)

    def cluster_overloaded(self) -> bool:
        """MLFS §3.5's overload test of MLF-C: tasks in the queue, or the cluster overload degree above h_s."""
        return self._sim.cluster_overloaded()

    def overloaded_servers(self) -> list[int]:
        return self._sim.overloaded_servers()

    def overloaded_for(self, server: int) -> float:
        """How long ``server`` has been overloaded without a break, up to now (0 if it is not overloaded)."""
        if not self.overloaded[server]:
            return 0.0
        return self._sim.now - self._sim.overloaded_since[server]

    # ---------------------------------------------------------------------------------- jobs' progress
    def iters(self, job: Job) -> float:
        """Iterations the job has done by now."""
        return progress.iters_at(job, self._sim.now)

    def remaining_iters(self, job: Job) -> float:
        """Iterations left to the job's current stopping point."""
        return progress.remaining_iters_at(job, self._sim.now)

    def observed_loss(self, job: Job, k: float) -> float:
        """The training loss the job reported after iteration ``k`` (its learning curve at that point). Only the
        prefix it has run can be read: ``k`` beyond the iterations done by now is a ValueError (a scheduler
        cannot see a job's future loss)."""
        done = self.iters(job)
        if not 0.0 <= k <= done + 1e-9:
            raise ValueError(f"job {job.jid} has run {done:g} iterations; its loss after iteration {k!r} is not observed yet")
        return job.loss_at_iter(k)

    def nas_trials(self, job: Job) -> list[Job]:
        """The submitted trials of ``job``'s NAS group (running or ended, itself included), by job id; empty if it
        is in no group. A trial not yet submitted is not seen."""
        group = job.spec.nas_group
        if group is None:
            return []
        return [j for j in self._sim.nas.trials(group) if j.state != JobState.PENDING]

    def running_time(self, job: Job) -> float:
        """Time the job has spent progressing, up to now."""
        return progress.running_time_at(job, self._sim.now)

    def waiting_time(self, task: Task) -> float:
        """Time the task has spent in the queue, up to now."""
        return progress.waiting_time_at(task, self._sim.now)

    def speed(self, job: Job) -> float:
        """Iterations per second now (0 unless every task holds a slot)."""
        return job.rate

    def ref_iter_time(self, job: Job) -> float:
        """The job's model's single-GPU iteration time averaged over the cluster's GPUs (s): a run-time
        estimate known at submission by profiling (MLF-H's r_k, Hare's T̄_n)."""
        return self._sim.cluster.mean_iter_time(job.model)

    def checkpoint_s(self, job: Job, n_gpus: int | None = None) -> float:
        """The job's suspend + resume overhead (s) if it were suspended now (UniSched's t^sr): what the simulator
        charges when it resumes on its ``job.spec.n_gpus`` GPUs, or on ``n_gpus`` (UniSched measures it while
        profiling on at most 2 GPUs)."""
        return checkpoint_s(self._sim.config, job.spec.n_gpus if n_gpus is None else n_gpus)

    def remaining_time(self, job: Job) -> float:
        """Estimated remaining run time (s): remaining iterations x :meth:`ref_iter_time`."""
        return self.remaining_iters(job) * self.ref_iter_time(job)

    # ------------------------------------------------------------------------------- resources, rules
    def utilisation(self) -> np.ndarray:
        """(S, 4) actual use / capacity of (GPU, CPU, memory, network); a GPU counts at most fully used."""
        return self._sim.cluster.utilisation_matrix()

    def feasible_servers(self, task: Task, moving: bool = False) -> np.ndarray:
        """Servers where ``task`` fits by nominal demand now (the simulator's fit rule); ``moving``: the task
        runs and its own slot counts as free."""
        return self._sim.feasible_servers(task, moving)

    def fit_reason(self, task: Task, server: int, moving: bool = False) -> str | None:
        """Why ``task`` cannot go to ``server`` now, or None."""
        return self._sim.fit_reason(task, server, moving=moving)

    def gpu_use(self, task: Task) -> float:
        """The GPU utilisation ``task`` causes (its model's utilisation x its job's usage factor, at most 1)."""
        return gpu_use(task.t.gpu_util, task.job.usage_factor)

    def task_use(self, task: Task) -> tuple[float, float]:
        """The CPU cores and GB of memory ``task`` actually uses (demand x its job's usage factor)."""
        f = task.job.usage_factor
        return task.t.cpu_cores * f, task.t.memory_gb * f

    def hot_gpus(self) -> np.ndarray:
        """GPUs overloaded by sharing (:func:`clustergym.core.resources.gpu_overloaded`)."""
        return gpu_overloaded(self.gpu_load, self.gpu_n_jobs, self.overload_threshold)

    def overloaded_resources(self, server: int) -> np.ndarray:
        """Which of (GPU, CPU, memory, network) are above h_r on ``server`` (GPU: one of its GPUs)."""
        return np.array(self._sim.resources.overloaded_resources(server))

    def gpu_jobs(self, g: int) -> tuple[Job, ...]:
        """The distinct jobs with a task on GPU ``g``, in the order their tasks arrived."""
        return tuple(dict.fromkeys(t.job for t in self._sim.cluster.gpu_tasks[g]))

    def interference(self, model: str, other: str, gpu: int) -> Factor:
        """``model``'s slowdown ratio while sharing GPU ``gpu`` with a job of model ``other``, with its source
        (the simulator's rule: :mod:`clustergym.core.interference`)."""
        return self._sim.resources.interference.pair(model, other, self.gpu_type[gpu])

    def command_error(self, cmd: Command) -> str | None:
        """Why the simulator would refuse ``cmd`` now, or None if it would accept it."""
        return command_error(self._sim, cmd)

    # ------------------------------------------------------------------------------- cluster constants
    @cached_property
    def gpu_type_counts(self) -> dict[str, int]:
        """GPUs per type, types in name order."""
        return {t: self.gpu_type.count(t) for t in sorted(set(self.gpu_type))}
