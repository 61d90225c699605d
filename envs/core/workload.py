"""Job specifications: what a trace or generator hands to the simulator.

A :class:`JobSpec` is immutable input. The simulator turns it into a run-time :class:`clustergym.core.job.Job`
with a task DAG (:mod:`clustergym.core.dag`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

SyncMode = Literal["ps", "allreduce"]
SLOClass = Literal["best-effort", "soft", "strict"]
StopOption = Literal["run-all", "opt-stop", "requirement"]

SYNC_MODES: tuple[str, ...] = ("ps", "allreduce")
SLO_CLASSES: tuple[str, ...] = ("best-effort", "soft", "strict")
# MLFS §3.5 options i), ii), iii), in the order the system may move a job along under overload.
STOP_OPTIONS: tuple[str, ...] = ("run-all", "opt-stop", "requirement")

# UniSched §IV-C (values from Chronus's user survey): a strict-SLO job earns 100 by its deadline D_0 and 0
# after; a soft-SLO job earns 100 by D_0, 80 by 1.1 D_0, 50 by 1.2 D_0, 20 by 1.5 D_0 and 0 after. UniSched
# prints the later deadlines as "1.1, 1.2 and 1.5 x D_0" without saying from when D_0 is measured; we measure
# every deadline as a span from the job's submission (D_f = submit + m_f (D_0 - submit)).
SLO_STEPS: dict[str, tuple[tuple[float, float], ...]] = {
    "strict": ((1.0, 100.0),),
    "soft": ((1.0, 100.0), (1.1, 80.0), (1.2, 50.0), (1.5, 20.0)),
    "best-effort": (),
}
SLO_FULL_VALUE = 100.0
# UniSched §IV-C: a strict deadline is drawn within 1.1 to 2 times the job's duration after its submission.
UNISCHED_DEADLINE_SPAN: tuple[float, float] = (1.1, 2.0)


def slo_mix_with_fraction(fraction: float) -> dict[str, float]:
    """UniSched's MIX1 class mix (a ``MappingConfig.slo_mix``): strict-SLO jobs with probability ``fraction``,
    best-effort otherwise."""
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0.0 <= fraction <= 1.0:
        raise ValueError(f"slo_fraction must be a number in [0, 1] (got {fraction!r})")
    return {"strict": float(fraction), "best-effort": 1.0 - float(fraction)}

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
    ``nas_group``: the neural architecture search this job is a trial of (None: not a trial); the trials of a
    group compete, and its controller stops the ones that fall behind (:mod:`clustergym.core.nas`).
    ``curve_pace``: how fast the job moves along its model's learning curve (its curve at progress x is the
    model's at ``curve_pace`` x x; 1 = the model's own): how a NAS trial's architecture differs from another's.
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
    nas_group: int | None = None
    curve_pace: float = 1.0

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
        group = self.nas_group
        if group is not None and (isinstance(group, bool) or not isinstance(group, int) or group < 0):
            raise bad("nas_group", "must be None or an integer >= 0")
        if not (isinstance(self.curve_pace, (int, float)) and 0.0 < self.curve_pace < math.inf):
            raise bad("curve_pace", "must be a finite number > 0")

    @property
    def n_gpus(self) -> int:
        return self.n_partitions * self.n_replicas

    @property
    def has_slo(self) -> bool:
        """A strict- or soft-SLO job (UniSched); best-effort jobs have no deadline that matters."""
        return self.slo_class != "best-effort"

    def slo_deadlines(self) -> tuple[tuple[float, float], ...]:
        """UniSched's step reward of the job: (absolute deadline D_f, value V_f) pairs, earliest first
        (:data:`SLO_STEPS`); empty for a best-effort job."""
        span = self.deadline - self.submit_time
        return tuple((self.submit_time + m * span, v) for m, v in SLO_STEPS[self.slo_class])

    def slo_value(self, end_time: float) -> float:
        """The value (0..100) the job earns by ending at ``end_time``: the first of its deadlines it meets."""
        return next((v for d, v in self.slo_deadlines() if end_time <= d), 0.0)
