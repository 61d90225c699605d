"""Stall detection: a run whose jobs wait while nothing can change ends instead of running forever.

A job progresses only with every task placed. A policy that never completes a job's placement (a job wider
than FIFO's one-task-per-GPU rule can ever place, a placement rule no server meets) leaves the simulator
offering a decision at every tick, forever with an infinite horizon. :class:`StallWatch` ends such a run: when
jobs are active but none progressed, arrived or ended for ``SimConfig.stall_timeout_s``, the engine stops (as at
the horizon: unfinished jobs are reported), sets ``Simulator.stalled`` to the reason and warns
(:class:`StallWarning`).
"""
from __future__ import annotations

import math
import warnings

from .progress import iters_at


class StallWarning(RuntimeWarning):
    """The run ended early: jobs waited but none progressed, arrived or ended for ``SimConfig.stall_timeout_s``
    (``Simulator.stalled`` keeps the message)."""


class StallWatch:
    """Watches the engine's progress key (active jobs, jobs ended, the active jobs' iterations summed now) at
    the first event after every eighth of the timeout: the sum sees progress made between two checks, and the
    check costs one pass over the active jobs every ``timeout / 8`` simulated seconds. A stall is declared at
    the first check at least ``timeout`` after the check that last saw the key change."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.check_at = 0.0  # the engine calls check() at the first event at or after this time
        self._key: tuple = ()
        self._since = 0.0

    def check(self, now: float, active: dict, jobs_ended: int) -> str | None:
        """The reason the run stalled (after warning with it), or None."""
        timeout = self.timeout
        self.check_at = now + timeout / 8 if timeout < math.inf else math.inf
        key = (len(active), jobs_ended, sum(iters_at(j, now) for j in active.values()))
        if key != self._key or not active:
            self._key, self._since = key, now
            return None
        if now - self._since < timeout:
            return None
        waiting = ", ".join(f"{j.jid} ({j.n_placed}/{len(j.tasks)} tasks placed)" for j in list(active.values())[:5])
        why = (f"run stalled: no job progressed, arrived or ended between t={self._since:.0f} s and t={now:.0f} s "
               f"(SimConfig.stall_timeout_s={timeout:g}); {len(active)} active job(s) wait, e.g. {waiting}: the "
               "policy never placed them fully (a job runs only with every task placed)")
        warnings.warn(why, StallWarning, stacklevel=3)  # at the code that called next_decision
        return why
