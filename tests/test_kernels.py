"""The compiled kernels (envs/kernels.py) give exactly what the numpy expressions they replace give.

Each reference below is the numpy code the env used before the kernels (kept here as the specification);
comparisons are bit for bit, on random cluster states of every shape the env meets: fewer servers than
destination columns (the dense path) and more (nearest-K destinations), servers of 1 to 16 GPUs, none, some
or all servers overloaded, loads past the clipping points.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from clustergym import kernels
from clustergym.core import placement
from clustergym.core.resources import FIT_EPS, fits

_EPS = FIT_EPS  # the env passes the core's


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2000), st.integers(0, 2**32 - 1), st.booleans())
def test_pairwise_sum_is_numpys_add_reduce(n, seed, signed):
    rng = np.random.default_rng(seed)
    a = rng.random(n) * 10.0 ** rng.uniform(-6, 6, n)
    if signed:
        a *= rng.choice([-1.0, 1.0], n)
    assert kernels.pairwise_sum(a, 0, n) == np.add.reduce(a)
    lo = n // 3
    assert kernels.pairwise_sum(a, lo, n - lo) == np.add.reduce(a[lo:])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=30), st.integers(0, 2**32 - 1))
def test_segment_sum_is_numpys_add_reduceat(sizes, seed):
    a = np.random.default_rng(seed).random(sum(sizes)) * 3.0
    first = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    ref = np.add.reduceat(a, first)
    assert [kernels.segment_sum(a, int(f), n) for f, n in zip(first, sizes)] == ref.tolist()


def _cluster(seed: int, S: int):
    """Random per-server and per-GPU arrays shaped like ``ClusterState``'s."""
    rng = np.random.default_rng(seed)
    n_gpus = rng.integers(1, 17, S).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(n_gpus)[:-1])).astype(np.int64)
    n = int(n_gpus.sum())
    c = dict(
        gpu_load=rng.random(n) * rng.choice([0.5, 1.5, 5.0], n),
        first_gpu=first, n_gpus=n_gpus,
        cpu_cap=rng.choice([32.0, 64.0, 96.0], S), mem_cap=rng.choice([256.0, 512.0], S),
        net_cap_mbps=rng.choice([10.0, 25.0, 100.0], S) * 125.0,
    )
    c["cpu_use"] = c["cpu_cap"] * rng.random(S) * 2.5
    c["mem_use"] = c["mem_cap"] * rng.random(S) * 1.2
    c["net_mbps"] = c["net_cap_mbps"] * rng.random(S) * rng.choice([0.0, 1.0, 3.0], S)
    c["cpu_alloc"] = c["cpu_cap"] * rng.random(S)
    c["mem_alloc"] = c["mem_cap"] * rng.random(S)
    c["max_free_gpu_mem"] = rng.choice([0.0, 4.0, 16.0, 40.0], S)
    share = rng.choice([0.0, 0.3, 1.0])
    c["over"] = rng.random(S) < share
    # ties in the distance ordering (identical servers) exercise the stable sort
    if S > 2:
        for key in ("cpu_use", "mem_use", "net_mbps"):
            c[key][1] = c[key][0]
    return c


