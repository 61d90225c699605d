"""The cluster's resources: admission (the fit rule), actual use, overload judgement and contention slowdowns.

Contention model (README, "Overload and contention"): admission checks *nominal* demands (GPU memory, CPU
cores, host memory must fit; GPU memory is never over-committed). Actual use varies around the demand (a
per-job usage factor the engine resamples). A server is overloaded when any resource's actual utilisation
(CPU, memory, NIC) exceeds ``h_r``, or any of its GPUs shared by several jobs has a summed utilisation above
``h_r`` (one job alone keeps a GPU busy, it does not overload it). A GPU shared by several jobs slows each
by its co-location interference ratio (:mod:`clustergym.core.interference`: Gavel's measured pairs, else
SJF-BSBF's injected ratio; :attr:`Resources.gpu_xi`); with ``SimConfig.interference = "off"`` instead in
proportion to over-commitment: summed utilisation ``u`` above 1 runs each of them at ``1/u``. A server whose
CPU or memory use exceeds capacity slows all its tasks by the larger ratio. A
server's NIC is shared equally by the jobs whose placement sends cross-server bytes through it: this layer
counts them (:attr:`Resources.nic_flows`) and reports the other jobs on a NIC when its count changes; the
progress layer times their transfers at their share (:func:`clustergym.core.progress.nic_sharing`). NIC use
above ``h_r`` x capacity counts as overload like any other resource.

:class:`Resources` is the only writer of the :class:`~clustergym.core.state.ClusterState` arrays. Each
update (attach, detach, a usage change, NIC traffic moving) reports in :attr:`Resources.changes` the jobs whose
contention slowdown changed and the servers whose overload began or ended; the engine acts on the report.
The module-level functions are the rules themselves, shared with the policies' view and the env's kernels;
whether a job can ever run on the cluster is :mod:`clustergym.core.feasibility`'s.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from .config import SimConfig
# the fit rule lives with the feasibility rules; it is re-exported here, where callers look for admission
from .feasibility import FIT_EPS, fits  # noqa: F401
from .feasibility import cluster_totals, gang_shortfall, no_packing_reason, packs_on_idle
from .hardware import ClusterSpec
from .interference import NO_RATIOS, Interference
from .job import Job, Task
from .resource_kernels import NO_PAIRS, move_net
from .state import ClusterState, Mirrored


# ---------------------------------------------------------------------------------------------------- rules

def gpu_use(gpu_util: float, usage_factor: float) -> float:
    """The GPU utilisation a task causes: its model's utilisation x its job's usage factor, at most 1."""
    use = gpu_util * usage_factor
    return 1.0 if use > 1.0 else use


def gpu_overloaded(load, n_jobs, h: float):
    """MLFS's overload rule for a GPU: shared by several jobs whose summed utilisation exceeds ``h``. One job
    alone at high utilisation keeps the GPU busy without contention; moving it would not help (Gandiva judges
    shared GPUs too). Elementwise on numpy arrays."""
    return (load > h) & (n_jobs > 1)


def overload_limits(h: float, cpu_cap, mem_cap, nic_gbps):
    """The use above which a server's CPU (cores), memory (GB) or NIC (MB/s) is overloaded: ``h`` x capacity."""
    return h * cpu_cap, h * mem_cap, h * nic_gbps * 125.0


def contention(ratio: float, step: float) -> float:
    """Slowdown factor of an over-committed resource: ``ratio`` (use / capacity) rounded up to the next
    ``step``, 1 when not over-committed. The rounding keeps small usage wobbles from cascading rate
    recomputations across every job on a server (README, "Overload and contention")."""
    if ratio <= 1.0:
        return 1.0
    return math.ceil(ratio / step - 1e-9) * step if step > 0 else ratio


class Changes:
    """What a resource update changed: ``jobs`` whose contention slowdown changed (in the order met; a job
    may repeat) and the servers whose overload ``began`` or ``ended``."""

    __slots__ = ("jobs", "began", "ended")

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.began: list[int] = []
        self.ended: list[int] = []



