"""Cluster hardware: GPU types, servers and clusters (specifications only, no run-time state).

Run-time occupancy lives in :mod:`clustergym.core.state`; presets and file loaders in
:mod:`clustergym.core.presets`.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class GPUType:
    """A GPU model. Speed is *not* a property of the type: it is per (model, GPU type), see
    :mod:`clustergym.core.catalogue`."""

    name: str
    memory_gb: float
    year: int


# Memory per device as sold. K80 is one die of the dual-die board (12 GB), as schedulers see it.
GPU_TYPES: dict[str, GPUType] = {
    "K80": GPUType("K80", 12.0, 2014),
    "M60": GPUType("M60", 8.0, 2015),
    "P100": GPUType("P100", 16.0, 2016),
    "V100": GPUType("V100", 16.0, 2017),
    "T4": GPUType("T4", 16.0, 2018),
    "A100": GPUType("A100", 40.0, 2020),
    "H100": GPUType("H100", 80.0, 2022),
}


@dataclass(frozen=True)
class ServerSpec:
    """One server: ``n_gpus`` GPUs of one type plus host resources.

    ``intra_gbps`` is the GPU-to-GPU bandwidth inside the server (NVLink or PCIe), ``nic_gbps`` the
    network bandwidth to other servers. Both in gigabits per second.
    """

    name: str
    gpu_type: str
    n_gpus: int
    cpu_cores: float
    memory_gb: float
    nic_gbps: float = 10.0
    intra_gbps: float = 100.0

    def __post_init__(self) -> None:
        if self.gpu_type not in GPU_TYPES:
            raise ValueError(f"server {self.name!r}: unknown gpu_type {self.gpu_type!r}; known: {sorted(GPU_TYPES)}")
        for f in ("n_gpus", "cpu_cores", "memory_gb", "nic_gbps", "intra_gbps"):
            if getattr(self, f) <= 0:
                raise ValueError(f"server {self.name!r}: {f} must be > 0, got {getattr(self, f)!r}")

    @property
    def gpu_memory_gb(self) -> float:
        return GPU_TYPES[self.gpu_type].memory_gb


@dataclass(frozen=True)
class ClusterSpec:
    """A named set of servers, with the source its figures come from."""

    name: str
    servers: tuple[ServerSpec, ...]
    source: str = ""
    notes: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.servers:
            raise ValueError(f"cluster {self.name!r} has no servers")
        names = [s.name for s in self.servers]
        if len(set(names)) != len(names):
            raise ValueError(f"cluster {self.name!r}: duplicate server names")

    @property
    def n_servers(self) -> int:
        return len(self.servers)

    @property
    def n_gpus(self) -> int:
        return sum(s.n_gpus for s in self.servers)

    def gpu_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.servers:
            out[s.gpu_type] = out.get(s.gpu_type, 0) + s.n_gpus
        return out

    @classmethod
    def homogeneous(cls, name: str, n_servers: int, gpu_type: str, gpus_per_server: int, cpu_cores: float,
                    memory_gb: float, nic_gbps: float = 10.0, intra_gbps: float = 100.0, source: str = "") -> "ClusterSpec":
        servers = tuple(ServerSpec(f"{name}-s{i}", gpu_type, gpus_per_server, cpu_cores, memory_gb, nic_gbps, intra_gbps)
                        for i in range(n_servers))
        return cls(name, servers, source)
