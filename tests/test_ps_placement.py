"""One placement rule for every heuristic: a job's parameter server stays with its workers whenever they fit
(baselines.base.keep_ps_with_workers)."""
from __future__ import annotations

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.agent import HeuristicAgent
from clustergym.baselines.base import Command, keep_ps_with_workers, pack_order, server_mask
from clustergym.core.commands import execute
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.view import ClusterView
from clustergym.gym_env import ClusterEnv

import helpers

# every heuristic with a server order (random samples the mask uniformly: it is the unordered reference)
ORDERED = [n for n, cls in baselines.REGISTRY.items() if not cls.uniform_over_mask]


def _specs():
    """Job 0 (4 GPUs) and job 1 (3 GPUs) load servers 0 and 1 of three 4-GPU servers; job 2, a single-GPU
    parameter-server job (a PS, which takes no GPU, and one worker), arrives at 100 s."""
    return [helpers.job(0, R=4, iters=10**6), helpers.job(1, R=3, iters=10**6),
            helpers.job(2, submit=100.0, sync="ps", iters=10**6)]


def _load(sim, execute_cmd):
    for jid, server in ((0, 0), (1, 1)):
        for t in sim.job_by_id[jid].tasks:
            execute_cmd(Command("place", t.tid, server))


def _ps_and_worker(sim):
    job = sim.job_by_id[2]
    ps = next(t for t in job.tasks if t.is_ps)
    worker = next(t for t in job.tasks if not t.is_ps)
    return ps, worker


