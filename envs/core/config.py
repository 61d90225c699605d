"""Simulator parameters (:class:`SimConfig`) and their validation."""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from .interference import INTERFERENCE_MODES

# which ticks are decision points: "actionable" (a ready task fits somewhere, or an overloaded server has tasks
# to move), "placement" (a ready task fits: for policies that never migrate), "queue" (any task waits), "always"
# (every tick while jobs are active)
DECIDE_ON = ("actionable", "placement", "queue", "always")


class SimConfigError(ValueError):
    """A :class:`SimConfig` field out of its range; ``field`` names it."""

    def __init__(self, field: str, why: str, value: object) -> None:
        self.field = field
        super().__init__(f"SimConfig.{field} {why} (got {value!r})")


@dataclass
class SimConfig:
    """Simulator parameters (defaults from MLFS §4.1 where it gives them). Every field is checked on
    construction; a bad value raises :class:`SimConfigError` naming the field."""

    tick_s: float = 60.0  # MLFS: "the job scheduler runs every minute"
    decide_on: str = "actionable"  # one of DECIDE_ON
    overload_threshold: float = 0.9  # h_r, a utilisation fraction in (0, 1]
    cluster_overload_threshold: float = 0.9  # h_s (on the RMS of a server's utilisation vector), in (0, 1]
    usage_change_mean_s: float = 600.0  # mean time between resource-use changes of a job; 0 = constant
    usage_sigma: float = 0.2  # log-normal spread of the usage factor
    usage_min: float = 0.5  # the usage factor is clipped to [usage_min, usage_max]
    usage_max: float = 1.6
    migration_base_s: float = 5.0  # checkpoint + restore fixed cost of moving one task
    suspend_s: float = 4.0  # UniSched: suspension stays within ~4 s
    resume_base_s: float = 10.0  # resumption grows with GPU count (UniSched, Fig. 8 discussion)
    resume_per_gpu_s: float = 1.0
    # UniSched's leases (clustergym.core.lease): a job runs for a lease, then is renewed or suspended; 0 = no
    # leases (UniSched: 300 s for best-effort and profiler jobs, 600 s for SLO jobs)
    be_lease_s: float = 0.0
    slo_lease_s: float = 0.0
    overload_recheck_s: float = 600.0  # an unchanged overload is offered again as a decision after this long
    contention_step: float = 0.05  # slowdown factors are rounded up to this step (0 = exact)
    gang_timeout_s: float = 1800.0  # a partially placed job releases its slots after this long (inf = never)
    # OptStop's learning-curve predictor (MLFS §2, §3.5: about 90 % accurate): a job's predicted optimum progress
    # is its true one x exp(eps), eps ~ N(0, optstop_error_sigma) per job, capped to its budget. 0.125 gives a
    # mean absolute relative error E|exp(eps) - 1| = exp(s^2/2) (2 Phi(s) - 1) = 10.0 % before the cap.
    optstop_error_sigma: float = 0.125
    horizon_s: float = math.inf  # stop the simulation here (unfinished jobs are reported)
    record_series: bool = True
    # the episode timeline (core/timeline.py: task spans on GPUs, queue, utilisation, overloads), for figures
    record_timeline: bool = False
    # end the run (Simulator.stalled, a StallWarning) when jobs wait but none progressed, arrived or ended for this
    # long: a policy that never fully places a job would otherwise be asked at every tick forever (inf = never;
    # then horizon_s must be finite)
    stall_timeout_s: float = 86400.0
    # GPU-sharing interference (clustergym.core.interference): "gavel" (Gavel's measured pair ratios, SJF-BSBF's
    # injected ratio interference_xi for pairs Gavel did not measure), "constant" (interference_xi for every pair,
    # SJF-BSBF Fig. 6(b)) or "off" (sharing costs only the utilisation rule)
    interference: str = "gavel"
    interference_xi: float = 1.5
    # the controller of every NAS group (clustergym.core.nas; ASHA's asynchronous successive halving, our values:
    # Hare gives none): trials are judged at progress nas_first_rung x nas_eta^k of their budget, and a trial
    # not within the best 1 / nas_eta of its group's trials judged at that rung so far is stopped
    nas_eta: float = 3.0
    nas_first_rung: float = 1.0 / 9.0

    def __post_init__(self) -> None:
        if self.decide_on not in DECIDE_ON:
            raise SimConfigError("decide_on", f"must be one of {DECIDE_ON}", self.decide_on)
        if self.interference not in INTERFERENCE_MODES:
            raise SimConfigError("interference", f"must be one of {INTERFERENCE_MODES}", self.interference)
        for name in ("record_series", "record_timeline"):
            if not isinstance(getattr(self, name), bool):
                raise SimConfigError(name, "must be True or False", getattr(self, name))
        for names, limits in _RANGES:
            for name in names:
                _check_number(name, getattr(self, name), *limits)
        if self.nas_first_rung >= 1.0:
            raise SimConfigError("nas_first_rung", "must be < 1 (a fraction of a trial's budget)", self.nas_first_rung)
        if self.usage_max < self.usage_min:
            raise SimConfigError("usage_max", f"must be >= usage_min = {self.usage_min}", self.usage_max)
        if math.isinf(self.horizon_s) and math.isinf(self.stall_timeout_s):
            raise SimConfigError("stall_timeout_s", "must be finite when horizon_s is infinite (else a run whose jobs "
                                 "no policy action ever completes would never end)", self.stall_timeout_s)


# the numeric fields by range: (lowest value, lowest excluded, highest value, infinity allowed)
_RANGES: tuple[tuple[tuple[str, ...], tuple[float, bool, float, bool]], ...] = (
    (("tick_s", "usage_min", "usage_max"), (0.0, True, math.inf, False)),
    (("overload_threshold", "cluster_overload_threshold"), (0.0, True, 1.0, False)),
    (("usage_change_mean_s", "usage_sigma", "migration_base_s", "suspend_s", "resume_base_s", "resume_per_gpu_s",
      "be_lease_s", "slo_lease_s", "overload_recheck_s", "contention_step", "optstop_error_sigma"), (0.0, False, math.inf, False)),
    (("gang_timeout_s", "horizon_s", "stall_timeout_s"), (0.0, True, math.inf, True)),
    (("interference_xi",), (1.0, False, math.inf, False)),
    (("nas_eta",), (1.0, True, math.inf, False)),
    (("nas_first_rung",), (0.0, True, 1.0, False)),
)


def number_error(v: object, lo: float = -math.inf, lo_open: bool = False, hi: float = math.inf,
                 inf_ok: bool = False, integer: bool = False) -> str | None:
    """Why ``v`` is not a number in range (``lo``, excluded if ``lo_open``; ``hi``; infinity only if
    ``inf_ok``; an integral value if ``integer``), or None: the one range rule of every configuration."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        return "must be a number"
    if math.isnan(v):
        return "must be a number, not NaN"
    if math.isinf(v) and not inf_ok:
        return "must be finite"
    if integer and not (math.isinf(v) or float(v).is_integer()):
        return "must be an integer"
    if v < lo or (lo_open and v == lo):
        return f"must be {'>' if lo_open else '>='} {lo:g}"
    if v > hi:
        return f"must be <= {hi:g}"
    return None


def _check_number(name: str, v: object, lo: float, lo_open: bool, hi: float, inf_ok: bool) -> None:
    why = number_error(v, lo, lo_open, hi, inf_ok)
    if why:
        raise SimConfigError(name, why, v)
