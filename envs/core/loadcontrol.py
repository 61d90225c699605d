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
from typing import TYPE_CHECKING, Iterable, Iterator

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
        for job, option in self.changes(overloaded, list(sim.active_jobs.values())):
            self.note(job.jid, overloaded)
            if option != job.stop_option:
                if not overloaded:
                    self.restored += 1
                sim.set_stop_option(job.jid, option)

    def changes(self, overloaded: bool, jobs: Iterable[Job]) -> Iterator[tuple[Job, str]]:
        """MLF-C's rule, in the order of ``jobs``: (job, the option it should run with now) for every job the
        controller acts on. Under overload, every changeable active job whose ``fallback`` target comes before
        its current one (only ever towards fewer iterations); otherwise every job it moved, with its normal
        option (possibly the one it has: it is then only forgotten). Lazy, so a change made while iterating
        (a job that finishes at once) is seen by the next job's check. Who applies the changes calls
        :meth:`note` for each: :meth:`on_tick` at every tick, or a policy acting through the env's
        stop-option actions (``clustergym.baselines.mlfs.MLFSHCActions``)."""
        for job in jobs:
            if job.state != JobState.ACTIVE or not job.spec.stop_changeable:
                continue
            if overloaded:
                if job.stop_option != self.fallback and job.target_for(self.fallback) < job.target_iters:
                    yield job, self.fallback
            elif job.jid in self._moved:
                yield job, self.normal_option(job)

    def note(self, jid: int, to_fallback: bool) -> None:
        """Remember a change of :meth:`changes` made: a move to ``fallback`` (restored when the overload
        ends), or a restore (forgotten)."""
        if to_fallback:
            self._moved.add(jid)
            self.switched += 1
        else:
            self._moved.discard(jid)

    def moved(self, jid: int) -> bool:
        """Whether job ``jid`` is on ``fallback`` by this controller's doing."""
        return jid in self._moved
