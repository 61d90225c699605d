"""Per-job records, cluster series, and the summary every scheduler is judged on (MLFS §4.2 metrics).

:class:`Metrics` receives the simulator's events (time passing, bytes crossing servers, migrations, overloads
beginning, jobs ending); :func:`summary` and :func:`job_records` read the jobs they are given.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from .job import Job, JobState
from .state import ClusterState
from .workload import SLO_FULL_VALUE


class Metrics:
    """Running totals kept from the simulator's events. The cumulative counters (``jobs_in_system_integral``,
    ``deadlines_met`` ...) are what the Gymnasium env differences into per-step rewards, so an episode's
    rewards sum exactly to its objective values."""

    def __init__(self, n_servers: int):
        self.n_servers = n_servers
        self.cross_pairs: dict[tuple[int, int], float] = {}
        self.cross_mb = 0.0
        self.migrations = 0
        self.preemptions = 0
        self.gang_releases = 0
        self.overload_occurrences = 0
        self.overload_server_seconds = 0.0
        self.jobs_in_system_integral = 0.0  # integral of the number of submitted, unfinished jobs (= sum of JCTs)
        self.queued_seconds = 0.0  # time during which some task had waited in the queue longer than one tick
        self.jobs_ended = 0
        self.deadlines_met = 0
        self.accuracy_met = 0
        self.accuracy_sum = 0.0  # sum of accuracy-by-deadline over ended jobs
        # UniSched's classes: SLO jobs judged against their (first) deadline, counted when it is decided (the
        # job ends by it: met; the deadline passes while the job runs or waits: missed), and the integral of
        # best-effort jobs in the system (its total over the episode is the sum of their JCTs)
        self.slo_met = 0
        self.slo_missed = 0
        self.be_active = 0
        self.be_in_system_integral = 0.0
        self.series: list[tuple] = []

    def add_cross(self, a: int, b: int, mb: float) -> None:
        if a == b or mb <= 0:
            return
        key = (a, b) if a < b else (b, a)
        self.cross_pairs[key] = self.cross_pairs.get(key, 0.0) + mb
        self.cross_mb += mb

    def add_cross_per_iter(self, per_iter: dict[tuple[int, int], float], iters: float) -> None:
        """``add_cross(a, b, mb * iters)`` for every pair of a plan's per-iteration bytes (its keys are
        already ordered pairs of distinct servers), in one call."""
        pairs = self.cross_pairs
        for key, mb in per_iter.items():
            v = mb * iters
            if v > 0:
                pairs[key] = pairs.get(key, 0.0) + v
                self.cross_mb += v

    def on_clock(self, dt: float, n_active: int, n_overloaded: int, queued_dt: float = 0.0) -> None:
        """``dt`` seconds passed with ``n_active`` jobs in the system and ``n_overloaded`` servers overloaded;
        during ``queued_dt`` of them some task had waited in the queue longer than one scheduling tick."""
        self.jobs_in_system_integral += n_active * dt
        self.be_in_system_integral += self.be_active * dt
        self.overload_server_seconds += n_overloaded * dt
        self.queued_seconds += queued_dt

    def on_overloads_began(self, n: int) -> None:
        self.overload_occurrences += n

    def on_migration(self, src: int, dst: int, state_mb: float) -> None:
        """A task moved from server ``src`` to ``dst`` carrying ``state_mb`` (0 bytes cross on the same server)."""
        self.migrations += 1
        if src != dst:
            self.add_cross(src, dst, state_mb)

    def on_preemption(self) -> None:
        self.preemptions += 1

    def on_gang_release(self) -> None:
        self.gang_releases += 1

    def on_arrival(self, job: Job) -> None:
        self.be_active += not job.spec.has_slo

    def on_deadline_passed(self, job: Job) -> None:
        """``job``'s deadline passed while it was still in the system: an SLO job missed it."""
        self.slo_missed += job.spec.has_slo

    def on_job_end(self, job: Job) -> None:
        r = job.record
        self.be_active -= not job.spec.has_slo
        self.slo_met += job.spec.has_slo and r.end_time <= job.spec.deadline
        self.jobs_ended += 1
        if r.end_time <= job.spec.deadline:
            self.deadlines_met += 1
        if r.acc_at_deadline >= job.spec.accuracy_requirement:
            self.accuracy_met += 1
        self.accuracy_sum += r.acc_at_deadline

    SERIES_FIELDS = ("time", "queue_tasks", "running_jobs", "gpu_alloc", "gpu_util", "cpu_util", "mem_util",
                     "net_util", "overloaded_servers")

    def record_series(self, now: float, n_queued: int, n_active: int, cluster: ClusterState) -> None:
        u = cluster.utilisation()
        self.series.append((now, n_queued, n_active, float((cluster.gpu_n_tasks > 0).mean()),
                            float(u["gpu"].mean()), float(u["cpu"].mean()), float(u["mem"].mean()),
                            float(u["net"].mean()), int(cluster.overloaded.sum())))

    def summary(self, jobs: Sequence[Job], now: float, decisions: int, events: int) -> dict:
        """Every job is accounted for: ``jobs == finished + stopped + unfinished + not_submitted``."""
        ended = [j for j in jobs if j.state in (JobState.FINISHED, JobState.STOPPED)]
        jct = np.array([j.record.end_time - j.spec.submit_time for j in ended]) if ended else np.array([np.nan])
        wait = np.array([j.waiting_time for j in ended]) if ended else np.array([np.nan])
        n = len(ended)
        first_submit = min((j.spec.submit_time for j in jobs), default=0.0)
        span = now - first_submit
        return {
            "jobs": len(jobs),
            "finished": sum(j.state == JobState.FINISHED for j in jobs),
            "stopped": sum(j.state == JobState.STOPPED for j in jobs),
            "unfinished": sum(j.state == JobState.ACTIVE for j in jobs),
            "not_submitted": sum(j.state == JobState.PENDING for j in jobs),
            "mean_jct": float(np.mean(jct)), "p50_jct": float(np.median(jct)), "p99_jct": float(np.percentile(jct, 99)),
            # over every submitted job, an unfinished one counting its time so far: not flattered by truncation
            "mean_jct_censored": float(np.mean([(j.record.end_time if j.record.end_time >= 0 else now)
                                                - j.spec.submit_time for j in jobs if j.state != JobState.PENDING]
                                               or [np.nan])),
            "makespan": float(max((j.record.end_time for j in ended), default=first_submit) - first_submit),
            "deadline_ratio": self.deadlines_met / n if n else float("nan"),
            "mean_accuracy": self.accuracy_sum / n if n else float("nan"),
            "accuracy_ratio": self.accuracy_met / n if n else float("nan"),
            "bandwidth_mb": float(self.cross_mb),
            "mean_waiting": float(np.mean(wait)),
            "overload_occurrences": self.overload_occurrences,
            "overload_server_hours": float(self.overload_server_seconds) / 3600.0,
            # of the time from the first submission to now, the fraction during which some task had waited in
            # the queue longer than one scheduling tick (a task waiting for the next tick is not held back)
            "queued_fraction": float(self.queued_seconds / span) if span > 0 else 0.0,
            "migrations": self.migrations, "preemptions": self.preemptions, "gang_releases": self.gang_releases,
            **slo_summary(jobs, self.slo_met, self.slo_missed, now),
            "decisions": decisions, "events": events, "sim_time": float(now),
        }


