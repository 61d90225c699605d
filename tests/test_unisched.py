"""UniSched's estimator (Eqs. 1-3), allocations, MILP selector and policy (clustergym.baselines.unisched)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from clustergym.baselines.unisched_milp import (InfeasibleMILP, MilpJob, allocation_options, cells_of,
                                                expected_suspensions, iteration_time, solve_plan, sr_overhead,
                                                suspension_probabilities)


@pytest.mark.parametrize("n,m,expected", [(3, 6, 1.0), (6, 12, 2.5), (5, 6, 2 / 3), (4, 4, 0.0), (1, 9, 0.0)])
def test_eq3_expected_suspensions_match_the_closed_form(n, m, expected):
    # n run leases among m, placed uniformly: E[k] = n (m - n + 1) / m - 1 (checked by brute force in the seed note)
    assert sum(suspension_probabilities(n, m)) == pytest.approx(1.0)
    assert expected_suspensions(n, m) == pytest.approx(expected)
    assert expected_suspensions(n, m) == pytest.approx(n * (m - n + 1) / m - 1)


def test_sr_overhead_eq1_and_eq2_by_hand():
    assert sr_overhead(6, 12, 20.0) == pytest.approx(50.0)  # 2.5 expected suspensions x 20 s
    assert sr_overhead(6, None, 20.0) == 60.0  # best-effort: n / 2 x t^sr
    assert sr_overhead(7, 6, 20.0) == 0.0  # more leases than the deadline allows: run back to back
    # Eq. 2: T^comp; + (N-1) T^1 on one node; + (N-1) T^2 across nodes
    assert iteration_time(1.0, 0.1, 0.3, 1, 1) == 1.0
    assert iteration_time(1.0, 0.1, 0.3, 4, 1) == pytest.approx(1.3)
    assert iteration_time(1.0, 0.1, 0.3, 4, 2) == pytest.approx(1.9)
    with pytest.raises(ValueError, match="1 <= n <= m"):
        suspension_probabilities(5, 3)


def test_cells_and_the_policy_generators_allocations():
    assert cells_of(6, 3) == (0, 1, 1, 0) and cells_of(16, 2) == (0, 0, 4) and cells_of(3, 2) == (1, 1, 0)
    # UniSched §III-C's example for a 6-GPU job on 8-GPU nodes: (0,0,0,1), (0,1,1,0) and (6,0,0,0)
    assert [c for c, _ in allocation_options(6, 3)] == [(0, 0, 0, 1), (0, 1, 1, 0), (6, 0, 0, 0)]
    assert allocation_options(1, 3) == [((1, 0, 0, 0), 1)]
    assert allocation_options(8, 2) == [((0, 0, 2), 2), ((8, 0, 0), 8)]


def _six_gpu_jobs(n_slo: int, be: bool, consolidated_only: bool = False) -> list[MilpJob]:
    # Eq. 2 with T^comp 1, T^1 0.02, T^2 0.04: one node 1.1 s per iteration, six nodes 1.2 s: phi-bar 11/12
    times = [iteration_time(1.0, 0.02, 0.04, 6, nodes) for _, nodes in allocation_options(6, 3)]
    options = [(cells, times[0] / t) for (cells, _), t in zip(allocation_options(6, 3), times)]
    options = options[:1] if consolidated_only else options
    # each SLO job needs 6 leases at full speed (7 on single GPUs: ceil(6 x 12 / 11)) before slot 7
    jobs = [MilpJob(i, 6, options, 6, deadlines=[(7, 100.0)]) for i in range(n_slo)]
    if be:
        jobs.append(MilpJob(9, 6, options, 6, None, be_value=0.99 / 6))
    return jobs


def test_worked_example_four_six_gpu_slo_jobs_on_three_eight_gpu_nodes():
    # UniSched §I: Chronus's round-up gives each 6-GPU job a whole 8-GPU node, so only three of four meet their
    # deadlines; UniSched's estimator lets one run fragmented, slower but in time, and all four meet them
    plan, status = solve_plan(_six_gpu_jobs(4, False), (0, 0, 0, 3), 24, 8, 10.0)
    assert status == "optimal" and sorted(plan.run) == [0, 1, 2, 3]
    assert plan.objective == pytest.approx(400.0, abs=1e-3)
    assert sum(p == 2 for p in plan.run.values()) == 1  # one of them on six single GPUs
    chronus, _ = solve_plan(_six_gpu_jobs(4, False, consolidated_only=True), (0, 0, 0, 3), 24, 8, 10.0)
    assert len(chronus.run) == 3 and chronus.objective == pytest.approx(300.0, abs=1e-3)
    # three SLO jobs and a best-effort job: the best-effort job runs consolidated (it earns more at full speed)
    # and one SLO job is relaxed to single GPUs without missing its deadline
    plan, _ = solve_plan(_six_gpu_jobs(3, True), (0, 0, 0, 3), 24, 8, 10.0)
    assert sorted(plan.run) == [0, 1, 2, 9] and plan.run[9] in (0, 1)
    assert plan.objective == pytest.approx(300.0 + 0.99 / 6, abs=1e-3)


def test_an_infeasible_milp_is_a_named_error():
    # two running jobs whose leases still run hold 12 GPUs each: no plan keeps both on a 16-GPU cluster
    jobs = [MilpJob(i, 12, [((0, 0, 0, 1), 1.0)], 3, None, 0.3, running=True, pinned=True, held=(0, 0, 1, 1))
            for i in range(2)]
    with pytest.raises(InfeasibleMILP, match=r"jobs \[0, 1\], 24 GPUs together, cluster 16 GPUs"):
        solve_plan(jobs, (0, 0, 0, 0), 16, 4, 5.0)


def test_the_fallback_without_a_solution_is_the_cached_plan_then_the_greedy_rule():
    from clustergym.baselines import unisched, unisched_milp
    from clustergym.baselines.unisched_milp import Plan

    pol = unisched.UniSched()
    jobs = [MilpJob(1, 4, [((0, 0, 1), 1.0)], 2, [(5, 100.0)]), MilpJob(2, 8, [((0, 0, 2), 1.0)], 9, None, 0.1),
            MilpJob(3, 2, [((0, 1, 0), 1.0)], 1, None, 0.5, running=True, held=(0, 1, 0))]

    pol._plan = None
    greedy = pol._fallback(jobs, 12)  # running first, then SLO by deadline, then best-effort by value
    assert greedy.status == "greedy" and greedy.run == {3: -1, 1: 0}  # 2 + 4 GPUs; the 8-GPU job would exceed 12
    pol._plan = Plan({1: 0, 2: 0, 7: 0}, "optimal")
    cached = pol._fallback(jobs, 12)
    assert cached.status == "cached" and cached.run == {1: 0, 2: 0}  # job 7 ended since
    assert unisched_milp.TIE_BREAK < 0.99 / 1000  # the tie-break never outweighs a best-effort value


def test_unisched_without_profiling_runs_the_unisched_scenario_through_the_env_and_beats_fifo_on_slo_misses():
    from clustergym.eval.rollout import evaluate

    from clustergym import baselines
    from clustergym.eval.rollout import EVAL_DEFAULTS, predictor, rollout
    from clustergym.scenarios import make_env

    kw = {"window_jobs": 30}
    env = make_env("clustergym/UniSched-v2", {**EVAL_DEFAULTS, **kw})
    agent = baselines.make("unisched", env, profile_s=0.0)  # no profiling phase: the reference estimates
    uni = rollout(env, predictor(agent, env, "unisched"), 0)
    env.close()
    fifo = evaluate("fifo", "clustergym/UniSched-v2", kw, [0])[0]
    assert uni["finished"] == fifo["finished"] == 30
    assert uni["slo_miss_rate"] < fifo["slo_miss_rate"]
    assert not math.isnan(uni["mean_be_jct"])


def test_unisched_at_core_level_suspends_only_at_lease_ends():
    from clustergym.baselines import make, run
    from clustergym.core.engine import SimConfig, Simulator

    from helpers import cluster, job, models

    # one 4-GPU server; a long best-effort job runs first, then an urgent strict job arrives: the best-effort
    # job's lease (300 s) must end before UniSched may suspend it for the SLO job
    specs = [job(0, iters=3000, slo_class="best-effort", R=4),
             job(1, submit=30.0, iters=600, slo_class="strict", R=4, deadline=1500.0)]
    sim = Simulator(cluster(1), specs, SimConfig(be_lease_s=300.0, slo_lease_s=600.0, usage_change_mean_s=0.0),
                    models=models)
    pol = make("unisched", profile_s=0.0)  # leases only (tests/test_unisched_profile.py: the profiling phase)
    s = run(sim, pol)
    rec = {r["job_id"]: r for r in sim.job_records()}
    assert s["finished"] == 2 and rec[1]["deadline_met"]
    assert rec[0]["preemptions"] == 1 and rec[1]["first_start"] >= 300.0
    assert pol.solves >= 1 and pol.statuses["optimal"] == pol.solves


def test_cells_free_takes_the_largest_cells_first_each_from_the_best_fitting_server():
    from clustergym.baselines.unisched_milp import cells_free

    # free GPUs per server (4-GPU servers: cells of 1, 2 and 4 GPUs)
    assert cells_free([4, 1, 1, 2], (0, 0, 1)) and not cells_free([4, 1, 1, 2], (0, 0, 2))
    assert cells_free([4, 1, 1, 2], (0, 1, 1))  # the 4-cell from the empty server, the 2-cell from the 2-free one
    assert cells_free([4, 2], (0, 3, 0)) and not cells_free([4, 2], (1, 3, 0))  # a 4-cell splits into two 2-cells
    assert cells_free([4, 1], (1, 0, 1))  # the single from the 1-free server: the 4-cell stays whole for the job
    assert not cells_free([3, 3], (0, 0, 1))  # six free GPUs, but no 4-cell: a cell never spans servers
    assert cells_free([1, 1, 1, 1], (4, 0, 0)) and not cells_free([1, 1, 1], (4, 0, 0))
    assert cells_free([], (0, 0, 0))


def _fragmented_view():
    """Three 4-GPU servers: jobs 0 and 1 (3 GPUs each) run on servers 0 and 1, job 2 (2 GPUs) waits. Free: 1, 1
    and 4 GPUs."""
    from clustergym.baselines import make
    from clustergym.core.engine import SimConfig, Simulator
    from clustergym.core.view import ClusterView

    from helpers import cluster, job, models

    specs = [job(0, R=3, iters=10**6), job(1, R=3, iters=10**6), job(2, R=2, iters=100)]
    sim = Simulator(cluster(3), specs, SimConfig(usage_change_mean_s=0.0), models=models)
    assert sim.next_decision()
    for jid in (0, 1):
        for t in sim.job(jid).tasks:
            sim.place(t.tid, jid)
    view = ClusterView(sim)
    assert view.idle_gpus.tolist() == [1, 1, 4]
    pol = make("unisched", profile_s=0.0)
    pol.begin(view)
    return pol, view, sim.job(2)


@pytest.mark.parametrize("placement,first", [("best-fit", {0, 1}), ("worst-fit", {2})])
def test_a_single_gpu_allocation_takes_the_fragments_first_under_best_fit(placement, first):
    # UniSched's single-GPU allocation is level-0 cells; the MILP's Eq. 14 counts them as taken from the free
    # level-0 cells before a larger cell is split, so best fit leaves server 2's 4-cell whole for another job
    pol, view, waiting = _fragmented_view()
    pol.single_gpu_placement = placement
    pol._cells = {waiting.jid: (2, 0, 0)}  # two level-0 cells
    task = waiting.tasks[0]
    assert pol.server_order(view, task, view.feasible_servers(task))[0] in first
    pol._cells = {waiting.jid: (0, 1, 0)}  # the consolidated allocation: a server that takes the whole job
    assert pol.server_order(view, task, view.feasible_servers(task))[0] == 2


def test_a_planned_job_waits_until_the_cells_of_its_planned_allocation_are_free():
    pol, view, waiting = _fragmented_view()
    pol.place_as_planned = True
    servers = np.arange(view.n_servers)
    pol._cells = {waiting.jid: (0, 1, 0)}  # one 2-cell: server 2 holds it
    assert pol.fits(view, waiting, "exclusive", servers)
    pol._cells = {waiting.jid: (0, 0, 2)}  # two whole servers: not free now (six GPUs are, on three servers)
    pol._fit_cache.clear()
    assert not pol.fits(view, waiting, "exclusive", servers)
    pol.place_as_planned = False  # the gang guard alone: two tasks, six free GPUs
    assert pol.fits(view, waiting, "exclusive", servers)
    from clustergym.baselines import make

    with pytest.raises(ValueError, match="single_gpu_placement"):
        make("unisched", single_gpu_placement="spread")
