"""Gandiva (Xiao et al., OSDI '18), as MLFS compares against it.

- Order: FIFO by submission, skipping jobs that do not fit (Gandiva does not hold the queue).
- Affinity packing by GPU count: a job's tasks go to servers already hosting the job, then servers whose
  jobs have the same GPU count as this one (Gandiva's "affinity"), then empty servers, then the rest;
  an idle GPU is preferred, otherwise a GPU is time-shared (packed) while the summed GPU use stays
  <= ``max_gpu_load`` (1.0: no utilisation over-commitment; the packed jobs still pay their pair's
  co-location interference ratio, :mod:`clustergym.core.interference`; Gandiva's suspend/resume
  time-slicing is not modelled).
- Migration off overloaded GPUs (load above h_r): the lowest-utilisation task on the overloaded GPU
  moves to the server holding the cluster's lowest-load GPU that can take it, if that lowers the load
  it sees. No requeueing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.job import TaskState
from clustergym.core.resources import fits
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, job_servers, restrict, server_mask


@dataclass
class Gandiva(Policy):
    name = "gandiva"
    source = "Gandiva (Xiao et al., OSDI'18); MLFS §2/§4.1 comparison method"
    max_gpu_load: float = 1.0
    migrate: bool = True

    def affinity_order(self, view: ClusterView, task, mask: np.ndarray) -> list[int]:
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return []
        mine = job_servers(task.job)
        n = task.job.spec.n_gpus
        room = fits(view.gpu_mem_cap - view.gpu_mem_used, task.t.gpu_memory_gb)
        idle = np.logical_or.reduceat((view.gpu_n_tasks == 0) & room, view.server_first_gpu)

        def affinity(s: int) -> int:
            sizes = {t.job.spec.n_gpus for t in view.running_tasks(s)}
            return 0 if n in sizes else (1 if not sizes else 2)

        return sorted(idx.tolist(), key=lambda s: (s not in mine, not idle[s] and not task.is_ps, affinity(s), s))

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if self.migrate and cands.migrate:
            yield from self._migrations(view, cands)

        def order(v: ClusterView, t, mask: np.ndarray) -> list[int]:
            return self.affinity_order(v, t, restrict(server_mask(v, t, "share", self.max_gpu_load), cands.servers))

        yield from self.job_first(view, cands, lambda j: j.spec.submit_time, "share", order, True)

    def _migrations(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        load, h = view.gpu_load, view.overload_threshold
        hot: dict[int, list] = {}
        for t in cands.migrate:
            if t.state == TaskState.RUNNING and t.gpu >= 0 and load[t.gpu] > h and t.tid not in self._touched:
                hot.setdefault(t.gpu, []).append(t)
        for g in sorted(hot, key=lambda g: -load[g]):
            task = min(hot[g], key=lambda t: (view.gpu_use(t), t.tid))
            use = view.gpu_use(task)
            mask = restrict(server_mask(view, task, "fit", moving=True), cands.servers)
            mask[task.server] = False
            ok_gpu = fits(view.gpu_mem_cap - view.gpu_mem_used, task.t.gpu_memory_gb) & mask[view.gpu_server]
            for dest_g in np.argsort(load + np.where(ok_gpu, 0.0, np.inf), kind="stable"):
                if not ok_gpu[dest_g] or load[dest_g] + use >= load[g]:
                    break
                yield Command("migrate", task.tid, int(view.gpu_server[dest_g]))
                break
