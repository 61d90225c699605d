"""Shared machinery of the heuristic schedulers.

A policy reads the simulation through a :class:`~clustergym.core.view.ClusterView` (read-only) and acts on
:class:`Candidates`: the tasks it may place, the running tasks it may move, and the servers it may use. It
answers with its commands in order of preference (:meth:`Policy.preferences`, a lazy generator). Two drivers
consume that:

- :func:`run` drives a bare Simulator: the candidates are every ready task, every running task on an
  overloaded server and every server; the first valid preference is executed, until the policy has none
  left (the round ends) -- no Gymnasium needed;
- :class:`clustergym.baselines.agent.HeuristicAgent` drives the Gymnasium env: the candidates are the env's
  window and destination columns, and the first preference the action mask allows is returned. So a
  heuristic sees exactly the task window an agent sees.

Helpers here: the server-side masks every policy needs (plain admission, an exclusive GPU, or MLFS's
"will not be overloaded by hosting the task"), the gang guard (does a whole job fit now?), the ideal
virtual host (MLFS §3.3.2) and the ideal virtual task (MLFS §3.3.3).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Mapping, Sequence

import numpy as np

from clustergym.core import placement
from clustergym.core.commands import Command, execute
from clustergym.core.dag import link_volumes
from clustergym.core.job import Job, Task, TaskState
from clustergym.core.resources import fits
from clustergym.core.view import ClusterView
from clustergym.core.workload import STOP_OPTIONS

if TYPE_CHECKING:
    from clustergym.core.engine import Simulator

# ---------------------------------------------------------------------------------------------- commands


@dataclass
class Candidates:
    """What a policy may act on at this step."""

    place: list[Task]
    migrate: list[Task]
    servers: np.ndarray  # server ids the policy may use as destinations
    can_preempt: bool = False

    @staticmethod
    def full(view: ClusterView, can_preempt: bool = True) -> "Candidates":
        """Every ready task, every running task on an overloaded server, every server."""
        mig = [t for s in view.overloaded_servers() for t in view.running_tasks(s)]
        return Candidates(view.ready_tasks(), mig, np.arange(view.n_servers), can_preempt)


def is_valid(view: ClusterView, cmd: Command) -> bool:
    """Would the simulator accept ``cmd`` now?"""
    return view.command_error(cmd) is None


# --------------------------------------------------------------------------------------- server masks


def _any_per_server(view: ClusterView, gpu_bool: np.ndarray) -> np.ndarray:
    return np.logical_or.reduceat(gpu_bool, view.server_first_gpu)


def server_mask(view: ClusterView, task: Task, mode: str = "fit", h: float | None = None,
                moving: bool = False) -> np.ndarray:
    """Servers that can take ``task`` now.

    - ``"fit"``: the simulator's admission (nominal CPU, memory, GPU memory);
    - ``"exclusive"``: ... and an idle GPU (no task on it) with room: one task per GPU, as gang
      schedulers (FIFO, Tiresias, Gavel ...) allocate;
    - ``"share"``: ... and a GPU with room whose summed use stays within ``h`` (default 1) with the task's;
    - ``"headroom"`` (MLFS §3.3.2): ... the server is underloaded and will not become overloaded by
      hosting the task: its CPU and memory use plus the task's stay within ``h`` (default: the simulator's
      h_r) x capacity, and its least-loaded GPU with room stays within ``h`` after adding the task's GPU use.
    """
    ok = view.feasible_servers(task, moving=moving)
    if mode == "fit" or (task.is_ps and mode in ("exclusive", "share")):
        return ok
    room = fits(view.gpu_mem_cap - view.gpu_mem_used, task.t.gpu_memory_gb)
    if mode == "exclusive":
        return ok & _any_per_server(view, (view.gpu_n_tasks == 0) & room)
    if mode == "share":
        cap = 1.0 if h is None else h
        return ok & _any_per_server(view, room & (view.gpu_load + view.gpu_use(task) <= cap + 1e-9))
    if mode == "headroom":
        h = view.overload_threshold if h is None else h
        cpu_t, mem_t = view.task_use(task)
        cpu = view.cpu_use + cpu_t
        mem = view.mem_use + mem_t
        if moving and task.server >= 0:
            cpu[task.server] -= cpu_t
            mem[task.server] -= mem_t
        ok = ok & ~view.overloaded & (cpu <= h * view.cpu_cap) & (mem <= h * view.mem_cap)
        if not task.is_ps:
            ok &= _any_per_server(view, room & gpu_headroom(view.gpu_load, view.gpu_use(task), h))
        return ok
    raise ValueError(f"unknown server mask mode {mode!r}")


def gpu_headroom(load: np.ndarray, use: float, h: float) -> np.ndarray:
    """A GPU "will not be overloaded by hosting the task": load + use <= h, or the GPU is idle (a task
    whose own use exceeds h -- the catalogue has models at 0.95 -- may still run alone; otherwise it
    could never be placed)."""
    return (load + use <= h + 1e-9) | (load <= 1e-9)


def restrict(mask: np.ndarray, servers: np.ndarray) -> np.ndarray:
    """``mask`` limited to the candidate servers."""
    if len(servers) == len(mask):
        return mask
    out = np.zeros_like(mask)
    out[servers] = mask[servers]
    return out


def job_servers(job: Job) -> set[int]:
    return {t.server for t in job.tasks if t.state == TaskState.RUNNING}


def pack_order(view: ClusterView, task: Task, mask: np.ndarray) -> list[int]:
    """Consolidating order: servers already hosting the job first, then the fewest idle GPUs that
    still fit (best fit), then the lowest index."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    mine = job_servers(task.job)
    idle = view.idle_gpus
    return sorted(idx.tolist(), key=lambda s: (s not in mine, int(idle[s]), s))


