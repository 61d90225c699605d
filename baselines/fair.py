"""Fair sharing with Dominant Resource Fairness over GPU, CPU and memory (TensorFlow on Borg, the
"TensorFlow" comparison method of MLFS).

Each job is a tenant. DRF serves the tenant with the smallest dominant share; a waiting job holds
nothing, so we use the dominant share its full demand would take (max over GPUs / cluster GPUs, CPU
cores / cluster cores, memory / cluster memory) and admit the smallest first (progressive filling
order), ties by submission. Placement spreads load like Borg's worst fit: the server with the lowest
dominant utilisation first, one task per GPU. No preemption to rebalance shares.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from clustergym.core.job import Job

from .base import Command, Policy, View, sim_cache, spread_order


@dataclass
class Fair(Policy):
    name = "fair"
    source = "DRF (Ghodsi et al., NSDI'11); Borg (Verma et al., EuroSys'15); MLFS 'TensorFlow' baseline"

    def dominant_share(self, sim, job: Job) -> float:
        cache = sim_cache(sim)
        if "totals" not in cache:
            c = sim.cluster
            cache["totals"] = (float(c.n_gpus), float(c.cpu_cap.sum()), float(c.mem_cap.sum()))
        g, cpu, mem = cache["totals"]
        return max(job.spec.n_gpus / g, sum(t.t.cpu_cores for t in job.tasks) / cpu,
                   sum(t.t.memory_gb for t in job.tasks) / mem)

    def preferences(self, sim, view: View) -> Iterator[Command]:
        return self.job_first(sim, view, lambda j: (self.dominant_share(sim, j), j.spec.submit_time), "exclusive",
                              spread_order, True)
