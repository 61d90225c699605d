"""Compiled (numba) kernels of the pairwise policy's weight-free features (:mod:`clustergym.agents.policies`).

The features restate MLF-H's inputs from the observation: per task row (:func:`row_features`), per (row, stop
option) (:func:`stop_features`), per server's GPUs (:func:`gpu_stats`) and per valid (row, destination) pair
(:func:`pair_features`). As torch code they were some 150 small tensor operations per forward pass, about a third
of the encoder's time on the CPU (each operation costs microseconds of dispatch whatever its size); here each
block is one call. They have no weights, so no gradient flows through them.

Arithmetic is float32 throughout, as torch did it: the constants are float32 globals, so numba does not
promote to float64. Results equal the torch expressions they replace up to the summation order of short sums
(the squared distance's four terms, a server's GPU loads); ``tests/test_feature_kernels.py`` checks each
against those expressions.
``cache=True`` keeps the compiled code in ``__pycache__``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

F0, F1, F10, F60 = np.float32(0.0), np.float32(1.0), np.float32(10.0), np.float32(60.0)
HALF = np.float32(0.5)
BIG = np.float32(1e4)  # stands for "no value" in a masked min, as the torch code's fill value
TINY = np.float32(1e-6)  # "idle" GPU load and the nearest-host tie tolerance
EPS_PS = np.float32(1e-7)  # tie tolerance of the earliest parameter server's job index
MIN_HOURS = np.float32(1.0 / 60.0)  # one minute, the clamp of 1/slack and 1/remaining time
UNSQ_FLOOR, UNSQ_CAP = np.float32(1e-3), np.float32(1e3)
AMAX_FLOOR = np.float32(1e-9)
WAIT_CAP, DIST_CAP = np.float32(100.0), np.float32(4.0)


@njit(cache=True)
def _unsq(x):
    """Inverse of the observation's squashing x / (1 + |x|), capped at 1e3."""
    v = x / max(F1 - abs(x), UNSQ_FLOOR)
    return min(max(v, -UNSQ_CAP), UNSQ_CAP)


@njit(cache=True)
def row_features(tasks, c_present, c_slack, c_wait, c_remaining, c_urgency, c_share, c_is_ps, c_job, c_running,
                 c_placed):
    """(B, W, 8) row features of ``tasks`` (B, W, F), the ``c_*`` arguments its column indices."""
    B, W, _ = tasks.shape
    out = np.zeros((B, W, 8), dtype=np.float32)
    for b in range(B):
        ps_first, first = BIG, BIG  # the earliest job index among present PS rows and among present rows
        for r in range(W):
            if tasks[b, r, c_present] > HALF:
                first = min(first, tasks[b, r, c_job])
                if tasks[b, r, c_is_ps] > HALF:
                    ps_first = min(ps_first, tasks[b, r, c_job])
        first = min(first, F1)
        for r in range(W):
            if not tasks[b, r, c_present] > HALF:
                continue
            row = tasks[b, r]
            slack = _unsq(row[c_slack])
            sign = F1 if slack > F0 else (-F1 if slack < F0 else F0)
            inv_slack = sign / max(abs(slack), MIN_HOURS)
            inv_remaining = F1 / max(_unsq(row[c_remaining]), MIN_HOURS)
            is_ps = row[c_is_ps] > HALF
            out[b, r, 0] = min(max(inv_slack, -F60), F60) / F10
            out[b, r, 1] = inv_remaining / F10
            out[b, r, 2] = min(_unsq(row[c_wait]), WAIT_CAP) / F10
            out[b, r, 3] = row[c_urgency] * F10 * row[c_share]
            out[b, r, 4] = F1 if is_ps else F0
            out[b, r, 5] = F1 if is_ps and row[c_job] <= ps_first + EPS_PS else F0
            out[b, r, 6] = F1 if row[c_placed] > F0 and row[c_running] < HALF else F0
            out[b, r, 7] = (row[c_job] - first) * F10
    return out


@njit(cache=True)
def stop_features(tasks, rows_b, rows_r, c_progress, c_target, c_changeable, c_stop, c_own, c_target_o):
    """(R, N, 6 + N) stop-option features of the rows (``rows_b[i]``, ``rows_r[i]``) of ``tasks``; ``c_stop``,
    ``c_own`` and ``c_target_o`` hold each option's column (N options)."""
    N = len(c_stop)
    out = np.zeros((len(rows_b), N, N + 6), dtype=np.float32)
    for i in range(len(rows_b)):
        row = tasks[rows_b[i], rows_r[i]]
        progress, target = row[c_progress], row[c_target]
        for o in range(N):
            t_o = row[c_target_o[o]]
            out[i, o, o] = F1
            out[i, o, N] = row[c_stop[o]]
            out[i, o, N + 1] = row[c_own[o]]
            out[i, o, N + 2] = row[c_changeable]
            out[i, o, N + 3] = t_o - progress
            out[i, o, N + 4] = t_o - target
            out[i, o, N + 5] = F1 if t_o <= progress else F0
    return out


