"""Run-time jobs and tasks: a :class:`Job` is its spec (:class:`~clustergym.core.workload.JobSpec`, immutable),
its run-time state (the fields below) and its :class:`JobRecord` (what the metrics report)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, Iterable

import numpy as np

from .catalogue import ModelProfile
from .dag import TaskTemplate, build_tasks
from .workload import STOP_OPTIONS, JobSpec


# the child of the simulator's seed that draws OptStop's prediction errors (the simulator's own Generator is the
# seed itself, so these draws shift none of its draws)
OPTSTOP_STREAM = 1


def optstop_prediction_errors(seed: int, n_jobs: int, sigma: float) -> list[float]:
    """Per job (in submission order), the factor OptStop's learning-curve predictor is off by: exp(eps), eps ~
    N(0, sigma), from a stream of its own (:data:`OPTSTOP_STREAM`, a child of ``seed``)."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(OPTSTOP_STREAM,))))
    return np.exp(sigma * rng.standard_normal(n_jobs)).tolist()


class InvalidCommand(ValueError):
    """A scheduler command the simulator refuses; the message says exactly why (raised by the engine and the
    command modules; ``clustergym.core.engine`` re-exports it)."""


class TaskState(IntEnum):
    PENDING = 0  # job not yet submitted
    WAITING = 1  # in the queue
    RUNNING = 2  # holds a GPU slot (or, for a PS, a server)
    DONE = 3


class JobState(IntEnum):
    PENDING = 0
    ACTIVE = 1  # submitted, not finished
    FINISHED = 2  # reached its stopping point
    STOPPED = 3  # stopped before its stopping point: by a scheduler command, or by its NAS group's controller


# The same members as module constants, for the simulator's hot loops: an attribute of an Enum class costs
# about ten times a global lookup.
TASK_WAITING, TASK_RUNNING = TaskState.WAITING, TaskState.RUNNING
JOB_ACTIVE = JobState.ACTIVE


@dataclass(eq=False, slots=True)
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
    waited: float = 0.0  # total time spent in the queue up to its last placement
    queue_seq: int = -1  # queue entries before its last one (its place in the queue: core/ready.py)

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


@dataclass(eq=False, slots=True)
class JobRecord:
    """What happened to a job, for the per-job records and the summary (times in simulated seconds, -1: not
    yet)."""

    first_start: float = -1.0  # first time every task held a slot
    end_time: float = -1.0
    acc_at_deadline: float = -1.0  # accuracy reached by the deadline (set at the deadline or the end)
    cross_mb: float = 0.0  # cross-server MB: per-iteration traffic and migrated task state
    migrations: int = 0
    preemptions: int = 0
    gang_releases: int = 0
    stopped_by: str = ""  # a STOPPED job: "command" (a scheduler's) or "nas" (its NAS group's controller)


