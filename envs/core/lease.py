"""Lease-based training (UniSched §III-B "Lease-based training"): a job runs on its GPUs for a lease; at the
lease's end it is renewed, or it is suspended (checkpointed) and yields its GPUs, and may resume elsewhere.

The rule, as the simulator applies it when ``SimConfig.be_lease_s`` / ``slo_lease_s`` are set (0: no leases,
the default, and this module changes nothing):

- A job gets a lease when it becomes fully placed (its first start or a resumption): ``slo_lease_s`` for a
  strict- or soft-SLO job, ``be_lease_s`` for a best-effort one (UniSched: 10 and 5 minutes). The lease
  counts from the placement, so a resumption's restore time is spent inside the lease, as on a real cluster.
- While its lease runs the job cannot be suspended: ``Simulator.preempt`` refuses it, naming the lease's end
  (migration, MLFS's overload relief, stays allowed).
- When the lease ends the simulator holds a decision round (the lease's end is a decision point). In that
  round the policy may suspend the job (``preempt``: every task back to the queue; restarting pays the
  suspend + resume overhead, ``SimConfig.suspend_s + resume_base_s + resume_per_gpu_s x GPUs``, the same
  checkpoint cost as any preemption). A job the round leaves running renews its lease in place, from the
  round's end, at no cost: UniSched's renewal of a job that keeps its allocation. Renewal by default is our
  choice (the paper's selector re-plans every job each cycle and renews those it keeps); it lets a policy
  that never suspends run unchanged.
- A lease no longer than a job's checkpoint (suspend + resume) would be spent restoring: the simulator
  refuses such a job with :class:`LeaseError` when it is built, naming the job and the two lengths.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from .job import JOB_ACTIVE

if TYPE_CHECKING:
    from .config import SimConfig
    from .job import Job


class LeaseError(ValueError):
    """A lease no longer than a job's checkpoint: the job could never run a lease after restoring."""

    def __init__(self, job_id: int, why: str) -> None:
        self.job_id = job_id
        super().__init__(why)


def checkpoint_s(config: "SimConfig", n_gpus: int) -> float:
    """Suspend + resume overhead of a job on ``n_gpus`` GPUs (UniSched's t^sr): suspension (about 4 s) plus a
    resumption that grows with the GPU count."""
    return config.suspend_s + config.resume_base_s + config.resume_per_gpu_s * n_gpus


def lease_s(config: "SimConfig", has_slo: bool) -> float:
    """The lease of a job of that class (0: leases are off for it)."""
    return config.slo_lease_s if has_slo else config.be_lease_s


class Leases:
    """Who holds a lease until when, and whose lease has ended and awaits the decision round.

    ``expiry`` maps a leased job to (its lease's end, the lease's token); ``due`` holds the jobs whose lease
    ended and which may now be suspended. Every grant schedules an expiry event through ``push(time, job,
    token)`` (the engine's event queue), which the engine hands back to :meth:`expire`; a token that no longer
    matches is a stale lease. ``wake()`` asks the engine for a decision round."""

    def __init__(self, config: "SimConfig", jobs: Iterable["Job"],
                 push: Callable[[float, "Job", int], None] = lambda t, job, token: None,
                 wake: Callable[[], None] = lambda: None) -> None:
        self.config, self._push, self._wake = config, push, wake
        self.on = config.be_lease_s > 0 or config.slo_lease_s > 0
        self.expiry: dict["Job", tuple[float, int]] = {}
        self.due: dict["Job", None] = {}  # insertion-ordered: deterministic renewals
        self._token = 0
        self.renewals = 0
        if self.on:
            for job in jobs:
                length, cost = lease_s(config, job.spec.has_slo), checkpoint_s(config, job.spec.n_gpus)
                if 0 < length <= cost:
                    raise LeaseError(job.jid, f"job {job.jid}: its lease ({length:g} s) is no longer than its "
                                              f"checkpoint (suspend + resume on {job.spec.n_gpus} GPUs: {cost:g} s); "
                                              f"lengthen SimConfig.{'slo' if job.spec.has_slo else 'be'}_lease_s")

    def grant(self, job: "Job", now: float) -> None:
        """``job`` became fully placed: a new lease from ``now``, if its class has leases."""
        self.due.pop(job, None)
        if self.on and lease_s(self.config, job.spec.has_slo) > 0:
            self._grant_from(job, now)

    def expire(self, job: "Job", token: int) -> None:
        """The expiry event of lease ``token``: if it is still the job's lease and the job still runs, the job
        becomes due and a decision round is asked for."""
        lease = self.expiry.get(job)
        if lease is not None and lease[1] == token and job.fully_placed:
            self.due[job] = None
            self._wake()

    def release(self, job: "Job") -> None:
        """``job`` left its GPUs (suspended, released or ended): it holds no lease."""
        self.expiry.pop(job, None)
        self.due.pop(job, None)

    def preempt_error(self, job: "Job") -> str | None:
        """Why ``job`` cannot be preempted now (None if it can): not active, nothing placed, or a lease that
        still runs (:meth:`suspend_error`). ``Simulator.preempt`` and ``command_error`` both refuse by it."""
        if job.state != JOB_ACTIVE:
            return f"job {job.jid} is {job.state.name}, only ACTIVE jobs can be preempted"
        if job.n_placed == 0:
            return f"job {job.jid} has no placed task to preempt"
        return self.suspend_error(job)

    def suspend_error(self, job: "Job") -> str | None:
        """Why ``job`` may not be suspended now (None if it may): its lease still runs."""
        lease = self.expiry.get(job)
        if lease is None or job in self.due:
            return None
        return f"job {job.jid} holds a lease until t={lease[0]:g} s; it may be suspended only at its lease's end"

    def renew_due(self, now: float) -> None:
        """End of a decision round: every due job still fully placed renews its lease from ``now``."""
        for job in self.due:
            if job.fully_placed:
                self._grant_from(job, now)
                self.renewals += 1
        self.due.clear()

    def _grant_from(self, job: "Job", now: float) -> None:
        self._token += 1
        self.expiry[job] = lease = (now + lease_s(self.config, job.spec.has_slo), self._token)
        self._push(lease[0], job, self._token)
