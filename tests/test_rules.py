"""Each rule has one home in the core, and every consumer follows it: the configured overload threshold, the
resource update reports, the read-only policy view."""
from __future__ import annotations

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.base import Candidates, job_fits, server_mask
from clustergym.baselines.mlfs import MLFH
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.view import ClusterView

import helpers

LIGHT = helpers.toy_model("light", gpu_util=0.3)  # two jobs on one GPU: load 0.6


def models(name):
    return LIGHT if name == "light" else helpers.models(name)


def shared_gpu_sim(h: float) -> Simulator:
    """Jobs 0 and 1 share GPU 0 of server 0 (load 0.6); job 2 waits; server 1 is empty."""
    # (the users chose OptStop: MLF-H has no stopping option to change first)
    specs = [helpers.job(i, model="light", iters=100_000, stop="opt-stop") for i in range(3)]
    sim = Simulator(helpers.cluster(2), specs, SimConfig(overload_threshold=h, usage_change_mean_s=0.0), 0,
                    models=models)
    assert sim.next_decision()
    sim.place(sim.jobs[0].tasks[0].tid, 0, gpu=0)
    sim.place(sim.jobs[1].tasks[0].tid, 0, gpu=0)
    sim.now = 3600.0  # past the migration cooldowns
    return sim


@pytest.mark.parametrize("h", [0.5, 0.9])
def test_overload_threshold_reaches_every_consumer(h):
    sim = shared_gpu_sim(h)
    hot = 0.6 > h
    view = ClusterView(sim)
    waiting = sim.jobs[2].tasks[0]
    assert bool(sim.cluster.overloaded[0]) is hot  # the engine
    assert view.overload_threshold == h and bool(view.hot_gpus()[0]) is hot  # the view's rules
    assert view.overloaded_resources(0).tolist() == [hot, False, False, False]
    # MLF-H takes the simulator's h_r unless given its own
    assert MLFH().threshold(view) == h and MLFH(h_r=0.7).threshold(view) == 0.7
    # headroom (MLFS: do not place on an overloaded server, nor overload one by placing): a third task on
    # GPU 0 would make 0.9, within h = 0.9; under h = 0.5 server 0 is already overloaded
    assert bool(server_mask(view, waiting, "headroom")[0]) is not hot
    assert job_fits(view, sim.jobs[2], "headroom", servers=np.array([0])) is not hot
    # migration off the shared GPU happens exactly when it is overloaded, for MLF-H and Gandiva
    cands = Candidates.full(view)
    for pol in (MLFH(gang_guard=False), baselines.make("gandiva")):
        cmd = pol.decide(view, cands)
        assert (cmd is not None and cmd.kind == "migrate" and cmd.server == 1) is hot, pol.name


@pytest.mark.parametrize("interference", ["off", "gavel"])
def test_attach_and_detach_report_slowed_jobs_and_overloads(interference):
    # two on one GPU: load 1.2. Without interference each runs at 1/1.2 (gpu_slow); with it, at the pair's
    # ratio (the toy pair is not in Gavel's table: SJF-BSBF's 1.5, in gpu_xi) and gpu_slow stays 1
    heavy = helpers.toy_model("heavy", gpu_util=0.6)
    sim = Simulator(helpers.cluster(2), [helpers.job(0, model="heavy"), helpers.job(1, model="heavy")],
                    SimConfig(usage_change_mean_s=0.0, interference=interference), 0, models=lambda name: heavy)
    res = sim.resources
    a, b = sim.jobs[0].tasks[0], sim.jobs[1].tasks[0]
    ch = res.attach(a, 0, 0)
    assert (ch.jobs, ch.began, ch.ended) == ([], [], [])  # alone on the GPU: no contention, no overload
    ch = res.attach(b, 0, 0)
    assert (ch.jobs, ch.began, ch.ended) == ([a.job, b.job], [0], [])
    on = interference == "gavel"
    assert sim.cluster.gpu_slow[0] == pytest.approx(1.0 if on else 1.2)
    assert res.gpu_xi[0] == ({a.job: 1.5, b.job: 1.5} if on else {})
    ch.jobs.clear(), ch.began.clear()
    ch = res.detach(b)
    # the jobs whose ratio changed are reported (b too: it leaves the GPU)
    assert (ch.jobs, ch.began, ch.ended) == ([a.job, b.job] if on else [a.job], [], [0])
    assert sim.cluster.gpu_slow[0] == 1.0 and not sim.cluster.overloaded[0] and res.gpu_xi[0] == {}


def test_view_is_read_only_and_live():
    sim = shared_gpu_sim(0.9)
    view = ClusterView(sim)
    for name in ("gpu_load", "cpu_alloc", "overloaded", "gpu_n_tasks", "idle_gpus"):
        with pytest.raises(ValueError, match="read-only"):
            getattr(view, name)[0] = 0
    assert view.gpu_load[0] == pytest.approx(0.6)
    sim.place(sim.jobs[2].tasks[0].tid, 1)
    assert view.gpu_n_tasks[view.server_first_gpu[1]] == 1  # the same memory as the simulator's arrays
    assert view == ClusterView(sim) and view != ClusterView(shared_gpu_sim(0.9))
    job = sim.jobs[0]
    # 1 s per iteration alone, 1.5 s sharing GPU 0 with job 1 (SJF-BSBF's ratio: the toy pair is not in
    # Gavel's table), since its placement at t = 0
    assert view.iters(job) == pytest.approx(2400.0)
    assert view.running_time(job) == pytest.approx(3600.0)
    assert job.iters == 0.0  # reading does not materialise
