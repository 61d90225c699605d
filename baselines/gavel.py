"""Gavel (Narayanan et al., OSDI '20): heterogeneity-aware max-min fairness, solved as an LP with pulp
+ HiGHS, then rounded to placements.

LP (Gavel's "max-min fairness over throughput-normalised allocations", one GPU type per job at a time):
variables X[j,k] >= 0, the fraction of time job j runs on GPU type k;

    maximise  t
    s.t.      sum_k T[j,k] X[j,k] / T_eq[j]  >= t         for every job j   (normalised throughput)
              sum_k X[j,k] <= 1                            for every job j
              sum_j n_gpus[j] X[j,k] <= N_k                for every type k  (scale factor = GPUs)

with T[j,k] = 1 / (job's iteration time on type k) and T_eq[j] = the job's throughput on an equal
time-share of every GPU (its throughput averaged over the cluster's GPUs; the common 1/|J| factor
cancels in the max-min). The objective variant ``objective="throughput"`` maximises
sum_j sum_k T[j,k] X[j,k] / T_eq[j] instead (normalised total throughput). ``objective="makespan"`` is
Gavel's makespan policy, min_X max_j remaining_iters[j] / sum_k T[j,k] X[j,k], as the LP

    maximise  t                                            (t = 1 / makespan)
    s.t.      sum_k T[j,k] X[j,k] / remaining_iters[j] >= t   for every job j

with the same two capacity constraints (remaining iterations read when the LP is solved).

Rounding (our simplification; Gavel time-slices 6-minute rounds with preemption, which the env does not
expose): the LP is re-solved whenever the set of active jobs changes (solve time capped by
``time_limit_s``, at most ``max_jobs`` jobs, oldest first; others get X = 0). Waiting jobs are then
started in order of their allocation deficit, sum_k X[j,k] minus the fraction of their time in the
system they have run, largest first; a job's tasks go preferably to the type with its largest X[j,k]
(then faster types), one task per GPU, consolidated. If the LP fails, the allocation falls back to
an equal share on the job's fastest type.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from clustergym.core.job import Job
from clustergym.core.view import ClusterView

from .base import Candidates, Command, Policy, job_servers


@contextlib.contextmanager
def _solver_output(shown: bool) -> Iterator[None]:
    """HiGHS prints its banner from C when a process makes its first solver, whatever pulp's ``msg``; unless
    ``shown``, the process's stdout goes to /dev/null for the solve (Python's buffered output flushed first)."""
    if shown:
        yield
        return
    sys.stdout.flush()
    saved, null = os.dup(1), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(null)


def solve_max_min(tput: np.ndarray, scale: np.ndarray, counts: np.ndarray, objective: str = "max-min",
                  time_limit_s: float = 1.0, remaining: np.ndarray | None = None,
                  verbose: bool = False) -> tuple[np.ndarray, str]:
    """Solve Gavel's LP. ``tput``: (J, K) throughputs; ``scale``: (J,) GPUs per job; ``counts``: (K,)
    GPUs per type; ``remaining``: (J,) remaining iterations (``objective="makespan"`` only); ``verbose``:
    the solver's log on stdout. Returns (X, pulp solution status)."""
    import pulp

    if objective == "makespan":
        if remaining is None:
            raise ValueError("objective 'makespan' needs the jobs' remaining iterations")
        remaining = np.maximum(np.asarray(remaining, dtype=float), 1.0)  # at least one iteration left

    J, K = tput.shape
    eq = (tput * counts[None, :]).sum(axis=1) / counts.sum()
    prob = pulp.LpProblem("gavel", pulp.LpMaximize)
    x = {(j, k): prob.add_variable(f"x_{j}_{k}", lowBound=0) for j in range(J) for k in range(K)}
    norm = {j: pulp.lpSum(float(tput[j, k] / eq[j]) * x[j, k] for k in range(K)) for j in range(J)}
    if objective == "max-min":
        t = prob.add_variable("t", lowBound=0)
        prob += t
        for j in range(J):
            prob += norm[j] >= t
    elif objective == "throughput":
        prob += pulp.lpSum(norm.values())
    elif objective == "makespan":
        t = prob.add_variable("t", lowBound=0)
        prob += t
        for j in range(J):
            prob += pulp.lpSum(float(tput[j, k] / remaining[j]) * x[j, k] for k in range(K)) >= t
    else:
        raise ValueError(f"unknown Gavel objective {objective!r}")
    for j in range(J):
        prob += pulp.lpSum(x[j, k] for k in range(K)) <= 1
    for k in range(K):
        prob += pulp.lpSum(float(scale[j]) * x[j, k] for j in range(J)) <= float(counts[k])
    with _solver_output(verbose):
        prob.solve(pulp.HiGHS(msg=verbose, timeLimit=time_limit_s, threads=1))
    status = pulp.LpSolution[prob.sol_status]
    X = np.array([[x[j, k].value() or 0.0 for k in range(K)] for j in range(J)])
    return np.clip(X, 0.0, 1.0), status


