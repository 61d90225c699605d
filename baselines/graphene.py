"""Graphene (Grandl et al., OSDI '16), adapted to GPU training DAGs.

Graphene schedules the "troublesome" tasks of a DAG first (long-running, or with demands that are hard
to pack) and otherwise favours tasks that unlock more of the DAG, then packs tasks Tetris-style
(alignment of demand and free resources). Our adaptation, job by job (gang guard):

- descendant score of a task: D_k = sum over children c of gamma (1 + D_c): more and closer
  descendants score higher (gamma = 0.8 per layer);
- a job is troublesome when one of its tasks' dominant demand share (GPU memory / GPU capacity, CPU /
  server cores, memory / server memory, on the median server) is at least ``trouble_share``, or its
  estimated remaining time is at least ``long_s`` (4 h);
- job order: troublesome first, then larger maximum descendant score, then submission;
- placement: one task per GPU, servers by Tetris alignment (dot product of the task's normalised
  demand with the server's normalised free CPU, memory and idle GPUs), largest first (``placement="pack"``,
  the shared best fit, is the ablation that isolates what Tetris alignment costs).
Graphene's offline DAG-schedule construction (space-time packing of the whole DAG) is not reproduced.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order


def descendant_scores(job: Job, gamma: float) -> list[float]:
    n = len(job.tasks)
    d = [0.0] * n
    for k in range(n - 1, -1, -1):
        d[k] = sum(gamma * (1.0 + d[c]) for c in job.tasks[k].t.children)
    return d


@dataclass
class Graphene(Policy):
    name = "graphene"
    source = "Graphene (Grandl et al., OSDI'16); MLFS §4.1 comparison method"
    gamma: float = 0.8
    trouble_share: float = 0.5
    long_s: float = 4 * 3600.0
    placement: str = "tetris"  # "tetris" (Graphene's alignment) or "pack" (best fit, an ablation)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.placement not in ("tetris", "pack"):
            raise ValueError(f"graphene: placement must be 'tetris' or 'pack', got {self.placement!r}")

    def new_episode(self, view: ClusterView) -> None:
        self._median_caps = (float(np.median(view.gpu_mem_cap)), float(np.median(view.cpu_cap)),
                             float(np.median(view.mem_cap)))

    def troublesome(self, view: ClusterView, job: Job) -> bool:
        g, cpu, mem = self._median_caps
        share = max(max(t.t.gpu_memory_gb / g, t.t.cpu_cores / cpu, t.t.memory_gb / mem) for t in job.tasks)
        return share >= self.trouble_share or view.remaining_time(job) >= self.long_s

    def key(self, view: ClusterView, job: Job):
        return (not self.troublesome(view, job), -max(descendant_scores(job, self.gamma)), job.spec.submit_time)

    def tetris_order(self, view: ClusterView, task, mask: np.ndarray) -> list[int]:
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return []
        idle = view.idle_gpus / view.server_n_gpus
        free = np.stack([idle, (view.cpu_cap - view.cpu_alloc) / view.cpu_cap,
                         (view.mem_cap - view.mem_alloc) / view.mem_cap], axis=1)
        dem = np.array([0.0 if task.is_ps else 1.0, task.t.cpu_cores, task.t.memory_gb])
        dem = dem / np.array([1.0, np.median(view.cpu_cap), np.median(view.mem_cap)])
        score = free[idx] @ dem
        return [int(idx[i]) for i in np.lexsort((idx, -score))]

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: self.key(view, j), "exclusive",
                              self.tetris_order if self.placement == "tetris" else pack_order, True)