def spread_order(view: ClusterView, task: Task, mask: np.ndarray) -> list[int]:
    """Load-balancing order (worst fit): lowest dominant utilisation first."""
    idx = np.flatnonzero(mask)
    if len(idx) == 0:
        return []
    u = view.utilisation()
    dom = np.maximum.reduce([u[:, 0], u[:, 1], u[:, 2]])
    return sorted(idx.tolist(), key=lambda s: (float(dom[s]), s))


# -------------------------------------------------------------------------------------------- gang guard


def job_fits(view: ClusterView, job: Job, mode: str = "exclusive", servers: np.ndarray | None = None,
             h: float | None = None, empty: bool = False) -> bool:
    """Can every waiting task of ``job`` be placed right now (under ``mode``), given what is free?

    A greedy dry run on copies of the free capacities (tasks in DAG order, each on the first server
    that still takes it; ``empty``: on the idle cluster instead). The engine only runs a job whose every
    task holds a slot, so a scheduler that starts a job it cannot finish placing strands the slots until
    the gang timeout: every policy uses this guard before starting a job (documented addition, switchable
    with ``gang_guard``)."""
    if h is None:
        h = 1.0 if mode == "share" else view.overload_threshold
    free = _DryRun(view, empty)
    allowed = np.ones(view.n_servers, dtype=bool)
    if servers is not None and len(servers) != view.n_servers:
        allowed[:] = False
        allowed[servers] = True
    if mode == "headroom" and not empty:
        allowed &= ~view.overloaded
    for t in job.tasks:
        if t.state != TaskState.WAITING and not empty:
            continue
        ok, g = free.slots(view, t, allowed, mode, h)
        cand = np.flatnonzero(ok)
        if len(cand) == 0:
            return False
        free.take(view, t, int(cand[0]), g)
    return True


