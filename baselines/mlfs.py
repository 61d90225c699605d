"""MLF-H and MLFS-H+C (MLFS, Wang, Liu & Shen, CoNEXT '20, §3.3 and §3.5).

Priority (Eqs. 2-6), for task k of job J whose current iteration is I (I = completed iterations + 1):

    P'ML_k = L_J * (1/I) * (dl_{I-1} / sum_{j<I} dl_j) * S_k            (2)
    PML_k  = P'ML_k + gamma * sum_{c in child(k)} PML_c                  (3)  (recursive; 0-sum for sinks)
    P'C_k  = gamma_d / (d_k - t) + gamma_r / r_k + gamma_w * w_k         (4)
    PC_k   = P'C_k + gamma * sum_{c in child(k)} PC_c                    (5)
    P_k    = alpha * PML_k + (1 - alpha) * PC_k                          (6)

and a parameter-server task gets the highest priority. Our readings (documented in docs/baselines.md):

- dl_j = loss(j-1) - loss(j) from the job's learning curve, so dl_{I-1} = loss(I-2) - loss(I-1) and the
  sum is loss(0) - loss(I-1). At I = 1 (nothing done yet) the ratio is 0/0; we take 1 (the first
  iteration is the most recent and only one, as the ratio is for I = 2). If the curve is flat so far
  (sum 0) the ratio is 0. The engine's progress is fractional; I = floor(iterations) + 1.
- L_J = the job's urgency (1..10); S_k = the task's parameter share.
- Times in Eq. 4 are in ``time_unit_s`` (default hours) so the three terms are of similar size (a
  job one hour from its deadline, one hour from done, or one hour in the queue scores 0.3/0.3/0.35).
  d_k = job deadline - (layers below k) / (layers) x reference iteration time (the downstream part of
  the last iteration must still run); r_k = remaining iterations x reference iteration time (the
  model's single-GPU iteration time averaged over the cluster's GPUs); w_k = the task's total time in
  the queue. |d_k - t| and r_k are floored at ``min_time_s`` (1 minute); a passed deadline keeps the
  printed formula's negative sign (the deadline can no longer be met, the term stops pushing).

Placement: MLFS §3.3.2 ideal virtual host (:func:`clustergym.baselines.base.ideal_host_order`) among the
underloaded servers that the task would not overload (``server_mask(..., "headroom")``); the engine
then picks the server's least-loaded GPU. Migration (§3.3.3): on each overloaded server, the ideal
virtual task among the lowest-priority ``p_s`` share of the tasks on its overloaded GPUs (all its
tasks if no GPU is overloaded), moved to the ideal host elsewhere, or back to the queue if none.
Migrations are handled before placements in a round (the paper reschedules them "along with" the
queue; ordering them first is our simplification). A server is acted on only once its overload has lasted
``overload_persist_s`` and only if moving its candidates out (lowest priority first) can bring it under h_r
on every resource (:func:`can_relieve`; the paper moves tasks "until the server is not overloaded"); NIC-only
overloads move tasks only towards their neighbours and never requeue (``nic_guard``). docs/baselines.md
gives the measurements behind each.

Stopping: MLFS's schedulers run every changeable job with OptStop (§4), so MLF-H first moves the jobs it sees
to "opt-stop" (``system_stop_option``, the ``stop_option`` parameter).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from clustergym.core.job import Job, Task, TaskState
from clustergym.core.loadcontrol import LoadControl
from clustergym.core.resources import gpu_overloaded, overload_limits
from clustergym.core.view import ClusterView

if TYPE_CHECKING:
    from clustergym.core.engine import Simulator

from .base import (Candidates, Command, Policy, comm_neighbours, comm_to_servers, ideal_host_order,
                   ideal_task_choice, job_fits, keep_ps_with_workers, pack_order, restrict, server_mask,
                   system_stop_commands)


def loss_ratio(job: Job, iters: float | None = None) -> tuple[int, float]:
    """(I, dl_{I-1} / sum_{j<I} dl_j) for the job's current iteration (see module docstring)."""
    it = job.iters if iters is None else iters
    I = int(math.floor(it + 1e-9)) + 1
    if I <= 1:
        return 1, 1.0
    total = job.loss_at_iter(0) - job.loss_at_iter(I - 1)
    if total <= 0:
        return I, 0.0
    last = job.loss_at_iter(I - 2) - job.loss_at_iter(I - 1)
    return I, max(0.0, last) / total


