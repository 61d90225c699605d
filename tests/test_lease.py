"""Leases (UniSched §III-B, clustergym.core.lease) and UniSched's job classes in the metrics: hand-computed."""
from __future__ import annotations

import math

import pytest

from clustergym.core.commands import Command, command_error
from clustergym.core.engine import InvalidCommand, LeaseError, SimConfig, Simulator

from helpers import cluster, job, models

LEASES = dict(be_lease_s=300.0, slo_lease_s=600.0, usage_change_mean_s=0.0)


def _two_jobs(**cfg):
    # one best-effort and one strict-SLO job, 10,000 one-second iterations each, on one 4-GPU server
    specs = [job(0, iters=10_000, slo_class="best-effort"), job(1, iters=10_000, slo_class="strict")]
    sim = Simulator(cluster(1), specs, SimConfig(**{**LEASES, **cfg}), models=models)
    assert sim.next_decision() and sim.now == 0.0
    for t in sim.ready_tasks():
        sim.place(t.tid, 0)
    return sim, sim.job(0), sim.job(1)


def test_a_lease_blocks_suspension_until_its_end_then_renews_in_place():
    sim, be, slo = _two_jobs()
    assert sim.leases.expiry[be][0] == 300.0 and sim.leases.expiry[slo][0] == 600.0  # 5- and 10-minute leases
    with pytest.raises(InvalidCommand, match=r"job 0 holds a lease until t=300 s"):
        sim.preempt(0)
    assert "until t=600" in command_error(sim, Command("preempt", jid=1))
    # nothing waits and nothing is overloaded: the best-effort lease's end is the only reason for this decision
    assert sim.next_decision() and sim.now == 300.0
    assert command_error(sim, Command("preempt", jid=0)) is None and command_error(sim, Command("preempt", jid=1))
    # the round leaves job 0 running: it renews in place from the round's end, 300 + 300 = 600, for free
    assert sim.next_decision() and sim.now == 600.0
    assert sim.leases.renewals == 1 and be.paused_until == 0.0
    # both leases end at 600: the SLO job is suspended and resumes at once; it pays its checkpoint
    sim.preempt(1)
    assert slo not in sim.leases.expiry and slo.record.preemptions == 1
    for t in sim.ready_tasks():
        sim.place(t.tid, 0)
    assert slo.paused_until == 600.0 + 4.0 + 10.0 + 1.0  # suspend 4 s + resume 10 s + 1 s per GPU
    assert sim.leases.expiry[slo][0] == 1200.0  # a new 10-minute lease from the placement, restore inside it


def test_without_leases_nothing_is_leased_and_preemption_is_free_to_happen():
    sim, be, _ = _two_jobs(be_lease_s=0.0, slo_lease_s=0.0)
    assert not sim.leases.on and not sim.leases.expiry
    sim.preempt(0)
    assert be.n_placed == 0


def test_a_lease_no_longer_than_the_checkpoint_is_a_named_error():
    # a 2-GPU job's checkpoint: 4 + 10 + 2 x 1 = 16 s; a 16-second lease would be spent restoring
    with pytest.raises(LeaseError, match=r"job 3: its lease \(16 s\) is no longer than its checkpoint .* 16 s") as e:
        Simulator(cluster(1), [job(3, R=2)], SimConfig(be_lease_s=16.0), models=models)
    assert e.value.job_id == 3
    Simulator(cluster(1), [job(3, R=2)], SimConfig(be_lease_s=16.5), models=models)  # longer: accepted
    with pytest.raises(ValueError, match="slo_lease_s must be >= 0"):
        SimConfig(slo_lease_s=-1.0)


