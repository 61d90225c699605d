"""The window's overflow rule (:mod:`clustergym.window`): which candidates get rows when more qualify than rows
remain, drawn so that no heuristic's ordering is favoured. Waiting jobs whose gang is already partly placed
come first; the others, and running-job rows, are taken in turn from four orderings each
(:data:`WAITING_ORDERS`: arrival, fewest GPUs, least attained GPU service, earliest deadline;
:data:`RUNNING_ORDERS`: most attained GPU service, latest arrival, most GPUs, latest deadline, the natural
victims of those rules) by :func:`round_robin`."""
from __future__ import annotations

import heapq
from operator import attrgetter
from typing import TYPE_CHECKING, Callable, Iterable

from .core.progress import running_time_at

if TYPE_CHECKING:
    from .core.engine import Simulator
    from .core.job import Job


def _service(job: "Job", now: float) -> float:
    """Attained GPU service: GPUs x time the job has progressed (Tiresias' 2D measure)."""
    return running_time_at(job, now) * job.spec.n_gpus


# An ordering maps the current time to a sort key of jobs (ascending = first taken). The fixed ones are C-level
# attribute getters: the waiting orderings rank every waiting job at each step of a contended episode.
_ARRIVAL = attrgetter("spec.submit_time", "spec.job_id")
_FEWEST_GPUS = attrgetter("spec.n_gpus", "spec.submit_time", "spec.job_id")
_EARLIEST_DEADLINE = attrgetter("spec.deadline", "spec.submit_time", "spec.job_id")
Ordering = Callable[[float], Callable[["Job"], tuple]]

WAITING_ORDERS: tuple[Ordering, ...] = (
    lambda now: _ARRIVAL,                                                        # arrival
    lambda now: _FEWEST_GPUS,                                                    # fewest GPUs
    lambda now: lambda j: (_service(j, now), j.spec.submit_time, j.jid),         # least attained service
    lambda now: _EARLIEST_DEADLINE,                                              # earliest deadline
)
RUNNING_ORDERS: tuple[Ordering, ...] = (
    lambda now: lambda j: (-_service(j, now), -j.spec.submit_time, -j.jid),      # most attained service
    lambda now: lambda j: (-j.spec.submit_time, -j.jid),                         # latest arrival
    lambda now: lambda j: (-j.spec.n_gpus, -j.spec.submit_time, -j.jid),         # most GPUs
    lambda now: lambda j: (-j.spec.deadline, -j.spec.submit_time, -j.jid),       # latest deadline
)


def round_robin(jobs: Iterable["Job"], orders: Iterable[Ordering], now: float, n: int) -> list["Job"]:
    """Up to ``n`` of ``jobs``, taken in turn from each ordering (sort keys ``order(now)(job)``), each turn the
    first job of that ordering not taken yet: every ordering's head jobs are in, none dominates. An ordering is
    read no further than its first ``n`` jobs (fewer than ``n`` are taken before any turn), so only those are
    ranked (``heapq.nsmallest``: the same as the head of the sorted list)."""
    jobs = list(jobs)
    n = min(n, len(jobs))
    ranked = [heapq.nsmallest(n, jobs, key=order(now)) for order in orders]
    pos = [0] * len(ranked)
    taken: set[int] = set()  # ids of the jobs taken
    out: list = []
    while len(out) < n:
        moved = False
        for i, r in enumerate(ranked):
            p = pos[i]
            while p < len(r) and id(r[p]) in taken:
                p += 1
            pos[i] = p
            if p < len(r):
                taken.add(id(r[p]))
                out.append(r[p])
                moved = True
                if len(out) == n:
                    break
        if not moved:
            break
    return out


def waiting_rows(sim: "Simulator", waiting: list, sel: list[int], room: int) -> list[int]:
    """``room`` of the candidate waiting rows ``sel`` (indices into ``waiting``), job by job: partly placed
    jobs first (by arrival), then the others by :func:`round_robin` over :data:`WAITING_ORDERS`; returned
    in queue order."""
    by_job: dict[int, list[int]] = {}
    for i in sel:
        by_job.setdefault(waiting[i].job.jid, []).append(i)
    jobs = [sim.job_by_id[j] for j in by_job]
    order = sorted((j for j in jobs if j.n_placed), key=lambda j: (j.spec.submit_time, j.jid))
    rest = [j for j in jobs if not j.n_placed]
    order += round_robin(rest, WAITING_ORDERS, sim.now, room)  # each job gives at least one row
    keep: list[int] = []
    for job in order:
        keep.extend(by_job[job.jid][:room - len(keep)])
        if len(keep) == room:
            break
    return sorted(keep)