def _reference_destinations(c: dict, K: int):
    """The env's numpy code before the kernel (utilisation_matrix, clip, ideal host, distance, nearest K)."""
    S = len(c["n_gpus"])
    U = np.empty((S, 4))
    U[:, 0] = np.add.reduceat(np.minimum(c["gpu_load"], 1.0), c["first_gpu"]) / c["n_gpus"]
    U[:, 1] = c["cpu_use"] / c["cpu_cap"]
    U[:, 2] = c["mem_use"] / c["mem_cap"]
    U[:, 3] = c["net_mbps"] / c["net_cap_mbps"]
    np.minimum(U, 2.0, out=U)
    over = c["over"]
    n_over = int(over.sum())
    ideal = U.T.compress(~over, axis=1).min(axis=1) if 0 < n_over < S else U.min(axis=0)
    D = U - ideal
    D *= D
    dist = np.sqrt(((D[:, 0] + D[:, 1]) + D[:, 2]) + D[:, 3])
    if S <= K:
        dest = np.concatenate((np.arange(S), np.full(K - S, -1))).astype(np.int64)
        d = np.arange(S)
    else:
        d = dest = np.argsort(dist, kind="stable")[:K]
    free = np.stack((c["max_free_gpu_mem"][d], c["cpu_cap"][d] - c["cpu_alloc"][d],
                     c["mem_cap"][d] - c["mem_alloc"][d]))
    ocd = float(np.add.reduce(np.sqrt(np.add.reduce(U * U, axis=1) / 4)) / S)
    return U, dist, dest, free, ocd


def _run_destinations(c: dict, K: int):
    S = len(c["n_gpus"])
    U, dist, dest, free = np.empty((S, 4)), np.empty(S), np.empty(K, np.int64), np.full((3, K), np.nan)
    k, ocd = kernels.destinations(c["gpu_load"], c["first_gpu"], c["n_gpus"], c["cpu_use"], c["cpu_cap"],
                                  c["mem_use"], c["mem_cap"], c["net_mbps"], c["net_cap_mbps"], c["over"],
                                  int(c["over"].sum()), c["max_free_gpu_mem"], c["cpu_alloc"], c["mem_alloc"],
                                  np.empty(len(c["gpu_load"])), U, dist, dest, free)
    return k, U, dist, dest, free, ocd


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 40))
def test_destinations_match_numpy(seed, S, K):
    c = _cluster(seed, S)
    k, U, dist, dest, free, ocd = _run_destinations(c, K)
    rU, rdist, rdest, rfree, rocd = _reference_destinations(c, K)
    assert k == min(S, K)
    np.testing.assert_array_equal(U, rU)
    np.testing.assert_array_equal(dist, rdist)
    np.testing.assert_array_equal(dest, rdest)
    np.testing.assert_array_equal(free[:, :k], rfree)
    assert ocd == rocd


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 40))
def test_destinations_use_the_core_ideal_host_rule(seed, S, K):
    """The kernel's distances are MLFS's ideal-host distances (clustergym.core.placement) of the clipped
    utilisation, the ideal taken over the servers that are not overloaded (all when none or all are)."""
    c = _cluster(seed, S)
    k, U, dist, dest, _, _ = _run_destinations(c, K)
    over = c["over"]
    cand = np.flatnonzero(~over) if 0 < over.sum() < S else np.arange(S)
    ideal = placement.ideal_host(U, cand)
    np.testing.assert_array_equal(dist, np.sqrt(placement.host_distances(U, ideal)))
    if S > K:  # the nearest K, ties by index: the rule's order over all servers from that ideal
        assert dest.tolist() == np.lexsort((np.arange(S), dist))[:K].tolist()