def slo_summary(jobs: Sequence[Job], met: int, missed: int, now: float) -> dict:
    """UniSched's metrics (§IV-E): ``slo_miss_rate`` (SLO jobs that missed their deadline, of those judged so
    far), ``slo_weighted_miss`` (R^slo: the mean of 1 - value/100 over ended SLO jobs, a soft job's value read
    from its step function; an SLO job still running past its last deadline counts as value 0) and the mean
    JCT of ended best-effort jobs."""
    slo = [j for j in jobs if j.spec.has_slo and j.state != JobState.PENDING]
    ended = (JobState.FINISHED, JobState.STOPPED)
    lost = [1.0 - j.spec.slo_value(j.record.end_time if j.state in ended else math.inf) / SLO_FULL_VALUE
            for j in slo if j.state in ended or now > j.spec.slo_deadlines()[-1][0]]
    be = [j.record.end_time - j.spec.submit_time for j in jobs
          if not j.spec.has_slo and j.state in (JobState.FINISHED, JobState.STOPPED)]
    return {"slo_jobs": sum(j.spec.has_slo for j in jobs),
            "slo_miss_rate": missed / (met + missed) if met + missed else float("nan"),
            "slo_weighted_miss": float(np.mean(lost)) if lost else float("nan"),
            "mean_be_jct": float(np.mean(be)) if be else float("nan")}


def job_records(jobs: Sequence[Job]) -> list[dict]:
    """One record per job: its spec, what happened to it, and where it got to."""
    out = []
    for j in jobs:
        s, r = j.spec, j.record
        ended = j.state in (JobState.FINISHED, JobState.STOPPED)
        out.append({
            "job_id": s.job_id, "model": s.model, "n_gpus": s.n_gpus, "n_partitions": s.n_partitions,
            "n_replicas": s.n_replicas, "sync": s.sync, "urgency": s.urgency, "slo_class": s.slo_class,
            "stop_option": s.stop_option, "final_stop_option": j.stop_option,
            # OptStop's stopping iteration on the true curve and as predicted (what "opt-stop" runs to)
            "optstop_true_iters": j.iterations_at(j.optimum_true),
            "optstop_predicted_iters": j.iterations_at(j.optimum_predicted),
            "submit": s.submit_time, "first_start": r.first_start if r.first_start >= 0 else np.nan,
            "end": r.end_time if ended else np.nan, "jct": (r.end_time - s.submit_time) if ended else np.nan,
            "waiting_time": j.waiting_time, "running_time": j.running_time, "deadline": s.deadline,
            "deadline_met": bool(ended and r.end_time <= s.deadline),
            "iterations": j.iters, "max_iterations": s.max_iterations,
            "final_accuracy": j.accuracy(),
            "accuracy_by_deadline": r.acc_at_deadline if r.acc_at_deadline >= 0 else j.accuracy(),
            "accuracy_requirement": s.accuracy_requirement,
            "accuracy_met": bool(ended and r.acc_at_deadline >= s.accuracy_requirement),
            "cross_server_mb": r.cross_mb, "migrations": r.migrations, "preemptions": r.preemptions,
            "gang_releases": r.gang_releases, "state": j.state.name, "stopped_by": r.stopped_by,
            "nas_group": s.nas_group if s.nas_group is not None else -1, "curve_pace": s.curve_pace,
        })
    return out