class _DryRun:
    """Free capacities and use that :func:`job_fits` books tasks against (copies of the cluster's, or an
    idle cluster's), over every server or only over ``servers`` (their positions then index the arrays)."""

    def __init__(self, view: ClusterView, empty: bool, servers: np.ndarray | None = None):
        if servers is None:
            srv, gpus = slice(None), slice(None)
            self.first, self.n_gpus = view.server_first_gpu, view.server_n_gpus
        else:
            srv = np.asarray(servers, dtype=np.int64)
            self.n_gpus = view.server_n_gpus[srv]
            self.first = np.concatenate(([0], np.cumsum(self.n_gpus)[:-1])).astype(np.int64)
            gpus = np.concatenate([np.arange(f, f + n) for f, n in zip(view.server_first_gpu[srv], self.n_gpus)])
        self.cpu_cap, self.mem_cap = view.cpu_cap[srv], view.mem_cap[srv]
        if empty:
            self.cpu_free, self.mem_free = self.cpu_cap.copy(), self.mem_cap.copy()
            self.cpu_use, self.mem_use = np.zeros_like(self.cpu_free), np.zeros_like(self.mem_free)
            self.gmem = view.gpu_mem_cap[gpus].copy()
            self.gload, self.gn = np.zeros_like(self.gmem), np.zeros(len(self.gmem), view.gpu_n_tasks.dtype)
        else:
            self.cpu_free = self.cpu_cap - view.cpu_alloc[srv]
            self.mem_free = self.mem_cap - view.mem_alloc[srv]
            self.cpu_use, self.mem_use = view.cpu_use[srv].copy(), view.mem_use[srv].copy()
            self.gmem = view.gpu_mem_cap[gpus] - view.gpu_mem_used[gpus]
            self.gload = view.gpu_load[gpus].copy()
            self.gn = view.gpu_n_tasks[gpus].copy()

    def slots(self, view: ClusterView, t: Task, allowed: np.ndarray, mode: str, h: float) -> tuple[np.ndarray, Any]:
        """(servers that take ``t`` now under ``mode``, its usable GPUs or None for a PS)."""
        tt, f = t.t, t.job.usage_factor
        ok = allowed & fits(self.cpu_free, tt.cpu_cores) & fits(self.mem_free, tt.memory_gb)
        if mode == "headroom":
            ok &= (self.cpu_use + tt.cpu_cores * f <= h * self.cpu_cap) & (
                self.mem_use + tt.memory_gb * f <= h * self.mem_cap)
        if t.is_ps:
            return ok, None
        g = fits(self.gmem, tt.gpu_memory_gb)
        if mode == "exclusive":
            g &= self.gn == 0
        elif mode == "headroom":
            g &= gpu_headroom(self.gload, view.gpu_use(t), h)
        elif mode == "share":
            g &= self.gload + view.gpu_use(t) <= h + 1e-9
        return ok & np.logical_or.reduceat(g, self.first), g

    def take(self, view: ClusterView, t: Task, s: int, g: Any) -> None:
        """Book ``t`` on server ``s`` (on its least-loaded usable GPU)."""
        tt, f = t.t, t.job.usage_factor
        self.cpu_free[s] -= tt.cpu_cores
        self.mem_free[s] -= tt.memory_gb
        self.cpu_use[s] += tt.cpu_cores * f
        self.mem_use[s] += tt.memory_gb * f
        if g is not None:
            first = int(self.first[s])
            gload = self.gload
            best = min((gi for gi in range(first, first + int(self.n_gpus[s])) if g[gi]), key=lambda gi: gload[gi])
            self.gmem[best] -= tt.gpu_memory_gb
            gload[best] += view.gpu_use(t)
            self.gn[best] += 1


# ------------------------------------------------------------------------------ one placement rule for all


def _workers_with_ps(view: ClusterView, ps: Task, s: int, mode: str, h: float,
                     planned: Mapping[int, int] | None = None) -> int:
    """How many of the PS's workers would share server ``s`` with it: those running there, plus the waiting
    ones a dry run books on ``s`` after the PS (in DAG order, under ``mode``; with ``planned``, only the waiting
    workers planned on ``s``); -1 if the PS does not fit."""
    dry = _DryRun(view, False, np.array([s]))
    here = np.ones(1, dtype=bool)
    ok, _ = dry.slots(view, ps, here, mode, h)
    if not ok[0]:
        return -1
    dry.take(view, ps, 0, None)
    n = 0
    for t in ps.job.tasks:
        if t.is_ps:
            continue
        if t.state == TaskState.RUNNING:
            n += t.server == s
        elif t.state == TaskState.WAITING and (planned is None or planned.get(t.tid) == s):
            ok, g = dry.slots(view, t, here, mode, h)
            if ok[0]:
                dry.take(view, t, 0, g)
                n += 1
    return n


