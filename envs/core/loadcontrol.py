"""MLF-C, MLFS §3.5: system load control by changing jobs' stopping options under overload.

Users pick a stopping option per job (run all iterations / OptStop / stop at the accuracy requirement)
and say whether the system may change it. While the cluster is overloaded (tasks in the queue, or mean
server overload degree above h_s: :meth:`Simulator.cluster_overloaded`), MLF-C moves every changeable job
to the cheapest option that still meets the user's accuracy requirement ("requirement"); jobs already
past that point stop at once. When the overload ends, jobs return to their own option, since MLFS
"follows the user choices" when resources suffice.

Any policy can switch it on: ``sim.controllers.append(LoadControl())``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .job import JobState

if TYPE_CHECKING:
    from .engine import Simulator


@dataclass
class LoadControl:
    """The MLF-C controller. ``fallback`` is the option changeable jobs move to under overload."""

    fallback: str = "requirement"
    activations: int = 0  # ticks at which the cluster was overloaded
    switched: int = 0  # jobs moved to ``fallback``
    restored: int = 0  # jobs given their own option back when an overload ended

    def on_tick(self, sim: "Simulator") -> None:
        overloaded = sim.cluster_overloaded()
        if overloaded:
            self.activations += 1
        for job in list(sim.active_jobs.values()):
            if job.state != JobState.ACTIVE or not job.spec.stop_changeable:
                continue
            own = job.spec.stop_option
            want = own
            # only ever change a job towards fewer iterations
            if overloaded and job.target_for(self.fallback) < job.target_for(own):
                want = self.fallback
            if want != job.stop_option:
                if want == own:
                    self.restored += 1
                else:
                    self.switched += 1
                sim.set_stop_option(job.jid, want)
