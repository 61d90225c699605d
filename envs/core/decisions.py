"""Decision points: when the simulator stops to ask the policy (``SimConfig.decide_on``), and when it looks again.

- ``always``: every tick with an active job.
- ``queue``: every tick with a waiting task.
- ``placement``: every tick where some ready waiting task fits a server now.
- ``default`` (anything else): as ``placement``, and also when an overloaded server holds tasks, offered again
  only when the set of overloaded servers changes or ``overload_recheck_s`` after it was last offered, so a
  policy that left an overload alone is not asked every tick.

A lease's end (UniSched) is a decision point in every mode.
"""
from __future__ import annotations

import math
from typing import Any

from .config import SimConfig
from .feasibility import some_ready_task_fits


class DecisionPoints:
    """The rule above, with its memory of the overload last offered. ``sim`` is the
    :class:`~clustergym.core.engine.Simulator` it serves (read only)."""

    def __init__(self, config: SimConfig) -> None:
        self.config = config
        self.overload_offered: tuple = ()  # overloaded servers at the last overload-driven decision point
        self.overload_offered_at = -math.inf

    def possible(self, sim: Any) -> bool:
        """Whether the current tick is a decision point (records an overload it offers)."""
        mode = self.config.decide_on
        if mode == "always" or sim.leases.due:  # a lease's end: renew or suspend
            return bool(sim.active_jobs)
        if mode == "queue" and sim.queue:
            return True
        if some_ready_task_fits(sim.ready, sim.resources):
            return True
        if mode == "placement":
            return False
        return self._overload_due(sim)

    def _overload_due(self, sim: Any) -> bool:
        over = sim.overloaded_servers()
        if not any(sim.cluster.server_tasks[s] for s in over):
            return False
        key = tuple(over)
        if key != self.overload_offered or sim.now - self.overload_offered_at >= self.config.overload_recheck_s:
            self.overload_offered, self.overload_offered_at = key, sim.now
            return True
        return False

    def next_look(self, sim: Any) -> float | None:
        """After a round: the earliest time of the next tick worth a look (None: wait for an event)."""
        mode, tick = self.config.decide_on, self.config.tick_s
        if (mode == "always" or (mode == "queue" and sim.queue)
                or some_ready_task_fits(sim.ready, sim.resources)):
            return sim.now + tick
        if mode != "placement" and any(sim.cluster.server_tasks[s] for s in sim.overloaded_servers()):
            return max(sim.now + tick, self.overload_offered_at + self.config.overload_recheck_s)
        return None