def _reference_fit(tids, demand, free, k, n_mig, n_over, own, over, dest, W, K):
    """The env's numpy mask code before the kernel (fit by nominal demand, migration rules)."""
    m2 = np.zeros((W, K + 1), bool)
    f = free[:, :k] + _EPS
    ok = np.logical_and.reduce(f[None, :, :] >= demand.take(tids, axis=0)[:, :, None], axis=1)
    d = dest[:k]
    ok[:n_mig] &= ~over[d]
    for i in range(n_mig):
        ok[i, d == own[i]] = False
    m2[:n_mig, :k] = ok[:n_mig]
    m2[:n_mig, K] = True
    m2[n_over:n_mig, :k] = False
    return ok, m2


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 12), st.integers(0, 40))
def test_fit_mask_matches_numpy(seed, S, K, n_rows):
    rng = np.random.default_rng(seed)
    c = _cluster(seed, S)
    k, _, _, dest, free, _ = _run_destinations(c, K)
    W = max(1, n_rows) + 2
    n_tasks = 50
    demand = np.stack((rng.choice([0.0, 4.0, 16.0, 48.0], n_tasks), rng.choice([1.0, 8.0, 40.0], n_tasks),
                       rng.choice([8.0, 100.0, 400.0], n_tasks)), axis=1)
    demand[rng.random(n_tasks) < 0.2, 0] = -np.inf  # parameter servers take no GPU
    # free exactly equal to a demand must fit (the eps), so copy some free values into demands
    demand[:3, 1] = free[1, 0]
    tids = rng.integers(0, n_tasks, n_rows).astype(np.int64)
    n_mig = int(rng.integers(0, min(n_rows, W) + 1))
    n_over = int(rng.integers(0, n_mig + 1))
    # the running rows' tasks run somewhere (the waiting rows' tasks' entries are never read)
    task_server = rng.integers(-1, S, n_tasks).astype(np.int64)
    task_server[tids[:n_mig]] = rng.integers(0, S, n_mig)
    own = task_server[tids[:n_mig]]
    mask = np.zeros(W * (K + 1) + 1, bool)
    m2 = mask[:-1].reshape(W, K + 1)
    ok = np.empty((max(1, n_rows), K + 1), bool)
    n_fit = kernels.fit_mask(tids, demand, free, k, _EPS, n_mig, n_over, task_server, c["over"], dest, m2, ok)
    rok, rm2 = _reference_fit(tids, demand, free, k, n_mig, n_over, own, c["over"], dest, W, K)
    np.testing.assert_array_equal(ok[:n_rows, :k], rok)
    np.testing.assert_array_equal(ok[:n_rows, k], rok.any(axis=1))
    np.testing.assert_array_equal(m2, rm2)
    assert not mask[-1]  # the caller's cell: untouched
    assert n_fit == int(rok[n_mig:].any(axis=1).sum())


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 60), st.integers(1, 12), st.integers(1, 40))
def test_fit_mask_is_the_core_fit_rule(seed, S, K, n_rows):
    """A waiting row fits a destination exactly when the core's fit rule says so for GPU memory (none for a
    PS), CPU cores and memory."""
    rng = np.random.default_rng(seed)
    c = _cluster(seed, S)
    k, _, _, dest, free, _ = _run_destinations(c, K)
    demand = np.stack((rng.choice([0.0, 4.0, 16.0, 48.0], n_rows), rng.choice([1.0, 8.0, 40.0], n_rows),
                       rng.choice([8.0, 100.0, 400.0], n_rows)), axis=1)
    demand[rng.random(n_rows) < 0.2, 0] = -np.inf
    demand[: n_rows // 2, 1] = free[1, 0] + rng.choice([-1e-10, 0.0, 1e-10, 1e-8])  # at the eps boundary
    tids = np.arange(n_rows, dtype=np.int64)
    m2 = np.zeros((n_rows, K + 1), bool)
    ok = np.empty((n_rows, K + 1), bool)
    kernels.fit_mask(tids, demand, free, k, FIT_EPS, 0, 0, np.full(n_rows, -1, np.int64), c["over"], dest, m2, ok)
    for r in range(n_rows):
        g, cpu, mem = demand[r]
        for col in range(k):
            gpu_ok = True if g == -np.inf else fits(free[0, col], g)
            assert ok[r, col] == (gpu_ok and fits(free[1, col], cpu) and fits(free[2, col], mem)), (r, col)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 80), st.integers(1, 12), st.integers(1, 4))