def test_slo_deadlines_are_judged_when_they_pass_and_best_effort_jobs_by_their_jct():
    # one GPU each, 100 one-second iterations: every job ends at t = 100 when placed at 0
    specs = [job(0, slo_class="strict", deadline=150.0), job(1, slo_class="strict", deadline=50.0),
             job(2, slo_class="best-effort", deadline=20.0), job(3, slo_class="soft", deadline=80.0)]
    sim = Simulator(cluster(1), specs, SimConfig(usage_change_mean_s=0.0), models=models)
    while sim.next_decision():
        for t in sim.ready_tasks():
            sim.place(t.tid, 0)
    m, s = sim.metrics, sim.summary()
    # job 1 (deadline 50) and job 3 (its first deadline 80) missed, counted when their deadlines passed;
    # the best-effort job's deadline does not count
    assert (m.slo_met, m.slo_missed) == (1, 2) and s["slo_miss_rate"] == pytest.approx(2 / 3)
    # R^slo: the strict jobs lose 0 and 1; the soft job's steps are (80: 100), (88: 80), (96: 50), (120: 20), so
    # ending at t = 100 it earns 20 and loses 0.8
    assert specs[3].slo_deadlines() == ((80.0, 100.0), (88.0, 80.0), (96.0, 50.0), (120.0, 20.0))
    assert s["slo_weighted_miss"] == pytest.approx((0.0 + 1.0 + 0.8) / 3)
    assert s["slo_jobs"] == 3 and s["mean_be_jct"] == pytest.approx(100.0)
    assert m.be_in_system_integral == pytest.approx(100.0)  # one best-effort job in the system for 100 s


def test_summary_without_best_effort_jobs_reports_their_jct_as_undefined():
    sim = Simulator(cluster(1), [job(0, slo_class="strict")], SimConfig(usage_change_mean_s=0.0), models=models)
    while sim.next_decision():
        for t in sim.ready_tasks():
            sim.place(t.tid, 0)
    assert math.isnan(sim.summary()["mean_be_jct"]) and sim.summary()["slo_miss_rate"] == 0.0


def test_unisched_scenario_shows_each_rows_slo_class_and_pays_its_reward():
    import numpy as np

    from clustergym.observation import SLO_CLASS_FEATURE
    from clustergym.scenarios import make_env

    env = make_env("clustergym/UniSched-v2", window_jobs=30)
    obs, _ = env.reset(seed=3)
    u = env.unwrapped
    col = u.obs_builder.task_cols.index("slo_class")
    rows = [(r, t) for r, t in enumerate(u.window.tasks) if t is not None]
    assert rows and {t.job.spec.slo_class for _, t in rows} <= {"strict", "best-effort"}
    for r, t in rows:
        assert obs["tasks"][r, col] == SLO_CLASS_FEATURE[t.job.spec.slo_class]
    assert u.sim.config.be_lease_s == 300.0 and u.sim.config.slo_lease_s == 600.0
    done, total = False, 0.0
    while not done:
        _, r, te, tr, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
        total += r
        done = te or tr
    names, g, m, n = u.reward_fn.names, u.objective_totals(), u.sim.metrics, u.sim.n_jobs
    assert g[names.index("slo_miss")] == pytest.approx(-m.slo_missed / n)
    assert g[names.index("be_jct")] == pytest.approx(-m.be_in_system_integral / 3600.0 / n)
    # the scalar reward: 1 x (SLO misses) + 0.01 x (best-effort job-hours), per job, as costs; nothing else
    assert total == pytest.approx(-(m.slo_missed + 0.01 * m.be_in_system_integral / 3600.0) / n, rel=1e-6)
    assert m.slo_missed + m.slo_met > 0 and m.be_in_system_integral > 0


def test_a_requeued_task_ends_its_jobs_lease_and_placing_it_back_grants_a_new_one():
    # a 2-task best-effort job: requeueing one task leaves the job partly placed, which holds no lease
    sim = Simulator(cluster(1), [job(0, R=2, iters=10_000, slo_class="best-effort")], SimConfig(**LEASES),
                    models=models)
    assert sim.next_decision()
    for t in sim.ready_tasks():
        sim.place(t.tid, 0)
    be = sim.job(0)
    assert sim.leases.expiry[be][0] == 300.0
    sim.requeue(be.tasks[0].tid)
    assert be not in sim.leases.expiry and command_error(sim, Command("preempt", jid=0)) is None
    sim.place(be.tasks[0].tid, 0)
    assert sim.leases.expiry[be][0] == 300.0 + sim.now  # a new lease from the placement
