"""Fair sharing with Dominant Resource Fairness over GPU, CPU and memory (TensorFlow on Borg, the
"TensorFlow" comparison method of MLFS).

Each job is a tenant. DRF serves the tenant with the smallest dominant share; a waiting job holds
nothing, so we use the dominant share its full demand would take (max over GPUs / cluster GPUs, CPU
cores / cluster cores, memory / cluster memory) and admit the smallest first (progressive filling
order), ties by submission. Placement spreads load like Borg's worst fit: the server with the lowest
dominant utilisation first, one task per GPU (``placement="pack"``, best fit, is the ablation that isolates
what spreading costs). No preemption to rebalance shares.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, pack_order, spread_order


PLACEMENTS = {"spread": spread_order, "pack": pack_order}


@dataclass
class Fair(Policy):
    name = "fair"
    source = "DRF (Ghodsi et al., NSDI'11); Borg (Verma et al., EuroSys'15); MLFS 'TensorFlow' baseline"
    placement: str = "spread"  # "spread" (Borg's worst fit) or "pack" (best fit, an ablation)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.placement not in PLACEMENTS:
            raise ValueError(f"fair: placement must be one of {sorted(PLACEMENTS)}, got {self.placement!r}")

    def new_episode(self, view: ClusterView) -> None:
        self._totals = (float(view.n_gpus), float(view.cpu_cap.sum()), float(view.mem_cap.sum()))

    def dominant_share(self, job: Job) -> float:
        g, cpu, mem = self._totals
        return max(job.spec.n_gpus / g, sum(t.t.cpu_cores for t in job.tasks) / cpu,
                   sum(t.t.memory_gb for t in job.tasks) / mem)

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        return self.job_first(view, cands, lambda j: (self.dominant_share(j), j.spec.submit_time), "exclusive",
                              PLACEMENTS[self.placement], True)
