"""Per-job records, cluster series, and the summary every scheduler is judged on (MLFS §4.2 metrics)."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .job import Job, JobState

if TYPE_CHECKING:
    from .engine import Simulator


class Metrics:
    """Running totals kept by the simulator. The cumulative counters (``jobs_in_system_integral``,
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
        self.jobs_ended = 0
        self.deadlines_met = 0
        self.accuracy_met = 0
        self.accuracy_sum = 0.0  # sum of accuracy-by-deadline over ended jobs
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

    def on_job_end(self, job: Job) -> None:
        self.jobs_ended += 1
        if job.end_time <= job.spec.deadline:
            self.deadlines_met += 1
        if job.acc_at_deadline >= job.spec.accuracy_requirement:
            self.accuracy_met += 1
        self.accuracy_sum += job.acc_at_deadline

    SERIES_FIELDS = ("time", "queue_tasks", "running_jobs", "gpu_alloc", "gpu_util", "cpu_util", "mem_util",
                     "net_util", "overloaded_servers")

    def record_series(self, sim: "Simulator") -> None:
        if not sim.config.record_series:
            return
        c = sim.cluster
        u = c.utilisation()
        self.series.append((sim.now, len(sim.queue), len(sim.active_jobs), float((c.gpu_n_tasks > 0).mean()),
                            float(u["gpu"].mean()), float(u["cpu"].mean()), float(u["mem"].mean()),
                            float(u["net"].mean()), int(c.overloaded.sum())))

    def job_records(self, sim: "Simulator") -> list[dict]:
        out = []
        for j in sim.jobs:
            s = j.spec
            ended = j.state in (JobState.FINISHED, JobState.STOPPED)
            out.append({
                "job_id": s.job_id, "model": s.model, "n_gpus": s.n_gpus, "n_partitions": s.n_partitions,
                "n_replicas": s.n_replicas, "sync": s.sync, "urgency": s.urgency, "slo_class": s.slo_class,
                "stop_option": s.stop_option, "final_stop_option": j.stop_option,
                "submit": s.submit_time, "first_start": j.first_start if j.first_start >= 0 else np.nan,
                "end": j.end_time if ended else np.nan, "jct": (j.end_time - s.submit_time) if ended else np.nan,
                "waiting_time": j.waiting_time, "running_time": j.running_time, "deadline": s.deadline,
                "deadline_met": bool(ended and j.end_time <= s.deadline),
                "iterations": j.iters, "max_iterations": s.max_iterations,
                "final_accuracy": j.accuracy(), "accuracy_by_deadline": j.acc_at_deadline if j.acc_at_deadline >= 0 else j.accuracy(),
                "accuracy_requirement": s.accuracy_requirement,
                "accuracy_met": bool(ended and j.acc_at_deadline >= s.accuracy_requirement),
                "cross_server_mb": j.cross_mb, "migrations": j.migrations, "preemptions": j.preemptions,
                "gang_releases": j.gang_releases, "state": j.state.name,
            })
        return out

    def summary(self, sim: "Simulator") -> dict:
        """Every job is accounted for: ``jobs == finished + stopped + unfinished + not_submitted``."""
        jobs = sim.jobs
        ended = [j for j in jobs if j.state in (JobState.FINISHED, JobState.STOPPED)]
        jct = np.array([j.end_time - j.spec.submit_time for j in ended]) if ended else np.array([np.nan])
        wait = np.array([j.waiting_time for j in ended]) if ended else np.array([np.nan])
        n = len(ended)
        first_submit = min((j.spec.submit_time for j in jobs), default=0.0)
        return {
            "jobs": len(jobs),
            "finished": sum(j.state == JobState.FINISHED for j in jobs),
            "stopped": sum(j.state == JobState.STOPPED for j in jobs),
            "unfinished": sum(j.state == JobState.ACTIVE for j in jobs),
            "not_submitted": sum(j.state == JobState.PENDING for j in jobs),
            "mean_jct": float(np.mean(jct)), "p50_jct": float(np.median(jct)), "p99_jct": float(np.percentile(jct, 99)),
            # over every submitted job, an unfinished one counting its time so far: not flattered by truncation
            "mean_jct_censored": float(np.mean([(j.end_time if j.end_time >= 0 else sim.now) - j.spec.submit_time
                                                for j in jobs if j.state != JobState.PENDING] or [np.nan])),
            "makespan": float(max((j.end_time for j in ended), default=first_submit) - first_submit),
            "deadline_ratio": self.deadlines_met / n if n else float("nan"),
            "mean_accuracy": self.accuracy_sum / n if n else float("nan"),
            "accuracy_ratio": self.accuracy_met / n if n else float("nan"),
            "bandwidth_mb": float(self.cross_mb),
            "mean_waiting": float(np.mean(wait)),
            "overload_occurrences": self.overload_occurrences,
            "overload_server_hours": float(self.overload_server_seconds) / 3600.0,
            "migrations": self.migrations, "preemptions": self.preemptions, "gang_releases": self.gang_releases,
            "decisions": sim.decision_count, "events": sim.events_processed, "sim_time": float(sim.now),
        }
