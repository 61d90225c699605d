"""Gandiva (Xiao et al., OSDI '18), as MLFS compares against it.

- Order: FIFO by submission, skipping jobs that do not fit (Gandiva does not hold the queue).
- Affinity packing by GPU count: a job's tasks go to servers already hosting the job, then servers whose
  jobs have the same GPU count as this one (Gandiva's "affinity"), then empty servers, then the rest;
  an idle GPU is preferred, otherwise a GPU is time-shared (packed) while the summed GPU use stays
  <= ``max_gpu_load`` (1.0: packing that does not slow anyone down; Gandiva's suspend/resume
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

from .base import Command, Policy, View, job_servers, restrict, server_mask, task_gpu_use


@dataclass
class Gandiva(Policy):
    name = "gandiva"
    source = "Gandiva (Xiao et al., OSDI'18); MLFS §2/§4.1 comparison method"
    max_gpu_load: float = 1.0
    migrate: bool = True

    def affinity_order(self, sim, task, mask: np.ndarray) -> list[int]:
        c = sim.cluster
        idx = np.flatnonzero(mask)
        if len(idx) == 0:
            return []
        mine = job_servers(task.job)
        n = task.job.spec.n_gpus
        idle = np.logical_or.reduceat((c.gpu_n_tasks == 0) & (c.gpu_mem_cap - c.gpu_mem_used + 1e-9 >= task.t.gpu_memory_gb),
                                      c.server_first_gpu)

        def affinity(s: int) -> int:
            sizes = {t.job.spec.n_gpus for t in c.server_tasks[s]}
            return 0 if n in sizes else (1 if not sizes else 2)

        return sorted(idx.tolist(), key=lambda s: (s not in mine, not idle[s] and not task.is_ps, affinity(s), s))

    def preferences(self, sim, view: View) -> Iterator[Command]:
        if self.migrate and view.migrate:
            yield from self._migrations(sim, view)
        yield from self.job_first(sim, view, lambda j: j.spec.submit_time, "share",
                                  lambda s, t, m: self.affinity_order(s, t, restrict(server_mask(s, t, "share", self.max_gpu_load), view.servers)),
                                  True)

    def _migrations(self, sim, view: View) -> Iterator[Command]:
        c, h = sim.cluster, sim.config.overload_threshold
        hot: dict[int, list] = {}
        for t in view.migrate:
            if t.state == TaskState.RUNNING and t.gpu >= 0 and c.gpu_load[t.gpu] > h and t.tid not in self._touched:
                hot.setdefault(t.gpu, []).append(t)
        for g in sorted(hot, key=lambda g: -c.gpu_load[g]):
            task = min(hot[g], key=lambda t: (task_gpu_use(t), t.tid))
            use = task_gpu_use(task)
            mask = restrict(server_mask(sim, task, "fit", moving=True), view.servers)
            mask[task.server] = False
            ok_gpu = (c.gpu_mem_cap - c.gpu_mem_used + 1e-9 >= task.t.gpu_memory_gb) & mask[c.gpu_server]
            for dest_g in np.argsort(c.gpu_load + np.where(ok_gpu, 0.0, np.inf), kind="stable"):
                if not ok_gpu[dest_g] or c.gpu_load[dest_g] + use >= c.gpu_load[g]:
                    break
                yield Command("migrate", task.tid, int(c.gpu_server[dest_g]))
                break