@njit(cache=True)
def gpu_stats(loads):
    """(B, K, 4) mean, max and min load over each server's real GPUs (``loads`` >= 0; -1 pads) and its idle
    fraction; a server without GPUs gives zeros."""
    B, K, G = loads.shape
    out = np.zeros((B, K, 4), dtype=np.float32)
    for b in range(B):
        for k in range(K):
            n, total, mx, mn, idle = 0, F0, F0, BIG, F0
            for g in range(G):
                x = loads[b, k, g]
                if x >= F0:
                    n += 1
                    total += x
                    mx = max(mx, x)
                    mn = min(mn, x)
                    if x <= TINY:
                        idle += F1
            count = np.float32(max(n, 1))
            out[b, k, 0] = total / count
            out[b, k, 1] = mx
            out[b, k, 2] = mn if n > 0 else F0
            out[b, k, 3] = idle / count
    return out


@njit(cache=True)
def _gpu_fits(loads, b, k, t_gpu, thr):
    """Whether a real GPU of server k has load + t_gpu <= thr or is idle."""
    for g in range(loads.shape[2]):
        x = loads[b, k, g]
        if x >= F0 and (x + t_gpu <= thr or x <= TINY):
            return True
    return False


@njit(cache=True)
def pair_features(tasks, servers, loads, affinity, valid, h, tcols, scols, u_cpu, u_mem):
    """(P, 12) features and (P, 3) (batch, row, server) indices of the ``valid`` (B, W, K) pairs, row-major.
    ``tcols``: the task columns cpu, mem, GPU-use demand, is-PS, GPU-memory demand; ``scols``: the server
    columns of the utilisation vector (4), overloaded, free GPU memory; ``u_cpu``/``u_mem``: the CPU and memory
    positions in the utilisation vector; ``affinity`` (B, W, K), or (0, 0, 0) for none; ``h`` the overload
    threshold. The features' meaning is :func:`clustergym.agents.policies.pair_features`'."""
    B, W, K = valid.shape
    P = 0
    for b in range(B):
        for r in range(W):
            for k in range(K):
                P += valid[b, r, k]
    f = np.zeros((P, 12), dtype=np.float32)
    idx = np.zeros((P, 3), dtype=np.int64)
    util = np.zeros((K, 4), dtype=np.float32)  # the row's pairs' utilisation vectors, by pair
    h32, thr = np.float32(h), np.float32(h + 1e-6)
    has_aff = affinity.shape[0] > 0
    min_load = gpu_stats(loads)[:, :, 2]  # per server, once: the least loaded real GPU (0 without GPUs)
    p = 0
    for b in range(B):
        for r in range(W):
            start = p
            any_head = False
            t_cpu, t_mem, t_gpu = tasks[b, r, tcols[0]], tasks[b, r, tcols[1]], tasks[b, r, tcols[2]]
            is_ps = tasks[b, r, tcols[3]] > HALF
            for k in range(K):
                if not valid[b, r, k]:
                    continue
                for j in range(4):
                    util[p - start, j] = servers[b, k, scols[j]]
                cpu_after, mem_after = util[p - start, u_cpu] + t_cpu, util[p - start, u_mem] + t_mem
                gpu_after = min_load[b, k] + t_gpu * (F0 if is_ps else F1)
                head = (servers[b, k, scols[4]] <= HALF and cpu_after <= thr and mem_after <= thr
                        and (is_ps or _gpu_fits(loads, b, k, t_gpu, thr)))
                any_head = any_head or head
                idx[p, 0], idx[p, 1], idx[p, 2] = b, r, k
                f[p, 0], f[p, 1] = F1, F1 if head else F0
                f[p, 6] = affinity[b, r, k] if has_aff else F0
                f[p, 8], f[p, 9], f[p, 10] = h32 - cpu_after, h32 - mem_after, h32 - gpu_after
                f[p, 11] = servers[b, k, scols[5]] - tasks[b, r, tcols[4]]
                p += 1
            if p > start:
                _ideal_host_features(f, util, start, p, any_head)
    return f, idx


@njit(cache=True)
def _ideal_host_features(f, util, start, stop, any_head):
    """Columns 2-5 and 7 of one row's pairs ``start:stop``: the candidate set (its head pairs, or all when none
    is), the distance to the ideal virtual host (element-wise min of the candidates' utilisation) plus the
    bandwidth term, the gap to the row's nearest candidate, "is the nearest", the normalised affinity."""
    ideal = np.full(4, BIG, dtype=np.float32)
    amax = F0
    for p in range(start, stop):
        cand = f[p, 1] > HALF or not any_head
        f[p, 2] = F1 if cand else F0
        if cand:
            for j in range(4):
                ideal[j] = min(ideal[j], util[p - start, j])
            amax = max(amax, f[p, 6])
    has_aff = F1 if amax > F0 else F0
    dmin = BIG
    for p in range(start, stop):
        bwn = f[p, 6] / max(amax, AMAX_FLOOR) if amax > F0 else F0
        d = F0
        for j in range(4):
            diff = util[p - start, j] - ideal[j]
            d += diff * diff
        dist = d + (bwn - has_aff) * (bwn - has_aff)
        f[p, 3], f[p, 7] = dist, bwn
        if f[p, 2] > HALF:
            dmin = min(dmin, dist)
    for p in range(start, stop):
        cand = f[p, 2] > HALF
        gap = f[p, 3] - dmin if cand else F1
        f[p, 4] = min(gap, DIST_CAP)
        f[p, 5] = F1 if cand and gap <= TINY else F0
        f[p, 3] = min(f[p, 3], DIST_CAP)