@dataclass
class MLFH(Policy):
    """MLF-H with the paper's defaults (MLFS §4.1)."""

    name = "mlf-h"
    source = "MLFS (Wang, Liu, Shen, CoNEXT'20) §3.3 Eqs. 2-6, §4.1 defaults"
    # the option every changeable job runs with (Policy.stop_option): MLFS §4 "we assume that all jobs use
    # OptStop"; "requirement" (stop as soon as the accuracy requirement is met) isolates what an earlier stop
    # is worth
    stop_option: str | None = "opt-stop"
    alpha: float = 0.3
    gamma: float = 0.8
    gamma_d: float = 0.3
    gamma_r: float = 0.3
    gamma_w: float = 0.35
    h_r: float | None = None  # overload threshold; None: the simulator's (SimConfig.overload_threshold, 0.9)
    p_s: float = 0.10
    use_urgency: bool = True  # ablation: L_J = 1 for every job
    use_deadline: bool = True  # ablation: drop the gamma_d term
    migrate: bool = True  # handle overloaded servers (§3.3.3)
    time_unit_s: float = 3600.0
    min_time_s: float = 60.0
    migration_cooldown_s: float = 600.0  # a task placed/moved less than this ago is not moved (anti-thrash)
    # our additions to §3.3.3 (docs/baselines.md, deviations 2, 5, 6), each switchable for ablations:
    nic_guard: bool = True  # NIC-only overload: move only towards the task's neighbours, never requeue
    relieve_only: bool = True  # act on a server only if moving its candidates out can end its overload
    overload_persist_s: float = 600.0  # act on an overload only once it has lasted this long
    ps_first_across_jobs: bool = False  # ablation: a PS's +inf ranks its whole job before every other job
    # "ideal" (§3.3.2's ideal virtual host) or "pack" (the shared best fit, an ablation that isolates what the
    # host rule costs or gains; the headroom mask and the PS rule are kept)
    placement: str = "ideal"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.placement not in ("ideal", "pack"):
            raise ValueError(f"{self.name}: placement must be 'ideal' or 'pack', got {self.placement!r}")

    # ------------------------------------------------------------------ priority
    def job_priorities(self, view: ClusterView, job: Job) -> list[float]:
        """P_k (Eq. 6) for every task of ``job`` (index = task index in the job); PS = +inf."""
        spec = job.spec
        I, ratio = loss_ratio(job, view.iters(job))
        L = float(spec.urgency) if self.use_urgency else 1.0
        base_ml = L * (1.0 / I) * ratio
        unit = self.time_unit_s
        T = view.ref_iter_time(job)
        tasks = job.tasks
        n_layers = max((t.t.depth for t in tasks if not t.is_ps), default=0) + 1
        r = max(view.remaining_time(job), self.min_time_s) / unit
        n = len(tasks)
        pml = [0.0] * n
        pc = [0.0] * n
        for k in range(n - 1, -1, -1):  # tasks are stored in topological order: children after parents
            t = tasks[k]
            if t.is_ps:
                continue
            p_ml = base_ml * t.t.share
            p_c = self.gamma_r / r + self.gamma_w * view.waiting_time(t) / unit
            if self.use_deadline:
                d_k = spec.deadline - t.t.depth / n_layers * T
                slack = d_k - view.now
                if abs(slack) < self.min_time_s:
                    slack = math.copysign(self.min_time_s, slack if slack != 0 else 1.0)
                p_c += self.gamma_d / (slack / unit)
            kids = [c for c in t.t.children if not tasks[c].is_ps]
            if kids:
                p_ml += self.gamma * sum(pml[c] for c in kids)
                p_c += self.gamma * sum(pc[c] for c in kids)
            pml[k], pc[k] = p_ml, p_c
        return [math.inf if tasks[k].is_ps else self.alpha * pml[k] + (1 - self.alpha) * pc[k] for k in range(n)]

    def priority(self, view: ClusterView, task: Task) -> float:
        return self.job_priorities(view, task.job)[task.t.index]

    def _prio_map(self, view: ClusterView, tasks, per_job: dict[int, list[float]] | None = None) -> dict[int, float]:
        """Eq. 6 priority of each of ``tasks`` by tid; ``per_job`` (if given) receives each job's whole list."""
        out: dict[int, float] = {}
        seen: dict[int, list[float]] = {} if per_job is None else per_job
        for t in tasks:
            p = seen.get(t.job.jid)
            if p is None:
                p = seen[t.job.jid] = self.job_priorities(view, t.job)
            out[t.tid] = p[t.t.index]
        return out

    def _job_rank(self, per_job: dict[int, list[float]]) -> dict[int, float]:
        """The priority that orders each job among jobs: its highest worker priority (Eq. 6). A PS's +inf puts
        it first inside its job (§3.3.1: the PS is placed before its workers); it does not put every PS job
        before every other job (``ps_first_across_jobs``, the ablation, does)."""
        if self.ps_first_across_jobs:
            return {jid: max(p) for jid, p in per_job.items()}
        return {jid: max((x for x in p if x != math.inf), default=0.0) for jid, p in per_job.items()}

    # ------------------------------------------------------------------ decisions
    def new_episode(self, view: ClusterView) -> None:
        self._modes: dict[int, str] = {}

    def threshold(self, view: ClusterView) -> float:
        """h_r: this policy's, or the simulator's when not set."""
        return view.overload_threshold if self.h_r is None else self.h_r

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        util = view.utilisation()
        if self.migrate and cands.migrate:
            yield from self._migrations(view, cands, util)
        yield from self._placements(view, cands, util)

    def mode(self, view: ClusterView, job: Job) -> str:
        """"headroom" (never overload a server by placing, §3.3.2) unless the job could not be placed
        that way even on the idle cluster (e.g. 4 tasks of 8 cores on 32-core servers exceed h_r = 90%):
        then plain admission ("fit"), else it would wait forever (and block the env's window)."""
        m = self._modes.get(job.jid)
        if m is None:
            fit = job_fits(view, job, "headroom", h=self.threshold(view), empty=True)
            m = self._modes[job.jid] = "headroom" if fit else "fit"
        return m

    def _host_order(self, view: ClusterView, task: Task, cands: Candidates, util, moving: bool = False) -> list[int]:
        mode = self.mode(view, task.job)
        mask = restrict(server_mask(view, task, mode, self.threshold(view), moving=moving), cands.servers)
        if mode == "fit":
            mask &= ~view.overloaded
        if moving:
            mask[task.server] = False
        order = ideal_host_order(view, task, mask, util) if self.placement == "ideal" else pack_order(view, task, mask)
        return keep_ps_with_workers(view, task, order, mode, self.threshold(view))

    def _placements(self, view: ClusterView, cands: Candidates, util) -> Iterator[Command]:
        tasks = [t for t in cands.place if t.tid not in self._touched]
        if not tasks:
            return
        per_job: dict[int, list[float]] = {}
        prio = self._prio_map(view, tasks, per_job)
        rank = self._job_rank(per_job)
        # partly placed jobs first (finish their gang), then jobs by rank, tasks by priority (highest first)
        tasks.sort(key=lambda t: (t.job.n_placed == 0, -rank[t.job.jid], -prio[t.tid], t.tid))
        blocked: set[int] = set()
        for t in tasks:
            job = t.job
            if job.jid in blocked:
                continue
            if not self.fits(view, job, self.mode(view, job), cands.servers):
                blocked.add(job.jid)
                continue
            for s in self._host_order(view, t, cands, util):
                yield Command("place", t.tid, s)

    def _migrations(self, view: ClusterView, cands: Candidates, util) -> Iterator[Command]:
        over = view.overloaded
        hot_g = view.hot_gpus()
        by_server: dict[int, list[Task]] = {}
        for t in cands.migrate:
            if (t.state == TaskState.RUNNING and over[t.server] and t.tid not in self._touched
                    and view.now - t.placed_at >= self.migration_cooldown_s):
                by_server.setdefault(t.server, []).append(t)
        h = self.threshold(view)
        for s in sorted(by_server):
            tasks = by_server[s]
            if len(view.running_tasks(s)) < 2:
                continue  # a lone task overloads any server: moving it cannot help
            if view.overloaded_for(s) < self.overload_persist_s:
                continue  # a usage swing that clears by itself (jobs' use changes every ~10 min)
            over_res = view.overloaded_resources(s)
            nic_only = self.nic_guard and not over_res[:3].any()
            if nic_only:
                # NIC-only overload: the traffic is the jobs' own cross-server traffic, so a move helps only
                # if the task then exchanges more with its new server than with the tasks it leaves (the
                # job's cross-server volume falls); any other move spreads the job over more servers and
                # overloads more NICs. No such move for any task here: nothing to do on this server (and no
                # requeue, below).
                vols = {t.tid: comm_to_servers(view, t) for t in tasks}
                closer = {tid: v > v[s] for tid, v in vols.items()}
                if not any(m.any() for m in closer.values()):
                    continue
            prio = self._prio_map(view, tasks)
            first = int(view.server_first_gpu[s])
            hot = {gi for gi in range(first, first + int(view.server_n_gpus[s])) if hot_g[gi]}
            if hot:
                on_hot = sorted((t for t in tasks if t.gpu in hot), key=lambda t: (prio[t.tid], t.tid))
                pool = on_hot[:max(1, math.ceil(self.p_s * len(on_hot)))] if on_hot else []
            else:
                pool = [t for t in tasks if not math.isinf(prio[t.tid])] or tasks
            if self.relieve_only and not can_relieve(view, s, sorted(pool, key=lambda t: (prio[t.tid], t.tid)), h):
                continue  # moving every candidate out would leave it overloaded: moves only cost here
            pick = ideal_task_choice(view, s, pool)
            if pick is None:
                continue
            dests = self._host_order(view, pick, cands, util, moving=True)
            if nic_only:
                ok = closer[pick.tid]
                dests = [d for d in dests if ok[d]] if ok.any() else []
            for dest in dests:
                yield Command("migrate", pick.tid, dest)
            if over_res[:3].any() or not self.nic_guard:
                # back to the queue only when GPU, CPU or memory is overloaded: leaving frees them. A NIC
                # overload comes from the job's own cross-server traffic, which requeueing one task does not
                # cure: the job would stop, be placed again as spread out, and be requeued again.
                yield Command("requeue", pick.tid)


