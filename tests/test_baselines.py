"""Unit tests of the heuristic baselines: decision rules on small hand-built states, and the papers'
worked examples (Hare's toy examples, MLFS Eqs. 2-6 on a hand-computed DAG)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.base import Candidates, Command, execute, ideal_host_order, job_fits, run, server_mask
from clustergym.baselines.gavel import solve_max_min
from clustergym.baselines.hlas import HLAS, eft_split, single_gpu_toy
from clustergym.baselines.mlfs import MLFC, MLFH, loss_ratio
from clustergym.baselines.tiresias import Tiresias, queue_index
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.hardware import ClusterSpec, ServerSpec
from clustergym.core.job import TaskState
from clustergym.core.view import ClusterView as V

import helpers

CFG = dict(usage_change_mean_s=0.0)  # constant usage: hand-computable states


def make_sim(specs, cluster=None, **cfg):
    return Simulator(cluster or helpers.cluster(), specs, SimConfig(**{**CFG, **cfg}), 0, models=helpers.models)


def first_decision(sim):
    assert sim.next_decision()
    return sim


# ------------------------------------------------------------------------------------------- registry

def test_registry_names_and_defaults():
    assert baselines.available() == ["mlf-h", "mlfs-h+c", "mlfs-h+c-act", "mlf-h-req", "hlas", "hlas-p",
                                     "hlas-p-standin", "hlas-l", "gavel", "tiresias", "gandiva", "graphene", "slaq", "hypersched",
                                     "fair", "fifo", "sjf", "edf", "random", "unisched", "sjf-bsbf", "sjf-ffs", "sjf-gpu"]
    p = baselines.make("mlf-h")
    assert (p.alpha, p.gamma, p.gamma_d, p.gamma_r, p.gamma_w, p.h_r, p.p_s) == (0.3, 0.8, 0.3, 0.3, 0.35, None, 0.10)
    assert p.use_urgency and p.use_deadline and p.migrate
    assert baselines.make("mlf-h", alpha=0.5, migrate=False).params()["alpha"] == 0.5
    for name in baselines.available():
        pol = baselines.make(name)
        assert pol.name == name and pol.source
    with pytest.raises(KeyError, match="available"):
        baselines.make("nope")


# ---------------------------------------------------------------------------------- MLFS Eqs. 2-6

def test_loss_ratio_first_iteration_and_linear_curve():
    sim = make_sim([helpers.job(0, iters=100)])
    job = sim.jobs[0]
    assert loss_ratio(job, 0.0) == (1, 1.0)  # I = 1: 0/0, documented as 1
    # linear loss: every iteration reduces loss by 1/100, so the ratio is 1/(I-1)
    assert loss_ratio(job, 4.0) == (5, pytest.approx(0.25))
    assert loss_ratio(job, 4.7)[0] == 5


def test_mlfh_priority_hand_computed_chain_dag():
    """Chain model, 3 partitions (shares 1/6, 2/6, 3/6; task 0 -> 1 -> 2), urgency 5, 4 iterations done,
    deadline 10 h ahead, never waited. Hand computation with alpha=0.3, gamma=0.8, gamma_d=0.3,
    gamma_r=0.3, gamma_w=0.35, times in hours."""
    spec = helpers.job(0, P=3, iters=100, deadline=36000.0, urgency=5)
    sim = make_sim([spec])
    first_decision(sim)  # t = 0, every task waiting (waited 0)
    job = sim.jobs[0]
    job.iters = 4.0
    pol = MLFH()
    # Eq. 2: L * 1/I * ratio * S_k = 5 * 1/5 * 1/4 * S_k = 0.25 S_k
    p_ml2 = 0.25 * 3 / 6
    p_ml1 = 0.25 * 2 / 6 + 0.8 * p_ml2
    p_ml0 = 0.25 * 1 / 6 + 0.8 * p_ml1
    # Eq. 4: reference iteration time = 1 s (V100 toy); r = 96 remaining iterations = 96 s = 96/3600 h
    r_h = 96 / 3600
    T_h = 1 / 3600
    d2 = 10.0 - 0 / 3 * T_h  # sink: depth 0
    d1 = 10.0 - 1 / 3 * T_h
    d0 = 10.0 - 2 / 3 * T_h
    pc2 = 0.3 / d2 + 0.3 / r_h
    pc1 = 0.3 / d1 + 0.3 / r_h + 0.8 * pc2
    pc0 = 0.3 / d0 + 0.3 / r_h + 0.8 * pc1
    expect = [0.3 * p_ml0 + 0.7 * pc0, 0.3 * p_ml1 + 0.7 * pc1, 0.3 * p_ml2 + 0.7 * pc2]
    assert pol.job_priorities(V(sim), job) == pytest.approx(expect, rel=1e-9)
    # ablations: no urgency divides the ML part by 5, no deadline removes the gamma_d terms
    no_urg = MLFH(use_urgency=False).job_priorities(V(sim), job)
    assert no_urg[2] == pytest.approx(0.3 * p_ml2 / 5 + 0.7 * pc2)
    no_dl = MLFH(use_deadline=False).job_priorities(V(sim), job)
    assert no_dl[2] == pytest.approx(0.3 * p_ml2 + 0.7 * (0.3 / r_h))


def test_mlfh_ps_task_first_and_waiting_term():
    sim = make_sim([helpers.job(0, R=2, sync="ps")])
    first_decision(sim)
    pr = MLFH().job_priorities(V(sim), sim.jobs[0])
    assert math.isinf(pr[0]) and all(math.isfinite(p) for p in pr[1:])
    cmd = MLFH().decide(V(sim))  # first the job goes on OptStop (MLFS §4), then its PS is placed
    assert cmd == Command("stop-option", jid=0, option="opt-stop")
    cmd = helpers.decide_past_stop_options(MLFH(), sim)
    assert cmd.kind == "place" and cmd.tid == sim.jobs[0].tasks[0].tid


def test_mlfh_waiting_time_raises_priority():
    sim = make_sim([helpers.job(0), helpers.job(1, submit=0.0)])
    first_decision(sim)
    a, b = sim.jobs
    base = MLFH().job_priorities(V(sim), b)[0]
    b.tasks[0].waited = 3600.0  # one hour in the queue: + (1 - alpha) * gamma_w * 1
    assert MLFH().job_priorities(V(sim), b)[0] == pytest.approx(base + 0.7 * 0.35)


def test_ideal_host_prefers_least_utilised_and_neighbours():
    sim = make_sim([helpers.job(0), helpers.job(1, R=2, comm_ps_mb=80.0)], cluster=helpers.cluster(3))
    first_decision(sim)
    sim.place(sim.jobs[0].tasks[0].tid, 0)  # server 0 busier
    t0, t1 = sim.jobs[1].tasks
    mask = server_mask(V(sim), t0, "headroom")
    order = ideal_host_order(V(sim), t0, mask)
    assert order[0] == 1 and order[-1] == 0  # least utilised first (ties by index)
    sim.place(t0.tid, 2)
    # t1's ring neighbour sits on server 2: the bandwidth term pulls it there
    assert ideal_host_order(V(sim), t1, server_mask(V(sim), t1, "headroom"))[0] == 2
    assert helpers.decide_past_stop_options(MLFH(), sim) == Command("place", t1.tid, 2)


def test_mlfh_does_not_overload_a_gpu():
    # gpu_util 0.5: two tasks on one GPU = load 1.0 > h_r: MLF-H needs an idle or light GPU
    sim = make_sim([helpers.job(0), helpers.job(1)], cluster=helpers.cluster(1, gpus=1))
    first_decision(sim)
    cmd = helpers.decide_past_stop_options(MLFH(), sim)
    execute(sim, cmd)
    assert helpers.decide_past_stop_options(MLFH(), sim) is None  # the other task would overload the only GPU
    assert baselines.make("gandiva").decide(V(sim)) is not None  # Gandiva packs up to load 1.0


def overloaded_sim():
    """Server 0 GPU 0 shared by jobs 0 and 1 (load 1.0 > 0.9); server 1 empty."""
    # (the users chose OptStop: MLF-H has no stopping option to change first)
    sim = make_sim([helpers.job(0, urgency=9, stop="opt-stop"), helpers.job(1, urgency=1, stop="opt-stop")])
    first_decision(sim)
    sim.place(sim.jobs[0].tasks[0].tid, 0, gpu=0)
    sim.place(sim.jobs[1].tasks[0].tid, 0, gpu=0)
    assert sim.cluster.overloaded[0]
    sim.now = 3600.0  # past the anti-thrash cooldown
    return sim


def test_mlfh_migrates_lowest_priority_task_to_ideal_host():
    sim = overloaded_sim()
    cmd = MLFH().decide(V(sim), Candidates.full(V(sim)))
    # p_s = 10% of 2 tasks -> 1 candidate: the lower-priority one (job 1, urgency 1), to server 1
    assert cmd == Command("migrate", sim.jobs[1].tasks[0].tid, 1)
    assert MLFH(migrate=False).decide(V(sim), Candidates.full(V(sim))) is None


def test_mlfh_requeues_when_no_destination():
    sim = overloaded_sim()
    cands = Candidates.full(V(sim))
    cands.servers = np.array([0])  # no other destination in the window
    assert MLFH().decide(V(sim), cands) == Command("requeue", sim.jobs[1].tasks[0].tid)


def nic_sim(nics, servers_of_tasks):
    """A 4-partition chain job (t0-t1-t2-t3, 50 MB per edge and iteration) placed as given on 4-GPU
    servers with the given NICs (Gbit/s); past the migration cooldown."""
    cl = ClusterSpec("nic", tuple(ServerSpec(f"s{i}", "V100", 4, 32, 244, nic, 100.0) for i, nic in enumerate(nics)))
    sim = make_sim([helpers.job(0, P=len(servers_of_tasks), stop="opt-stop")], cluster=cl)
    first_decision(sim)
    for t, s in zip(sim.jobs[0].tasks, servers_of_tasks):
        sim.place(t.tid, s)
    sim.now = 3600.0
    return sim


def test_mlfh_nic_overload_migrates_only_towards_the_tasks_neighbours():
    # t1 and t3 on the 10 Mbit/s server 1, t0 and t2 on server 0: server 1's NIC is overloaded by the
    # job's own traffic. Moving t1 next to t0 and t2 removes two cross-server edges: allowed.
    sim = nic_sim((100.0, 0.01, 100.0), (0, 1, 0, 1))
    assert [V(sim).overloaded_resources(s).tolist() for s in range(3)] == [[False] * 4, [False, False, False, True], [False] * 4]
    assert MLFH().decide(V(sim), Candidates.full(V(sim))) == Command("migrate", sim.jobs[0].tasks[1].tid, 0)
    # 3-partition chain, t0 on server 0, t1 and t2 on server 1, all NICs 10 Mbit/s: servers 0 and 1 are
    # NIC-overloaded. Any move of t1 or t2 keeps or adds cross-server edges (to the empty server 2 it
    # would spread the job over three servers, which the ideal host order alone picks): no migration,
    # and no requeue (a NIC overload is not cured by stopping one task).
    sim = nic_sim((0.01, 0.01, 0.01), (0, 1, 1))
    assert V(sim).overloaded_resources(1).tolist() == [False, False, False, True]
    t1 = sim.jobs[0].tasks[1]
    pol = MLFH()
    pol.begin(V(sim))
    assert pol._host_order(V(sim), t1, Candidates.full(V(sim)), None, moving=True) == [2]
    assert MLFH().decide(V(sim), Candidates.full(V(sim))) is None


def test_gandiva_moves_lowest_utilisation_job_to_lowest_load_gpu():
    sim = make_sim([helpers.job(0, model="toy"), helpers.job(1, model="toy")])
    first_decision(sim)
    sim.jobs[1].usage_factor = 0.9  # job 1 uses 0.45 of a GPU, job 0 0.5: load 0.95
    sim.place(sim.jobs[0].tasks[0].tid, 0, gpu=0)
    sim.place(sim.jobs[1].tasks[0].tid, 0, gpu=0)
    assert sim.cluster.overloaded[0]
    assert baselines.make("gandiva").decide(V(sim), Candidates.full(V(sim))) == Command("migrate", sim.jobs[1].tasks[0].tid, 1)


# ------------------------------------------------------------------------------------------- MLF-C

def test_mlfc_switches_under_overload_and_restores():
    specs = [helpers.job(0, iters=100, acc_req=0.5, stop="run-all"),
             helpers.job(1, iters=100, acc_req=0.5, stop="run-all", stop_changeable=False),
             helpers.job(2, iters=100, acc_req=0.5)]
    sim = make_sim(specs, cluster=helpers.cluster(1, gpus=1))
    ctl = MLFC()
    sim.controllers.append(ctl)
    first_decision(sim)
    assert sim.next_decision()  # the round ended with three tasks queued on one GPU: overloaded
    j0, j1, _ = sim.jobs
    assert j0.stop_option == "requirement" and j0.target_iters == 50
    assert j1.stop_option == "run-all"  # user did not allow a change
    assert ctl.switched >= 1
    sim.queue.clear()  # overload gone (no queue; utilisation low)
    ctl.on_tick(sim)
    assert j0.stop_option == "run-all" and j0.target_iters == 100 and ctl.restored >= 1


def test_mlfsh_c_attaches_controller_once():
    sim = make_sim([helpers.job(0)])
    pol = baselines.make("mlfs-h+c")
    pol.attach(sim); pol.attach(sim)
    assert sum(isinstance(c, MLFC) for c in sim.controllers) == 1


# ------------------------------------------------------------------------------------- Hare examples

def test_hare_fig10_eft_task_gpu_times():
    a_times, b_times = (3, 3, 1.8, 1.8), (1, 2, 2.5, 1)
    assert eft_split(4, a_times[:2]) == ([2, 2], 12.0)
    assert eft_split(6, b_times[:2]) == ([4, 2], 8.0)
    assert eft_split(4, a_times[2:])[1] == pytest.approx(7.2)
    assert eft_split(6, b_times[2:]) == ([2, 4], 9.0)


def test_hare_fig12_average_jct():
    sizes = [2, 3, 4]
    assert np.mean(single_gpu_toy(sizes, "las")) == pytest.approx(20 / 3)  # HLAS 6.67
    assert np.mean(single_gpu_toy(sizes, "srtf")) == pytest.approx(16 / 3)  # SRTF 5.33
    assert np.mean(single_gpu_toy(sizes, "hlas-p", predicted=[0, 0, 3])) == pytest.approx(17 / 3)  # 5.67


def hetero_cluster():
    return ClusterSpec("het", (ServerSpec("k80", "K80", 4, 32, 244), ServerSpec("v100", "V100", 4, 32, 244)))


def test_hlas_takes_fastest_gpu_type_tiresias_ignores_it():
    sim = make_sim([helpers.job(0)], cluster=hetero_cluster())
    first_decision(sim)
    t = sim.jobs[0].tasks[0]
    assert HLAS().decide(V(sim)) == Command("place", t.tid, 1)  # V100 (1 s) before K80 (4 s)
    assert Tiresias().decide(V(sim)) == Command("place", t.tid, 0)  # type-blind: lowest index


def test_hlas_least_attained_service_first():
    sim = make_sim([helpers.job(0, iters=10_000), helpers.job(1, submit=0.0, iters=10_000)])
    first_decision(sim)
    a, b = sim.jobs
    a.iters = 5000  # 5000 s of average-GPU service: queue 2 of (600, 3600, 21600)
    cmd = HLAS().decide(V(sim))
    assert sim.tasks[cmd.tid].job is b


def test_tiresias_queues_and_preemption():
    assert [queue_index(s, (3600.0,)) for s in (0, 3599, 3600, 1e9)] == [0, 0, 1, 1]
    sim = make_sim([helpers.job(0, iters=100_000), helpers.job(1, submit=100.0)], cluster=helpers.cluster(1, gpus=1))
    first_decision(sim)
    run_cmd = Tiresias().decide(V(sim))
    execute(sim, run_cmd)
    sim.jobs[0].running_time = 7200.0  # 2 GPU-hours: queue 1
    while sim.next_decision():
        if sim.jobs[1].state == sim.jobs[1].state.ACTIVE:
            break
    pol = Tiresias()
    cmd = pol.decide(V(sim), Candidates.full(V(sim), can_preempt=True))
    assert cmd == Command("preempt", jid=0)
    assert Tiresias().decide(V(sim), Candidates.full(V(sim), can_preempt=False)) is None  # env: non-preemptive


def test_tiresias_clear_at_once_frees_the_head_before_backfill_can_take_the_gpus():
    # one 4-GPU server, two 2-GPU jobs in queue 1; a 4-GPU job (the head) and then a 2-GPU job arrive in queue
    # 0. One victim per decision frees 2 GPUs, which the placement pass gives to the 2-GPU job (backfill): the
    # head waits and the victim was preempted for nothing. Clearing at once preempts both running jobs before
    # placing anything, then places the head.
    def one_round(**params):
        sim = make_sim([helpers.job(0, R=2, iters=10**6), helpers.job(1, R=2, iters=10**6),
                        helpers.job(2, submit=100.0, R=4, iters=10**6), helpers.job(3, submit=150.0, R=2)],
                       cluster=helpers.cluster(1))
        first_decision(sim)
        for j in sim.jobs[:2]:
            for t in j.tasks:
                sim.place(t.tid, 0)
        while sim.next_decision():
            if sim.jobs[3].state == sim.jobs[3].state.ACTIVE:
                break
        for j in sim.jobs[:2]:
            j.running_time = 7200.0  # 4 GPU-hours each: queue 1
        pol, view = Tiresias(**params), V(sim)
        while (cmd := pol.decide(view, Candidates.full(view, can_preempt=True))) is not None:
            pol.observe(view, cmd)
            execute(sim, cmd)
        return sim

    base, clear = one_round(), one_round(clear_at_once=True)
    assert base.jobs[2].n_placed == 0 and base.jobs[3].fully_placed
    assert [j.record.preemptions for j in base.jobs] == [0, 1, 0, 0]
    assert clear.jobs[2].fully_placed and clear.jobs[3].n_placed == 0
    assert [j.record.preemptions for j in clear.jobs] == [1, 1, 0, 0]


# -------------------------------------------------------------------------------------- simple ones

def blocked_sim():
    """One 4-GPU server; job 0 holds 3 GPUs; job 1 (2 GPUs) waits; job 2 (1 GPU) could run."""
    specs = [helpers.job(0, R=3, iters=10_000), helpers.job(1, submit=1.0, R=2, deadline=9e5),
             helpers.job(2, submit=2.0, iters=10, deadline=5e5)]
    sim = make_sim(specs, cluster=helpers.cluster(1))
    first_decision(sim)
    for t in sim.jobs[0].tasks:
        sim.place(t.tid, 0)
    while sim.next_decision():
        if all(j.state == j.state.ACTIVE for j in sim.jobs):
            break
    return sim


def test_fifo_blocks_backfill_skips():
    sim = blocked_sim()
    assert not job_fits(V(sim), sim.jobs[1])
    assert baselines.make("fifo").decide(V(sim)) is None
    cmd = baselines.make("fifo", backfill=True).decide(V(sim))
    assert sim.tasks[cmd.tid].job is sim.jobs[2]


def test_fifo_head_blocks_even_when_not_a_candidate():
    """The env's window shows only jobs whose next task fits a destination: FIFO's blocking head (job 1) may be
    missing from its candidates, and must block all the same (as at core level, where it is a candidate)."""
    sim = blocked_sim()
    only_job2 = Candidates([t for t in sim.ready_tasks() if t.job is sim.jobs[2]], [], np.arange(1))
    assert baselines.make("fifo").decide(V(sim), only_job2) is None
    assert sim.tasks[baselines.make("fifo", backfill=True).decide(V(sim), only_job2).tid].job is sim.jobs[2]


def test_sjf_edf_orders():
    sim = make_sim([helpers.job(0, iters=500, deadline=2000.0), helpers.job(1, iters=50, deadline=9000.0)])
    first_decision(sim)
    assert sim.tasks[baselines.make("sjf").decide(V(sim)).tid].job.jid == 1
    assert sim.tasks[baselines.make("edf").decide(V(sim)).tid].job.jid == 0


def test_slaq_hypersched_fair_graphene_orders():
    specs = [helpers.job(0, R=4, iters=1000, deadline=1e6), helpers.job(1, R=1, iters=1000, deadline=1e6)]
    sim = make_sim(specs)
    first_decision(sim)
    # SLAQ: same loss reduction per tick, per GPU the 1-GPU job gains 4x more
    assert sim.tasks[baselines.make("slaq").decide(V(sim)).tid].job.jid == 1
    # fair (DRF): smaller dominant share first
    assert sim.tasks[baselines.make("fair").decide(V(sim)).tid].job.jid == 1
    # Graphene: the 2-stage chain (descendants) before a single task
    sim2 = make_sim([helpers.job(0), helpers.job(1, P=2)])
    first_decision(sim2)
    assert sim2.tasks[baselines.make("graphene").decide(V(sim2)).tid].job.jid == 1
    # HyperSched: a job that can still finish before its deadline before one that cannot
    sim3 = make_sim([helpers.job(0, iters=5000, deadline=1000.0), helpers.job(1, iters=500, deadline=5000.0)])
    first_decision(sim3)
    assert sim3.tasks[baselines.make("hypersched").decide(V(sim3)).tid].job.jid == 1


def test_random_is_seeded_and_valid():
    def trace(seed):
        sim = make_sim([helpers.job(i, submit=10.0 * i, iters=50) for i in range(6)])
        pol = baselines.make("random", seed=seed)
        out = []
        while sim.next_decision():
            while (cmd := pol.decide(V(sim))) is not None:
                pol.observe(sim, cmd)
                execute(sim, cmd)
                out.append(cmd)
        assert sim.summary()["finished"] == 6
        return out
    assert trace(3) == trace(3)


# ------------------------------------------------------------------------------------------- Gavel

def test_gavel_lp_max_min_hand_solved():
    """Two jobs, one GPU of type A and one of type B. Job 0: 2 it/s on A, 1 on B (equal-share throughput
    1.5); job 1: 1 and 1 (equal share 1). Job 1 can never exceed 1x its equal share, so the max-min
    optimum is t = 1 (job 1 runs all the time, job 0 gets >= its equal share)."""
    X, status = solve_max_min(np.array([[2.0, 1.0], [1.0, 1.0]]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
    assert status.startswith("Optimal")
    norm = (X * np.array([[2.0, 1.0], [1.0, 1.0]])).sum(axis=1) / np.array([1.5, 1.0])
    assert norm.min() == pytest.approx(1.0, abs=1e-6)
    assert (X.sum(axis=1) <= 1 + 1e-9).all() and (X.sum(axis=0) <= 1 + 1e-9).all()


def test_gavel_lp_makespan_hand_solved():
    """One GPU of type A: jobs with 100 and 300 iterations left at 1 it/s. Minimising the makespan shares
    the GPU 1:3 (X = 0.25, 0.75), so both end at 400 s (t = 1/400)."""
    X, status = solve_max_min(np.array([[1.0], [1.0]]), np.array([1.0, 1.0]), np.array([1.0]), "makespan",
                              remaining=np.array([100.0, 300.0]))
    assert status.startswith("Optimal")
    assert X[:, 0] == pytest.approx([0.25, 0.75], abs=1e-6)


def test_gavel_lp_makespan_uses_the_faster_type_hand_solved():
    """Types A and B, one GPU each. Job 0: 2 it/s on A, 1 on B, 2 iterations left; job 1: 1 it/s on both,
    1 left. Each job finishes in >= 1 s (job 1: rate <= 1; job 0: rate <= 2), and 1 s is reached only with
    job 0 all the time on A and job 1 all the time on B: X = [[1, 0], [0, 1]], makespan 1 s."""
    tput = np.array([[2.0, 1.0], [1.0, 1.0]])
    X, status = solve_max_min(tput, np.array([1.0, 1.0]), np.array([1.0, 1.0]), "makespan",
                              remaining=np.array([2.0, 1.0]))
    assert status.startswith("Optimal")
    assert X == pytest.approx(np.array([[1.0, 0.0], [0.0, 1.0]]), abs=1e-6)
    with pytest.raises(ValueError):
        baselines.make("gavel", objective="jct")


def test_gavel_makespan_policy_finishes_a_workload():
    specs = [helpers.job(i, submit=20.0 * i, R=1 + i % 2, iters=100 + 80 * i) for i in range(5)]
    sim = Simulator(hetero_cluster(), specs, SimConfig(), 0, models=helpers.models)
    pol = baselines.make("gavel", objective="makespan")
    s = run(sim, pol)
    assert s["finished"] == 5 and pol.solves >= 1 and pol.last_status.startswith("Optimal")


def test_gavel_places_on_allocated_type():
    sim = make_sim([helpers.job(0)], cluster=hetero_cluster())
    first_decision(sim)
    pol = baselines.make("gavel")
    cmd = pol.decide(V(sim))
    assert cmd.server == 1 and pol.solves == 1  # alone, the LP gives it the V100s (4x faster)
    assert pol.decide(V(sim)) == cmd and pol.solves == 1  # cached while the job set is unchanged


# ------------------------------------------------------------------------------ core driver, all policies

@pytest.mark.parametrize("name", baselines.available())
def test_every_policy_finishes_a_small_workload(name):
    specs = [helpers.job(i, submit=30.0 * i, R=1 + i % 3, P=1 + (i % 2), sync="ps" if i % 4 == 0 else "allreduce",
                         iters=200 + 50 * i, deadline=30.0 * i + 5000) for i in range(10)]
    sim = Simulator(helpers.cluster(3), specs, SimConfig(), 0, models=helpers.models)
    s = run(sim, baselines.make(name))
    assert s["finished"] == 10 and s["unfinished"] == 0


# ----------------------------------------------------------------------------------- Hare's HLAS, faithful

def test_hare_fig12_hlas_through_the_simulator():
    # Fig. 12: one GPU, jobs of 2, 3 and 4 unit rounds (one 60 s iteration = one tick), all at t = 0. HLAS with
    # one queue per round (thresholds between whole rounds) and free preemption round-robins the jobs: they end
    # at 4, 7 and 9 rounds, average JCT 20/3 = 6.67 rounds
    helpers.MODELS["toy-60"] = helpers.toy_model("toy-60", v100=60.0)
    try:
        specs = [helpers.job(j, model="toy-60", iters=n) for j, n in enumerate((2, 3, 4))]
        sim = make_sim(specs, cluster=helpers.cluster(1, gpus=1), suspend_s=0.0, resume_base_s=0.0,
                       resume_per_gpu_s=0.0)
        pol = HLAS(thresholds=(30.0, 90.0, 150.0, 210.0))
        run(sim, pol)
        ends = sorted(j.record.end_time / 60.0 for j in sim.jobs)
        assert ends == pytest.approx([4.0, 7.0, 9.0])
        assert np.mean(ends) == pytest.approx(20 / 3)
        assert pol.tbar(V(sim), sim.jobs[0]) == pytest.approx(60.0)
        # one queue (thresholds=()) is FIFO: no preemption, the jobs end at 2, 5, 9 rounds
        sim = make_sim(specs, cluster=helpers.cluster(1, gpus=1))
        run(sim, HLAS(thresholds=()))
        assert sorted(j.record.end_time / 60.0 for j in sim.jobs) == pytest.approx([2.0, 5.0, 9.0])
    finally:
        del helpers.MODELS["toy-60"]


def test_hlas_relaxed_sync_starts_a_job_on_fewer_gpus_and_favours_fast_ones():
    # Fig. 5: a 4-replica job (1 s/iteration on V100, 4 s on K80) with 2 idle V100s and 4 idle K80s: EFT puts
    # two tasks on each V100 (finish 2 s) rather than any on a K80 (4 s); without relaxed sync it takes 2 V100s
    # and 2 K80s (one task per GPU, round time 4 s)
    cl = ClusterSpec("het", (ServerSpec("k80", "K80", 4, 32, 244), ServerSpec("v100", "V100", 2, 32, 244)))
    sim = make_sim([helpers.job(0, R=4, iters=1000)], cluster=cl)
    run(sim, HLAS())
    job = sim.jobs[0]
    # placed at t = 0; an iteration: 2 x 1 s on each V100 + the ring's slowest hop between the two V100s
    # (2 (R-1)/R x 50 MB = 75 MB over 100 Gbit/s = 12,500 MB/s: 6 ms): 1000 x 2.006 s
    assert job.record.end_time == pytest.approx(1000 * (2.0 + 75.0 / 12_500.0))
    sim = make_sim([helpers.job(0, R=4, iters=1000)], cluster=cl)
    run(sim, HLAS(relaxed_sync=False))
    assert sim.jobs[0].record.end_time > 4.0 * 1000


def test_hlas_reschedule_moves_a_job_off_a_slow_gpu():
    # job 0 arrives while the V100 is taken by job 1, so it starts on the K80. When job 1 ends, job 2 (two
    # replicas too large to share a GPU, arrived later: ranked below job 0) keeps a decision point open, and
    # round-level rescheduling takes job 0 off the K80 (4 s a round) for the V100 (1 s); without
    # rescheduling it stays on the K80
    helpers.MODELS["toy-big"] = helpers.toy_model("toy-big", gpu_memory_gb=9.0)
    try:
        cl = ClusterSpec("het", (ServerSpec("k80", "K80", 1, 32, 244), ServerSpec("v100", "V100", 1, 32, 244)))
        specs = [helpers.job(1, iters=300), helpers.job(0, submit=30.0, iters=20_000),
                 helpers.job(2, submit=90.0, model="toy-big", R=2, iters=10)]
        types = {}
        for resched in (True, False):
            sim = make_sim(specs, cluster=cl)
            pol, view = HLAS(reschedule=resched), V(sim)
            seen = []
            while sim.next_decision():
                while (cmd := pol.decide(view)) is not None:
                    pol.observe(view, cmd)
                    execute(sim, cmd)
                seen += [sim.cluster.gpu_type[t.gpu] for t in sim.job(0).tasks if t.gpu >= 0]
            types[resched] = seen
        assert types[True][0] == "K80" and types[True][-1] == "V100"
        assert set(types[False]) == {"K80"}
    finally:
        del helpers.MODELS["toy-big"]


def test_hlas_reschedule_needs_another_server_not_only_another_split_of_its_own():
    # AlexNet as 4 partitions x 4 replicas on one 4-GPU server: the EFT split of its 16 tasks over the 4 GPUs
    # (0.028 s a round) beats the simulator's least-loaded GPU choice (0.045 s), but the policy places on
    # servers, so preempting it would only place it the same way again: no rescheduling (it used to be
    # preempted and placed back every round)
    from clustergym.baselines.hare_plan import current_round_time
    from clustergym.core.catalogue_data import get_model

    sim = Simulator(helpers.cluster(1, gpus=4), [helpers.job(0, model="AlexNet", P=4, R=4, iters=10**6)],
                    models=get_model)
    pol, view = HLAS(), V(sim)
    assert sim.next_decision()
    while (cmd := pol.decide(view)) is not None:
        pol.observe(view, cmd)
        execute(sim, cmd)
    assert sim.next_decision()
    job = sim.job(0)
    plan = pol.plan(view, job, unplaced=True)
    assert job.fully_placed and set(plan.servers) == {0}
    assert plan.round_time < 0.9 * current_round_time(view, job)  # the gain test alone would preempt
    assert pol.decide(view) is None


def test_hlas_keeps_its_plans_only_while_the_placement_is_unchanged():
    # a plan depends on where tasks are, not on time: kept until a task is attached or detached anywhere
    from clustergym.core.catalogue_data import get_model

    sim = Simulator(helpers.cluster(2, gpus=4), [helpers.job(0, model="AlexNet", P=2, R=2, iters=10**6),
                                                 helpers.job(1, model="AlexNet", P=2, iters=10**6)], models=get_model)
    pol, view = HLAS(), V(sim)
    assert sim.next_decision()
    pol.begin(view)
    j0, j1 = sim.job(0), sim.job(1)
    before, version = pol.plan(view, j1), view.placement_version
    assert pol.plan(view, j1) is before  # the same placement: the kept plan
    cmd = pol.decide(view)
    execute(sim, cmd)  # a task of job 0 or 1 takes a GPU
    assert view.placement_version == version + 1
    after = pol.plan(view, j1)
    assert after is not before
    fresh = HLAS()
    fresh.begin(view)
    assert (after.servers, after.round_time) == (fresh.plan(view, j1).servers, fresh.plan(view, j1).round_time)
    sim.requeue(next(t for t in j0.tasks + j1.tasks if t.state == TaskState.RUNNING).tid)
    assert view.placement_version == version + 2  # a detachment counts too


def test_hlas_demoted_job_yields_to_a_new_one():
    # queue levels matter: a job past the first threshold (600 s of average-group time) is preempted for a new
    # job in Q_1; with one queue (FIFO) the new job waits
    cl = helpers.cluster(1, gpus=1)
    for thresholds, preempted in (((600.0, 3600.0), 1), ((), 0)):
        sim = make_sim([helpers.job(0, iters=5000), helpers.job(1, submit=1000.0, iters=100)], cluster=cl)
        run(sim, HLAS(thresholds=thresholds))
        assert sim.jobs[0].record.preemptions == preempted


def test_hare_grouping_min_max():
    from clustergym.baselines.hare_grouping import default_n_groups, group_servers, grouping_objective, server_speeds
    # two models, servers V100, V100, K80, K80 (4 GPUs each): two groups of one V100 and one K80 server
    # give every model the same speed in both groups (objective 0); V100+V100 | K80+K80 would not
    times = np.array([[1.0, 1.0, 4.0, 4.0], [1.0, 1.0, 2.0, 2.0]])
    S = server_speeds(times, [4, 4, 4, 4])
    types = ["V100", "V100", "K80", "K80"]
    assert default_n_groups(types) == 2 and default_n_groups(["V100"] * 3) == 3
    groups = group_servers(S, types)
    assert sorted(map(sorted, groups)) == [[0, 2], [1, 3]]
    assert grouping_objective(S, groups) == 0.0
    assert grouping_objective(S, [[0, 1], [2, 3]]) == pytest.approx(8.0 - 2.0)  # model 0: 4+4 vs 1+1
    # an unbalanced start (3 V100, 1 K80 in 2 groups): min-max puts the K80 with a V100
    g = group_servers(server_speeds(times[:, [0, 1, 0, 2]], [4] * 4), ["V100", "V100", "V100", "K80"], 2)
    assert grouping_objective(server_speeds(times[:, [0, 1, 0, 2]], [4] * 4), g) <= 3.0 + 1e-9
    with pytest.raises(ValueError, match="n_groups"):
        group_servers(S, types, 5)


def test_hlas_bad_parameters_are_named():
    for kw, field in ((dict(thresholds=(10.0, 5.0)), "thresholds"), (dict(n_groups=0), "n_groups"),
                      (dict(reschedule_gain=1.0), "reschedule_gain")):
        with pytest.raises(ValueError, match=field):
            HLAS(**kw)


def test_mlfh_ranks_jobs_by_their_workers_not_by_their_parameter_server():
    # Eq. 6 gives a PS +inf so it is placed before its own workers; a PS job must not outrank every other job
    from clustergym.baselines.mlfs import MLFH

    per_job = {1: [math.inf, 0.2, 0.1], 2: [0.5, 0.4], 3: [math.inf]}
    assert MLFH()._job_rank(per_job) == {1: 0.2, 2: 0.5, 3: 0.0}
    assert MLFH(ps_first_across_jobs=True)._job_rank(per_job) == {1: math.inf, 2: 0.5, 3: math.inf}
