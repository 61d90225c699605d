"""Compiled (numba) kernels of a job's iteration time: its placement's links, their times under NIC shares,
and the critical path (:mod:`clustergym.core.dag` states the model; these are its arithmetic).

A job's DAG arrives as arrays (:class:`~clustergym.core.dag.JobGraph`): the workers in topological order
(``w_task``, ``w_rep``) and their non-PS parents in CSR form (``p_start``, ``p_idx``: worker i's parents are
``p_idx[p_start[i]:p_start[i + 1]]``). Every DAG edge and every synchronisation transfer is one *link*
``(server a, server b, MB)``: ``a = b = -1`` on one GPU (free), ``a == b`` inside a server, else between two
servers (``a < b``). The kernels do the operations of the plain-Python rules they replace in the same order
(sums accumulated edge by edge, the same comparisons), so iteration times are those floats bit for bit; with
``NUMBA_DISABLE_JIT=1`` they run as plain Python. ``cache=True`` keeps the compiled code in ``__pycache__``.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

MB_PER_GBIT = 125.0  # 1 Gbit = 125 MB


@njit(cache=True, inline="always")
def transfer_s(mb: float, gbps: float) -> float:
    """Seconds to move ``mb`` MB at ``gbps`` Gbit/s (0 for nothing to move or an infinite link)."""
    if gbps == math.inf or mb <= 0:
        return 0.0
    return mb / (gbps * MB_PER_GBIT)


@njit(cache=True, inline="always")
def _link(servers, gpus, a, b, mb, links, i, cross_ab, cross_mb, n_cross):
    """Write link i (``links[i]`` = its two servers) for ``mb`` MB from task a to task b; tally bytes between two
    servers in ``cross_ab``/``cross_mb`` (pairs in first-seen order, each sum accumulated transfer by transfer).
    Returns the new pair count."""
    sa, sb = servers[a], servers[b]
    if sa != sb:
        lo, hi = (sa, sb) if sa < sb else (sb, sa)
        links[i, 0], links[i, 1] = lo, hi
        if mb > 0:
            for j in range(n_cross):
                if cross_ab[j, 0] == lo and cross_ab[j, 1] == hi:
                    cross_mb[j] = cross_mb[j] + mb
                    return n_cross
            cross_ab[n_cross, 0], cross_ab[n_cross, 1], cross_mb[n_cross] = lo, hi, 0.0 + mb
            return n_cross + 1
    elif gpus[a] == gpus[b] and gpus[b] >= 0:
        links[i, 0], links[i, 1] = -1, -1
    else:
        links[i, 0], links[i, 1] = sa, sa
    return n_cross


@njit(cache=True)
def link_plan(w_task, p_start, p_idx, worker_mb, ps, ps_mb, ring_a, ring_b, ring_mb, servers, gpus, links, cross_ab,
              cross_mb, g_start, g_task, order):
    """The links of a placement (``servers[k]``, ``gpus[k]``: task k's slot, GPU -1 for the PS), written into the
    caller's arrays: ``links`` (rows: one per DAG edge, aligned with ``p_idx``, then one per worker's PS
    push/pull or per all-reduce ring hop), the cross-server pairs and their MB per iteration (``cross_ab``,
    ``cross_mb``: the first n_cross rows), the servers of those pairs in increasing order (the first n_order of
    ``order``) and the GPU groups of the workers sharing one GPU (CSR: ``g_task[g_start[i]:g_start[i + 1]]``,
    the first n_groups groups). Returns (n_cross, n_order, n_groups, MB per iteration through the PS server's
    NIC). (Results go into arrays the caller made: returning arrays from
    a kernel costs more than the kernel.)"""
    n_edges, nw = len(p_idx), len(w_task)
    n_cross = 0
    for i in range(nw):  # tasks are stored layer by layer within a replica: already topological
        k = w_task[i]
        for j in range(p_start[i], p_start[i + 1]):
            n_cross = _link(servers, gpus, p_idx[j], k, worker_mb, links, j, cross_ab, cross_mb, n_cross)
    ps_cross_mb = 0.0
    if ps:  # push gradients, pull parameters; summed worker by worker (the float every transfer adds)
        for i in range(nw):
            k = w_task[i]
            n_cross = _link(servers, gpus, k, 0, ps_mb, links, n_edges + i, cross_ab, cross_mb, n_cross)
            if servers[k] != servers[0]:
                ps_cross_mb += ps_mb
    else:
        for i in range(len(ring_a)):
            n_cross = _link(servers, gpus, ring_a[i], ring_b[i], ring_mb, links, n_edges + i, cross_ab, cross_mb,
                            n_cross)
    return n_cross, _sorted_servers(cross_ab, n_cross, order), _shared_gpu_groups(w_task, gpus, g_start, g_task), \
        ps_cross_mb


@njit(cache=True, inline="always")
def _sorted_servers(cross_ab, n_cross, order):
    """The distinct servers of the first ``n_cross`` pairs into ``order``, increasing (insertion sort: a job's
    cross-server pairs touch a few dozen servers at most); returns how many."""
    n = 0
    for i in range(n_cross):
        for j in range(2):
            s = cross_ab[i, j]
            k = n
            while k > 0 and order[k - 1] > s:
                k -= 1
            if k > 0 and order[k - 1] == s:
                continue
            for m in range(n, k, -1):
                order[m] = order[m - 1]
            order[k] = s
            n += 1
    return n


@njit(cache=True, inline="always")
def _shared_gpu_groups(w_task, gpus, g_start, g_task):
    """The workers of each GPU holding several of them (in worker order) into ``g_start``/``g_task`` (CSR); returns
    the group count. They run one after another (Hare's relaxed synchronisation), so an iteration takes at
    least their summed compute."""
    nw = len(w_task)
    first = np.empty(nw, np.int64)  # per worker: the index of the first worker on its GPU
    counts = np.zeros(nw, np.int64)
    for i in range(nw):
        g = gpus[w_task[i]]
        for j in range(i + 1):
            if gpus[w_task[j]] == g:
                first[i] = j
                counts[j] += 1
                break
    g_start[0] = 0
    n_groups = m = 0
    for j in range(nw):
        if counts[j] > 1:
            for i in range(j, nw):
                if first[i] == j:
                    g_task[m] = w_task[i]
                    m += 1
            n_groups += 1
            g_start[n_groups] = m
    return n_groups


@njit(cache=True)
def retime(links, n_edges, worker_mb, sync_mb, ps_server, ps_cross_mb, intra, nic, share, link_s):
    """Link times into ``link_s`` under NIC shares (``share`` rows (s, n): server s's NIC gives this job
    ``nic[s] / n``, the others their whole NIC); returns the synchronisation time. A DAG edge moves
    ``worker_mb``, a sync link ``sync_mb``; a link between two servers runs at the smaller of their NICs; the
    sync step takes its slowest link, and with a parameter server at least the PS server NIC's time for every
    cross-server push and pull."""
    bw = nic.copy()
    for i in range(len(share)):
        s = share[i, 0]
        bw[s] = nic[s] / share[i, 1]
    sync_s = 0.0
    for i in range(len(links)):
        a, b = links[i, 0], links[i, 1]
        mb = worker_mb if i < n_edges else sync_mb
        if a < 0:
            t = 0.0
        elif a == b:
            t = transfer_s(mb, intra[a])
        else:
            na, nb = bw[a], bw[b]
            t = transfer_s(mb, nb if nb < na else na)  # min(na, nb)
        link_s[i] = t
        if i >= n_edges and (i == n_edges or t > sync_s):
            sync_s = t
    if ps_server >= 0:
        t = transfer_s(ps_cross_mb, bw[ps_server])
        if t > sync_s:
            sync_s = t
    return sync_s


@njit(cache=True)
def critical_time(w_task, w_rep, p_start, p_idx, link_s, n_replicas, g_start, n_groups, g_task, sync_s, unit, slow):
    """Iteration time for per-task compute seconds ``unit[k] * slow[k]``: the slowest replica's critical path
    (node and edge weights: ``link_s[j]`` for DAG edge j), at least the summed compute of the workers on any
    one GPU, plus the sync time."""
    finish = np.zeros(len(unit))
    replica_end = np.zeros(n_replicas)
    for i in range(len(w_task)):
        k = w_task[i]
        start = 0.0
        for j in range(p_start[i], p_start[i + 1]):
            v = finish[p_idx[j]] + link_s[j]
            if v > start:
                start = v
        f = start + unit[k] * slow[k]
        finish[k] = f
        r = w_rep[i]
        if f > replica_end[r]:
            replica_end[r] = f
    end = replica_end[0]
    for r in range(1, n_replicas):
        if replica_end[r] > end:
            end = replica_end[r]
    for gi in range(n_groups):
        busy = 0.0
        for j in range(g_start[gi], g_start[gi + 1]):
            k = g_task[j]
            busy += unit[k] * slow[k]
        if busy > end:
            end = busy
    return end + sync_s