def nic_change(view: ClusterView, task: Task, s: int) -> float:
    """MB/s by which server ``s``'s NIC load changes when ``task`` (now on ``s``) leaves it: its edges to
    placed neighbours elsewhere stop crossing ``s``'s NIC, its edges to neighbours staying on ``s`` start to
    (volumes: :func:`comm_neighbours`, at the job's current speed)."""
    rate = view.speed(task.job)
    change = 0.0
    for nb, mb in comm_neighbours(task):
        if nb.state == TaskState.RUNNING:
            change += mb * rate if nb.server == s else -mb * rate
    return change


def can_relieve(view: ClusterView, s: int, candidates: list[Task], h: float) -> bool:
    """MLFS §3.3.3 moves tasks out of an overloaded server "until the server is not overloaded": would taking
    ``candidates`` out one after another (at their current use) bring server ``s`` to h x capacity or below on
    every resource (CPU, memory, NIC, and no GPU overloaded by sharing)? A server overloaded by what no
    candidate uses (a NIC carrying the traffic of jobs that stay) cannot be relieved: moving tasks off it
    would only pause jobs and leave free GPUs that no placement may use while it stays overloaded."""
    cpu, mem, net = float(view.cpu_use[s]), float(view.mem_use[s]), float(view.net_mbps[s])
    cpu_lim, mem_lim, net_lim = overload_limits(h, float(view.cpu_cap[s]), float(view.mem_cap[s]),
                                                float(view.nic_gbps[s]))
    first, n = int(view.server_first_gpu[s]), int(view.server_n_gpus[s])
    load = {g: float(view.gpu_load[g]) for g in range(first, first + n)}
    on_gpu: dict[int, dict] = {g: {} for g in load}  # per GPU: its jobs' task counts (a job's use counts once)
    for t in view.running_tasks(s):
        if t.gpu >= 0:
            on_gpu[t.gpu][t.job] = on_gpu[t.gpu].get(t.job, 0) + 1

    def overloaded() -> bool:
        return (cpu > cpu_lim or mem > mem_lim or net > net_lim
                or any(bool(gpu_overloaded(load[g], len(on_gpu[g]), h)) for g in load))

    for t in candidates:
        if not overloaded():
            return True
        c, m = view.task_use(t)
        cpu, mem, net = cpu - c, mem - m, net + nic_change(view, t, s)
        if t.gpu >= 0:
            jobs = on_gpu[t.gpu]
            jobs[t.job] -= 1
            if not jobs[t.job]:
                del jobs[t.job]
                load[t.gpu] -= view.gpu_use(t)
    return not overloaded()


