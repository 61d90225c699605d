"""Compiled (numba) kernels for the env's per-step numeric work.

A step of :class:`clustergym.gym_env.ClusterEnv` reads a few small arrays (20 servers by default) many times. As
numpy calls, which cost about 1 us each in call overhead alone, that was some 65 calls per step plus per-row
Python; each kernel here does one block of it in a single call: :func:`destinations` (utilisation, ideal-host
distances, destination columns, free resources), :func:`fit_mask` (the action mask's fit test),
:func:`first_rows_per_job` (the window's cap on rows per job), :func:`stop_mask` (the stop-option columns),
:func:`server_features` and :func:`task_window` (observation blocks) and :func:`job_dynamic` (a job's
dynamic columns).

The kernels reproduce numpy's arithmetic bit for bit (same operations, same summation order, float64 then one
rounding to float32), so observations and masks are those the numpy code gave; ``tests/test_kernels.py``
checks each kernel against the numpy expressions it replaces. Summation order matters: ``np.add.reduce`` of a
1-D array sums pairwise in blocks of 8 (:func:`pairwise_sum`), ``np.add.reduceat`` adds a segment's first
element to the pairwise sum of the rest (:func:`segment_sum`), and a reduction over a short row is sequential.

``cache=True`` keeps the compiled code in ``__pycache__``, so only the first process pays the compile time
(a few seconds); ``NUMBA_DISABLE_JIT=1`` runs the same functions as plain Python.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .core.workload import STOP_OPTIONS

_BLOCK = 128  # numpy's pairwise-summation block (PW_BLOCKSIZE)
N_STOP = len(STOP_OPTIONS)  # the stopping rules a job may use (MLFS §3.5), one-hot in its dynamic columns


@njit(cache=True)
def _pairwise_block(a, lo, n):
    # numpy's pairwise_sum for n <= 128: eight running sums combined as a tree, then the tail
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    end = n - n % 8
    while i < end:
        j = lo + i
        r0 += a[j]
        r1 += a[j + 1]
        r2 += a[j + 2]
        r3 += a[j + 3]
        r4 += a[j + 4]
        r5 += a[j + 5]
        r6 += a[j + 6]
        r7 += a[j + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def pairwise_sum(a, lo, n):
    """``np.add.reduce(a[lo:lo + n])`` in numpy's order: blocks of at most 128 as :func:`_pairwise_block`,
    larger ranges halved (the first half a multiple of 8) and the halves' sums added. The halving tree is
    walked with an explicit stack: numba's on-disk cache cannot reload recursive functions."""
    if n <= _BLOCK:
        return _pairwise_block(a, lo, n)
    st_lo = np.empty(64, np.int64)
    st_n = np.empty(64, np.int64)
    st_stage = np.zeros(64, np.int64)  # 0: expand left half, 1: expand right half, 2: add the two sums
    vals = np.empty(64)
    top, nv = 0, 0
    st_lo[0], st_n[0] = lo, n
    while top >= 0:
        m = st_n[top]
        if m <= _BLOCK:
            vals[nv] = _pairwise_block(a, st_lo[top], m)
            nv += 1
            top -= 1
            continue
        half = m // 2
        half -= half % 8
        stage = st_stage[top]
        st_stage[top] = stage + 1
        if stage == 0:
            top += 1
            st_lo[top], st_n[top], st_stage[top] = st_lo[top - 1], half, 0
        elif stage == 1:
            top += 1
            st_lo[top], st_n[top], st_stage[top] = st_lo[top - 1] + half, m - half, 0
        else:
            nv -= 1
            vals[nv - 1] = vals[nv - 1] + vals[nv]
            top -= 1
    return vals[0]


@njit(cache=True)
def segment_sum(a, lo, n):
    """One segment of ``np.add.reduceat``: the first element plus the pairwise sum of the others."""
    if n == 1:
        return a[lo]
    return a[lo] + pairwise_sum(a, lo + 1, n - 1)


