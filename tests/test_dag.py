"""Iteration time of hand-computed DAG placements (envs/core/dag.py)."""
import math

import numpy as np
import pytest

from clustergym.core.dag import build_tasks, iteration_time, layer_width, reference_iteration_time
from helpers import job, toy_model

CHAIN = toy_model()
LAYER = toy_model("toy-layer", "layer")
INTRA_MBPS = 100 * 125.0  # 100 Gbit/s in MB/s
NIC_MBPS = 10 * 125.0


def time_of(spec, model, servers, gpus, gpu_types=None, slow=None, n_servers=2):
    tasks = build_tasks(spec, model)
    base = [0.0 if g < 0 else model.iter_time((gpu_types or {}).get(g, "V100")) for g in gpus]
    return iteration_time(tasks, spec, servers, gpus, base, slow or [1.0] * len(tasks), [100.0] * n_servers,
                          [10.0] * n_servers)


def test_chain_shares_and_edges():
    tasks = build_tasks(job(P=3), CHAIN)
    assert [t.parents for t in tasks] == [(), (0,), (1,)]
    assert [t.children for t in tasks] == [(1,), (2,), ()]
    assert [t.depth for t in tasks] == [2, 1, 0]
    # parameters grow along the chain (p+1), compute shrinks (P-p)
    assert [round(t.share, 6) for t in tasks] == [round(1 / 6, 6), round(2 / 6, 6), round(3 / 6, 6)]
    assert [round(t.compute_share, 6) for t in tasks] == [0.5, round(1 / 3, 6), round(1 / 6, 6)]


def test_layer_split_structure():
    assert [layer_width(p) for p in (1, 2, 4, 8, 16, 32)] == [1, 1, 2, 2, 4, 4]
    tasks = build_tasks(job(model="toy-layer", P=4), LAYER)
    # two layers of two parts; every part of layer 1 depends on both parts of layer 0
    assert [t.parents for t in tasks] == [(), (), (0, 1), (0, 1)]


def test_two_stage_chain_same_server():
    # compute 2/3 s + 50 MB over 100 Gbit/s + 1/3 s
    T, cross = time_of(job(P=2), CHAIN, [0, 0], [0, 1])
    assert T == pytest.approx(1.0 + 50 / INTRA_MBPS)
    assert cross == {}


def test_two_stage_chain_across_servers_counts_bytes():
    T, cross = time_of(job(P=2), CHAIN, [0, 1], [0, 4])
    assert T == pytest.approx(1.0 + 50 / NIC_MBPS)
    assert cross == {(0, 1): pytest.approx(50.0)}


def test_tasks_of_one_job_sharing_a_gpu_serialise():
    # Hare's relaxed sync: both stages on GPU 0 -> no transfer, busy time = total compute
    T, _ = time_of(job(P=2), CHAIN, [0, 0], [0, 0])
    assert T == pytest.approx(1.0)


def test_replicas_of_one_job_sharing_a_gpu_serialise():
    # Hare's relaxed sync across replicas: 2 replicas (1 s each) on GPU 0 run one after another; the ring
    # hop between them is on one GPU (free): 1 + 1 = 2 s, where separate GPUs take 1 s + the hop
    T, cross = time_of(job(P=1, R=2), CHAIN, [0, 0], [0, 0])
    assert T == pytest.approx(2.0)
    assert cross == {}
    T_apart, _ = time_of(job(P=1, R=2), CHAIN, [0, 0], [0, 1])
    assert T_apart == pytest.approx(1.0 + 50 / INTRA_MBPS)


def test_allreduce_ring_across_servers():
    # 2 replicas, ring volume 2(R-1)/R * 50 MB = 50 MB per hop, both hops cross the NIC
    T, cross = time_of(job(P=1, R=2), CHAIN, [0, 1], [0, 4])
    assert T == pytest.approx(1.0 + 50 / NIC_MBPS)
    assert cross == {(0, 1): pytest.approx(100.0)}


