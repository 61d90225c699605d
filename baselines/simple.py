"""Simple reference policies: FIFO, SJF (shortest remaining time), EDF and uniform random.

All allocate one task per GPU (``mode="exclusive"``), start a job only when all its tasks fit (gang
guard) and consolidate a job's tasks (servers already hosting the job, then best fit).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order, restrict, server_mask


@dataclass
class FIFO(Policy):
    """First in, first out by submission time. Without ``backfill`` (default) the head job blocks the
    queue until it fits, as Gavel_FIFO in Hare ("this job needs to wait until demanded GPUs are
    available") and UniSched's FIFO do."""

    name = "fifo"
    source = "Hare (TCC'24) §VI baselines: Gavel_FIFO; UniSched/SJF-BSBF FIFO baseline"
    backfill: bool = False

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: j.spec.submit_time, "exclusive", pack_order, self.backfill)


@dataclass
class SJF(Policy):
    """Shortest remaining time first: remaining iterations x reference iteration time (clairvoyant:
    it reads the job's iteration target). Non-preemptive; skips jobs that do not fit (backfill)."""

    name = "sjf"
    source = "SJF-BSBF (arXiv'24) SJF baseline; Hare SRTF oracle"
    backfill: bool = True

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, view.remaining_time, "exclusive", pack_order, self.backfill)


@dataclass
class EDF(Policy):
    """Earliest (job) deadline first; non-preemptive; skips jobs that do not fit (backfill)."""

    name = "edf"
    source = "classic EDF (Liu & Layland 1973); UniSched deadline-aware baselines (GENIE ~ least laxity)"
    backfill: bool = True

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: j.spec.deadline, "exclusive", pack_order, self.backfill)


@dataclass
class Random(Policy):
    """Uniform over valid actions, with its own seeded ``numpy.random.Generator``.

    Through the env it samples uniformly among the actions the mask allows (end-of-round included). At
    core level it samples uniformly among every valid (task, server) placement, (task, server) migration
    and requeue of the view plus "end the round". It has no server order (so it does not go through
    :func:`~clustergym.baselines.base.keep_ps_with_workers`): it is the uniform reference."""

    name = "random"
    source = "uniform random over valid actions (sanity baseline)"
    uniform_over_mask = True
    seed: int = 0
    core_window: int | None = None  # core level only: at most this many of the view's tasks (None: all)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.rng = np.random.default_rng(self.seed)

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        opts: list[Command | None] = [None]
        for t in cands.place[: self.core_window]:  # [:None] is the whole list
            for s in np.flatnonzero(restrict(server_mask(view, t, "fit"), cands.servers)):
                opts.append(Command("place", t.tid, int(s)))
        for t in cands.migrate[: self.core_window]:
            if t.tid in self._touched:
                continue
            opts.append(Command("requeue", t.tid))
            for s in np.flatnonzero(restrict(server_mask(view, t, "fit", moving=True), cands.servers)):
                if int(s) != t.server:
                    opts.append(Command("migrate", t.tid, int(s)))
        pick = opts[int(self.rng.integers(len(opts)))]
        if pick is not None:
            yield pick