@dataclass
class Gavel(Policy):
    name = "gavel"
    source = "Gavel (Narayanan et al., OSDI'20) heterogeneity-aware max-min fairness LP"
    objective: str = "max-min"  # or "throughput", "makespan"
    time_limit_s: float = 1.0
    max_jobs: int = 200
    verbose: bool = False  # the LP solver's log (HiGHS's banner and progress) on stdout

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.objective not in ("max-min", "throughput", "makespan"):
            raise ValueError(f"unknown Gavel objective {self.objective!r}")
        self._key = None
        self._alloc: dict[int, np.ndarray] = {}
        self.solves = 0
        self.solve_seconds = 0.0
        self.last_status = ""

    def new_episode(self, view: ClusterView) -> None:
        per_type = view.gpu_type_counts
        self._types = list(per_type)
        self._counts = np.array(list(per_type.values()), dtype=float)
        self._key = None

    def allocation(self, view: ClusterView) -> dict[int, np.ndarray]:
        jobs = sorted(view.active_jobs(), key=lambda j: (j.spec.submit_time, j.jid))[: self.max_jobs]
        key = tuple(j.jid for j in jobs)
        if key == self._key:
            return self._alloc
        types, counts = self._types, self._counts
        if not jobs:
            self._key, self._alloc = key, {}
            return self._alloc
        tput = np.array([[1.0 / j.model.iter_time(t) for t in types] for j in jobs])
        scale = np.array([j.spec.n_gpus for j in jobs], dtype=float)
        remaining = (np.array([view.remaining_iters(j) for j in jobs])
                     if self.objective == "makespan" else None)
        t0 = time.perf_counter()
        try:
            X, status = solve_max_min(tput, scale, counts, self.objective, self.time_limit_s, remaining,
                                      self.verbose)
        except Exception as exc:  # solver failure: fall back to the fastest type
            X, status = np.zeros_like(tput), f"error: {exc}"
        self.solve_seconds += time.perf_counter() - t0
        self.solves += 1
        self.last_status = status
        if not status.endswith("Found"):
            X = np.zeros_like(tput)
            X[np.arange(len(jobs)), tput.argmax(axis=1)] = min(1.0, counts.sum() / scale.sum())
        self._key = key
        self._alloc = {j.jid: X[i] for i, j in enumerate(jobs)}
        return self._alloc

    def deficit(self, view: ClusterView, job: Job, alloc) -> float:
        x = alloc.get(job.jid)
        share = float(x.sum()) if x is not None else 0.0
        in_system = max(1e-9, view.now - job.spec.submit_time)
        return share - view.running_time(job) / in_system

    def type_order(self, view: ClusterView, task, mask: np.ndarray, alloc) -> list[int]:
        x = alloc.get(task.job.jid)
        rank = {t: (-(x[i] if x is not None else 0.0), task.job.model.iter_time(t)) for i, t in enumerate(self._types)}
        idle, types = view.idle_gpus, view.server_gpu_type
        mine = job_servers(task.job)
        idx = np.flatnonzero(mask).tolist()
        return sorted(idx, key=lambda s: (rank[types[s]], s not in mine, int(idle[s]), s))

    def preferences(self, view: ClusterView, cands: Candidates) -> Iterator[Command]:
        if not cands.place:
            return iter(())
        alloc = self.allocation(view)
        return self.job_first(view, cands, lambda j: -self.deficit(view, j, alloc), "exclusive",
                              lambda v, t, m: self.type_order(v, t, m, alloc), True)
