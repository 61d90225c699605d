"""The episode timeline: what ran where and how loaded the cluster was over time, recorded from the simulator's
events (``SimConfig.record_timeline``; off by default).

The simulator calls three hooks: :meth:`Timeline.start` when a task takes a slot, :meth:`Timeline.stop` when it
leaves it (finished, migrated, requeued, preempted, released), and :meth:`Timeline.sample` just before its clock
moves, with the state that held since the last move. Recording off, the hooks are those of :data:`OFF`, which do
nothing, so the event loop pays one empty call per hook.

- ``spans``: one :class:`Span` per task stint on a slot: job, task, server, GPU (-1 for a parameter server,
  which holds no GPU), start and end (``nan`` while it still runs).
- ``samples``: one row per interval of constant state, in :data:`SAMPLE_FIELDS` order: its start time, the
  tasks waiting in the queue, the jobs in the system, the fraction of GPUs holding a task, the mean GPU
  utilisation (each GPU's load capped at 1, as ``ClusterState.utilisation_matrix``) and the overloaded servers.
- ``overloads``: ``(time, servers)`` each time the set of overloaded servers changed (servers a sorted tuple).
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

SAMPLE_FIELDS: tuple[str, ...] = ("time", "queue_tasks", "jobs_in_system", "gpu_alloc", "gpu_util",
                                  "overloaded_servers")


class Span(NamedTuple):
    job: int
    task: int
    server: int
    gpu: int  # -1: a parameter server (no GPU)
    start: float
    end: float  # nan while the task still holds the slot


class Timeline:
    """The record of one run (``Simulator.timeline`` when ``SimConfig.record_timeline``)."""

    recording = True

    def __init__(self) -> None:
        self.spans: list[Span] = []
        self._open: dict[int, int] = {}  # task id -> index of its running span
        self.samples: list[tuple] = []
        self.overloads: list[tuple[float, tuple[int, ...]]] = []

    def start(self, now: float, task: Any, server: int, gpu: int) -> None:
        self._open[task.tid] = len(self.spans)
        self.spans.append(Span(task.job.jid, task.tid, int(server), int(gpu), float(now), math.nan))

    def stop(self, now: float, task: Any) -> None:
        i = self._open.pop(task.tid)
        self.spans[i] = self.spans[i]._replace(end=float(now))

    def sample(self, sim: Any) -> None:
        """The state of ``sim`` at ``sim.now``, which holds until its clock moves on."""
        c = sim.cluster
        self.samples.append((float(sim.now), len(sim.queue), len(sim.active_jobs), float((c.gpu_n_tasks > 0).mean()),
                             float(np.minimum(c.gpu_load, 1.0).mean()), int(c.overloaded.sum())))
        over = tuple(int(s) for s in np.flatnonzero(c.overloaded))
        if (self.overloads[-1][1] if self.overloads else ()) != over:
            self.overloads.append((float(sim.now), over))

    def closed_spans(self, end: float) -> list[Span]:
        """The spans with the ones still running ended at ``end`` (the run's last time)."""
        return [s._replace(end=float(end)) if math.isnan(s.end) else s for s in self.spans]

    def sample_array(self) -> np.ndarray:
        """``samples`` as a float array, one column per :data:`SAMPLE_FIELDS` entry."""
        return np.array(self.samples, dtype=float).reshape(-1, len(SAMPLE_FIELDS))


class _Off:
    """The hooks of a simulator that records no timeline: they do nothing."""

    recording = False

    def start(self, now: float, task: Any, server: int, gpu: int) -> None:
        pass

    def stop(self, now: float, task: Any) -> None:
        pass

    def sample(self, sim: Any) -> None:
        pass


OFF = _Off()


def make_timeline(record: bool) -> Timeline | _Off:
    """A :class:`Timeline` when ``record``, else :data:`OFF`."""
    return Timeline() if record else OFF