def keep_ps_with_workers(view: ClusterView, task: Task, order: list[int], mode: str = "fit",
                         h: float | None = None, planned: Mapping[int, int] | None = None) -> list[int]:
    """A policy's server order for ``task`` (``order``: the servers it may use, most preferred first) with
    the task's parameter server kept with its workers whenever they fit: every heuristic's placement goes
    through this one rule.

    - A PS goes first to the server of ``order`` where the most of its job's workers would be with it
      (running there, or waiting and fitting there after the PS, under the policy's ``mode``; the first such
      server in ``order`` on ties); the rest of ``order`` follows unchanged. A PS needs no GPU, so any
      packing rule would otherwise put it on a full server and send every iteration over the NIC.
    - A worker whose PS runs goes first to the PS's server (when it is in ``order``, i.e. the worker fits
      there); otherwise ``order`` is kept.

    Tasks of jobs without a PS keep ``order``. ``h`` as in :func:`job_fits`. ``planned`` (worker task id ->
    server) is for a policy that has already chosen its waiting workers' servers (SJF-BSBF's plan): a waiting
    worker then counts only on its planned server, if it still fits there after the PS."""
    tasks = task.job.tasks
    if len(order) < 2 or not any(t.is_ps for t in tasks):
        return order
    if not task.is_ps:
        home = {t.server for t in tasks if t.is_ps and t.state == TaskState.RUNNING}
        return sorted(order, key=lambda s: s not in home) if home else order
    workers = [t for t in tasks if not t.is_ps]
    if not workers:
        return order
    if h is None:
        h = 1.0 if mode == "share" else view.overload_threshold
    # only servers where a waiting worker could run at all (or one already runs) are worth a dry run
    room = np.zeros(view.n_servers, dtype=bool)
    for t in workers:
        if t.state == TaskState.RUNNING:
            room[t.server] = True
    if planned is not None:
        room[list(planned.values())] = True
    elif (waiting := next((t for t in workers if t.state == TaskState.WAITING), None)) is not None:
        room |= server_mask(view, waiting, mode, h)
    best, best_n = order[0], 0
    for s in order:
        if room[s]:
            n = _workers_with_ps(view, task, s, mode, h, planned)
            if n > best_n:
                best, best_n = s, n
                if n == len(workers):
                    break
    return order if best == order[0] else [best] + [s for s in order if s != best]


# ---------------------------------------------------------------------------------- MLFS vector choices


def comm_neighbours(task: Task) -> list[tuple[Task, float]]:
    """DAG neighbours of a task and the MB exchanged with each per iteration (volumes:
    :func:`clustergym.core.dag.link_volumes`): parent/child edges; worker<->PS; an all-reduce ring links the
    replicas of a partition."""
    job, spec = task.job, task.job.spec
    worker_mb, ps_mb, ring_mb = link_volumes(spec)
    out: list[tuple[Task, float]] = []
    tasks = job.tasks
    if task.is_ps:
        return [(t, ps_mb) for t in tasks if not t.is_ps]
    for p in task.t.parents:
        out.append((tasks[p], ps_mb if tasks[p].is_ps else worker_mb))
    for ch in task.t.children:
        out.append((tasks[ch], worker_mb))
    if spec.sync == "ps":
        if not any(tasks[p].is_ps for p in task.t.parents):
            out.append((tasks[0], ps_mb))
    elif ring_mb:
        out.extend((t, ring_mb) for t in tasks if t is not task and t.t.partition == task.t.partition)
    return out


def comm_to_servers(view: ClusterView, task: Task) -> np.ndarray:
    """MB per iteration between ``task`` and its already placed DAG neighbours, per server."""
    vol = np.zeros(view.n_servers)
    for nb, mb in comm_neighbours(task):
        if nb.state == TaskState.RUNNING:
            vol[nb.server] += mb
    return vol


def ideal_host_order(view: ClusterView, task: Task, mask: np.ndarray, util: np.ndarray | None = None) -> list[int]:
    """MLFS §3.3.2 ideal virtual host (:func:`clustergym.core.placement.ideal_host_order`) among ``mask``
    (underloaded servers the task would not overload), with the task's communication volumes to the
    servers of its placed neighbours. ``util``: ``view.utilisation()``, when already computed."""
    if not mask.any():
        return []
    U = view.utilisation() if util is None else util
    return placement.ideal_host_order(U, mask, comm_to_servers(view, task))


def task_util_vector(view: ClusterView, task: Task) -> np.ndarray:
    """U_k: the task's share of its server's GPU, CPU, memory and NIC capacity."""
    s = task.server
    cpu, mem = view.task_use(task)
    gpu = 0.0 if task.is_ps else view.gpu_use(task) / view.server_n_gpus[s]
    net = 0.0
    rate = view.speed(task.job)
    if rate > 0:
        for nb, mb in comm_neighbours(task):
            if nb.state == TaskState.RUNNING and nb.server != s:
                net += mb
        net = net * rate / (view.nic_gbps[s] * 125.0)
    return np.array([gpu, cpu / view.cpu_cap[s], mem / view.mem_cap[s], net])