class Job:
    """A submitted training job: ``spec``, ``model`` and ``curve`` (its model's learning curve at the job's
    ``spec.curve_pace``) (fixed), ``tasks`` (its DAG), run-time state and
    ``record``.

    Progress is rate-based: between events ``iters`` grows at ``rate`` iterations per second (``rate`` > 0
    only while every task holds a slot); the engine materialises it (``iters``, ``waiting_time``,
    ``running_time`` up to ``last_update``) at events. Read progress *now* through
    :mod:`clustergym.core.progress` (``iters_at`` ...) or a policy's :class:`~clustergym.core.view.ClusterView`.
    ``_pace`` is the progress layer's private state (placement plan, contention key, pending completion).
    """

    __slots__ = ("spec", "model", "curve", "tasks", "state", "n_placed", "usage_factor", "optimum_true",
                 "optimum_predicted", "stop_option", "target_iters", "iters", "rate", "last_update", "paused_until",
                 "waiting_time", "running_time", "record", "accum_steps", "_pace")

    def __init__(self, spec: JobSpec, model: ModelProfile, optstop_error: float = 1.0) -> None:
        self.spec = spec
        self.model = model
        self.tasks: list[Task] = []
        self.state = JobState.PENDING
        self.n_placed = 0  # tasks holding a slot
        self.usage_factor = 1.0  # actual resource use / nominal demand (resampled by the engine)
        self.curve = model.curve.paced(spec.curve_pace)  # its model's curve at its own pace (a NAS trial's)
        # OptStop (MLFS §3.5): the progress where accuracy stops improving, on the true curve, and as the
        # learning-curve predictor sees it (the true one x ``optstop_error``, capped to the budget)
        self.optimum_true = self.curve.optimum_progress()
        self.optimum_predicted = min(1.0, self.optimum_true * optstop_error)
        self.stop_option = spec.stop_option  # effective option (the system may change it: Simulator.set_stop_option)
        self.target_iters = self.target_for(spec.stop_option)
        self.iters = 0.0
        self.rate = 0.0
        self.last_update = 0.0
        self.paused_until = 0.0  # checkpoint/restore: no progress before this time
        self.waiting_time = 0.0  # submitted and not progressing, up to last_update
        self.running_time = 0.0  # progressing, up to last_update
        self.record = JobRecord()
        self.accum_steps = 1  # sub-batches per iteration (gradient accumulation: clustergym.core.accumulation)
        self._pace: Any = None

    def __repr__(self) -> str:
        return f"Job({self.jid}, {self.spec.model}, {self.state.name}, {self.n_placed}/{len(self.tasks)} placed)"

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
        return self.curve.accuracy_at(self.progress)

    def loss(self) -> float:
        return self.curve.loss_at(self.progress)

    def loss_at_iter(self, i: float) -> float:
        return self.curve.loss_at(i / self.spec.max_iterations)

    def stop_option_error(self, option: str | None) -> str | None:
        """Why this job's stopping rule may not become ``option`` now (None if it may).

        MLFS §3.5: the user picks an option and says whether the system may change it; the system only ever
        moves a job to a cheaper option, in the order run-all -> opt-stop -> requirement, and may always give
        it back its own."""
        jid = self.jid
        if option not in STOP_OPTIONS:
            return f"unknown stop option {option!r}; known: {STOP_OPTIONS}"
        if self.state != JOB_ACTIVE:
            return f"job {jid} is {self.state.name}, only ACTIVE jobs change their stopping rule"
        if option == self.stop_option:
            return f"job {jid} already uses {option!r}"
        own = self.spec.stop_option
        if option == own:
            return None
        if not self.spec.stop_changeable:
            return f"job {jid}'s user did not allow the system to change its stopping rule ({own!r})"
        if STOP_OPTIONS.index(option) < STOP_OPTIONS.index(own):
            return f"job {jid}: {option!r} is not cheaper than the user's {own!r} (order {STOP_OPTIONS})"
        return None

    def target_for(self, option: str) -> float:
        """The iteration the job stops at under ``option``: all of its budget, OptStop's *predicted* optimum
        (the scheduler cannot see the true curve), or the first iteration meeting the accuracy requirement."""
        spec = self.spec
        if option == "run-all":
            x = 1.0
        elif option == "opt-stop":
            x = self.optimum_predicted
        elif option == "requirement":
            x = min(1.0, self.curve.progress_for_accuracy(spec.accuracy_requirement))
        else:
            raise ValueError(f"unknown stop option {option!r}; known: {STOP_OPTIONS}")
        return self.iterations_at(x)

    def iterations_at(self, x: float) -> float:
        """The whole iteration at progress ``x`` of the budget (at least 1, at most the budget)."""
        return max(1.0, min(float(self.spec.max_iterations), math.ceil(x * self.spec.max_iterations)))


def make_job(spec: JobSpec, model: ModelProfile, first_tid: int, optstop_error: float = 1.0) -> Job:
    """The run-time job of ``spec`` with its task DAG; ``optstop_error``: the factor OptStop's predictor is off
    by for this job (1 = exact)."""
    job = Job(spec, model, optstop_error)
    templates: list[TaskTemplate] = build_tasks(spec, model)
    job.tasks = [Task(first_tid + i, job, t) for i, t in enumerate(templates)]
    return job


def make_jobs(specs: Iterable[JobSpec], models: Callable[[str], ModelProfile], seed: int,
              optstop_error_sigma: float) -> list[Job]:
    """The jobs of ``specs`` in (submit time, job id) order with consecutive task ids, each with its OptStop
    prediction error (:func:`optstop_prediction_errors`, drawn in that order). A duplicate job id is a
    ValueError."""
    ordered = sorted(specs, key=lambda s: (s.submit_time, s.job_id))
    jobs: list[Job] = []
    seen: set[int] = set()
    n_tasks = 0
    for spec, error in zip(ordered, optstop_prediction_errors(seed, len(ordered), optstop_error_sigma)):
        if spec.job_id in seen:
            raise ValueError(f"duplicate job_id {spec.job_id}")
        seen.add(spec.job_id)
        job = make_job(spec, models(spec.model), n_tasks, error)
        n_tasks += len(job.tasks)
        jobs.append(job)
    return jobs
