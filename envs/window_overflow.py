"""The window's overflow rule (:mod:`clustergym.window`): which candidates get rows when more qualify than rows
remain, drawn so that no heuristic's ordering is favoured. Waiting jobs whose gang is already partly placed
come first; the others, and running-job rows, are taken in turn from four orderings each
(:data:`WAITING_ORDERS`: arrival, fewest GPUs, least attained GPU service, earliest deadline;
:data:`RUNNING_ORDERS`: most attained GPU service, latest arrival, most GPUs, latest deadline, the natural
victims of those rules) by :func:`round_robin`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from .core.progress import running_time_at

if TYPE_CHECKING:
    from .core.engine import Simulator
    from .core.job import Job


def _service(job: "Job", now: float) -> float:
    """Attained GPU service: GPUs x time the job has progressed (Tiresias' 2D measure)."""
    return running_time_at(job, now) * job.spec.n_gpus


WAITING_ORDERS: tuple[Callable[["Job", float], tuple], ...] = (
    lambda j, now: (j.spec.submit_time, j.jid),                                  # arrival
    lambda j, now: (j.spec.n_gpus, j.spec.submit_time, j.jid),                   # fewest GPUs
    lambda j, now: (_service(j, now), j.spec.submit_time, j.jid),                # least attained service
    lambda j, now: (j.spec.deadline, j.spec.submit_time, j.jid),                 # earliest deadline
)
RUNNING_ORDERS: tuple[Callable[["Job", float], tuple], ...] = (
    lambda j, now: (-_service(j, now), -j.spec.submit_time, -j.jid),             # most attained service
    lambda j, now: (-j.spec.submit_time, -j.jid),                                # latest arrival
    lambda j, now: (-j.spec.n_gpus, -j.spec.submit_time, -j.jid),                # most GPUs
    lambda j, now: (-j.spec.deadline, -j.spec.submit_time, -j.jid),              # latest deadline
)


def round_robin(jobs: Iterable["Job"], orders: Iterable[Callable[["Job", float], tuple]], now: float,
                n: int) -> list["Job"]:
    """Up to ``n`` of ``jobs``, taken in turn from each ordering (sort keys ``order(job, now)``), each turn the
    first job of that ordering not taken yet: every ordering's head jobs are in, none dominates."""
    jobs = list(jobs)
    ranked = [sorted(jobs, key=lambda j, o=o: o(j, now)) for o in orders]
    pos = [0] * len(ranked)
    taken: set[int] = set()
    out: list = []
    while len(out) < n:
        moved = False
        for i, r in enumerate(ranked):
            p = pos[i]
            while p < len(r) and r[p].jid in taken:
                p += 1
            pos[i] = p
            if p < len(r):
                taken.add(r[p].jid)
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
    order += round_robin(rest, WAITING_ORDERS, sim.now, len(rest))
    keep: list[int] = []
    for job in order:
        keep.extend(by_job[job.jid][:room - len(keep)])
        if len(keep) == room:
            break
    return sorted(keep)