@njit(cache=True)
def destinations(gpu_load, first_gpu, n_gpus, cpu_use, cpu_cap, mem_use, mem_cap, net_mbps, net_cap_mbps,
                 over, n_over, max_free_gpu_mem, cpu_alloc, mem_alloc, gpu_scratch, U, dist, dest, free):
    """Utilisation, distance to MLF-H's ideal host, the destination columns and their free resources.

    Writes ``U`` (S, 4): use / capacity of (GPU, CPU, memory, network) as ``ClusterState.utilisation_matrix``,
    clipped at 2; ``dist`` (S,): Euclidean distance of each row of ``U`` to the ideal host, the column minimum
    over the servers that are not overloaded (over all servers when none or all are); ``dest`` (K,): the
    destination columns' servers (0..S-1 then -1 when S <= K, else the K closest to the ideal host, ties by
    index); ``free`` (3, K): largest free GPU memory on one GPU, free CPU cores and free memory of each
    destination (columns from k on untouched). Returns (k, the cluster overload degree of the clipped U:
    the mean over servers of the root mean square of the row)."""
    S = U.shape[0]
    K = dest.shape[0]
    for g in range(gpu_load.shape[0]):
        gpu_scratch[g] = min(gpu_load[g], 1.0)
    for s in range(S):
        U[s, 0] = min(segment_sum(gpu_scratch, first_gpu[s], n_gpus[s]) / n_gpus[s], 2.0)
        U[s, 1] = min(cpu_use[s] / cpu_cap[s], 2.0)
        U[s, 2] = min(mem_use[s] / mem_cap[s], 2.0)
        U[s, 3] = min(net_mbps[s] / net_cap_mbps[s], 2.0)
    some = 0 < n_over < S
    ideal = np.full(4, np.inf)
    for s in range(S):
        if some and over[s]:
            continue
        for r in range(4):
            if U[s, r] < ideal[r]:
                ideal[r] = U[s, r]
    rms = np.empty(S)
    for s in range(S):
        u0, u1, u2, u3 = U[s, 0], U[s, 1], U[s, 2], U[s, 3]
        d0, d1, d2, d3 = u0 - ideal[0], u1 - ideal[1], u2 - ideal[2], u3 - ideal[3]
        dist[s] = math.sqrt(((d0 * d0 + d1 * d1) + d2 * d2) + d3 * d3)
        rms[s] = math.sqrt((((u0 * u0 + u1 * u1) + u2 * u2) + u3 * u3) / 4.0)
    if S <= K:
        k = S
        for i in range(K):
            dest[i] = i if i < S else -1
    else:
        k = K
        order = np.argsort(dist, kind="mergesort")  # stable: ties by server index
        for i in range(K):
            dest[i] = order[i]
    for i in range(k):
        s = dest[i]
        free[0, i] = max_free_gpu_mem[s]
        free[1, i] = cpu_cap[s] - cpu_alloc[s]
        free[2, i] = mem_cap[s] - mem_alloc[s]
    return k, pairwise_sum(rms, 0, S) / S


@njit(cache=True)
def fit_mask(tids, demand, free, k, eps, n_mig, n_over, task_server, over, dest, mask2, ok):
    """Which destinations each window row's task fits, and the mask rows of the running-task rows.

    Row ``r`` holds task ``tids[r]``; ``demand`` (n_tasks, 3) is every task's (GPU memory, CPU, memory)
    demand (-inf GPU memory for a PS, which takes no GPU). ``ok[r, c]`` (written for c < k): the task fits
    destination column ``c`` by nominal demand (``free + eps >= demand`` for all three). Rows below ``n_mig``
    hold running tasks: the first ``n_over`` are migration candidates (not to an overloaded server nor to
    their own, ``task_server[tids[r]]``; "back to the queue" allowed), the others preemption candidates
    ("back to the queue" only). Their rows of ``mask2`` (W, K + 1), cleared beforehand by the caller, are
    written here; the waiting rows' mask is the caller's, which chooses the rows. Returns the number of waiting rows fitting somewhere,
    and writes ``ok[r, k]`` (a spare column) = row ``r`` fits some destination."""
    n = tids.shape[0]
    K = mask2.shape[1] - 1
    n_fit = 0
    for r in range(n):
        t = tids[r]
        own = task_server[t]
        g, c_, m = demand[t, 0], demand[t, 1], demand[t, 2]
        any_ = False
        for c in range(k):
            f = free[0, c] + eps >= g and free[1, c] + eps >= c_ and free[2, c] + eps >= m
            if r < n_mig:
                s = dest[c]
                f = f and not over[s] and s != own
                mask2[r, c] = f and r < n_over
            ok[r, c] = f
            any_ = any_ or f
        ok[r, k] = any_
        if r < n_mig:
            mask2[r, K] = True
        elif any_:
            n_fit += 1
    return n_fit


