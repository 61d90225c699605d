"""Cluster run-time state as flat numpy arrays (one row per server or GPU), so policies and the
observation builder read it without walking Python objects."""
from __future__ import annotations

import numpy as np

from .hardware import GPU_TYPES, ClusterSpec

GPU_TYPE_ORDER: tuple[str, ...] = tuple(GPU_TYPES)  # the observation's GPU-type one-hot order


class Mirrored:
    """A per-server or per-GPU quantity held twice: ``array`` (numpy, what observers read vectorised) and
    ``values`` (the same numbers as a Python list, what the engine reads one element at a time: a list element
    costs several times less to read than a numpy one). Written only by its owner
    (:class:`~clustergym.core.resources.Resources`), through :meth:`set`/:meth:`add`, or as a batch of in-place
    updates of ``values`` followed by :meth:`publish` of the entries touched."""

    __slots__ = ("array", "values")

    def __init__(self, array: np.ndarray):
        self.array = array
        self.values: list = array.tolist()

    def set(self, i: int, v) -> None:
        self.array[i] = self.values[i] = v

    def add(self, i: int, delta: float) -> None:
        values = self.values
        self.array[i] = values[i] = values[i] + delta

    def publish(self, indices) -> None:
        """Copy ``values`` to ``array`` at ``indices``, after a batch of updates made to ``values`` in place."""
        array, values = self.array, self.values
        for i in indices:
            array[i] = values[i]


