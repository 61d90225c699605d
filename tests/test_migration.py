"""MLF-H's migration (MLFS §3.3.3) helps where it can and stays quiet where it cannot.

It moves tasks off a server only once the overload has lasted ``overload_persist_s`` (a usage swing clears by
itself) and only if moving its candidates out can end the overload (MLFS: "until the server is not
overloaded"); moves that would leave the server overloaded only pause jobs and leave free GPUs no placement
may use (docs/baselines.md, MLF-H deviations).
"""
from __future__ import annotations

import pytest

from clustergym import baselines
from clustergym.baselines.base import Candidates, run
from clustergym.baselines.mlfs import MLFH, can_relieve
from clustergym.core.commands import execute
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.generator import generate
from clustergym.core.hardware import ClusterSpec, ServerSpec
from clustergym.core.presets import cluster_preset
from clustergym.core.view import ClusterView

import helpers

# two on one GPU: load 1.2 (overloaded above h_r = 0.9); each runs at the pair's interference ratio, 1.5 (the toy
# pair is not in Gavel's table: SJF-BSBF's injected ratio)
HEAVY = helpers.toy_model("heavy", gpu_util=0.6)
MODELS = {"heavy": HEAVY, "toy": helpers.models("toy")}
STILL = dict(usage_change_mean_s=0.0, optstop_error_sigma=0.0)


def shared_gpu_run(policy, nic=10.0):
    """Jobs 0 (urgency 9) and 1 (urgency 1), 2000 iterations of 1 s each, forced onto GPU 0 of server 0 at
    t = 0 (load 1.2: both run at 1.5 s per iteration); server 1 is empty. ``policy`` decides from then on."""
    specs = [helpers.job(0, model="heavy", iters=2000, urgency=9, stop_changeable=False),
             helpers.job(1, model="heavy", iters=2000, urgency=1, stop_changeable=False)]
    cl = ClusterSpec("two", tuple(ServerSpec(f"s{i}", "V100", 4, 32, 244, nic, 100.0) for i in range(2)))
    sim = Simulator(cl, specs, SimConfig(**STILL), seed=0, models=MODELS.__getitem__)
    assert sim.next_decision()
    for j in sim.jobs:
        sim.place(j.tasks[0].tid, 0, gpu=0)
    view, moves = ClusterView(sim), []
    while True:
        while (cmd := policy.decide(view)) is not None:
            policy.observe(view, cmd)
            moves.append((sim.now, cmd))
            execute(sim, cmd)
        if not sim.next_decision():
            break
    return {r["job_id"]: r["jct"] for r in sim.job_records()}, moves


def test_migration_relieves_a_lasting_gpu_overcommitment():
    # the engine offers the overload at t = 60 (too recent to act on) and again overload_recheck_s later, at
    # t = 660: it has lasted overload_persist_s and the tasks are past the cooldown. The lower-priority job
    # (urgency 1) moves to server 1, pausing 5 s + 300 MB / 1250 MB/s. Both have done 660 / 1.5 = 440
    # iterations; job 0 runs the other 1560 alone at 1 s, job 1 after its pause
    jct, moves = shared_gpu_run(MLFH())
    assert [(t, c.kind, c.server) for t, c in moves] == [(660.0, "migrate", 1)]
    assert jct[0] == pytest.approx(660 + 1560)
    assert jct[1] == pytest.approx(660 + 5 + 300 / 1250 + 1560)
    # without migration both run at 1.5 s per iteration to the end: migration cut the mean JCT
    jct_still, moves = shared_gpu_run(MLFH(migrate=False))
    assert moves == [] and jct_still == {0: pytest.approx(3000.0), 1: pytest.approx(3000.0)}
    assert sum(jct.values()) < sum(jct_still.values())


def nic_and_gpu_overloaded_sim():
    """Server 0: GPU 0 shared by two heavy jobs (load 1.2), and a 2-replica all-reduce job crossing its slow NIC
    (0.01 Gbit/s) to server 1: overloaded on GPU and NIC. Server 2 is empty. Past the cooldown and the
    persistence (t = 3600, the overload began at t = 0)."""
    specs = [helpers.job(0, model="heavy", iters=10**6, urgency=9, stop="opt-stop"),
             helpers.job(1, model="heavy", iters=10**6, urgency=1, stop="opt-stop"),
             helpers.job(2, model="toy", R=2, iters=10**6, urgency=9, stop="opt-stop")]
    nics = (0.01, 10.0, 10.0)
    cl = ClusterSpec("nic", tuple(ServerSpec(f"s{i}", "V100", 4, 32, 244, n, 100.0) for i, n in enumerate(nics)))
    sim = Simulator(cl, specs, SimConfig(**STILL), seed=0, models=MODELS.__getitem__)
    assert sim.next_decision()
    a, b, c = sim.jobs
    sim.place(a.tasks[0].tid, 0, gpu=0)
    sim.place(b.tasks[0].tid, 0, gpu=0)
    sim.place(c.tasks[0].tid, 0, gpu=1)
    sim.place(c.tasks[1].tid, 1)
    sim.now = 3600.0
    return sim


def test_no_move_where_moving_the_candidates_cannot_end_the_overload():
    sim = nic_and_gpu_overloaded_sim()
    view = ClusterView(sim)
    assert view.overloaded_resources(0).tolist() == [True, False, False, True]
    # the candidates (the lower-priority job on the shared GPU) would relieve the GPU, not the NIC carrying job 2
    b_task = sim.jobs[1].tasks[0]
    assert not can_relieve(view, 0, [b_task], view.overload_threshold)
    assert MLFH().decide(view, Candidates.full(view)) is None
    # the paper-literal reading moves it anyway, and server 0 stays overloaded
    literal = MLFH(relieve_only=False, overload_persist_s=0.0)
    cmd = literal.decide(view, Candidates.full(view))
    assert cmd is not None and cmd.kind == "migrate" and cmd.tid == b_task.tid
    execute(sim, cmd)
    assert sim.cluster.overloaded[0]


def test_no_move_before_the_overload_has_lasted():
    jct, moves = shared_gpu_run(MLFH(overload_persist_s=1200.0))
    # offered at t = 60, 660 and 1260: at 660 the overload had lasted 660 s, too recent; at 1260 it moves
    assert [t for t, _ in moves] == [1260.0]


@pytest.mark.slow  # three 150-job runs: ~40 s
def test_on_a_contended_window_migration_no_longer_costs_jct():
    # 150 generator jobs at offered load 2 on mlfs-80 (workload 4, simulator seed 4): the paper-literal
    # migration (every overloaded server, at once) makes mean JCT 47 % worse than no migration (24,438 vs
    # 16,600 s, 180 moves); with the persistence and relief rules MLF-H moves 28 times and its mean JCT is
    # 11,123 s. Same numbers natively on AVX-512 and under the AVX2 float settings. Not every window gains:
    # docs/baselines.md lists the two of six where the default loses to no migration.
    cl = cluster_preset("mlfs-80")

    def mean_jct(**params):
        sim = Simulator(cl, generate(150, 4, cl.n_gpus, load=2.0, cluster=cl), SimConfig(), seed=4)
        s = run(sim, baselines.make("mlf-h", **params))
        return s["mean_jct"], s["migrations"]

    ours, still, literal = mean_jct(), mean_jct(migrate=False), mean_jct(relieve_only=False, overload_persist_s=0.0)
    assert literal[0] > 1.2 * still[0]
    assert ours[0] < still[0]
    assert ours[1] < literal[1] / 2