@njit(cache=True)
def first_rows_per_job(fits, tids, offset, job_of_task, cap, counts):
    """The candidate rows a window shows when each job may have at most ``cap`` rows: in row order, the rows
    ``r`` with ``fits[r]`` whose job (``job_of_task[tids[offset + r]]``, an index into ``counts``) has fewer
    than ``cap`` rows kept so far. Returns their indices (into ``fits``). ``counts`` is scratch of at least
    (largest job index + 1) zeros, left zeroed on return."""
    n = fits.shape[0]
    keep = np.empty(n, np.int64)
    m = 0
    for r in range(n):
        if fits[r]:
            j = job_of_task[tids[offset + r]]
            if counts[j] < cap:
                counts[j] += 1
                keep[m] = r
                m += 1
    for i in range(m):
        counts[job_of_task[tids[offset + keep[i]]]] = 0
    return keep[:m]


@njit(cache=True)
def stop_mask(row_tids, job_of_task, cur, table, changed_round, rnd, mask_stop, missing):
    """The stop-option columns of the mask: row ``r`` (task ``row_tids[r]``, job ``j = job_of_task[...]``)
    allows option ``o`` when bit ``o`` of ``table[j, cur[j]]`` is set (the options the simulator's rule
    allows a job whose current option is ``cur[j]``, filled by the caller) and the job's rule did not change
    in this round (``changed_round[j] != rnd``). A job whose table entry is still unknown (-1) is written to
    ``missing`` and its row left alone; returns how many (the caller fills them and calls again)."""
    n_missing = 0
    n_opt = mask_stop.shape[1]
    for r in range(row_tids.shape[0]):
        j = job_of_task[row_tids[r]]
        code = table[j, cur[j]]
        if code < 0:
            missing[n_missing] = j
            n_missing += 1
            continue
        if changed_round[j] == rnd:
            code = 0
        for o in range(n_opt):
            mask_stop[r, o] = (code >> o) & 1 == 1
    return n_missing


@njit(cache=True)
def server_features(dest, k, U, free, gmax, idle_gpus, overloaded, dist, n_gpus_f, nic_f, type_onehot, gpu_load,
                    first_gpu, n_gpus, servers, gpu_loads):
    """The observation's ``servers`` (K, 20) and ``gpu_loads`` (K, G) rows of the k destinations.

    ``servers`` arrives zeroed and ``gpu_loads`` filled with -1 (padding). Columns follow
    ``observation.SERVER_COLUMNS``; each value is computed in float64 and rounded once to float32."""
    G = gpu_loads.shape[1]
    for i in range(k):
        s = dest[i]
        row = servers[i]
        row[0] = 1.0
        for r in range(4):
            row[1 + r] = U[s, r]
        for r in range(3):
            row[5 + r] = free[r, i] / gmax[r]
        row[8] = n_gpus_f[s]
        row[9] = idle_gpus[s] / G
        row[10] = 1.0 if overloaded[s] else 0.0
        row[11] = nic_f[s]
        row[12] = min(dist[s] * 0.5, 2.0)
        for t in range(type_onehot.shape[1]):
            row[13 + t] = type_onehot[s, t]
        f = first_gpu[s]
        for g in range(min(n_gpus[s], G)):
            gpu_loads[i, g] = min(gpu_load[f + g], 4.0)