def test_without_the_rule_best_fit_splits_the_ps_from_its_worker():
    """The artefact the rule removes: best fit ranks the full server 0 first for the PS (it needs no GPU),
    where the worker cannot follow."""
    sim = Simulator(helpers.cluster(3), _specs(), SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    assert sim.next_decision()
    _load(sim, lambda c: execute(sim, c))
    while sim.job_by_id[2].state.name != "ACTIVE":
        assert sim.next_decision()
    view = ClusterView(sim)
    ps, worker = _ps_and_worker(sim)
    order = pack_order(view, ps, server_mask(view, ps, "exclusive"))
    assert order[0] == 0
    assert not server_mask(view, worker, "exclusive")[0]
    assert keep_ps_with_workers(view, ps, order, "exclusive")[0] == 1  # the first server with room for both


@pytest.mark.parametrize("name", ORDERED)
def test_every_heuristic_keeps_a_single_gpu_ps_with_its_worker(name):
    sim = Simulator(helpers.cluster(3), _specs(), SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    policy = baselines.make(name)
    policy.attach(sim)
    view = ClusterView(sim)
    assert sim.next_decision()
    _load(sim, lambda c: execute(sim, c))
    while sim.next_decision():
        while (cmd := policy.decide(view)) is not None:
            policy.observe(view, cmd)
            execute(sim, cmd)
        ps, worker = _ps_and_worker(sim)
        if worker.server >= 0:
            break
    assert ps.server >= 0 and ps.server == worker.server, (name, ps.server, worker.server)


@pytest.mark.parametrize("name", ORDERED)
def test_every_heuristic_keeps_the_ps_with_its_worker_through_the_env(name):
    env = ClusterEnv(dict(invalid_action="raise"), cluster_spec=helpers.cluster(3), job_specs=_specs(),
                     models=helpers.models, model_names=list(helpers.MODELS))
    env.reset(seed=0)
    _load(env.sim, lambda c: env.step(env.window.action(c)))
    agent = HeuristicAgent(baselines.make(name), env)
    ps, worker = _ps_and_worker(env.sim)
    for _ in range(500):
        if worker.server >= 0:
            break
        obs, _, te, tr, _ = env.step(agent.predict(None)[0])
        assert not (te or tr)
    assert ps.server >= 0 and ps.server == worker.server, (name, ps.server, worker.server)


def test_a_ps_goes_where_most_of_its_workers_fit():
    """A 3-worker PS job on servers with 1, 2 and 4 idle GPUs: the PS goes to the 4-GPU server, ahead of the
    fuller servers best fit ranks first; its workers follow it there."""
    specs = [helpers.job(0, R=3, iters=10**6), helpers.job(1, R=2, iters=10**6),
             helpers.job(2, submit=100.0, sync="ps", R=3, iters=10**6)]
    sim = Simulator(helpers.cluster(3), specs, SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    assert sim.next_decision()
    for jid, server in ((0, 0), (1, 1)):
        for t in sim.job_by_id[jid].tasks:
            sim.place(t.tid, server)
    while sim.job_by_id[2].state.name != "ACTIVE":
        assert sim.next_decision()
    view = ClusterView(sim)
    ps, _ = _ps_and_worker(sim)
    assert pack_order(view, ps, server_mask(view, ps, "exclusive")) == [0, 1, 2]
    assert keep_ps_with_workers(view, ps, [0, 1, 2], "exclusive") == [2, 0, 1]
    fifo = baselines.make("fifo")
    while (cmd := fifo.decide(view)) is not None:
        fifo.observe(view, cmd)
        execute(sim, cmd)
    assert [t.server for t in sim.job_by_id[2].tasks] == [2, 2, 2, 2]


def test_a_worker_goes_to_its_ps_server_first():
    sim = Simulator(helpers.cluster(3), _specs(), SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    assert sim.next_decision()
    _load(sim, lambda c: execute(sim, c))
    while sim.job_by_id[2].state.name != "ACTIVE":
        assert sim.next_decision()
    ps, worker = _ps_and_worker(sim)
    sim.place(ps.tid, 2)
    view = ClusterView(sim)
    assert keep_ps_with_workers(view, worker, [1, 2], "exclusive") == [2, 1]
    # an all-reduce job has no PS: its order is untouched
    plain = sim.job_by_id[1].tasks[0]
    assert keep_ps_with_workers(view, plain, [1, 2, 0]) == [1, 2, 0]


def _active_ps_job(n_workers: int):
    """A simulator on three idle 4-GPU servers whose only job (a PS and ``n_workers`` workers) waits."""
    sim = Simulator(helpers.cluster(3), [helpers.job(0, sync="ps", R=n_workers, iters=10**6)],
                    SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    while sim.job_by_id[0].state.name != "ACTIVE":
        assert sim.next_decision()
    return sim, sim.job_by_id[0]


def test_a_ps_goes_where_most_of_its_planned_workers_are():
    """With a plan (worker -> server), the rule counts each waiting worker only on its planned server: one
    worker planned on server 0 and two on server 2 send the PS to server 2, where without the plan all three
    would fit on server 0."""
    sim, job = _active_ps_job(3)
    view = ClusterView(sim)
    ps = next(t for t in job.tasks if t.is_ps)
    workers = [t for t in job.tasks if not t.is_ps]
    planned = {workers[0].tid: 0, workers[1].tid: 2, workers[2].tid: 2}
    assert keep_ps_with_workers(view, ps, [0, 1, 2], "fit") == [0, 1, 2]
    assert keep_ps_with_workers(view, ps, [0, 1, 2], "fit", planned=planned) == [2, 0, 1]


def test_sjf_bsbf_places_its_ps_through_the_shared_rule():
    """SJF-BSBF's PS follows the plan's majority server, not the first planned worker's server."""
    from clustergym.baselines.sjfbsbf import SJFBSBF, _Plan

    sim, job = _active_ps_job(3)
    view = ClusterView(sim)
    ps = next(t for t in job.tasks if t.is_ps)
    w = [t for t in job.tasks if not t.is_ps]
    plan = _Plan(job, [(w[0], 0, 0), (w[1], 2, 8), (w[2], 2, 9)])
    cmds = list(SJFBSBF._place_ps(view, [ps], plan, {0, 1, 2}))
    assert [c.server for c in cmds] == [2, 0, 1] and {c.tid for c in cmds} == {ps.tid}