def test_first_rows_per_job_is_the_window_cap(seed, n, n_jobs, cap):
    """The kept rows are, in row order, the fitting rows whose job has fewer than ``cap`` rows kept so far
    (the Python rule it replaces); the scratch counts come back zeroed."""
    rng = np.random.default_rng(seed)
    fits = rng.random(n) < 0.7
    job_of_task = rng.integers(0, n_jobs, 100).astype(np.int64)  # 100 tasks' jobs
    offset = int(rng.integers(0, 5))  # the window's running rows come first in `tids`
    tids = rng.integers(0, 100, n + offset).astype(np.int64)
    job_of_row = job_of_task[tids[offset:]]
    counts = np.zeros(n_jobs + 3, np.int64)
    keep = kernels.first_rows_per_job(fits, tids, offset, job_of_task, cap, counts)
    per_job: dict[int, int] = {}
    ref = []
    for r in range(n):
        if fits[r] and per_job.get(int(job_of_row[r]), 0) < cap:
            per_job[int(job_of_row[r])] = per_job.get(int(job_of_row[r]), 0) + 1
            ref.append(r)
    assert keep.tolist() == ref
    assert not counts.any()
    # a strided column of a wider array (what the window passes) gives the same rows
    wide = np.zeros((n, 3), bool)
    wide[:, 1] = fits
    assert kernels.first_rows_per_job(wide[:, 1], tids, offset, job_of_task, cap, counts).tolist() == ref


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 40), st.integers(1, 10))
def test_stop_mask_reads_the_rule_table(seed, n_rows, n_jobs):
    """Row r allows option o exactly when bit o of its job's table entry (for the job's current option) is
    set and the job's rule did not change in this round; unknown entries (-1) are reported, not written."""
    rng = np.random.default_rng(seed)
    job_of_task = rng.integers(0, n_jobs, 60).astype(np.int64)
    row_tids = rng.integers(0, 60, n_rows).astype(np.int64)
    cur = rng.integers(0, 3, n_jobs).astype(np.int64)
    table = rng.integers(-1, 8, (n_jobs, 3)).astype(np.int64)
    changed = rng.integers(3, 6, n_jobs).astype(np.int64)
    rnd = 5
    wide = np.full((max(1, n_rows), 7), True)  # a strided view, as the window's mask columns are
    mask = wide[:n_rows, 4:]
    missing = np.empty(max(1, n_rows), np.int64)
    m = kernels.stop_mask(row_tids, job_of_task, cur, table, changed, rnd, mask, missing)
    want_missing = []
    for r in range(n_rows):
        j = job_of_task[row_tids[r]]
        code = table[j, cur[j]]
        if code < 0:
            want_missing.append(j)
            assert mask[r].all()  # left alone
            continue
        for o in range(3):
            assert mask[r, o] == (bool(code >> o & 1) and changed[j] != rnd), (r, o)
    assert missing[:m].tolist() == want_missing
    assert wide[:n_rows, :4].all()  # the other columns untouched


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 120), st.integers(1, 40))
def test_server_features_match_numpy(seed, S, K):
    c = _cluster(seed, S)
    k, U, dist, dest, free, _ = _run_destinations(c, K)
    rng = np.random.default_rng(seed + 1)
    G = int(c["n_gpus"].max())
    idle = np.array([rng.integers(0, n + 1) for n in c["n_gpus"]], np.int64)
    n_gpus_f = (c["n_gpus"] / G).astype(np.float32)
    nic_f = np.minimum(c["net_cap_mbps"] / 125.0 / 100.0, 2.0).astype(np.float32)
    onehot = np.zeros((S, 7), np.float32)
    onehot[np.arange(S), rng.integers(0, 7, S)] = 1.0
    gmax = np.array([80.0, 96.0, 512.0])
    Sv = np.zeros((K, 20), np.float32)
    Gm = np.full((K, G), -1.0, np.float32)
    kernels.server_features(dest, k, U, free, gmax, idle, c["over"], dist, n_gpus_f, nic_f, onehot, c["gpu_load"],
                            c["first_gpu"], c["n_gpus"], Sv, Gm)
    # the numpy code of the general (nearest-K) path before the kernel
    d = dest[:k]
    rS = np.zeros((K, 20), np.float32)
    rG = np.full((K, G), -1.0, np.float32)
    slot = np.arange(G)
    valid = slot[None, :] < c["n_gpus"][:, None]
    idx = np.where(valid, c["first_gpu"][:, None] + slot[None, :], 0)
    rS[:k, 0] = 1.0
    rS[:k, 1:5] = U[d]
    rS[:k, 5:8] = (free[:, :k] / gmax[:, None]).T
    rS[:k, 8] = n_gpus_f[d]
    rS[:k, 9] = idle[d] / G
    rS[:k, 10] = c["over"][d]
    rS[:k, 11] = nic_f[d]
    rS[:k, 12] = np.minimum(dist[d] * 0.5, 2.0)
    rS[:k, 13:] = onehot[d]
    rG[:k] = np.where(valid[d], np.minimum(c["gpu_load"][idx[d]], 4.0), -1.0)
    np.testing.assert_array_equal(Sv, rS)
    np.testing.assert_array_equal(Gm, rG)


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 24), st.integers(1, 6), st.integers(1, 30), st.integers(1, 12))
def test_task_window_matches_numpy(seed, W, n_dyn, S, K):
    rng = np.random.default_rng(seed)
    n_tasks, n_jobs, F = 40, 7, 30
    o_job = n_dyn + 5
    static = rng.random((n_tasks, F)).astype(np.float32)
    static[:, :n_dyn] = 0.0
    static[:, o_job:o_job + 4] = 0.0
    job_rows = rng.random((n_jobs, 4)).astype(np.float32)
    rows = sorted(rng.choice(W, int(rng.integers(0, W + 1)), replace=False).tolist())
    tids = rng.integers(0, n_tasks, len(rows)).tolist()
    jobs = rng.integers(0, n_jobs, len(rows)).tolist()
    dyn = rng.random((len(rows), n_dyn)) * 3.0  # float64: rounded once on the way in
    vals = [v for r, t, j, d in zip(rows, tids, jobs, dyn) for v in (r, t, j, *d)]
    # a random DAG neighbourhood (up to 6 neighbours, repeats allowed so sums of shares on one server occur)
    nbrs = [rng.integers(0, n_tasks, int(rng.integers(0, 7))).tolist() for _ in range(n_tasks)]
    ptr = np.array([0] + np.cumsum([len(x) for x in nbrs]).tolist(), np.int64)
    flat = np.array([t for x in nbrs for t in x], np.int64)
    task_server = np.where(rng.random(n_tasks) < 0.6, rng.integers(0, S, n_tasks), -1).astype(np.int64)
    k = min(S, K)
    dest = np.full(K, -1, np.int64)
    dest[:k] = rng.permutation(S)[:k] if S > K else np.arange(S)
    T, A = kernels.task_window(static, job_rows, np.array(vals, dtype=np.float64), W, n_dyn, o_job, ptr, flat,
                               task_server, dest, k, S)
    # the numpy code before the kernel: gather static rows, assign the dynamic blocks; affinity as the
    # scatter-add of each row's running neighbours' shares onto their destination columns (float64)
    ref = np.zeros((W, F), np.float32)
    if rows:
        ref[rows] = static[tids]
        ref[rows, :n_dyn] = dyn
        ref[rows, o_job:o_job + 4] = job_rows[jobs]
    col_of = {int(s): c for c, s in enumerate(dest[:k])}
    flat_ix, wts = [], []
    for r, t in zip(rows, tids):
        for q in nbrs[t]:
            if task_server[q] >= 0 and int(task_server[q]) in col_of:
                flat_ix.append(r * K + col_of[int(task_server[q])])
                wts.append(1.0 / len(nbrs[t]))
    refA = np.bincount(flat_ix, wts, minlength=W * K).astype(np.float32).reshape(W, K)
    assert T.dtype == np.float32 and A.dtype == np.float32
    np.testing.assert_array_equal(T, ref)
    np.testing.assert_array_equal(A, refA)


