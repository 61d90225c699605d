"""Task dependency graphs of training jobs, and iteration time under a placement.

A job's iteration is a DAG (MLFS §3.2, Fig. 2): ``n_partitions`` model partitions x ``n_replicas``
data-parallel replicas, plus one parameter-server task when ``sync == "ps"``.

Partition structure (MLFS §4.1):

- ``chain`` models (MLP, AlexNet, VGG) are cut into sequential stages: partition p feeds p+1.
- ``layer`` models (ResNet, LSTM, Transformer) have every layer split into ``w`` parallel parts,
  ``w`` = the largest power of two <= sqrt(P); layer l's parts all feed every part of layer l+1.
- ``none`` models (SVM) have one partition.

Parameter shares (S_k / S_J in MLFS Eq. 2) are uneven on purpose, so the priority term matters:
chain stages hold parameters in proportion to ``p + 1`` (the dense layers of sequential CNNs sit at the
end) while compute is proportional to ``P - p`` (convolutions sit at the start); layer-split parts are
equal within a layer and layers are equal.

Iteration time (all times in seconds, volumes in MB, bandwidths in Gbit/s):

- compute of task k on a GPU of type g: ``compute_share_k * model.iter_time(g) * slowdown_k``;
- a DAG edge costs ``comm_worker_mb`` transferred over the link between the two GPUs: free on the
  same GPU, ``intra_gbps`` inside a server, the smaller NIC between servers (``nic`` is the bandwidth each
  server's NIC gives this job: the simulator passes the NIC's equal share among the jobs crossing it,
  :mod:`clustergym.core.progress`);
- a replica's time is its DAG's critical path (node + edge weights); tasks of one job that share a GPU
  run one after another (Hare's relaxed synchronisation), so a replica also takes at least the summed
  compute of its tasks on any one GPU;
- synchronisation: all-reduce runs a ring per partition over the replicas
  (``2 (R-1)/R * comm_ps_mb`` per replica, over the slowest ring link); a parameter server receives
  ``comm_ps_mb`` from every worker and sends it back, limited by each worker's link and by the PS
  server's NIC for the cross-server total;
- the iteration takes the slowest replica's critical path plus the sync time.

Cross-server bytes per iteration are accounted per server pair for MLFS's bandwidth objective.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import dag_kernels as kernels
from .catalogue import ModelProfile
from .workload import JobSpec

TASK_GPU_OVERHEAD_GB = 0.3  # CUDA context and framework buffers per task
PS_CPU_CORES = 2.0


@dataclass(frozen=True)
class TaskTemplate:
    """Static description of one task of a job's DAG."""

    index: int
    kind: str  # "worker" or "ps"
    partition: int  # -1 for the PS
    replica: int  # -1 for the PS
    share: float  # parameter share S_k / S_J
    compute_share: float  # share of one replica's per-iteration compute
    gpu_memory_gb: float  # 0 for the PS (needs no GPU)
    gpu_util: float
    cpu_cores: float
    memory_gb: float
    state_mb: float  # bytes moved when the task is migrated (weights + optimiser state)
    parents: tuple[int, ...]
    children: tuple[int, ...]
    depth: int  # layers below this task in its replica's DAG (0 = sink)


def layer_width(n_partitions: int) -> int:
    w = 1
    while (w * 2) ** 2 <= n_partitions:
        w *= 2
    return w