# MLF-C lives in the simulator core so any policy can switch it on (clustergym.core.loadcontrol).
MLFC = LoadControl


@dataclass
class MLFSHC(MLFH):
    """MLF-H plus the MLF-C load controller (the heuristic half of MLFS; MLF-RL is the agents' job)."""

    name = "mlfs-h+c"
    source = "MLFS (CoNEXT'20) §3.3 (MLF-H) + §3.5 (MLF-C)"
    fallback: str = "requirement"

    def attach(self, sim: "Simulator") -> None:
        if not any(isinstance(c, MLFC) for c in sim.controllers):
            # when an overload ends, jobs go back to the option MLFS runs them with (OptStop), not to run-all
            self.controller = MLFC(self.fallback, restore_option=self.system_stop_option)
            sim.controllers.append(self.controller)


@dataclass
class MLFHRequirement(MLFH):
    """MLF-H with every changeable job stopped as soon as its accuracy requirement is met: MLF-C's fallback option
    for all such jobs all the time, not only under overload. Our variant, not a scheduler of MLFS, which runs
    every job with OptStop (§4) because users want the best accuracy their budget gives; it trades mean accuracy
    for JCT and shows how much of a policy's lead on a scenario is the stopping rule alone. It acts through
    "stop-option" commands only (no controller), so an agent can clone it."""

    name = "mlf-h-req"
    source = "MLFS (CoNEXT'20) §3.3 (MLF-H) with MLF-C's 'requirement' option for every changeable job (our variant)"
    stop_option: str = "requirement"
    # the share of changeable jobs stopped at the requirement, each job chosen by a fixed draw from its id; the
    # others run with OptStop as under MLF-H (a dose-response of the stopping lever)
    fraction: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.fraction <= 1.0:
            raise ValueError(f"{self.name}: fraction must be in [0, 1], got {self.fraction!r}")

    def system_stop_preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if self.fraction >= 1.0:
            yield from super().system_stop_preferences(view, cands)
            return
        for option, chosen in ((self.stop_option, True), ("opt-stop", False)):
            for cmd in system_stop_commands(view, cands, option):
                if (job_draw(cmd.jid) < self.fraction) == chosen:
                    yield cmd


