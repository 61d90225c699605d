"""Run-time jobs and tasks."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import IntEnum

from .catalogue import ModelProfile
from .dag import TaskTemplate, build_tasks
from .workload import STOP_OPTIONS, JobSpec


class TaskState(IntEnum):
    PENDING = 0  # job not yet submitted
    WAITING = 1  # in the queue
    RUNNING = 2  # holds a GPU slot (or, for a PS, a server)
    DONE = 3


class JobState(IntEnum):
    PENDING = 0
    ACTIVE = 1  # submitted, not finished
    FINISHED = 2  # reached its stopping point
    STOPPED = 3  # stopped by a scheduler command


# The same members as module constants, for the simulator's hot loops: an attribute of an Enum class costs
# about ten times a global lookup.
TASK_WAITING, TASK_RUNNING = TaskState.WAITING, TaskState.RUNNING
JOB_ACTIVE = JobState.ACTIVE


@dataclass(eq=False)
class Task:
    """One task of a job: a template plus where it runs."""

    tid: int  # global id
    job: "Job"
    t: TaskTemplate
    state: TaskState = TaskState.PENDING
    server: int = -1
    gpu: int = -1  # global GPU index, -1 for a PS or when not placed
    queued_since: float = 0.0  # when it last entered the queue
    placed_at: float = -1.0
    waited: float = 0.0  # total time spent in the queue

    @property
    def is_ps(self) -> bool:
        return self.t.kind == "ps"

    def is_ready(self) -> bool:
        """Waiting and every DAG parent already holds a slot: MLFS's dependency rule for placement."""
        if self.state != TASK_WAITING:
            return False
        tasks = self.job.tasks
        for p in self.t.parents:
            if tasks[p].state != TASK_RUNNING:
                return False
        return True

    def __repr__(self) -> str:
        return f"Task({self.tid}, job={self.job.jid}, {self.t.kind}, p={self.t.partition}, r={self.t.replica}, {self.state.name})"


@dataclass(eq=False)
class Job:
    """A submitted training job and its progress.

    Progress is rate-based: between events ``iters`` grows linearly at ``rate`` iterations per second;
    ``sync_progress(now)`` materialises it. ``epoch`` versions every scheduled completion event so stale
    ones are ignored.
    """

    spec: JobSpec
    model: ModelProfile
    tasks: list[Task] = field(default_factory=list)
    state: JobState = JobState.PENDING
    iters: float = 0.0
    rate: float = 0.0
    last_update: float = 0.0
    paused_until: float = 0.0  # checkpoint/restore: no progress before this time
    epoch: int = 0
    usage_factor: float = 1.0
    stop_option: str = ""  # effective option (MLF-C may change it)
    target_iters: float = 0.0
    iter_time: float = math.inf
    cross_mb_per_iter: dict = field(default_factory=dict)
    cross_mb_rate_total: float = 0.0
    cross_servers: frozenset = frozenset()  # the servers in cross_mb_per_iter's pairs
    n_placed: int = 0
    plan: object = None  # dag.PlacementPlan of the current placement (None: recompute)
    graph: object = None  # dag.JobGraph (placement-independent), built at the first full placement
    placement_version: int = 0  # bumped whenever one of its tasks is attached or detached (keys caches)
    # (servers, their CPU and memory demand sums, GPUs) of the running tasks, for resource-use changes;
    # None = recompute (reset with ``plan`` whenever a task is attached or detached)
    usage_layout: object = None
    # per task, set by the simulator when the task is placed (meaningful while it is): compute share x iteration
    # time on its GPU, and its (server, GPU)
    unit_compute: list = field(default_factory=list)
    slots: list = field(default_factory=list)
    slow_key: tuple | None = None  # contention factors the current rate was computed with
    iter_times: dict = field(default_factory=dict)  # slow_key -> iteration time, for the current ``plan``
    scheduled: tuple | None = None  # (rate, target, paused_until) of the pending completion event
    has_run: bool = False
    # records
    first_start: float = -1.0
    end_time: float = -1.0
    waiting_time: float = 0.0
    running_time: float = 0.0
    acc_at_deadline: float = -1.0
    cross_mb: float = 0.0
    migrations: int = 0
    preemptions: int = 0
    gang_releases: int = 0

    @property
    def jid(self) -> int:
        return self.spec.job_id

    @property
    def n_tasks(self) -> int:
        return len(self.tasks)

    @property
    def fully_placed(self) -> bool:
        return self.n_placed == len(self.tasks)

    @property
    def progress(self) -> float:
        return self.iters / self.spec.max_iterations

    def accuracy(self) -> float:
        return self.model.curve.accuracy_at(self.progress)

    def loss(self) -> float:
        return self.model.curve.loss_at(self.progress)

    def loss_at_iter(self, i: float) -> float:
        return self.model.curve.loss_at(i / self.spec.max_iterations)

    def target_for(self, option: str) -> float:
        spec, curve = self.spec, self.model.curve
        if option == "run-all":
            x = 1.0
        elif option == "opt-stop":
            x = curve.optimum_progress()
        elif option == "requirement":
            x = min(1.0, curve.progress_for_accuracy(spec.accuracy_requirement))
        else:
            raise ValueError(f"unknown stop option {option!r}; known: {STOP_OPTIONS}")
        return max(1.0, min(float(spec.max_iterations), math.ceil(x * spec.max_iterations)))


def make_job(spec: JobSpec, model: ModelProfile, first_tid: int) -> Job:
    job = Job(spec=spec, model=model)
    templates: list[TaskTemplate] = build_tasks(spec, model)
    job.tasks = [Task(first_tid + i, job, t) for i, t in enumerate(templates)]
    job.unit_compute = [0.0] * len(templates)
    job.slots = [(-1, -1)] * len(templates)
    job.stop_option = spec.stop_option
    job.target_iters = job.target_for(spec.stop_option)
    return job