class Resources:
    """Admission, placement bookkeeping, actual use, overload and contention of one cluster."""

    def __init__(self, cluster: ClusterState, config: SimConfig, n_tasks: int):
        c = self.cluster = cluster
        self.h = h = config.overload_threshold
        self.contention_step = config.contention_step
        self.changes = Changes()
        # the server of every running task by task id, -1 for the others (a task runs exactly while attached),
        # so the env's compiled affinity kernel reads placements without the objects
        self.task_server = np.full(n_tasks, -1, dtype=np.int64)
        # capacities and overload limits as Python floats (the same IEEE values, cheaper to read one by one)
        self._cpu_cap = c.cpu_cap.tolist()
        self._mem_cap = c.mem_cap.tolist()
        self._cpu_limit, self._mem_limit, self._net_limit = (
            a.tolist() for a in overload_limits(h, c.cpu_cap, c.mem_cap, c.nic_gbps))
        self._gpu_server = c.gpu_server.tolist()
        # every ClusterState array the engine reads element by element, with its Python copy (Mirrored: the
        # one writer of both)
        self.cpu_alloc = Mirrored(c.cpu_alloc)
        self.mem_alloc = Mirrored(c.mem_alloc)
        self.gpu_mem_used = Mirrored(c.gpu_mem_used)
        self.max_free_gpu_mem = Mirrored(c.server_max_free_gpu_mem)
        self.gpu_load = Mirrored(c.gpu_load)
        self.cpu_use = Mirrored(c.cpu_use)
        self.mem_use = Mirrored(c.mem_use)
        # NIC loads: numpy only (updated in place by the move_net kernel; read one element per overload judgement)
        self.net = c.net_mbps
        self.overloaded = Mirrored(c.overloaded)
        # per server: the jobs whose current placement sends cross-server bytes through its NIC (insertion
        # order: deterministic reports) and their number
        self._nic_jobs: list[dict[Job, None]] = [{} for _ in range(c.n_servers)]
        self.nic_flows: list[int] = [0] * c.n_servers
        self._gpu_hot = [False] * c.n_gpus
        # per GPU: ((job, highest GPU utilisation of its tasks there), ...) in the order the jobs first appear
        # in gpu_tasks; None = rebuild (after a task is attached to or detached from the GPU)
        self._gpu_jobs: list[tuple | None] = [()] * c.n_gpus
        self._server_hot_gpus = [0] * c.n_servers
        # move_net's inputs to find the servers whose overload flag changes: limits, hot-GPU counts, scratch
        self._limits = np.array([self._cpu_limit, self._mem_limit, self._net_limit], dtype=np.float64).reshape(3, -1)
        self._hot_counts = np.zeros(c.n_servers, dtype=np.int64)
        self._flips = np.empty(c.n_servers, dtype=np.int64)
        self.n_overloaded = 0  # == count_nonzero(cluster.overloaded)
        # per job: ((server, CPU sum, memory sum) per server in task order, sorted servers, sorted GPUs) of its
        # running tasks, for usage changes; dropped whenever one of its tasks is attached or detached
        self._layout: dict[Job, tuple] = {}
        self._static_fit: dict | None = None
        # co-location interference: per GPU, {job: its ratio} for the jobs whose ratio there exceeds 1
        self.interference = Interference(config.interference, config.interference_xi)
        self.gpu_xi: list[dict[Job, float]] = [NO_RATIOS] * c.n_gpus
        # the jobs with a task on a server or GPU whose slowdown (server_slow, gpu_slow, gpu_xi) changed, until
        # the progress layer reads their slowdowns again (it keeps the others': refresh_rate's ``stale``)
        self.slow_changed: set[Job] = set()
        self._gpu_type = list(c.gpu_type)

    # ------------------------------------------------------------------------------------------ admission
    def fit(self, task: Task, server: int, gpu: int | None, moving: bool) -> tuple[str | None, int]:
        """(why ``task`` cannot go to ``server`` (and ``gpu``) or None, the GPU it would get: -1 for a PS,
        ``gpu`` if given, else :meth:`best_gpu`). ``moving``: the task runs now and its own slot counts as free."""
        c = self.cluster
        if not 0 <= server < c.n_servers:
            return f"unknown server {server} (valid: 0..{c.n_servers - 1})", -1
        t = task.t
        cpu_free = self._cpu_cap[server] - self.cpu_alloc.values[server]
        mem_free = self._mem_cap[server] - self.mem_alloc.values[server]
        if moving and task.server == server:
            cpu_free += t.cpu_cores
            mem_free += t.memory_gb
        if not fits(cpu_free, t.cpu_cores):
            return f"server {server} has {cpu_free:.2f} free CPU cores, task {task.tid} needs {t.cpu_cores:.2f}", -1
        if not fits(mem_free, t.memory_gb):
            return f"server {server} has {mem_free:.2f} GB free memory, task {task.tid} needs {t.memory_gb:.2f}", -1
        if task.is_ps:
            if gpu is not None and gpu >= 0:
                return f"task {task.tid} is a parameter server and takes no GPU", -1
            return None, -1
        if gpu is None:
            g = self.best_gpu(task, server, moving)
            return (None, g) if g >= 0 else (
                f"no GPU on server {server} has {t.gpu_memory_gb:.2f} GB free for task {task.tid}", -1)
        if not (0 <= gpu < c.n_gpus and c.gpu_server[gpu] == server):
            return f"GPU {gpu} is not on server {server}", -1
        free = c.gpu_mem_cap[gpu] - c.gpu_mem_used[gpu] + (t.gpu_memory_gb if moving and task.gpu == gpu else 0.0)
        if not fits(free, t.gpu_memory_gb):
            return f"GPU {gpu} has {free:.2f} GB free, task {task.tid} needs {t.gpu_memory_gb:.2f}", -1
        return None, gpu

    def best_gpu(self, task: Task, server: int, moving: bool = False) -> int:
        """MLFS §3.3.2: the least-loaded GPU of the server that has room; -1 if none. Ties (a job's tasks sharing
        GPUs count once in their load) go to the GPU with the fewest tasks, then the lowest index, so the tasks of
        one job that outnumber a server's GPUs spread evenly over them (Hare's relaxed synchronisation)."""
        c = self.cluster
        need = task.t.gpu_memory_gb
        if not fits(self.max_free_gpu_mem.values[server] + (need if moving and task.server == server else 0.0), need):
            return -1
        best, best_load, best_n = -1, math.inf, 0
        r = c.server_gpus(server)
        a, b = r.start, r.stop
        used, loads, n_tasks = self.gpu_mem_used.values[a:b], self.gpu_load.values[a:b], c.gpu_n_tasks[a:b]
        own = task.gpu if moving else -1
        for i, cap in enumerate(c.gpu_mem_cap_list[a:b]):
            g = a + i
            load = loads[i] - (gpu_use(task.t.gpu_util, task.job.usage_factor) if own == g else 0.0)
            n = n_tasks[i] - (1 if own == g else 0)
            if (load < best_load - 1e-12 or (load <= best_load + 1e-12 and n < best_n)) and fits(
                    cap - used[i] + (need if own == g else 0.0), need):
                best, best_load, best_n = g, load, n
        return best

    def feasible_servers(self, task: Task, moving: bool = False) -> np.ndarray:
        """Boolean mask over servers where ``task`` fits by nominal demand (the fit rule, vectorised)."""
        c, t = self.cluster, task.t
        cpu_free = c.cpu_cap - c.cpu_alloc
        mem_free = c.mem_cap - c.mem_alloc
        gfree = c.server_max_free_gpu_mem
        if moving and task.server >= 0:
            cpu_free[task.server] += t.cpu_cores
            mem_free[task.server] += t.memory_gb
            if not task.is_ps:
                gfree = gfree.copy()
                g = task.gpu
                gfree[task.server] = max(gfree[task.server], c.gpu_mem_cap[g] - c.gpu_mem_used[g] + t.gpu_memory_gb)
        ok = fits(cpu_free, t.cpu_cores) & fits(mem_free, t.memory_gb)
        if not task.is_ps:
            ok &= fits(gfree, t.gpu_memory_gb)
        return ok

    def never_fits(self, job: Job) -> str | None:
        """Why no server could ever host some task of ``job``, or its tasks together exceed the cluster (it
        would wait forever); None if neither."""
        c = self.cluster
        if self._static_fit is None:  # the servers' distinct (CPU, memory, GPU memory) capacities
            self._static_fit = {"triples": sorted({(float(c.cpu_cap[i]), float(c.mem_cap[i]),
                                                    float(c.gpu_mem_cap[c.server_first_gpu[i]]))
                                                   for i in range(c.n_servers)}),
                                "seen": set(), "totals": cluster_totals(c.spec)}
        cache = self._static_fit
        short = gang_shortfall([t.t for t in job.tasks], c.spec, cache["totals"])
        if short:
            return short
        for t in job.tasks:
            tt = t.t
            key = (tt.cpu_cores, tt.memory_gb, 0.0 if t.is_ps else tt.gpu_memory_gb)
            if key in cache["seen"]:
                continue
            if not any(fits(cpu, key[0]) and fits(mem, key[1]) and fits(gmem, key[2])
                       for cpu, mem, gmem in cache["triples"]):
                return (f"task {tt.index} needs {key[2]:.1f} GB GPU memory, {key[0]:.1f} CPU cores and "
                        f"{key[1]:.1f} GB memory: no server of cluster {c.spec.name!r} can ever host it")
            cache["seen"].add(key)
        return self._never_packs(job)

    def _never_packs(self, job: Job) -> str | None:
        """:func:`~clustergym.core.feasibility.never_runs`'s packing part (``packs_on_idle``)."""
        tasks = [t.t for t in job.tasks]
        spec = self.cluster.spec
        return no_packing_reason(len(tasks), spec) if packs_on_idle(tasks, spec) is False else None

    # ------------------------------------------------------------------------------------------ placement
    def attach(self, task: Task, server: int, gpu: int) -> Changes:
        """Give ``task`` its slot: nominal allocation, actual use, the GPU's task list; judge the server."""
        c, t = self.cluster, task.t
        task.server, task.gpu = server, gpu
        self.task_server[task.tid] = server
        self.cpu_alloc.add(server, t.cpu_cores)
        self.mem_alloc.add(server, t.memory_gb)
        c.server_tasks[server][task] = None
        c.server_version[server] += 1
        c.placement_version += 1
        if gpu >= 0:
            self._change_gpu_memory(server, gpu, t.gpu_memory_gb)
            on_gpu = c.gpu_tasks[gpu]
            on_gpu.append(task)
            c.gpu_n_tasks[gpu] = len(on_gpu)
            if len(on_gpu) == 1:
                c.server_idle_gpus[server] -= 1
            self._gpu_jobs[gpu] = None
        self._apply_usage(task, +1.0)
        self._layout.pop(task.job, None)
        self._refresh((server,), (gpu,) if gpu >= 0 else ())
        return self.changes

    def detach(self, task: Task) -> Changes:
        """Free ``task``'s slot (the reverse of :meth:`attach`)."""
        c, t = self.cluster, task.t
        server, gpu = task.server, task.gpu
        self._apply_usage(task, -1.0)
        self.cpu_alloc.add(server, -t.cpu_cores)
        self.mem_alloc.add(server, -t.memory_gb)
        del c.server_tasks[server][task]
        c.server_version[server] += 1
        c.placement_version += 1
        if gpu >= 0:
            self._change_gpu_memory(server, gpu, -t.gpu_memory_gb)
            on_gpu = c.gpu_tasks[gpu]
            on_gpu.remove(task)
            c.gpu_n_tasks[gpu] = len(on_gpu)
            if not on_gpu:
                c.server_idle_gpus[server] += 1
            self._gpu_jobs[gpu] = None
        task.server, task.gpu = -1, -1
        self.task_server[task.tid] = -1
        self._layout.pop(task.job, None)
        self._refresh((server,), (gpu,) if gpu >= 0 else ())
        return self.changes

    def change_usage(self, job: Job, factor: float) -> Changes:
        """Set the job's usage factor and move its running tasks' actual use accordingly (per server: a wide
        job has many tasks on few servers)."""
        layout = self._layout.get(job) or self._usage_layout(job)
        df = factor - job.usage_factor
        cpu_use, mem_use = self.cpu_use.values, self.mem_use.values  # updated in place, then published
        for srv, cpu, mem in layout[0]:
            cpu_use[srv] += cpu * df
            mem_use[srv] += mem * df
        self.cpu_use.publish(layout[1])
        self.mem_use.publish(layout[1])
        job.usage_factor = factor
        self._refresh(layout[1], layout[2])
        return self.changes

    def _usage_layout(self, job: Job) -> tuple:
        per_server: dict[int, list[float]] = {}
        gpus = set()
        for t in job.tasks:
            if t.server >= 0:
                acc = per_server.setdefault(t.server, [0.0, 0.0])
                acc[0] += t.t.cpu_cores
                acc[1] += t.t.memory_gb
                if t.gpu >= 0:
                    gpus.add(t.gpu)
        self._layout[job] = layout = ([(s, cpu, mem) for s, (cpu, mem) in per_server.items()], sorted(per_server),
                                      sorted(gpus))
        return layout

    def _apply_usage(self, task: Task, sign: float) -> None:
        f, s = task.job.usage_factor, task.server
        self.cpu_use.add(s, sign * task.t.cpu_cores * f)
        self.mem_use.add(s, sign * task.t.memory_gb * f)

    def _change_gpu_memory(self, server: int, gpu: int, delta_gb: float) -> None:
        """Add ``delta_gb`` to a GPU's used memory and keep the server's largest free GPU memory (the max over
        its GPUs of capacity - used): it becomes that GPU's free memory if larger, and needs a scan of the
        server's GPUs only if that GPU held the largest and now has less."""
        caps, used = self.cluster.gpu_mem_cap_list, self.gpu_mem_used.values
        free_before = caps[gpu] - used[gpu]
        self.gpu_mem_used.add(gpu, delta_gb)
        free = caps[gpu] - used[gpu]
        largest = self.max_free_gpu_mem.values[server]
        if free > largest:
            largest = free
        elif free < free_before == largest:
            r = self.cluster.server_gpus(server)
            largest = max(map(float.__sub__, caps[r.start:r.stop], used[r.start:r.stop]))
        else:
            return
        self.max_free_gpu_mem.set(server, largest)

    # --------------------------------------------------------------------------------- network traffic
    def move_traffic(self, job: Job, old: tuple, new: tuple) -> Changes:
        """Move ``job``'s NIC loads from its ``old`` to its ``new`` traffic, each (iterations per second, the
        servers of its cross-server pairs, those pairs as arrays: servers (n, 2), MB per iteration (n,)), pair by
        pair (:func:`~clustergym.core.resource_kernels.move_net`). Every server involved is judged again both
        ways: traffic that ends (the job finished, slowed down or moved) must also clear an overload it caused.
        Where the job starts or stops crossing a NIC, its other jobs get another share of it: reported in ``jobs``."""
        old_rate, old_servers, old_pairs = old
        rate, servers, pairs = new
        old_on, new_on = old_rate > 0 and old_servers, rate > 0 and servers  # the sides that move bytes
        if old_on or new_on:
            (oa, om), (na, nm) = old_pairs if old_on else NO_PAIRS, pairs if new_on else NO_PAIRS
            flips = move_net(self.net, oa, om, old_rate, na, nm, rate, self.cpu_use.array, self.mem_use.array,
                             self._hot_counts, self._limits, self.overloaded.array, self._flips)
            for i in range(flips):  # the servers whose overload began or ended
                self._judge_overload(int(self._flips[i]))
        if old_servers is not servers and old_servers != servers:
            self._move_flows(job, old_servers, servers)
        return self.changes

    def _move_flows(self, job: Job, old: frozenset, new: frozenset) -> None:
        """``job`` stops crossing the NICs of ``old`` - ``new`` and starts crossing those of ``new`` - ``old``:
        update the counts and report the other jobs on those NICs (their share changed), servers in order."""
        jobs, flows, slowed = self._nic_jobs, self.nic_flows, self.changes.jobs
        for s in sorted(old - new):
            del jobs[s][job]
            flows[s] -= 1
            slowed.extend(jobs[s])
        for s in sorted(new - old):
            slowed.extend(jobs[s])
            jobs[s][job] = None
            flows[s] += 1

    def nic_share(self, s: int, job: Job) -> float:
        """The bandwidth (Gbit/s) server ``s``'s NIC gives one more flow of ``job``: its capacity divided among
        that flow and the other jobs crossing it (a migration's state transfer)."""
        others = self.nic_flows[s] - (1 if job in self._nic_jobs[s] else 0)
        return float(self.cluster.nic_gbps[s]) / (others + 1)

    # ---------------------------------------------------------------------------- overload, contention
    def overloaded_resources(self, s: int) -> tuple[bool, bool, bool, bool]:
        """Which of (GPU, CPU, memory, network) of server ``s`` are above h_r now (GPU: one of its GPUs is
        overloaded by :func:`gpu_overloaded`)."""
        return (self._server_hot_gpus[s] > 0, self.cpu_use.values[s] > self._cpu_limit[s],
                self.mem_use.values[s] > self._mem_limit[s], self.net[s] > self._net_limit[s])

    def overloaded_servers(self) -> list[int]:
        if not self.n_overloaded:  # the common case, asked at every tick
            return []
        return [s for s, over in enumerate(self.overloaded.values) if over]

    def _judge_overload(self, s: int) -> None:
        """Set server ``s``'s overload flag from its current use (MLFS: any resource above h_r):
        ``any(self.overloaded_resources(s))``, spelled out because it runs at every change of use."""
        over = (self.cpu_use.values[s] > self._cpu_limit[s] or self.mem_use.values[s] > self._mem_limit[s]
                or self.net[s] > self._net_limit[s] or self._server_hot_gpus[s] > 0)
        if over == self.overloaded.values[s]:
            return
        (self.changes.began if over else self.changes.ended).append(s)
        self.n_overloaded += 1 if over else -1
        self.overloaded.set(s, over)

    def _refresh(self, servers: Iterable[int], gpus: Iterable[int]) -> None:
        """Recompute GPU loads, overload flags and slowdowns; report jobs whose speed may change.
        (Plain Python over the few GPUs of a server: numpy calls on 4-element slices cost more than they save.)"""
        c = self.cluster
        gpu_slow, step, h = c.gpu_slow, self.contention_step, self.h
        gpu_hot, server_hot, gpu_jobs, slowed = self._gpu_hot, self._server_hot_gpus, self._gpu_jobs, self.changes.jobs
        loads = self.gpu_load.values  # updated in place, published after the loop
        new_loads = []
        use_of, overloaded, slowdown = gpu_use, gpu_overloaded, contention  # (locals: read per GPU)
        xi_on = self.interference.on
        for g in gpus:
            on_gpu = gpu_jobs[g]
            if on_gpu is None:
                on_gpu = self._gpu_job_utils(g)
                if xi_on:
                    self._refresh_interference(g, on_gpu)
            n_jobs = len(on_gpu)
            if n_jobs == 1:  # the common exclusive case
                job, util = on_gpu[0]
                load = use_of(util, job.usage_factor)
            else:  # a job's tasks on one GPU count once, at their highest use (the same sum as a per-task scan)
                load = 0.0
                for job, util in on_gpu:
                    load += use_of(util, job.usage_factor)
            if load != loads[g]:
                loads[g] = load
                new_loads.append(g)
            hot = n_jobs > 1 and overloaded(load, n_jobs, h)  # (never with one job: skip the call)
            if hot != gpu_hot[g]:
                gpu_hot[g] = hot
                s = self._gpu_server[g]
                server_hot[s] += 1 if hot else -1
                self._hot_counts[s] = server_hot[s]
            # with co-location interference on, its ratio is the whole cost of sharing (gpu_xi, not this rule)
            slow = 1.0 if n_jobs == 1 or load <= 1.0 or xi_on else slowdown(load, step)
            if slow != gpu_slow[g]:
                gpu_slow[g] = slow
                slowed.extend([job for job, _ in on_gpu])
                self.slow_changed.update([job for job, _ in on_gpu])
        if new_loads:
            self.gpu_load.publish(new_loads)
        cpu_use, mem_use, server_slow = self.cpu_use.values, self.mem_use.values, c.server_slow
        for s in servers:
            cu, mu = cpu_use[s], mem_use[s]
            self._judge_overload(s)
            # within capacity (use <= capacity exactly when use / capacity <= 1.0) is the common case: no division
            if cu <= self._cpu_cap[s] and mu <= self._mem_cap[s]:
                slow = 1.0
            else:
                slow = contention(max(cu / self._cpu_cap[s], mu / self._mem_cap[s]), step)
            if slow != server_slow[s]:
                server_slow[s] = slow
                jobs = [t.job for t in c.server_tasks[s]]
                slowed.extend(jobs)
                self.slow_changed.update(jobs)

    def _refresh_interference(self, g: int, on_gpu: tuple) -> None:
        """Recompute GPU ``g``'s interference ratios after its jobs changed; report the jobs whose ratio changed
        (those it had or has, in a deterministic order)."""
        xi = self.interference.ratios([job for job, _ in on_gpu], self._gpu_type[g])
        old = self.gpu_xi[g]
        if xi != old:
            self.gpu_xi[g] = xi
            jobs = [*old, *(job for job in xi if job not in old)]
            self.changes.jobs.extend(jobs)
            self.slow_changed.update(jobs)

    def _gpu_job_utils(self, g: int) -> tuple:
        """Rebuild _gpu_jobs[g] (and the GPU's job count). A job's use of the GPU is its busiest task's:
        max(util) x usage factor, equal to the max over its tasks of util x factor (multiplying by a positive
        factor is monotone)."""
        per_job: dict[Job, float] = {}
        for t in self.cluster.gpu_tasks[g]:
            util = t.t.gpu_util
            if util > per_job.get(t.job, -1.0):
                per_job[t.job] = util
        self._gpu_jobs[g] = entries = tuple(per_job.items())
        self.cluster.gpu_n_jobs[g] = len(entries)
        return entries