def _interp_py(x, xs, ys):
    import bisect
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1]
    k = bisect.bisect_right(xs, x)
    return ys[k - 1] + (ys[k] - ys[k - 1]) * (x - xs[k - 1]) / (xs[k] - xs[k - 1])


def _job_dynamic_py(now, ts, submit, deadline, maxit, iters, rate, last_update, paused_until, target, n_placed,
                    n_tasks, waiting_time, running_time, mean_it, stop_idx, xs, ls, accs, H):
    """The pure-Python job columns the kernel replaced (observation._jdyn before the kernel)."""
    import math

    def sq(x):
        return x / (1.0 + x) if x > 0 else 0.0

    it = iters
    placed = n_placed == n_tasks
    if rate > 0:
        start = max(last_update, paused_until)
        if now > start:
            it = min(target, it + rate * (now - start))
    i = math.floor(it)
    red = [0.0] * H
    if i >= 1:
        lv = [_interp_py(max(0, i - j) / maxit, xs, ls) for j in range(H + 1)]
        total = ls[0] - lv[0]
        if total > 0:
            for j in range(min(H, i)):
                red[j] = min(1.0, max(0.0, (lv[j + 1] - lv[j]) / total))
    waiting = waiting_time + max(0.0, now - last_update) * (0.0 if placed else 1.0)
    x = (deadline - now) / ts
    return np.array((sq((now - submit) / ts), x / (1.0 + abs(x)), min(1.0, it / maxit),
                     min(1.0, math.log1p(it) / math.log1p(1e7)), min(1.0, target / maxit), n_placed / n_tasks,
                     _interp_py(it / maxit, xs, accs), sq(waiting / ts), sq(running_time / ts),
                     sq(max(0.0, target - it) * mean_it / ts), *(float(o == stop_idx) for o in range(3)), *red),
                    np.float32)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 6), st.booleans(), st.booleans())