@njit(cache=True)
def task_window(static_rows, job_rows, vals, W, n_dyn, o_job, nb_ptr, nb_tid, task_server, dest, k, n_servers):
    """The observation's ``tasks`` (W, F) and ``affinity`` (W, K) arrays; rows without a candidate are zero.

    ``vals`` is flat, ``3 + n_dyn`` values per candidate row: window row, task id (row of ``static_rows``), job
    row (of ``job_rows``), then the task-dynamic values. A task row is its static row with the ``n_dyn``
    leading (task-dynamic) columns and the job's dynamic columns (from column ``o_job``) written in; float64
    values are rounded once to float32, as an assignment would.

    Affinity: for each candidate task, the share of its DAG neighbours (``nb_tid[nb_ptr[t]:nb_ptr[t + 1]]``,
    parents then children) running on each destination (``task_server``: a running task's server, else -1;
    ``dest[:k]``: the destination columns' servers), summed in float64 in neighbour order and rounded once."""
    T = np.zeros((W, static_rows.shape[1]), np.float32)
    A = np.zeros((W, dest.shape[0]), np.float32)
    col_of = np.full(n_servers, -1, np.int64)
    for i in range(k):
        col_of[dest[i]] = i
    acc = np.zeros(dest.shape[0])
    per = 3 + n_dyn
    nj = job_rows.shape[1]
    for i in range(vals.shape[0] // per):
        b = i * per
        r = int(vals[b])
        t = int(vals[b + 1])
        row = T[r]
        row[:] = static_rows[t]
        for c in range(n_dyn):
            row[c] = vals[b + 3 + c]
        j = int(vals[b + 2])
        for c in range(nj):
            row[o_job + c] = job_rows[j, c]
        lo, hi = nb_ptr[t], nb_ptr[t + 1]
        if hi > lo:
            w = 1.0 / (hi - lo)
            touched = False
            for q in range(lo, hi):
                s = task_server[nb_tid[q]]
                if s >= 0 and col_of[s] >= 0:
                    acc[col_of[s]] += w
                    touched = True
            if touched:
                for c in range(k):
                    A[r, c] = acc[c]
                    acc[c] = 0.0
    return T, A


@njit(cache=True)
def _interp(x, xs, ys):
    """``np.interp`` for one point (values beyond the ends held constant), in the arithmetic of the
    pure-Python version it replaced: ``ys[k-1] + (ys[k] - ys[k-1]) * (x - x0) / (x1 - x0)``."""
    n = xs.shape[0]
    if x <= xs[0]:
        return ys[0]
    if x >= xs[n - 1]:
        return ys[n - 1]
    lo, hi = 0, n  # bisect_right: the first index whose x is larger
    while lo < hi:
        mid = (lo + hi) // 2
        if x < xs[mid]:
            hi = mid
        else:
            lo = mid + 1
    k = lo
    return ys[k - 1] + (ys[k] - ys[k - 1]) * (x - xs[k - 1]) / (xs[k] - xs[k - 1])


@njit(cache=True)
def _sq(x):
    return x / (1.0 + x) if x > 0 else 0.0


@njit(cache=True)
def _cap1(x):
    return x if x < 1.0 else 1.0  # Python's min(1.0, x)


@njit(cache=True)
def job_dynamic(job_rows, row, now, ts, submit, deadline, max_iters, iters, rate, last_update, paused_until,
                target, n_placed, n_tasks, waiting_time, running_time, mean_iter_time, stop_idx, curve_x,
                curve_loss, curve_acc, n_red):
    """A job's dynamic observation columns (``observation.JOB_DYNAMIC_HEAD`` then ``n_red`` loss reductions)
    into ``job_rows[row]``.

    The head's last ``N_STOP`` columns are the one-hot of the job's current stopping rule (``stop_idx``, its
    index in ``STOP_OPTIONS``); the loss reductions follow them.

    ``rate`` > 0 only for a fully placed active job: its progress since max(last update, pause end) is
    extrapolated to ``now``. Loss reductions follow MLFS Eq. (2): ``(l(I-j-1) - l(I-j)) / (l(0) - l(I))`` at the
    whole iteration count I, clipped to [0, 1]. Python's ``min``/``max`` are spelled out so every value,
    including which of two equal values is kept, is the one the pure-Python code gave."""
    placed = n_placed == n_tasks
    it = iters
    if rate > 0:
        start = paused_until if paused_until > last_update else last_update
        if now > start:
            v = it + rate * (now - start)
            it = v if v < target else target
    i = math.floor(it)
    out = job_rows[row]
    if i >= 1:
        lv = np.empty(n_red + 1)
        for j in range(n_red + 1):
            lv[j] = _interp((i - j if i - j > 0 else 0) / max_iters, curve_x, curve_loss)
        total = curve_loss[0] - lv[0]
    else:
        lv = np.empty(0)
        total = 0.0
    late = now - last_update
    waiting = waiting_time + (late if late > 0.0 else 0.0) * (0.0 if placed else 1.0)
    left = target - it
    out[0] = _sq((now - submit) / ts)
    x = (deadline - now) / ts
    out[1] = x / (1.0 + abs(x))
    out[2] = _cap1(it / max_iters)
    out[3] = _cap1(math.log1p(it) / math.log1p(1e7))
    out[4] = _cap1(target / max_iters)
    out[5] = n_placed / n_tasks
    out[6] = _interp(it / max_iters, curve_x, curve_acc)
    out[7] = _sq(waiting / ts)
    out[8] = _sq(running_time / ts)
    # remaining iterations x the model's iteration time averaged over the cluster's GPUs (MLF-H's r_k)
    out[9] = _sq((left if left > 0.0 else 0.0) * mean_iter_time / ts)
    for o in range(N_STOP):
        out[10 + o] = 1.0 if o == stop_idx else 0.0
    for j in range(n_red):
        red = 0.0
        if i >= 1 and total > 0 and j < i:  # iteration i - j >= 1
            v = (lv[j + 1] - lv[j]) / total
            red = _cap1(v if v > 0.0 else 0.0)
        out[10 + N_STOP + j] = red