def test_parameter_server_sync():
    # PS on server 0; worker 1 on server 0, worker 2 on server 1: push+pull 2*50 MB
    spec = job(P=1, R=2, sync="ps")
    T, cross = time_of(spec, CHAIN, [0, 0, 1], [-1, 0, 4])
    assert T == pytest.approx(1.0 + 100 / NIC_MBPS)
    assert cross == {(0, 1): pytest.approx(100.0)}


def test_heterogeneous_replicas_wait_for_the_slowest():
    # replica on K80 (4 s/iter for this model) dominates the synchronous iteration
    T, _ = time_of(job(P=1, R=2), CHAIN, [0, 1], [0, 4], gpu_types={0: "V100", 4: "K80"})
    assert T == pytest.approx(4.0 + 50 / NIC_MBPS)


def test_slowdown_scales_compute():
    T, _ = time_of(job(P=1), CHAIN, [0], [0], slow=[1.5])
    assert T == pytest.approx(1.5)


def test_reference_iteration_time_packs_one_server():
    T = reference_iteration_time(CHAIN, 2, 1, "allreduce", "V100", 50.0, 50.0)
    assert T == pytest.approx(1.0 + 50 / INTRA_MBPS)
    assert math.isfinite(reference_iteration_time(CHAIN, 4, 4, "ps", "K80", 50.0, 50.0, gpus_per_server=4))


def test_unpartitionable_model_rejects_partitions():
    with pytest.raises(ValueError, match="cannot be partitioned"):
        build_tasks(job(model="toy-none", P=2), toy_model("toy-none", "none"))


@pytest.mark.parametrize("sync, servers, gpus", [("ps", [0, 0, 1, 1, 2], [-1, 0, 4, 5, 8]),
                                                 ("allreduce", [0, 1, 1, 2], [0, 4, 4, 8])])
def test_retimed_plan_equals_a_fresh_plan_under_the_new_nic_shares(sync, servers, gpus):
    from clustergym.core.dag import critical_time, placement_plan, retime

    spec = job(P=2, R=2, sync=sync)
    tasks = build_tasks(spec, CHAIN)
    intra, whole, shared = [100.0] * 3, [10.0] * 3, [10.0, 2.5, 5.0]  # NICs 1 and 2 shared by 4 and 2 jobs
    fresh = placement_plan(tasks, spec, servers, gpus, intra, shared)
    again = retime(placement_plan(tasks, spec, servers, gpus, intra, whole), np.array(intra), np.array(whole),
                   ((1, 4), (2, 2)))
    assert np.array_equal(again.link_s, fresh.link_s) and again.sync_s == fresh.sync_s
    assert again.cross == fresh.cross and again.sync_s > 0
    unit, slow = [0.5] * len(tasks), [1.0] * len(tasks)
    assert critical_time(again, unit, slow) == critical_time(fresh, unit, slow)
    assert critical_time(again, unit, slow) > critical_time(
        placement_plan(tasks, spec, servers, gpus, intra, whole), unit, slow)


def test_reference_iteration_time_reuses_answers_only_for_the_same_profile_and_arguments(monkeypatch):
    import dataclasses

    from clustergym.core import dag

    monkeypatch.setattr(dag, "_REFERENCE_TIMES", {})
    args = (2, 1, "allreduce", "V100", 50.0, 50.0)
    first = reference_iteration_time(CHAIN, *args)
    assert reference_iteration_time(CHAIN, *args) == first  # the reused answer
    assert first == dag._reference_iteration_time(CHAIN, *args, 8, 10.0, 100.0)  # equals a fresh computation
    slower = dataclasses.replace(CHAIN, iteration_time={g: 2 * t for g, t in CHAIN.iteration_time.items()})
    assert reference_iteration_time(slower, *args) > first  # another profile of the same name: its own answer
    assert reference_iteration_time(CHAIN, 2, 1, "allreduce", "V100", 50.0, 60.0) != first  # other arguments
    monkeypatch.setattr(dag, "_REFERENCE_TIMES_MAX", 2)
    reference_iteration_time(CHAIN, 4, 1, "allreduce", "V100", 50.0, 50.0)
    assert len(dag._REFERENCE_TIMES) <= 2  # bounded: cleared when full