def test_job_dynamic_matches_python(seed, H, running, placed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    xs = np.concatenate(([0.0], np.sort(rng.random(n - 1)) * rng.choice([1.0, 1.5]) + 1e-6))
    xs = np.unique(xs)
    ls = rng.random(len(xs)) * 5.0
    if rng.random() < 0.5:  # measured losses are non-increasing; noisy ones exercise the clipping to [0, 1]
        ls = np.sort(ls)[::-1].copy()
    accs = np.sort(rng.random(len(xs)))
    maxit = float(rng.choice([1.0, 50.0, 1e3, 1e6]))
    iters = float(rng.choice([0.0, 0.4, 1.0, rng.random() * maxit * 1.2, maxit]))
    target = float(rng.choice([maxit, maxit * rng.random(), iters]))
    now = float(rng.random() * 1e5)
    last_update = now - float(rng.choice([0.0, rng.random() * 1e4]))
    paused_until = float(rng.choice([0.0, last_update, now, now + 10.0, last_update + rng.random() * 100]))
    n_tasks = int(rng.integers(1, 9))
    n_placed = n_tasks if placed else int(rng.integers(0, n_tasks))
    rate = float(rng.choice([rng.random() * 10, np.inf])) if running and placed else 0.0
    args = (now, 3600.0, now - rng.random() * 1e5, now + rng.normal() * 1e4, maxit, iters, rate, last_update,
            paused_until, target, n_placed, n_tasks, rng.random() * 1e4, rng.random() * 1e4, rng.random() * 10,
            int(rng.integers(0, 3)))
    rows = np.full((3, 13 + H), np.nan, np.float32)
    kernels.job_dynamic(rows, 1, *args, xs, ls, accs, H)
    ref = _job_dynamic_py(*args, xs.tolist(), ls.tolist(), accs.tolist(), H)
    np.testing.assert_array_equal(rows[1], ref)
    assert np.isnan(rows[0]).all() and np.isnan(rows[2]).all()
