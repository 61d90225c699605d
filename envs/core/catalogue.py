"""Model catalogue: per-model, per-GPU-type speed and per-task resource demands.

Speed depends on the model *and* the GPU type: ``ModelProfile.iteration_time[gpu_type]`` is the time of one
training iteration (one mini-batch through the whole, unpartitioned model) on one GPU of that type, running
alone. Figures come from measured matrices (Gavel: K80/P100/V100; ElasticFlow: A100/T4); the rule for
missing cells is documented on :func:`fill_missing_speeds` and in the README.

THE DATA TABLE IS FILLED IN BY ``envs/core/catalogue_data.py``; this module defines the interface.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping

from .curves import LearningCurve

Parallelism = Literal["chain", "layer", "none"]


@dataclass(frozen=True)
class ModelProfile:
    """A trainable model type.

    - ``parallelism``: how model parallelism splits it (MLFS §4.1): ``"chain"`` cuts the network into
      sequential stages (MLP, AlexNet, VGG-like), ``"layer"`` splits every layer into parallel parts
      (ResNet, LSTM-like), ``"none"`` cannot be partitioned (SVM): one partition only.
    - ``iteration_time``: seconds per iteration per GPU type (whole model, batch ``batch_size``, 1 GPU).
    - ``gpu_memory_gb``: GPU memory of one full replica (weights, optimiser state, activations);
      a partition needs its share plus a fixed runtime overhead (see :mod:`clustergym.core.dag`).
    - ``gpu_util``: the GPU utilisation one full-model task causes when it runs alone (0..1].
    - ``cpu_cores`` / ``host_memory_gb``: host demand of one replica's data loading and runtime.
    - ``activation_mb``: bytes passed between consecutive partitions per iteration (forward + backward).
    - ``params_m``: parameters in millions (sync volume = 4 bytes x params x share).
    - ``batch_fixed_share``: the share of one iteration at ``batch_size`` that does not scale with the batch
      (SJF-BSBF Eq. 3's ``alpha / t_comp(B)``), for gradient accumulation (:mod:`clustergym.core.accumulation`);
      None: unknown, the model cannot accumulate.
    """

    name: str
    family: str
    parallelism: Parallelism
    params_m: float
    batch_size: int
    iteration_time: Mapping[str, float]
    gpu_memory_gb: float
    gpu_util: float
    cpu_cores: float
    host_memory_gb: float
    activation_mb: float
    curve: LearningCurve
    max_partitions: int = 32
    batch_fixed_share: float | None = None
    sources: str = ""
    notes: str = field(default="", compare=False)

    def iter_time(self, gpu_type: str) -> float:
        try:
            return self.iteration_time[gpu_type]
        except KeyError:
            raise KeyError(f"model {self.name!r} has no speed for GPU type {gpu_type!r}") from None

    @property
    def param_mb(self) -> float:
        return self.params_m * 4.0  # fp32 bytes, in MB
