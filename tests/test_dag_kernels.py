"""The compiled iteration-time kernels (envs/core/dag_kernels.py) against a plain-Python statement of the same
rules (envs/core/dag.py's module docstring), bit for bit, on random DAGs, placements and NIC shares.

The reference keeps the rule's own shape (a dict of links keyed by servers and volume, the cross-server bytes
summed transfer by transfer), so a kernel that reorders a sum or drops a link shows up as a different float.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from clustergym.core.dag import build_tasks, critical_time, job_graph, link_plan, retime
from helpers import job, toy_model

MODELS = {"chain": toy_model("toy-chain", "chain"), "layer": toy_model("toy-layer", "layer"),
          "none": toy_model("toy-none", "none")}


def _t(mb: float, gbps: float) -> float:
    return 0.0 if gbps == math.inf or mb <= 0 else mb / (gbps * 125.0)


def reference(tasks, spec, servers, gpus, intra, nic, unit, slow):
    """(iteration time, {(a, b): MB}) by the rules written out in Python."""
    cross: dict = {}

    def link_time(a: int, b: int, mb: float) -> float:
        sa, sb = servers[a], servers[b]
        if sa != sb:
            key = (min(sa, sb), max(sa, sb))
            if mb > 0:
                cross[key] = cross.get(key, 0.0) + mb
            return _t(mb, min(nic[sa], nic[sb]))
        return 0.0 if gpus[a] == gpus[b] >= 0 else _t(mb, intra[sa])

    workers = [t for t in tasks if t.kind == "worker"]
    worker_mb, ps_mb = spec.comm_worker_mb, 2.0 * spec.comm_ps_mb
    finish: dict = {}
    replica_end = [0.0] * spec.n_replicas
    for t in workers:
        start = 0.0
        for p in t.parents:
            if tasks[p].kind != "ps":
                start = max(start, finish[p] + link_time(p, t.index, worker_mb))
        finish[t.index] = start + unit[t.index] * slow[t.index]
        replica_end[t.replica] = max(replica_end[t.replica], finish[t.index])
    end = max(replica_end)
    by_gpu: dict = {}
    for t in workers:
        by_gpu.setdefault(gpus[t.index], []).append(t.index)
    for ks in by_gpu.values():
        if len(ks) > 1:
            busy = 0.0
            for k in ks:
                busy += unit[k] * slow[k]
            end = max(end, busy)
    sync = 0.0
    if spec.sync == "ps":
        sync = max([link_time(t.index, 0, ps_mb) for t in workers], default=0.0)
        ps_cross = 0.0
        for t in workers:
            if servers[t.index] != servers[0]:
                ps_cross += ps_mb
        sync = max(sync, _t(ps_cross, nic[servers[0]]))
    elif spec.n_replicas > 1:
        ring_mb = 2.0 * (spec.n_replicas - 1) / spec.n_replicas * spec.comm_ps_mb
        parts: dict = {}
        for t in workers:
            parts.setdefault(t.partition, []).append(t.index)
        hops = [(a, ks[(i + 1) % len(ks)]) for ks in parts.values() for i, a in enumerate(ks)]
        sync = max([link_time(a, b, ring_mb) for a, b in hops], default=0.0)
    return end + sync, cross


@st.composite
def placements(draw):
    kind = draw(st.sampled_from(sorted(MODELS)))
    P = 1 if kind == "none" else draw(st.integers(1, 6))
    spec = job(model=f"toy-{kind}", P=P, R=draw(st.integers(1, 4)), sync=draw(st.sampled_from(["ps", "allreduce"])))
    tasks = build_tasks(spec, MODELS[kind])
    n_servers = draw(st.integers(1, 5))
    servers = [draw(st.integers(0, n_servers - 1)) for _ in tasks]
    # GPUs: a few per server, shared at random; the PS holds none
    gpus = [-1 if t.kind == "ps" else servers[i] * 4 + draw(st.integers(0, 3)) for i, t in enumerate(tasks)]
    nic = [draw(st.sampled_from([1.0, 10.0, 25.0, 100.0])) for _ in range(n_servers)]
    sharing = tuple((s, draw(st.integers(2, 5))) for s in range(n_servers) if draw(st.booleans()))
    unit = [draw(st.floats(0.0, 2.0)) if t.kind == "worker" else 0.0 for t in tasks]
    slow = [draw(st.sampled_from([1.0, 1.25, 1.5, 3.0])) for _ in tasks]
    return tasks, spec, servers, gpus, [100.0] * n_servers, nic, sharing, unit, slow


@settings(max_examples=200, deadline=None)
@given(placements())
def test_kernels_equal_the_plain_rules_bit_for_bit(case):
    tasks, spec, servers, gpus, intra, nic, sharing, unit, slow = case
    shared = list(nic)
    for s, n in sharing:
        shared[s] = nic[s] / n
    want_T, want_cross = reference(tasks, spec, servers, gpus, intra, shared, unit, slow)
    plan = retime(link_plan(job_graph(tasks, spec), servers, gpus), np.array(intra), np.array(nic), sharing)
    assert critical_time(plan, unit, slow) == want_T
    assert list(plan.cross.items()) == list(want_cross.items())
    assert plan.cross_servers == {s for pair in want_cross for s in pair}
    assert list(plan.cross_order) == sorted(plan.cross_servers)
