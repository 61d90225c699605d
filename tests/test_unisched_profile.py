"""UniSched's profiling phase (baselines/unisched_profile.py): every new job is first profiled for one BE lease on at
most 2 GPUs; the stint costs its time and GPUs, and the Estimator then uses what it measured."""
from __future__ import annotations

import math

from types import SimpleNamespace

import numpy as np
import pytest

from clustergym.baselines import make, run
from clustergym.baselines.unisched_milp import iteration_time
from clustergym.baselines.unisched_profile import Profiler, stint_layout
from clustergym.core.commands import execute
from clustergym.core.dag import reference_iteration_time
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.lease import checkpoint_s
from clustergym.core.view import ClusterView

from helpers import cluster, job, models

CONFIG = dict(be_lease_s=300.0, slo_lease_s=600.0, usage_change_mean_s=0.0)


def test_stint_layout_and_bad_input():
    assert stint_layout(1, 4) == (1, 1)
    assert stint_layout(3, 4) == (2, 1)  # fits one node: 2 GPUs on one server
    assert stint_layout(8, 4) == (2, 2)  # larger than a node: one GPU on each of 2 servers
    with pytest.raises(ValueError, match="n_gpus >= 1"):
        stint_layout(0, 4)
    with pytest.raises(ValueError, match="profile_s"):
        make("unisched", profile_s=-1.0)


def _run(specs, n_servers=1, **params):
    sim = Simulator(cluster(n_servers), specs, SimConfig(**CONFIG), models=models)
    pol = make("unisched", **params)
    run(sim, pol)
    return sim, pol


def test_a_new_job_is_profiled_for_one_lease_before_it_runs_and_its_jct_pays_for_it():
    specs = [job(0, iters=600, slo_class="best-effort")]  # 600 iterations of 1 s on one V100
    sim, pol = _run(specs)
    rec = sim.job_records()[0]
    assert pol.profiler.started == 1 and pol.profiler.done[0].ended == pytest.approx(300.0)
    assert rec["first_start"] == pytest.approx(300.0)  # the stint 0-300 s, then the execution plan at 300 s
    plain, _ = _run(specs, profile_s=0.0)
    # the stint advanced no iteration: the job ends exactly one stint later than without profiling
    assert rec["jct"] - plain.job_records()[0]["jct"] == pytest.approx(300.0)


@pytest.mark.parametrize("R", [1, 2])
def test_with_profile_progress_a_job_of_its_stints_layout_is_profiled_by_running_it(R):
    # a 1-GPU job's stint is one GPU and a 2-GPU job's two GPUs of one node: the job itself, so its profiling
    # run keeps its iterations and its JCT is the one without a profiling phase (600 iterations of 1 s)
    specs = [job(0, iters=600, R=R, slo_class="best-effort")]
    sim, pol = _run(specs, profile_progress=True)
    plain, _ = _run(specs, profile_s=0.0)
    rec, ref = sim.job_records()[0], plain.job_records()[0]
    assert rec["first_start"] == 0.0 and rec["jct"] == pytest.approx(ref["jct"])
    assert pol.profiler.started == 1 and 0 in pol.profiler.done and not pol.profiler.in_place
    assert pol.profiler.done[0].ended == pytest.approx(300.0)  # measured at the first re-plan, one BE lease on
    assert (pol.profiler.done[0].t_intra is not None) == (R == 2)  # a 2-GPU run on one node measures T^1


def test_with_profile_progress_a_larger_job_still_pays_its_stint():
    # a 4-GPU job's stint runs 2 replicas on 2 GPUs, not the job: it stays overhead
    specs = [job(0, iters=600, R=4, slo_class="best-effort")]
    sim, pol = _run(specs, profile_progress=True)
    assert sim.job_records()[0]["first_start"] == pytest.approx(300.0) and not pol.profiler.in_place


class _Watch:
    """Checks, at every decision of the policy, that no task holds a GPU a profiling stint holds."""

    def __init__(self, pol):
        self.pol, self.peak = pol, 0

    def __call__(self, view: ClusterView) -> None:
        reserved = self.pol.profiler.reserved()
        self.peak = max(self.peak, sum(reserved.values()))
        for s, n in reserved.items():
            assert int(view.idle_gpus[s]) >= n, f"server {s}: a task took a GPU of a profiling stint"


def test_stints_hold_their_gpus_and_every_job_runs_only_after_its_stint():
    # 1-GPU jobs with a parameter server: the PS must go where the worker can (not onto a stint's GPUs' server)
    specs = [job(j, submit=40.0 * j, R=1 + j % 4, iters=300 + 100 * j, sync="ps" if j % 4 == 0 else "allreduce",
                 slo_class="strict" if j % 2 else "best-effort", deadline=40.0 * j + 6000.0) for j in range(12)]
    sim = Simulator(cluster(2), specs, SimConfig(**CONFIG), models=models)
    pol = make("unisched")
    pol.attach(sim)
    view = ClusterView(sim)
    watch = _Watch(pol)
    while sim.next_decision():
        while (cmd := pol.decide(view)) is not None:
            pol.observe(view, cmd)
            execute(sim, cmd)
            watch(view)
    recs = {r["job_id"]: r for r in sim.job_records()}
    assert all(r["state"] == "FINISHED" for r in recs.values())
    assert pol.profiler.started == len(specs) and watch.peak >= 2
    for jid, prof in pol.profiler.done.items():
        assert recs[jid]["first_start"] >= prof.ended - 1e-9 >= specs[jid].submit_time + 300.0 - 1e-9
    assert all(recs[j]["cross_server_mb"] == 0.0 for j in range(0, 12, 4))  # each 1-GPU job with its PS


