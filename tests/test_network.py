"""NIC sharing (envs/core/progress.py, resources.py): the jobs crossing one NIC share its bandwidth equally.

Hand-computed with the toy model (1 s of compute per iteration on a V100) on 10 Gbit/s NICs (1,250 MB/s): a
two-replica all-reduce job sends 2 (R-1)/R x 50 MB = 50 MB over each ring hop, so its iteration takes
1 + 50/1250 = 1.04 s with a NIC to itself and 1 + 50/625 = 1.08 s when it shares one NIC with another job.
"""
import numpy as np
import pytest

from clustergym.core.engine import SimConfig, Simulator
from helpers import cluster, job, models

STILL = dict(usage_change_mean_s=0.0)
ALONE, SHARED = 1.0 + 50 / 1250.0, 1.0 + 50 / 625.0


def sim_of(specs, n_servers=3, **cfg):
    return Simulator(cluster(n_servers), specs, SimConfig(**{**STILL, **cfg}), seed=0, models=models)


def place_job(sim, jid, servers):
    tasks = [t for t in sim.ready_tasks() if t.job.jid == jid]
    for t, s in zip(tasks, servers):
        sim.place(t.tid, s)


def test_two_jobs_crossing_one_nic_share_it_and_the_survivor_speeds_back_up():
    # job 0 spans servers 0-1, job 1 spans servers 0-2: both cross server 0's NIC; job 2 runs on one GPU
    sim = sim_of([job(0, R=2, iters=100), job(1, R=2, iters=200), job(2, iters=100)])
    assert sim.next_decision()
    place_job(sim, 0, [0, 1])
    place_job(sim, 1, [0, 2])
    place_job(sim, 2, [1])
    j0, j1, j2 = sim.jobs
    assert sim.resources.nic_flows == [2, 1, 1]
    assert 1 / j0.rate == pytest.approx(SHARED) and 1 / j1.rate == pytest.approx(SHARED)
    assert 1 / j2.rate == pytest.approx(1.0)  # no cross-server traffic: untouched by the NICs
    while sim.next_decision():
        pass
    rec = {r["job_id"]: r for r in sim.job_records()}
    # job 0: 100 shared iterations; job 1: 100 shared, then 100 alone once job 0 left server 0's NIC
    assert rec[0]["jct"] == pytest.approx(100 * SHARED)
    assert rec[1]["jct"] == pytest.approx(100 * SHARED + 100 * ALONE)
    assert rec[2]["jct"] == pytest.approx(100.0)
    assert sim.resources.nic_flows == [0, 0, 0]


def test_a_job_alone_on_its_nics_keeps_the_full_bandwidth():
    sim = sim_of([job(0, R=2, iters=100), job(1, R=2, iters=100)])
    sim.next_decision()
    place_job(sim, 0, [0, 1])
    place_job(sim, 1, [2, 2])  # both replicas on server 2: no cross-server traffic
    assert sim.resources.nic_flows == [1, 1, 0]
    assert 1 / sim.jobs[0].rate == pytest.approx(ALONE)
    assert 1 / sim.jobs[1].rate == pytest.approx(1.0 + 50 / 12500.0)  # ring over the 100 Gbit/s intra link


def test_moving_off_a_shared_nic_speeds_up_the_job_left_behind():
    sim = sim_of([job(0, R=2, iters=300), job(1, R=2, iters=300)], n_servers=4, decide_on="always")
    sim.next_decision()
    place_job(sim, 0, [0, 1])
    place_job(sim, 1, [0, 2])
    j0, j1 = sim.jobs
    assert 1 / j0.rate == pytest.approx(SHARED)
    assert sim.next_decision() and sim.now == 60.0
    moving = next(t for t in j1.tasks if t.server == 0)
    sim.migrate(moving.tid, 3)  # job 1 now spans servers 2-3: server 0's NIC is job 0's alone
    assert sim.resources.nic_flows == [1, 1, 1, 1]
    assert 1 / j0.rate == pytest.approx(ALONE)
    assert 1 / j1.rate == pytest.approx(ALONE)


def test_a_migration_transfer_shares_the_nics_it_crosses():
    # job 0 crosses servers 0-1; job 1's single task moves from server 2 to server 1: its 300 MB of state
    # share server 1's NIC with job 0 (5 Gbit/s = 625 MB/s), server 2's NIC is free
    sim = sim_of([job(0, R=2, iters=1000), job(1, iters=200)], decide_on="always")
    sim.next_decision()
    place_job(sim, 0, [0, 1])
    place_job(sim, 1, [2])
    sim.next_decision()
    assert sim.now == 60.0
    (t,) = sim.jobs[1].tasks
    sim.migrate(t.tid, 1)
    state_mb = 3 * 25.0 * 4
    assert sim.jobs[1].paused_until == pytest.approx(60.0 + 5.0 + state_mb / 625.0)


def test_parameter_server_nic_is_shared_too():
    # two PS jobs (PS + one worker each) whose PS sits on server 0 and worker on server 1: both cross both
    # NICs. Push + pull = 100 MB per iteration: 100/1250 alone, 100/625 shared
    specs = [job(0, sync="ps", iters=50), job(1, sync="ps", iters=50)]
    sim = sim_of(specs)
    sim.next_decision()
    for jid in (0, 1):
        ps = next(t for t in sim.ready_tasks() if t.job.jid == jid)
        sim.place(ps.tid, 0)
        worker = next(t for t in sim.ready_tasks() if t.job.jid == jid)
        sim.place(worker.tid, 1)
    assert sim.resources.nic_flows == [2, 2, 0]
    for j in sim.jobs:
        assert 1 / j.rate == pytest.approx(1.0 + 100 / 625.0)
    np.testing.assert_allclose(sim.cluster.net_mbps[:2], 2 * 100 / (1.0 + 100 / 625.0))