def ideal_task_choice(view: ClusterView, s: int, candidates: Sequence[Task]) -> Task | None:
    """MLFS §3.3.3 ideal virtual task: per overloaded resource the maximum of the candidates'
    utilisations, per other resource the minimum; bandwidth to the tasks staying on the server ideal 0
    (volumes divided by the candidates' maximum). Returns the candidate nearest to it."""
    if not candidates:
        return None
    over = view.overloaded_resources(s)
    X = np.array([task_util_vector(view, t) for t in candidates])
    ideal = np.where(over, X.max(axis=0), X.min(axis=0))
    bw = np.array([sum(mb for nb, mb in comm_neighbours(t) if nb.state == TaskState.RUNNING and nb.server == s)
                   for t in candidates])
    m = bw.max()
    bwn = bw / m if m > 0 else bw
    d = np.sum((X - ideal) ** 2, axis=1) + bwn ** 2
    return candidates[int(np.lexsort(([t.tid for t in candidates], d))[0])]


# ------------------------------------------------------------------------------------------------ policy


@dataclass
class Policy:
    """Base class. Subclasses set ``name`` and ``source`` and implement :meth:`preferences`.

    Parameters common to all: ``gang_guard`` (start a job only if all its waiting tasks fit now; a job
    already partly placed is always completed first) and ``stop_option`` (MLFS §3.5: the stopping option the
    system puts every changeable job on, "opt-stop" or "requirement", where the job's user let the system
    change it and the option is cheaper than the user's; None = the users' own options, what MLFS's
    comparison methods run). It gives every heuristic the stopping lever MLF-H and the agent have:
    ``sjf:stop_option=requirement``. Its commands come before the policy's own preferences (:meth:`ranked`).
    """

    name: ClassVar[str] = "policy"
    source: ClassVar[str] = ""
    uniform_over_mask: ClassVar[bool] = False  # the env adapter samples the mask (random policy)
    gang_guard: bool = True
    stop_option: str | None = None

    def __post_init__(self) -> None:
        if self.stop_option is not None and self.stop_option not in STOP_OPTIONS:
            raise ValueError(f"{self.name}: stop_option must be None or one of {STOP_OPTIONS}, got "
                             f"{self.stop_option!r}")
        if self.stop_option is not None and self.uniform_over_mask:
            raise ValueError(f"{self.name}: samples the action mask uniformly, so it cannot apply stop_option")
        self._view: ClusterView | None = None  # the simulation of the current episode
        self._round: tuple = ()
        self._fit_cache: dict[int, bool] = {}

    # -- lifecycle
    def attach(self, sim: "Simulator") -> None:
        """Called once per new Simulator (episode) before the first decision (e.g. to add controllers)."""

    def new_episode(self, view: ClusterView) -> None:
        """Called when :meth:`begin` meets a new simulation: reset what the policy keeps per episode."""

    def begin(self, view: ClusterView) -> None:
        """Start (or continue) a decision round."""
        if view != self._view:
            self._view = view
            self._round = ()
            self.new_episode(view)
        key = (view.decisions, view.now)
        if key != self._round:
            self._round = key
            self._fit_cache = {}

    @property
    def _touched(self) -> set[int]:
        """Ids of the tasks placed, moved or requeued in this round (the simulator's round record,
        :mod:`clustergym.core.rounds`): not migrated or requeued again in it (the rule), and by the heuristics'
        own choice not placed again either."""
        return self._view.round_moved_tasks if self._view is not None else set()

    def observe(self, view: ClusterView, cmd: Command) -> None:
        """Note a command about to be (or just) executed (the round rule's record is the simulator's)."""
        if cmd.kind in ("migrate", "requeue", "preempt"):
            self._fit_cache.clear()

    def params(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}

    @property
    def system_stop_option(self) -> str | None:
        """The stopping option the system runs every changeable job with (``stop_option``)."""
        return self.stop_option

    # -- decisions
    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        """The policy's own commands, most preferred first (placements, migrations, requeues, ...)."""
        raise NotImplementedError

    def ranked(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        """Every command the policy would take, most preferred first: the system's stop-option changes
        (:meth:`system_stop_preferences`), then :meth:`preferences`. Drivers (:meth:`decide`, the env
        adapter) read this."""
        yield from self.system_stop_preferences(view, cands)
        yield from self.preferences(view, cands)

    def decide(self, view: ClusterView, cands: Candidates | None = None) -> Command | None:
        """The most preferred valid command, or None to end the round."""
        self.begin(view)
        cands = Candidates.full(view) if cands is None else cands
        for cmd in self.ranked(view, cands):
            if is_valid(view, cmd):  # the round rule included (core/rounds.py)
                return cmd
        return None

    def system_stop_preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        """The "stop-option" commands that put the jobs of ``cands`` on :attr:`system_stop_option`
        (:func:`system_stop_commands`); nothing when it is None."""
        if self.system_stop_option is not None:
            yield from system_stop_commands(view, cands, self.system_stop_option)

    # -- shared helpers for subclasses
    def fits(self, view: ClusterView, job: Job, mode: str, servers: np.ndarray) -> bool:
        if not self.gang_guard or job.n_placed > 0:
            return True
        v = self._fit_cache.get(job.jid)
        if v is None:
            v = self._fit_cache[job.jid] = job_fits(view, job, mode, servers)
        return v

    def job_first(self, view: ClusterView, cands: Candidates, job_key, mode: str, order_fn,
                  backfill: bool = True) -> Iterator[Command]:
        """Place tasks job by job: partly placed jobs first, then jobs by ``job_key`` (ascending); a
        job's ready tasks in DAG order; servers by ``order_fn(view, task, mask)`` through
        :func:`keep_ps_with_workers`. Without ``backfill`` the first job of the whole queue (candidate or
        not) that does not fit blocks everything behind it."""
        touched = self._touched
        by_job: dict[int, list[Task]] = {}
        for t in cands.place:
            if t.tid not in touched:
                by_job.setdefault(t.job.jid, []).append(t)
        jobs = [view.job(j) for j in by_job]
        if not backfill:
            # the head of the whole queue blocks, shown or not: the env's window shows only the jobs whose next
            # task fits a destination now, and a job that does not fit is exactly the one that must block (a set:
            # the sort below is a total order)
            jobs += [j for j in {t.job for t in view.ready_tasks() if t.tid not in touched} if j.jid not in by_job]
        jobs.sort(key=lambda j: (j.n_placed == 0, job_key(j), j.jid))
        for job in jobs:
            if job.jid not in by_job or not self.fits(view, job, mode, cands.servers):
                if not backfill:
                    return
                continue
            for t in sorted(by_job[job.jid], key=lambda t: t.tid):
                mask = restrict(server_mask(view, t, mode), cands.servers)
                for s in keep_ps_with_workers(view, t, order_fn(view, t, mask), mode):
                    yield Command("place", t.tid, s)


# ----------------------------------------------------------------------------- the system's stopping rule


def attaches_controller(policy: "Policy | type[Policy]") -> bool:
    """Whether ``policy`` (an instance or class) adds a controller to the simulator in :meth:`Policy.attach`,
    which then acts between the agent's actions (MLF-C's load control): such a policy cannot be imitated, nor
    consulted by another agent without changing the episode."""
    cls = policy if isinstance(policy, type) else type(policy)
    return cls.attach is not Policy.attach


def system_stop_commands(view: ClusterView, cands: Candidates, option: str) -> Iterator[Command]:
    """MLFS §3.5 / §4: the "stop-option" commands that move each job the policy sees (the jobs of its candidate
    tasks, in candidate order) to ``option``, for jobs still on their user's own option where the simulator
    allows the change (the user let the system change it and ``option`` is cheaper:
    ``Simulator.stop_option_error``). A job the system already moved (MLF-C's "requirement" under overload)
    is left to whoever moved it."""
    seen: set[int] = set()
    for t in (*cands.place, *cands.migrate):
        job = t.job
        if job.jid in seen:
            continue
        seen.add(job.jid)
        if job.stop_option == job.spec.stop_option != option and job.spec.stop_changeable:
            cmd = Command("stop-option", jid=job.jid, option=option)
            if view.command_error(cmd) is None:
                yield cmd


# --------------------------------------------------------------------------------------------- drivers


def run(sim: "Simulator", policy: Policy, max_commands: int = 100_000) -> dict:
    """Drive ``sim`` to the end with ``policy`` (core level, no Gymnasium). Returns ``sim.summary()``."""
    policy.attach(sim)
    view = ClusterView(sim)
    while sim.next_decision():
        for _ in range(max_commands):
            cmd = policy.decide(view)
            if cmd is None:
                break
            policy.observe(view, cmd)
            execute(sim, cmd)
    return sim.summary()
