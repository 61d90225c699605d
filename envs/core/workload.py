"""Job specifications: what a trace or generator hands to the simulator.

A :class:`JobSpec` is immutable input. The simulator turns it into a run-time :class:`clustergym.core.job.Job`
with a task DAG (:mod:`clustergym.core.dag`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SyncMode = Literal["ps", "allreduce"]
SLOClass = Literal["best-effort", "soft", "strict"]
StopOption = Literal["run-all", "opt-stop", "requirement"]

SYNC_MODES: tuple[str, ...] = ("ps", "allreduce")
SLO_CLASSES: tuple[str, ...] = ("best-effort", "soft", "strict")
# MLFS §3.5 options i), ii), iii), in the order the system may move a job along under overload.
STOP_OPTIONS: tuple[str, ...] = ("run-all", "opt-stop", "requirement")

# MLFS §4.1's workload: the five algorithms it ran (AlexNet, ResNet, MLP, LSTM, SVM) as mapping weights, and
# "The number of GPUs needed by each ML job was randomly selected from {1, 2, 4, 8, 16, 32}".
MLFS_MODEL_WEIGHTS: dict[str, float] = {"AlexNet": 1.0, "ResNet-50": 1.0, "MLP": 1.0, "LSTM": 1.0, "SVM": 1.0}
MLFS_GPU_CHOICES: tuple[int, ...] = (1, 2, 4, 8, 16, 32)


@dataclass(frozen=True)
class JobSpec:
    """One training job.

    Times are seconds from the start of the workload. ``n_partitions x n_replicas`` tasks each need one
    GPU slot (model partitions x data-parallel replicas, MLFS §3.2); with ``sync == "ps"`` the job also
    has one parameter-server task that needs CPU and memory but no GPU compute.

    ``max_iterations`` is the iteration budget (option "run-all" runs all of them).
    ``reference_runtime`` is how long the job ran in its source trace (seconds), for records.
    ``stop_changeable`` says whether MLF-C may move the job to a cheaper stopping option under overload.
    """

    job_id: int
    submit_time: float
    model: str
    n_partitions: int
    n_replicas: int
    max_iterations: int
    accuracy_requirement: float
    deadline: float
    urgency: int = 5
    sync: SyncMode = "allreduce"
    slo_class: SLOClass = "best-effort"
    stop_option: StopOption = "run-all"
    stop_changeable: bool = True
    data_size_mb: float = 500.0
    comm_ps_mb: float = 75.0
    comm_worker_mb: float = 75.0
    reference_runtime: float = 0.0
    source: str = ""

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> ValueError:
            return ValueError(f"job {self.job_id}: field {field!r} {why} (got {getattr(self, field)!r})")

        if self.submit_time < 0:
            raise bad("submit_time", "must be >= 0")
        if self.n_partitions < 1:
            raise bad("n_partitions", "must be >= 1")
        if self.n_replicas < 1:
            raise bad("n_replicas", "must be >= 1")
        if self.max_iterations < 1:
            raise bad("max_iterations", "must be >= 1")
        if not 0.0 <= self.accuracy_requirement <= 1.0:
            raise bad("accuracy_requirement", "must be in [0, 1]")
        if self.deadline <= self.submit_time:
            raise bad("deadline", "must be after submit_time")
        if not 1 <= self.urgency <= 10:
            raise bad("urgency", "must be in [1, 10]")
        if self.sync not in SYNC_MODES:
            raise bad("sync", f"must be one of {SYNC_MODES}")
        if self.slo_class not in SLO_CLASSES:
            raise bad("slo_class", f"must be one of {SLO_CLASSES}")
        if self.stop_option not in STOP_OPTIONS:
            raise bad("stop_option", f"must be one of {STOP_OPTIONS}")
        for f in ("data_size_mb", "comm_ps_mb", "comm_worker_mb", "reference_runtime"):
            if getattr(self, f) < 0:
                raise bad(f, "must be >= 0")

    @property
    def n_gpus(self) -> int:
        return self.n_partitions * self.n_replicas
