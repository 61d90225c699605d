"""HLAS: Heterogeneity-aware Least-Attained-Service (Hare, Chen et al., IEEE TCC 2024, §IV).

Service of job n: H_n = R_n^r x T̄_n, rounds (iterations) done times the heterogeneity-averaged round
time. Hare groups GPUs so that every group shows each job the same speed and takes T̄_n from the
groups' average speed; we skip the grouping step and take T̄_n directly as the job's iteration time
averaged over the cluster's GPUs (:func:`clustergym.baselines.base.ref_iter_time`), which is what the grouping
approximates. Jobs sit in K queues by H_n (new jobs in Q_1, demotion only); the highest non-empty
queue is served, a partially scheduled job first, otherwise FIFO.

Placement is heterogeneity-aware by earliest finish time: a job's task goes to the GPU where it would
finish first given this job's tasks already there (:func:`eft_split` reproduces Hare's Fig. 10). With one
task per GPU (our gang engine), that is the fastest idle GPU type for the job, consolidated on ties.

Unspecified in the paper (Hare §7.2 of our extraction): K and the thresholds. Default: K = 4 with
exponentially spaced thresholds 600 s, 3600 s, 21600 s of average-GPU time (ratio 6), exposed.
HLAS-P's conservative prediction is available as ``predicted_rounds`` for the toy model only.
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, job_servers


def eft_split(n_tasks: int, task_times: Sequence[float]) -> tuple[list[int], float]:
    """Earliest-finish-time split of one round's ``n_tasks`` identical tasks over GPUs whose per-task
    times are ``task_times`` (ties to the lower GPU index). Returns the tasks per GPU and the round's
    task-GPU time (sum of the task times; Hare's service measure under relaxed synchronisation)."""
    finish = [0.0] * len(task_times)
    count = [0] * len(task_times)
    for _ in range(n_tasks):
        g = min(range(len(task_times)), key=lambda i: (finish[i] + task_times[i], i))
        finish[g] += task_times[g]
        count[g] += 1
    return count, float(sum(c * t for c, t in zip(count, task_times)))


def hlas_order_key(service: float, arrival_rank: int, thresholds: Sequence[float] | None = None):
    """HLAS job order: queue by service (least attained first), FIFO inside a queue. With
    ``thresholds=None`` the queues are continuous (pure LAS), as in Hare's one-GPU toy example."""
    q = service if thresholds is None else bisect.bisect_right(list(thresholds), service)
    return (q, arrival_rank)


def single_gpu_toy(sizes: Sequence[int], mode: str = "las", predicted: Sequence[int] | None = None) -> list[float]:
    """Hare Fig. 12: one GPU, unit-time rounds, job i has ``sizes[i]`` rounds, all arriving at 0.
    ``mode``: "las" (HLAS order on attained rounds), "srtf" (clairvoyant), "hlas-p" (HLAS order on
    expected size = attained + conservatively predicted additional rounds, ``predicted[i]`` at start).
    Returns completion times."""
    n = len(sizes)
    done = [0] * n
    end = [0.0] * n
    pred = list(predicted) if predicted is not None else [0] * n
    t = 0
    while any(d < s for d, s in zip(done, sizes)):
        live = [i for i in range(n) if done[i] < sizes[i]]
        if mode == "srtf":
            i = min(live, key=lambda i: (sizes[i] - done[i], i))
        elif mode == "las":
            i = min(live, key=lambda i: hlas_order_key(done[i], i))
        elif mode == "hlas-p":
            i = min(live, key=lambda i: hlas_order_key(done[i] + max(0, pred[i] - done[i]), i))
        else:
            raise ValueError(mode)
        done[i] += 1
        t += 1
        if done[i] == sizes[i]:
            end[i] = float(t)
    return end


@dataclass
class HLAS(Policy):
    name = "hlas"
    source = "Hare/HLAS (Chen, Li, Wu, Guo, IEEE TCC 2024) §IV, Algorithms 1-3"
    thresholds: tuple[float, ...] = (600.0, 3600.0, 21600.0)  # seconds of average-GPU time; K = 4

    def service(self, view: ClusterView, job: Job) -> float:
        return view.iters(job) * view.ref_iter_time(job)

    def key(self, view: ClusterView, job: Job):
        return hlas_order_key(self.service(view, job), 0, self.thresholds)[0], job.spec.submit_time

    def eft_order(self, view: ClusterView, task, mask: np.ndarray) -> list[int]:
        """Servers by the finish time of one more task of this job on their best idle GPU (the job's
        iteration time on the server's GPU type x (1 + this job's tasks already on that GPU, 0 with
        exclusive GPUs)), then consolidation, then index."""
        idx = np.flatnonzero(mask)
        model = task.job.model
        types = view.server_gpu_type
        mine = job_servers(task.job)
        return sorted(idx.tolist(), key=lambda s: (model.iter_time(types[s]), s not in mine, s))

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: self.key(view, j), "exclusive", self.eft_order, True)
