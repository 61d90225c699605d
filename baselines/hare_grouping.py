"""Hare's preparation phase (Chen et al., IEEE TCC 2024, §IV-A, Eqs. 4-6): GPU grouping.

Hare partitions the GPUs into |U| groups so that every group shows each job about the same speed:

    min_z max_n (p_n^max - p_n^min),  p_n^max = max_u sum_m z_{m,u} s_{n,m},  p_n^min = min_u (the same sum),

each GPU in exactly one group, ``s_{n,m}`` job n's speed on GPU m (1 / its task time there). The paper gives no
solver and no default |U|; our choices (docs/baselines.md, "HLAS"):

- **Unit: servers, not single GPUs.** A policy's commands name a server and the simulator puts the task on
  that server's least-loaded GPU (the env's destinations are servers too), so a group that held one GPU of a
  server could not be addressed. A server's GPUs share one type, so a server's speed for job n is
  ``n_gpus x s_{n,type}``.
- **Jobs n:** online, future jobs are unknown; the max ranges over every profiled model of the catalogue
  (Hare's profiling database), at one task per model.
- **Default |U|:** the number of servers of the cluster's rarest GPU type (at most the number of servers):
  the most groups that can each receive a server of every type. A single-type cluster gets one group per
  server (equal groups, objective 0).
- **Solver:** greedy, then local search. Servers are dealt type by type (fastest type first) to the group
  with the lowest running total of normalised speed (each model's speeds divided by its mean); then single
  moves and pairwise swaps of servers between groups are applied while they lower the objective
  (lexicographically: the max range, then the sum of the ranges), within a budget of evaluations.
  Deterministic: ties go to the lower group and server index.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

MOVE_BUDGET = 20_000  # objective evaluations of the local search


def server_speeds(iter_times: np.ndarray, server_gpus: Sequence[int]) -> np.ndarray:
    """``S[n, s]``: job (model) n's speed on server s, the sum of its GPUs' speeds ``1 / iter_times[n, s]``."""
    return np.asarray(server_gpus, dtype=float)[None, :] / np.asarray(iter_times, dtype=float)


def group_speeds(speeds: np.ndarray, groups: Sequence[Sequence[int]]) -> np.ndarray:
    """``P[n, u]``: job n's speed on group u (Eqs. 5-6: the sum of its members' speeds)."""
    return np.stack([speeds[:, list(g)].sum(axis=1) for g in groups], axis=1)


def grouping_objective(speeds: np.ndarray, groups: Sequence[Sequence[int]]) -> float:
    """Eq. 4's objective: the largest, over jobs, spread between a job's fastest and slowest group."""
    P = group_speeds(speeds, groups)
    return float((P.max(axis=1) - P.min(axis=1)).max())


def default_n_groups(server_types: Sequence[str]) -> int:
    """The number of servers of the rarest GPU type; one group per server on a single-type cluster."""
    counts: dict[str, int] = {}
    for t in server_types:
        counts[t] = counts.get(t, 0) + 1
    return len(server_types) if len(counts) == 1 else min(counts.values())


def group_servers(speeds: np.ndarray, server_types: Sequence[str], n_groups: int | None = None,
                  budget: int = MOVE_BUDGET) -> list[list[int]]:
    """Solve Eqs. 4-6 over servers (the module docstring's greedy + local search). ``speeds``: ``S[n, s]``
    (:func:`server_speeds`). Returns the groups, each a sorted list of server indices, none empty."""
    n_servers = speeds.shape[1]
    k = default_n_groups(server_types) if n_groups is None else int(n_groups)
    if not 1 <= k <= n_servers:
        raise ValueError(f"HLAS n_groups must be between 1 and the number of servers ({n_servers}), got {n_groups}")
    norm = speeds / speeds.mean(axis=1, keepdims=True)
    weight = norm.mean(axis=0)  # a server's normalised speed, averaged over the models
    type_speed: dict[str, float] = {}
    for s, t in enumerate(server_types):
        type_speed[t] = max(type_speed.get(t, 0.0), float(weight[s]))
    order = sorted(range(n_servers), key=lambda s: (-type_speed[server_types[s]], server_types[s], s))
    member = np.zeros(n_servers, dtype=np.int64)
    total = np.zeros(k)
    for s in order:
        u = int(np.argmin(total))
        member[s] = u
        total[u] += weight[s]
    return _local_search(speeds, member, k, budget)


def _score(P: np.ndarray) -> tuple[float, float]:
    spread = P.max(axis=1) - P.min(axis=1)
    return float(spread.max()), float(spread.sum())


def _local_search(speeds: np.ndarray, member: np.ndarray, k: int, budget: int) -> list[list[int]]:
    """Apply improving single moves and pairwise swaps until none improves or the budget is spent."""
    P = np.stack([speeds[:, member == u].sum(axis=1) for u in range(k)], axis=1)
    best = _score(P)
    sizes = np.bincount(member, minlength=k)
    evals, improved = 0, k > 1
    while improved and evals < budget:
        improved = False
        for a in range(len(member)):
            ua = int(member[a])
            for v in range(k):  # move a to group v (never empty a group)
                if v == ua or sizes[ua] == 1:
                    continue
                P[:, ua] -= speeds[:, a]
                P[:, v] += speeds[:, a]
                evals += 1
                sc = _score(P)
                if sc < best:
                    best, improved = sc, True
                    member[a], sizes[ua], sizes[v] = v, sizes[ua] - 1, sizes[v] + 1
                    ua = v
                else:
                    P[:, ua] += speeds[:, a]
                    P[:, v] -= speeds[:, a]
            for b in range(a + 1, len(member)):  # swap a and b
                ub = int(member[b])
                if ub == ua:
                    continue
                d = speeds[:, b] - speeds[:, a]
                P[:, ua] += d
                P[:, ub] -= d
                evals += 1
                sc = _score(P)
                if sc < best:
                    best, improved = sc, True
                    member[a], member[b] = ub, ua
                    ua = ub
                else:
                    P[:, ua] -= d
                    P[:, ub] += d
            if evals >= budget:
                break
    return [sorted(np.flatnonzero(member == u).tolist()) for u in range(k)]