def partition_layout(parallelism: str, n_partitions: int) -> tuple[list[int], list[float], list[float]]:
    """For each partition: its layer index, parameter share and compute share."""
    p = n_partitions
    if parallelism == "none" or p == 1:
        return [0] * p, [1.0 / p] * p, [1.0 / p] * p
    if parallelism == "chain":
        wp = [i + 1.0 for i in range(p)]
        wc = [float(p - i) for i in range(p)]
        return list(range(p)), [w / sum(wp) for w in wp], [w / sum(wc) for w in wc]
    w = layer_width(p)
    n_layers = math.ceil(p / w)
    layers = [min(i // w, n_layers - 1) for i in range(p)]
    return layers, [1.0 / p] * p, [1.0 / p] * p


def build_tasks(spec: JobSpec, model: ModelProfile) -> list[TaskTemplate]:
    """The job's tasks, PS first (it is every worker root's parent: workers need to know where it is)."""
    if model.parallelism == "none" and spec.n_partitions > 1:
        raise ValueError(f"job {spec.job_id}: model {model.name!r} cannot be partitioned (n_partitions={spec.n_partitions})")
    layers, shares, cshares = partition_layout(model.parallelism, spec.n_partitions)
    n_layers = max(layers) + 1
    by_layer: list[list[int]] = [[] for _ in range(n_layers)]
    for part, layer in enumerate(layers):
        by_layer[layer].append(part)

    has_ps = spec.sync == "ps"
    offset = 1 if has_ps else 0
    P = spec.n_partitions
    tasks: list[TaskTemplate] = []
    if has_ps:
        roots = [offset + r * P + part for r in range(spec.n_replicas) for part in by_layer[0]]
        tasks.append(TaskTemplate(
            index=0, kind="ps", partition=-1, replica=-1, share=1.0, compute_share=0.0, gpu_memory_gb=0.0,
            gpu_util=0.0, cpu_cores=PS_CPU_CORES, memory_gb=1.0 + 3.0 * model.param_mb / 1024.0,
            state_mb=3.0 * model.param_mb, parents=(), children=tuple(roots), depth=n_layers))
    for r in range(spec.n_replicas):
        base = offset + r * P
        for part in range(P):
            layer = layers[part]
            parents = tuple(base + q for q in by_layer[layer - 1]) if layer > 0 else ((0,) if has_ps else ())
            children = tuple(base + q for q in by_layer[layer + 1]) if layer + 1 < n_layers else ()
            share = shares[part]
            tasks.append(TaskTemplate(
                index=base + part, kind="worker", partition=part, replica=r, share=share,
                compute_share=cshares[part],
                gpu_memory_gb=worker_gpu_memory(model.gpu_memory_gb, share),
                gpu_util=min(1.0, model.gpu_util),
                cpu_cores=max(0.25, model.cpu_cores * cshares[part]),
                memory_gb=max(0.5, model.host_memory_gb * cshares[part]),
                state_mb=3.0 * model.param_mb * share,
                parents=parents, children=children, depth=n_layers - 1 - layer))
    return tasks


def worker_gpu_memory(replica_gb: float, share: float) -> float:
    """GPU memory of a worker task: its parameter share of a full replica's memory plus the runtime overhead."""
    return TASK_GPU_OVERHEAD_GB + replica_gb * share


# reference_iteration_time's recent answers: (model id, the other arguments) -> (model, seconds). The model is kept
# with its answer so an id reused by another profile never matches (the identity is checked).
_REFERENCE_TIMES: dict[tuple, tuple[ModelProfile, float]] = {}
_REFERENCE_TIMES_MAX = 4096  # cleared when full: an episode's jobs ask a few hundred times at most


def reference_iteration_time(model: ModelProfile, n_partitions: int, n_replicas: int, sync: str, gpu_type: str,
                             comm_ps_mb: float, comm_worker_mb: float, gpus_per_server: int = 8,
                             nic_gbps: float = 10.0, intra_gbps: float = 100.0) -> float:
    """Iteration time on dedicated GPUs of ``gpu_type``, packed onto as few servers as possible
    (``gpus_per_server`` each, tasks filled in index order, PS on the first server). Used to turn a trace
    job's duration into an iteration budget. A pure function of its arguments (profiles are frozen), so recent
    answers are reused: an episode asks it twice per job (its deadline and the arrival compression)."""
    key = (id(model), n_partitions, n_replicas, sync, gpu_type, comm_ps_mb, comm_worker_mb, gpus_per_server,
           nic_gbps, intra_gbps)
    hit = _REFERENCE_TIMES.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    seconds = _reference_iteration_time(model, n_partitions, n_replicas, sync, gpu_type, comm_ps_mb, comm_worker_mb,
                                        gpus_per_server, nic_gbps, intra_gbps)
    if len(_REFERENCE_TIMES) >= _REFERENCE_TIMES_MAX:
        _REFERENCE_TIMES.clear()
    _REFERENCE_TIMES[key] = (model, seconds)
    return seconds


def _reference_iteration_time(model: ModelProfile, n_partitions: int, n_replicas: int, sync: str, gpu_type: str,
                              comm_ps_mb: float, comm_worker_mb: float, gpus_per_server: int, nic_gbps: float,
                              intra_gbps: float) -> float:
    spec = JobSpec(job_id=0, submit_time=0.0, model=model.name, n_partitions=n_partitions, n_replicas=n_replicas,
                   max_iterations=1, accuracy_requirement=0.0, deadline=1.0, sync=sync, comm_ps_mb=comm_ps_mb,
                   comm_worker_mb=comm_worker_mb)
    tasks = build_tasks(spec, model)
    servers, gpus = [], []
    slot = 0
    for t in tasks:
        if t.kind == "ps":
            servers.append(0)
            gpus.append(-1)
        else:
            servers.append(slot // gpus_per_server)
            gpus.append(slot)
            slot += 1
    n = len(tasks)
    speed = [model.iter_time(gpu_type)] * n
    return iteration_time(tasks, spec, servers, gpus, speed, [1.0] * n,
                          [intra_gbps] * (max(servers) + 1), [nic_gbps] * (max(servers) + 1))[0]


@dataclass
class PlacementPlan:
    """Everything about a job's iteration that depends only on where its tasks are (one link per DAG edge and
    per synchronisation transfer, cross-server bytes), with the link times under one set of NIC shares, so a
    change of contention only re-runs the critical path and a change of NIC shares only re-times the links
    (:func:`retime`, in place). A link is its two servers: ``-1, -1`` on one GPU, ``a, a`` inside server a,
    ``a, b`` (a < b) between two servers (:mod:`clustergym.core.dag_kernels`)."""

    graph: "JobGraph"
    links: np.ndarray  # (n_edges + n_sync, 2): the DAG edges (aligned with graph.p_idx), then the sync transfers
    link_s: np.ndarray  # seconds per link under the NIC shares the plan was last timed with
    sync_s: float
    # the workers of each GPU holding several (replicas too: Hare's relaxed synchronisation runs the tasks of a
    # round that share a GPU one after another), CSR: g_task[g_start[i]:g_start[i + 1]] for i < n_groups
    g_start: np.ndarray
    g_task: np.ndarray
    n_groups: int
    ps_server: int  # the parameter server's server, -1 without one
    ps_cross_mb: float  # MB per iteration through the PS server's NIC (every cross-server worker's push and pull)
    # the cross-server pairs (a, b), a < b, in first-seen order, and their MB per iteration (``cross`` as arrays:
    # what the NIC-load kernel reads)
    cross_ab: np.ndarray  # (n, 2)
    cross_mb: np.ndarray  # (n,)
    cross_servers: frozenset[int]  # the servers in those pairs
    cross_order: tuple[int, ...]  # the same servers in server order
    _cross: dict | None = field(default=None, repr=False, compare=False)  # ``cross``, once read

    @property
    def cross(self) -> dict[tuple[int, int], float]:
        """{(server a, server b): MB per iteration}, a < b, in first-seen order; built when first read (a plan
        often ends before its bytes are ever counted: many are re-planned within one decision round)."""
        c = self._cross
        if c is None:
            ab = self.cross_ab
            c = self._cross = dict(zip(zip(ab[:, 0].tolist(), ab[:, 1].tolist()), self.cross_mb.tolist()))
        return c


@dataclass(frozen=True)
class JobGraph:
    """The placement-independent part of :func:`placement_plan` for one job, as the kernels' arrays: its
    workers in topological order with their non-PS parents (CSR), its sync transfers and volumes. Built once
    per job, so a re-plan after every migration only looks up the tasks' slots."""

    w_task: np.ndarray  # worker task indices, topological order
    w_rep: np.ndarray  # their replicas
    p_start: np.ndarray  # worker i's non-PS parents: p_idx[p_start[i]:p_start[i + 1]]
    p_idx: np.ndarray
    comm_worker_mb: float
    ps: bool  # parameter-server sync (task 0 is the PS)
    ps_mb: float  # per worker and iteration, to and from the PS
    ring_a: np.ndarray  # all-reduce ring links (a -> b), partition by partition
    ring_b: np.ndarray
    ring_mb: float
    n_replicas: int


def link_volumes(spec: JobSpec) -> tuple[float, float, float]:
    """MB per iteration over a DAG edge between workers, between a worker and the parameter server (gradients
    out, parameters back), and over an all-reduce ring link (``2 (R-1)/R comm_ps_mb``; 0 without a ring)."""
    ring_mb = 0.0
    if spec.sync != "ps" and spec.n_replicas > 1:
        ring_mb = 2.0 * (spec.n_replicas - 1) / spec.n_replicas * spec.comm_ps_mb
    return spec.comm_worker_mb, 2.0 * spec.comm_ps_mb, ring_mb


def job_graph(tasks: list[TaskTemplate], spec: JobSpec) -> JobGraph:
    workers = [t for t in tasks if t.kind == "worker"]
    parents = [[p for p in t.parents if tasks[p].kind != "ps"] for t in workers]
    worker_mb, ps_mb, ring_mb = link_volumes(spec)
    ring: list[tuple[int, int]] = []
    if ring_mb:
        by_partition: dict[int, list[int]] = {}
        for t in workers:
            by_partition.setdefault(t.partition, []).append(t.index)
        for members in by_partition.values():
            ring.extend((a, members[(i + 1) % len(members)]) for i, a in enumerate(members))
    return JobGraph(_ints([t.index for t in workers]), _ints([t.replica for t in workers]),
                    _ints(np.cumsum([0] + [len(ps) for ps in parents])), _ints([p for ps in parents for p in ps]),
                    worker_mb, spec.sync == "ps", ps_mb, _ints([a for a, _ in ring]), _ints([b for _, b in ring]),
                    ring_mb, spec.n_replicas)


def _ints(values) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def placement_plan(tasks: list[TaskTemplate], spec: JobSpec, servers: list[int], gpus: list[int],
                   intra: list[float], nic: list[float]) -> PlacementPlan:
    """Transfer, sync and cross-server figures of a fully placed job (see the module docstring)."""
    return plan_placement(job_graph(tasks, spec), servers, gpus, intra, nic)


def plan_placement(g: JobGraph, servers: list[int], gpus: list[int], intra: list[float],
                   nic: list[float]) -> PlacementPlan:
    """:func:`placement_plan` from the job's :class:`JobGraph`: :func:`link_plan` timed by :func:`retime`.
    ``nic[s]``: the bandwidth server s's NIC gives this job (its whole NIC, or its share of it)."""
    return retime(link_plan(g, servers, gpus), np.asarray(intra, dtype=np.float64),
                  np.asarray(nic, dtype=np.float64))


def link_plan(g: JobGraph, servers, gpus) -> PlacementPlan:
    """The placement's links, not yet timed (what the simulator builds once per placement and times with
    :func:`retime` for the NIC shares it meets). Which servers exchange bytes (``cross``, ``cross_servers``)
    depends on the placement alone. ``servers[k]``, ``gpus[k]``: task k's slot (GPU -1 for the PS)."""
    n_links, nw = len(g.p_idx) + (len(g.w_task) if g.ps else len(g.ring_a)), len(g.w_task)
    links, cross_ab = np.empty((n_links, 2), dtype=np.int64), np.empty((n_links, 2), dtype=np.int64)
    cross_mb, g_start, g_task = np.empty(n_links), np.empty(nw + 1, dtype=np.int64), np.empty(nw, dtype=np.int64)
    order = np.empty(2 * n_links, dtype=np.int64)
    n_cross, n_order, n_groups, ps_cross_mb = kernels.link_plan(
        g.w_task, g.p_start, g.p_idx, g.comm_worker_mb, g.ps, g.ps_mb, g.ring_a, g.ring_b, g.ring_mb,
        np.asarray(servers, dtype=np.int64), np.asarray(gpus, dtype=np.int64), links, cross_ab, cross_mb, g_start,
        g_task, order)
    order = tuple(order[:n_order].tolist())
    return PlacementPlan(g, links, np.empty(n_links), 0.0, g_start, g_task, n_groups,
                         int(servers[0]) if g.ps else -1, ps_cross_mb, cross_ab[:n_cross], cross_mb[:n_cross],
                         frozenset(order), order)


_NO_SHARE = np.empty((0, 2), dtype=np.int64)


def retime(plan: PlacementPlan, intra: np.ndarray, nic: np.ndarray, sharing: tuple = ()) -> PlacementPlan:
    """``plan``, timed in place: its link and sync times when server s's NIC gives this job ``nic[s] / n`` for
    each (s, n) of ``sharing`` and ``nic[s]`` elsewhere (the placement, hence the links and the cross-server
    bytes, unchanged): what a change in the number of jobs crossing a NIC costs."""
    share = np.array([x for pair in sharing for x in pair], dtype=np.int64).reshape(-1, 2) if sharing else _NO_SHARE
    return retime_shares(plan, intra, nic, share)


def retime_shares(plan: PlacementPlan, intra: np.ndarray, nic: np.ndarray, share: np.ndarray) -> PlacementPlan:
    """:func:`retime` with the NIC shares as an int64 array of rows (s, n)."""
    g = plan.graph
    plan.sync_s = kernels.retime(plan.links, len(g.p_idx), g.comm_worker_mb, g.ps_mb if g.ps else g.ring_mb,
                                 plan.ps_server, plan.ps_cross_mb, intra, nic, share, plan.link_s)
    return plan


def critical_time(plan: PlacementPlan, unit_compute, slowdown) -> float:
    """Iteration time given per-task compute seconds ``unit_compute[k] * slowdown[k]``: the slowest replica's
    critical path, at least the summed compute of the job's tasks on any one GPU (they share it one after
    another, whatever their replica), plus the sync time."""
    g = plan.graph
    if len(g.w_task) == 1:
        k = int(g.w_task[0])
        return float(unit_compute[k]) * float(slowdown[k]) + plan.sync_s  # (Python floats from lists or arrays)
    return kernels.critical_time(g.w_task, g.w_rep, g.p_start, g.p_idx, plan.link_s, g.n_replicas, plan.g_start,
                                 plan.n_groups, plan.g_task, plan.sync_s, np.asarray(unit_compute, dtype=np.float64),
                                 np.asarray(slowdown, dtype=np.float64))


def iteration_time(tasks: list[TaskTemplate], spec: JobSpec, servers: list[int], gpus: list[int],
                   base_time: list[float], slowdown: list[float], intra: list[float], nic: list[float],
                   ) -> tuple[float, dict[tuple[int, int], float]]:
    """Iteration time of a fully placed job and its cross-server MB per iteration per server pair.

    ``servers[k]``/``gpus[k]``: location of task k (gpu -1 for the PS); ``base_time[k]``: the model's
    iteration time on task k's GPU type; ``slowdown[k]`` >= 1: contention factor; ``intra``/``nic``:
    per-server bandwidths (indexed by server id).
    """
    plan = placement_plan(tasks, spec, servers, gpus, intra, nic)
    unit = [t.compute_share * base_time[t.index] for t in tasks]
    return critical_time(plan, unit, slowdown), plan.cross
