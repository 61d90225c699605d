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
queue; ordering them first is our simplification).
"""
from __future__ import annotations

from clustergym.core.loadcontrol import LoadControl

import math
from dataclasses import dataclass
from typing import Iterator


from clustergym.core.job import Job, Task, TaskState

from .base import (Command, comm_to_servers, current_iters, job_fits, sim_cache, effective_overload, hot_gpus, Policy, View, ideal_host_order, ideal_task_choice, overloaded_resources, ref_iter_time, remaining_time,
                   restrict, server_mask, server_util_matrix, waiting_time)


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
    alpha: float = 0.3
    gamma: float = 0.8
    gamma_d: float = 0.3
    gamma_r: float = 0.3
    gamma_w: float = 0.35
    h_r: float = 0.9
    p_s: float = 0.10
    use_urgency: bool = True  # ablation: L_J = 1 for every job
    use_deadline: bool = True  # ablation: drop the gamma_d term
    migrate: bool = True  # handle overloaded servers (§3.3.3)
    time_unit_s: float = 3600.0
    min_time_s: float = 60.0
    migration_cooldown_s: float = 600.0  # a task placed/moved less than this ago is not moved (anti-thrash)

    # ------------------------------------------------------------------ priority
    def job_priorities(self, sim, job: Job) -> list[float]:
        """P_k (Eq. 6) for every task of ``job`` (index = task index in the job); PS = +inf."""
        spec = job.spec
        I, ratio = loss_ratio(job, current_iters(sim, job))
        L = float(spec.urgency) if self.use_urgency else 1.0
        base_ml = L * (1.0 / I) * ratio
        unit = self.time_unit_s
        T = ref_iter_time(sim, job)
        tasks = job.tasks
        n_layers = max((t.t.depth for t in tasks if not t.is_ps), default=0) + 1
        r = max(remaining_time(sim, job), self.min_time_s) / unit
        n = len(tasks)
        pml = [0.0] * n
        pc = [0.0] * n
        for k in range(n - 1, -1, -1):  # tasks are stored in topological order: children after parents
            t = tasks[k]
            if t.is_ps:
                continue
            p_ml = base_ml * t.t.share
            p_c = self.gamma_r / r + self.gamma_w * waiting_time(sim, t) / unit
            if self.use_deadline:
                d_k = spec.deadline - t.t.depth / n_layers * T
                slack = d_k - sim.now
                if abs(slack) < self.min_time_s:
                    slack = math.copysign(self.min_time_s, slack if slack != 0 else 1.0)
                p_c += self.gamma_d / (slack / unit)
            kids = [c for c in t.t.children if not tasks[c].is_ps]
            if kids:
                p_ml += self.gamma * sum(pml[c] for c in kids)
                p_c += self.gamma * sum(pc[c] for c in kids)
            pml[k], pc[k] = p_ml, p_c
        return [math.inf if tasks[k].is_ps else self.alpha * pml[k] + (1 - self.alpha) * pc[k] for k in range(n)]

    def priority(self, sim, task: Task) -> float:
        return self.job_priorities(sim, task.job)[task.t.index]

    def _prio_map(self, sim, tasks) -> dict[int, float]:
        out: dict[int, float] = {}
        seen: dict[int, list[float]] = {}
        for t in tasks:
            p = seen.get(t.job.jid)
            if p is None:
                p = seen[t.job.jid] = self.job_priorities(sim, t.job)
            out[t.tid] = p[t.t.index]
        return out

    # ------------------------------------------------------------------ decisions
    def preferences(self, sim, view: View) -> Iterator[Command]:
        util = server_util_matrix(sim)
        if self.migrate and view.migrate:
            yield from self._migrations(sim, view, util)
        yield from self._placements(sim, view, util)

    def mode(self, sim, job: Job) -> str:
        """"headroom" (never overload a server by placing, §3.3.2) unless the job could not be placed
        that way even on the idle cluster (e.g. 4 tasks of 8 cores on 32-core servers exceed h_r = 90%):
        then plain admission ("fit"), else it would wait forever (and block the env's window)."""
        cache = sim_cache(sim).setdefault("mlfh_mode", {})
        m = cache.get(job.jid)
        if m is None:
            m = cache[job.jid] = "headroom" if job_fits(sim, job, "headroom", h=self.h_r, empty=True) else "fit"
        return m

    def _host_order(self, sim, task: Task, view: View, util, moving: bool = False) -> list[int]:
        mode = self.mode(sim, task.job)
        mask = restrict(server_mask(sim, task, mode, self.h_r, moving=moving), view.servers)
        if mode == "fit":
            mask &= ~effective_overload(sim)
        if moving:
            mask[task.server] = False
        return ideal_host_order(sim, task, mask, util)

    def _placements(self, sim, view: View, util) -> Iterator[Command]:
        cands = [t for t in view.place if t.tid not in self._touched]
        if not cands:
            return
        prio = self._prio_map(sim, cands)
        # partly placed jobs first (finish their gang), then by priority (highest first)
        cands.sort(key=lambda t: (t.job.n_placed == 0, -prio[t.tid], t.tid))
        blocked: set[int] = set()
        for t in cands:
            job = t.job
            if job.jid in blocked:
                continue
            if not self.fits(sim, job, self.mode(sim, job), view.servers):
                blocked.add(job.jid)
                continue
            for s in self._host_order(sim, t, view, util):
                yield Command("place", t.tid, s)

    def _migrations(self, sim, view: View, util) -> Iterator[Command]:
        c = sim.cluster
        over = effective_overload(sim)
        hot_g = hot_gpus(sim)
        by_server: dict[int, list[Task]] = {}
        for t in view.migrate:
            if (t.state == TaskState.RUNNING and over[t.server] and t.tid not in self._touched
                    and sim.now - t.placed_at >= self.migration_cooldown_s):
                by_server.setdefault(t.server, []).append(t)
        for s in sorted(by_server):
            tasks = by_server[s]
            if len(c.server_tasks[s]) < 2:
                continue  # a lone task overloads any server: moving it cannot help
            over_res = overloaded_resources(sim, s)
            nic_only = not over_res[:3].any()
            if nic_only:
                # NIC-only overload: the traffic is the jobs' own cross-server traffic, so a move helps
                # only if the task then exchanges more with its new server than with the tasks it
                # leaves (the job's cross-server volume falls); any other move spreads the job further
                # and overloads more NICs (observed: two 16-GPU model-parallel jobs spread over 12 and
                # 10 servers, every NIC overloaded, nothing placeable for a day). No such move for any
                # task here: nothing to do on this server (and no requeue, below).
                vols = {t.tid: comm_to_servers(sim, t) for t in tasks}
                closer = {tid: v > v[s] for tid, v in vols.items()}
                if not any(m.any() for m in closer.values()):
                    continue
            prio = self._prio_map(sim, tasks)
            hot = {gi for gi in c.server_gpus(s) if hot_g[gi]}
            if hot:
                on_hot = sorted((t for t in tasks if t.gpu in hot), key=lambda t: (prio[t.tid], t.tid))
                pool = on_hot[:max(1, math.ceil(self.p_s * len(on_hot)))] if on_hot else []
            else:
                pool = [t for t in tasks if not math.isinf(prio[t.tid])] or tasks
            pick = ideal_task_choice(sim, s, pool)
            if pick is None:
                continue
            if nic_only:
                ok = closer[pick.tid]
                dests = [d for d in self._host_order(sim, pick, view, util, moving=True) if ok[d]] if ok.any() else []
            else:
                dests = self._host_order(sim, pick, view, util, moving=True)
            for dest in dests:
                yield Command("migrate", pick.tid, dest)
            if over_res[:3].any():
                # back to the queue only when GPU, CPU or memory is overloaded: leaving frees them.
                # A NIC overload is caused by the job's own cross-server traffic, which requeueing one
                # task would not cure (the job would stop and be placed again: a livelock we observed).
                yield Command("requeue", pick.tid)


# MLF-C lives in the simulator core so any policy can switch it on (clustergym.core.loadcontrol).
MLFC = LoadControl


@dataclass
class MLFSHC(MLFH):
    """MLF-H plus the MLF-C load controller (the heuristic half of MLFS; MLF-RL is the agents' job)."""

    name = "mlfs-h+c"
    source = "MLFS (CoNEXT'20) §3.3 (MLF-H) + §3.5 (MLF-C)"
    fallback: str = "requirement"

    def attach(self, sim) -> None:
        if not any(isinstance(c, MLFC) for c in sim.controllers):
            self.controller = MLFC(self.fallback)
            sim.controllers.append(self.controller)