def _profiled(specs, n_servers, jid, **params):
    """The policy and the job, in the decision round where the job's stint has just been turned into a profile."""
    sim = Simulator(cluster(n_servers), specs, SimConfig(**CONFIG), models=models)
    pol = make("unisched", **params)
    pol.attach(sim)
    view = ClusterView(sim)
    while sim.next_decision():
        while (cmd := pol.decide(view)) is not None:
            pol.observe(view, cmd)
            execute(sim, cmd)
            if jid in pol.profiler.done:
                return pol, view, sim.job(jid)
    raise AssertionError(f"job {jid} was never profiled")


def test_the_estimator_uses_the_profiled_two_gpu_values_not_the_true_ones():
    # an 8-GPU job on two 4-GPU servers is profiled on one GPU of each: it measures T^comp and T^2 only
    pol, view, j = _profiled([job(0, R=8, iters=3000)], 2, 0)
    m = pol.profiler.done[0]
    ref = dict(sync="allreduce", comm_ps_mb=50.0, comm_worker_mb=50.0, nic_gbps=10.0, intra_gbps=100.0)
    t_comp = reference_iteration_time(models("toy"), 1, 1, gpu_type="V100", gpus_per_server=4, **ref)
    two = reference_iteration_time(models("toy"), 1, 2, gpu_type="V100", gpus_per_server=1, **ref)
    assert (m.t_comp, m.t_intra, m.t_inter) == pytest.approx((t_comp, None, two - t_comp))
    assert pol.profile(j) == (m.t_comp, None, m.t_inter)
    # its t^sr is the one measured on the 2 profiling GPUs while it has not run on its own 8
    assert m.t_sr == pytest.approx(checkpoint_s(SimConfig(**CONFIG), 2)) != checkpoint_s(SimConfig(**CONFIG), 8)
    # Eq. 2 extrapolates the 2-GPU measurement; the true 8-GPU time on 2 nodes differs
    est = iteration_time(m.t_comp, 0.0, m.t_inter, 8, 2)
    mj = pol.milp_job(view, j)
    assert j.record.first_start < 0  # not yet run on its own GPUs: Eq. 3 uses the t^sr measured on 2
    t_sr = m.t_sr
    n = view.remaining_iters(j)
    assert mj.leases >= 1 and mj.be_value == pytest.approx(0.99 / mj.leases)
    assert mj.leases * 300.0 >= n * est  # its leases cover the estimated run time (Eq. 1)
    # and exactly Eq. 1 plus Eq. 3's suspend/resume term, n/2 t^sr with n = the leases Eq. 1 alone needs
    raw = math.ceil(n * est / 300.0)
    assert mj.leases == math.ceil((n * est + raw / 2.0 * t_sr) / 300.0)


def test_a_job_profiled_on_one_node_is_offered_one_node_allocations_only():
    # a 2-GPU job on 4-GPU servers is profiled on 2 GPUs of one server (T^1): its single-GPU allocation (two
    # nodes, T^2 unmeasured) is not offered; with the reference estimates it is
    pol, view, j = _profiled([job(0, R=2, iters=3000)], 2, 0)
    assert pol.profiler.done[0].t_inter is None
    assert len(pol.milp_job(view, j).options) == 1
    ref, view, j = _profiled([job(0, R=2, iters=3000)], 2, 0, profiled_estimates=False)
    assert len(ref.milp_job(view, j).options) == 2


def test_before_its_stint_a_job_is_a_profiler_job_valued_above_best_effort_below_slo():
    sim = Simulator(cluster(2), [job(1, R=8, iters=3000, slo_class="strict", deadline=9000.0)], SimConfig(**CONFIG),
                    models=models)
    pol = make("unisched")
    assert sim.next_decision()
    view = ClusterView(sim)
    pol.begin(view)
    assert pol.profiler.state(1) == "new"
    mj = pol.milp_job(view, sim.job(1))
    assert (mj.n_gpus, mj.leases, mj.deadlines, mj.be_value) == (2, 1, None, 1.0)
    assert mj.options == [((2, 0, 0), 1.0)]  # one GPU on each of two nodes
    assert pol.decide(view) is None and pol.profiler.state(1) == "profiling"  # selected: its stint starts
    assert pol.profiler.reserved() == {0: 1, 1: 1}
    assert pol.profiler.free_gpus(view) == {0: 3, 1: 3}  # the simulator still sees 4 idle GPUs on each


def test_free_gpus_are_the_idle_ones_no_stint_holds():
    # stints of 1 GPU on servers 0 and 1 and of 2 GPUs on server 2: what each server has left, never below 0
    prof = Profiler(300.0)
    prof.stints = {7: ((0, 1), 1, 300.0), 8: ((2,), 2, 300.0), 9: ((0,), 2, 300.0)}
    view = SimpleNamespace(n_servers=4, idle_gpus=np.array([4, 1, 2, 3]))
    assert prof.reserved() == {0: 3, 1: 1, 2: 2}
    assert prof.free_gpus(view) == {0: 1, 1: 0, 2: 0, 3: 3}