def job_draw(jid: int) -> float:
    """A fixed number in [0, 1) for a job id (Knuth's multiplicative hash): the same jobs are chosen in every
    episode and process."""
    return ((int(jid) * 2654435761) % 2**32) / 2**32


@dataclass
class MLFSHCActions(MLFH):
    """MLFS-H+C acting only through the env's actions: MLF-H, then MLF-C's stop-option changes as "stop-option"
    commands instead of a controller attached to the simulator. This is the form an agent can imitate (an
    agent has no controller; it changes a job's stopping rule through the stop-option columns of its row).

    The rule is MLF-C's own (:meth:`LoadControl.changes`: under overload every changeable job whose
    ``fallback`` target comes first moves there; when the overload ends the jobs moved go back to OptStop).
    Our choices where the action form cannot do what the controller does: MLF-C's commands come after
    MLF-H's preferences, so the overload is judged on what the round's placements left queued (the
    controller runs after the round); they reach only the jobs with a row in the window (waiting rows,
    migration rows, at most ``running_rows`` running-job rows) and only at decision points (the controller
    also acts at ticks without a decision); a job's rule changes at most once per round (the env's rule)."""

    name = "mlfs-h+c-act"
    source = "MLFS (CoNEXT'20) §3.3 (MLF-H) + §3.5 (MLF-C), MLF-C as stop-option actions"
    fallback: str = "requirement"

    def new_episode(self, view: ClusterView) -> None:
        super().new_episode(view)
        self.control = LoadControl(self.fallback, restore_option=self.system_stop_option)  # rule and memory only

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        yield from super().preferences(view, cands)
        overloaded = view.cluster_overloaded()
        for job, option in self.control.changes(overloaded, view.active_jobs()):
            if option == job.stop_option:  # a restore with nothing to change: only forget the job
                self.control.note(job.jid, False)
                continue
            cmd = Command("stop-option", jid=job.jid, option=option)
            if view.command_error(cmd) is None:
                yield cmd

    def observe(self, view: ClusterView, cmd: Command) -> None:
        super().observe(view, cmd)
        if cmd.kind != "stop-option":
            return
        if cmd.option == self.fallback:
            self.control.note(cmd.jid, True)
        elif self.control.moved(cmd.jid):
            self.control.note(cmd.jid, False)
