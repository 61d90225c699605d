"""MLF-C, MLFS §3.5: system load control by changing jobs' stopping options under overload.

Users pick a stopping option per job (run all iterations / OptStop / stop at the accuracy requirement)
and say whether the system may change it. While the cluster is overloaded (tasks in the queue, or mean
server overload degree above h_s: :meth:`Simulator.cluster_overloaded`), MLF-C moves every changeable job
whose requirement comes before its current stopping point to "requirement" (MLFS §4: "it stops a job when its
required accuracy is reached when the system is overloaded"); jobs already past that point stop at once.
When the overload ends, the jobs it moved return to the scheduler's normal option: ``restore_option`` when
the policy that attached the controller runs its jobs with one (MLFS's schedulers: "opt-stop", §4 "we assume
that all jobs use OptStop") and the user allowed it, else the user's own ("when there are enough resources
in the cluster, we can run the jobs based on user preference"). Every change goes through
:meth:`Simulator.set_stop_option` (the one rule of who may change what).

Any policy can switch it on: ``sim.controllers.append(LoadControl())``; one controller per simulator (it
remembers the jobs it moved).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .job import Job, JobState
from .workload import STOP_OPTIONS

if TYPE_CHECKING:
    from .engine import Simulator


@dataclass
class LoadControl:
    """The MLF-C controller. ``fallback``: the option changeable jobs move to under overload;
    ``restore_option``: the option they return to when it ends (None: the user's own)."""

    fallback: str = "requirement"
    restore_option: str | None = None
    activations: int = 0  # ticks at which the cluster was overloaded
    switched: int = 0  # jobs moved to ``fallback``
    restored: int = 0  # jobs given their normal option back when an overload ended
    _moved: set[int] = field(default_factory=set, repr=False)  # ids of the jobs now on ``fallback`` by our doing

    def __post_init__(self) -> None:
        for name in ("fallback", "restore_option"):
            v = getattr(self, name)
            if v not in STOP_OPTIONS and not (name == "restore_option" and v is None):
                raise ValueError(f"LoadControl.{name} must be one of {STOP_OPTIONS} (got {v!r})")

    def normal_option(self, job: Job) -> str:
        """The option ``job`` runs with when the cluster is not overloaded: ``restore_option`` if the system
        may move the job there (:meth:`Simulator.stop_option_error`'s order: cheaper than the user's own, or the
        user's own), else the user's own."""
        own = job.spec.stop_option
        want = self.restore_option
        if want is None or not job.spec.stop_changeable or STOP_OPTIONS.index(want) < STOP_OPTIONS.index(own):
            return own
        return want

    def on_tick(self, sim: "Simulator") -> None:
        overloaded = sim.cluster_overloaded()
        if overloaded:
            self.activations += 1
        for job in list(sim.active_jobs.values()):
            if job.state != JobState.ACTIVE or not job.spec.stop_changeable:
                continue
            if overloaded:
                # only ever towards fewer iterations than the job's current stopping point
                if job.stop_option != self.fallback and job.target_for(self.fallback) < job.target_iters:
                    self._moved.add(job.jid)
                    self.switched += 1
                    sim.set_stop_option(job.jid, self.fallback)
            elif job.jid in self._moved:
                self._moved.discard(job.jid)
                normal = self.normal_option(job)
                if normal != job.stop_option:
                    self.restored += 1
                    sim.set_stop_option(job.jid, normal)