class ClusterState:
    """Capacities, nominal allocations (what admission control checks) and actual usage (what
    overload detection and slowdown use; it varies over time around the nominal demand).
    Observers read it; only :class:`clustergym.core.resources.Resources` writes it."""

    def __init__(self, spec: ClusterSpec):
        self.spec = spec
        S = spec.n_servers
        self.n_servers = S
        self.server_names = [s.name for s in spec.servers]
        self.server_gpu_type = [s.gpu_type for s in spec.servers]
        self.server_type_id = np.array([GPU_TYPE_ORDER.index(s.gpu_type) for s in spec.servers], dtype=np.int64)
        self.cpu_cap = np.array([s.cpu_cores for s in spec.servers], dtype=np.float64)
        self.mem_cap = np.array([s.memory_gb for s in spec.servers], dtype=np.float64)
        self.nic_gbps = np.array([s.nic_gbps for s in spec.servers], dtype=np.float64)
        self.intra_gbps = np.array([s.intra_gbps for s in spec.servers], dtype=np.float64)
        gpu_server, first = [], []
        for i, s in enumerate(spec.servers):
            first.append(len(gpu_server))
            gpu_server.extend([i] * s.n_gpus)
        self.n_gpus = len(gpu_server)
        self.gpu_server = np.array(gpu_server, dtype=np.int64)
        self.server_first_gpu = np.array(first, dtype=np.int64)
        self.server_n_gpus = np.array([s.n_gpus for s in spec.servers], dtype=np.int64)
        self.gpu_mem_cap = np.array([spec.servers[s].gpu_memory_gb for s in gpu_server], dtype=np.float64)
        self.gpu_type = [spec.servers[s].gpu_type for s in gpu_server]
        self.gpu_mem_cap_list: list[float] = self.gpu_mem_cap.tolist()  # the same, as Python floats
        self._mean_iter_time: dict[str, float] = {}
        # nominal allocations
        self.gpu_mem_used = np.zeros(self.n_gpus)
        self.cpu_alloc = np.zeros(S)
        self.mem_alloc = np.zeros(S)
        self.gpu_n_tasks = np.zeros(self.n_gpus, dtype=np.int64)
        self.gpu_n_jobs = np.zeros(self.n_gpus, dtype=np.int64)  # distinct jobs sharing the GPU
        # GPUs without a task per server (== add.reduceat(gpu_n_tasks == 0, server_first_gpu)), kept as GPUs
        # become busy or idle
        self.server_idle_gpus = self.server_n_gpus.copy()
        # actual usage
        self.gpu_load = np.zeros(self.n_gpus)  # utilisation, may exceed 1 when shared
        # contention slowdowns, read one element at a time by the engine only: Python lists (no numpy scalars)
        self.gpu_slow: list[float] = [1.0] * self.n_gpus  # of the GPU's tasks (shared GPUs only)
        self.cpu_use = np.zeros(S)
        self.mem_use = np.zeros(S)
        self.net_mbps = np.zeros(S)  # cross-server MB/s through the server's NIC
        self.overloaded = np.zeros(S, dtype=bool)
        self.server_slow: list[float] = [1.0] * S  # CPU/memory contention slowdown of the server's tasks
        self.server_max_free_gpu_mem = self.gpu_mem_cap[self.server_first_gpu].copy()
        self._server_gpu_ranges = [range(int(f), int(f) + int(n)) for f, n in zip(self.server_first_gpu, self.server_n_gpus)]
        self.gpu_tasks: list[list] = [[] for _ in range(self.n_gpus)]
        self.server_tasks: list[dict] = [{} for _ in range(S)]  # task -> None, insertion-ordered
        # bumped whenever a server's task set changes: keys the sorted view below
        self.server_version: list[int] = [0] * S
        self.placement_version = 0  # bumped whenever any server's task set changes (the sum of the above)
        self._by_id: list[tuple[int, tuple]] = [(-1, ())] * S
        self.net_cap_mbps = self.nic_gbps * 125.0  # NIC capacity in MB/s

    def mean_iter_time(self, model) -> float:
        """A model's single-GPU iteration time averaged over the cluster's GPUs (s): the reference run-time
        estimate of MLF-H and Hare (known at submission by profiling, so not clairvoyant)."""
        v = self._mean_iter_time.get(model.name)
        if v is None:
            per = {ty: model.iter_time(ty) for ty in set(self.gpu_type)}
            v = self._mean_iter_time[model.name] = float(np.mean([per[ty] for ty in self.gpu_type]))
        return v

    def server_gpus(self, s: int) -> range:
        return self._server_gpu_ranges[s]

    def tasks_by_id(self, s: int) -> tuple:
        """The tasks on server ``s`` ordered by task id (cached until the server's task set changes)."""
        v, tasks = self._by_id[s]
        if v != self.server_version[s]:
            tasks = tuple(sorted(self.server_tasks[s], key=_tid))
            self._by_id[s] = (self.server_version[s], tasks)
        return tasks

    def utilisation_matrix(self) -> np.ndarray:
        """(S, 4) actual use / capacity of (GPU, CPU, memory, network); a GPU counts at most fully used.
        (The env computes the same in ``kernels.destinations``; tests compare the two.)"""
        out = np.empty((self.n_servers, 4))
        out[:, 0] = np.add.reduceat(np.minimum(self.gpu_load, 1.0), self.server_first_gpu) / self.server_n_gpus
        out[:, 1] = self.cpu_use / self.cpu_cap
        out[:, 2] = self.mem_use / self.mem_cap
        out[:, 3] = self.net_mbps / self.net_cap_mbps
        return out

    def utilisation(self) -> dict[str, np.ndarray]:
        """Per-server utilisation of each resource type (actual usage / capacity): the columns of
        :meth:`utilisation_matrix` by name."""
        u = self.utilisation_matrix()
        return {"gpu": u[:, 0], "cpu": u[:, 1], "mem": u[:, 2], "net": u[:, 3]}

    def overload_degree(self) -> float:
        """MLFS §3.5 O_c: the mean over servers of ||U_s||, here divided by sqrt(M) (the RMS) so it is on the same
        0..1 scale as h_s = 0.9 (the printed norm of M = 4 utilisations would reach 2)."""
        u = self.utilisation()
        m = np.stack([u["gpu"], u["cpu"], u["mem"], u["net"]])
        return float(np.mean(np.sqrt(np.mean(m * m, axis=0))))


def _tid(task) -> int:
    return task.tid
