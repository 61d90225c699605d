"""Caches and incrementally maintained state (added for speed) agree with a rebuild from scratch.

A stale cache would not crash: it would quietly serve an old value. So after random rollouts (random valid
actions, including migrations, requeues and preemptions) every cached or incrementally updated structure
is compared with the same quantity computed from the simulator's plain state.
"""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
from hypothesis import HealthCheck, given, settings, strategies as st

import clustergym  # noqa: F401  (registers the ids)
from clustergym.core.dag import critical_time, placement_plan
from clustergym.core.job import JobState, TaskState
from clustergym.observation import ObservationBuilder
from helpers import random_core_command

DEFAULT = "clustergym/GPUCluster-v1"
HETERO = "clustergym/Hetero-v1"
BIG = "clustergym/MLFS2474-v1"
SCENARIOS = {
    "default": (DEFAULT, {"window_jobs": 12}),
    "hetero-preempt": (HETERO, {"window_jobs": 12, "preemption": True}),
    # more servers than destination columns: the general (non-dense) observation path
    "big": (BIG, {"window_jobs": 25, "window_size": 8, "n_destinations": 8}),
}


def check_simulator(sim) -> None:
    c = sim.cluster
    assert sim.n_overloaded == np.count_nonzero(c.overloaded)
    # the overload flags are what the current use says (MLFS's rule with threshold h on every resource)
    h = sim.config.overload_threshold
    shared_hot = np.array([c.gpu_load[g] > h and c.gpu_n_jobs[g] > 1 for g in range(c.n_gpus)], dtype=bool)
    expect = ((c.cpu_use > h * c.cpu_cap) | (c.mem_use > h * c.mem_cap) | (c.net_mbps > h * c.nic_gbps * 125.0)
              | (np.add.reduceat(shared_hot, c.server_first_gpu) > 0))
    np.testing.assert_array_equal(c.overloaded, expect)
    np.testing.assert_array_equal(c.server_idle_gpus, np.add.reduceat(c.gpu_n_tasks == 0, c.server_first_gpu))
    # the resources' Python copies of cluster arrays
    res = sim.resources
    for name in ("cpu_alloc", "mem_alloc", "gpu_mem_used", "max_free_gpu_mem", "gpu_load", "cpu_use", "mem_use",
                 "overloaded"):
        mirrored = getattr(res, name)
        assert mirrored.values == mirrored.array.tolist(), name
    # the move_net kernel's copies: the hot-GPU count per server
    assert res._hot_counts.tolist() == res._server_hot_gpus
    assert res.overloaded.array is c.overloaded and res.net is c.net_mbps and res.gpu_load.array is c.gpu_load
    np.testing.assert_array_equal(c.gpu_n_tasks, [len(t) for t in c.gpu_tasks])
    np.testing.assert_array_equal(c.gpu_n_jobs, [len({t.job for t in ts}) for ts in c.gpu_tasks])
    # per-GPU (job, utilisation) lists: the jobs in order of first appearance, each at its busiest task
    for g in range(c.n_gpus):
        if res._gpu_jobs[g] is not None:
            per_job = {}
            for t in c.gpu_tasks[g]:
                per_job[t.job] = max(per_job.get(t.job, 0.0), t.t.gpu_util)
            assert res._gpu_jobs[g] == tuple(per_job.items())
    # cached usage layouts: what the running tasks give
    for job, layout in res._layout.items():
        assert layout == res._usage_layout(job)
    for s in range(c.n_servers):
        assert c.tasks_by_id(s) == tuple(sorted(c.server_tasks[s], key=lambda t: t.tid))
        gpus = c.server_gpus(s)
        assert c.server_max_free_gpu_mem[s] == max(c.gpu_mem_cap[g] - c.gpu_mem_used[g] for g in gpus)
    # NIC sharing: per server, the active jobs whose current placement sends cross-server bytes through it
    crossing = [[j for j in sim.active_jobs.values() if s in j._pace.cross_servers] for s in range(c.n_servers)]
    assert res.nic_flows == [len(js) for js in crossing]
    assert [set(js) for js in res._nic_jobs] == [set(js) for js in crossing]
    for job in sim.jobs:
        p = job._pace
        if p.plan is None:
            continue
        servers = [t.server for t in job.tasks]
        gpus = [t.gpu for t in job.tasks]
        assert p.slots == list(zip(servers, gpus))
        assert p.servers.tolist() == servers and p.gpus.tolist() == gpus
        # slowdowns kept across refreshes: what the slots read now, unless the resources layer reported a change
        if p.slowdowns is not None and job not in res.slow_changed:
            assert p.slowdowns == tuple(max(c.server_slow[s], c.gpu_slow[g], res.gpu_xi[g].get(job, 1.0)) if g >= 0
                                        else c.server_slow[s] for s, g in p.slots)
        assert p.unit_compute == [t.t.compute_share * job.model.iter_time(c.gpu_type[t.gpu]) if t.gpu >= 0 else 0.0
                                  for t in job.tasks]
        # each NIC the job crosses gives it an equal share among the jobs crossing it
        nic = [float(c.nic_gbps[s]) / len(crossing[s]) if s in p.cross_servers else float(c.nic_gbps[s])
               for s in range(c.n_servers)]
        fresh = placement_plan([t.t for t in job.tasks], job.spec, servers, gpus, c.intra_gbps, nic)
        assert_same_plan(p.plan, fresh)
        for slow, T in p.iter_times.items():  # cached iteration times of this placement
            assert T == critical_time(fresh, p.unit_compute, slow)
    for job in sim.active_jobs.values():
        assert job._pace.cross_servers == {s for pair in job._pace.cross for s in pair}
    # NIC load = sum over progressing jobs of their cross-server bytes x rate (summed in another order)
    net = np.zeros(c.n_servers)
    for job in sim.active_jobs.values():
        if job.rate > 0 and job.fully_placed:
            for (a, b), mb in job._pace.cross.items():
                net[a] += mb * job.rate
                net[b] += mb * job.rate
    np.testing.assert_allclose(c.net_mbps, net, rtol=1e-9, atol=1e-6)


def assert_same_plan(a, b) -> None:
    """Two placement plans hold the same links, times, GPU groups and bytes (the arrays compared by value, the
    groups' arrays up to their used length, the cross-server pairs in the same order: it sets the order NIC
    loads are summed in)."""
    for f in ("w_task", "w_rep", "p_start", "p_idx", "ring_a", "ring_b"):
        assert np.array_equal(getattr(a.graph, f), getattr(b.graph, f)), f
    assert np.array_equal(a.links, b.links) and np.array_equal(a.link_s, b.link_s) and a.sync_s == b.sync_s
    n = a.n_groups
    assert n == b.n_groups and np.array_equal(a.g_start[:n + 1], b.g_start[:n + 1])
    assert np.array_equal(a.g_task[:a.g_start[n]], b.g_task[:b.g_start[n]])
    assert (a.ps_server, a.ps_cross_mb, a.cross_servers) == (b.ps_server, b.ps_cross_mb, b.cross_servers)
    assert list(a.cross.items()) == list(b.cross.items())


def check_env(u, obs) -> None:
    b = u.obs_builder
    # a new builder (empty caches) gives the same observation
    fresh = ObservationBuilder(u.W, u.K, u.G, u.model_names, u.config.loss_history, u.config.time_scale)
    fresh.reset(u.sim)
    w = u.window
    ref = fresh.build(u.sim, w.tasks, w.kinds, w.dest, w.k, w.ideal_distance, w.utilisation, w.overload_degree, w.mask,
                      w.queue_beyond, u._round_actions, u._clock_offset, w.free)
    assert sorted(ref) == sorted(obs)
    # the kernel's utilisation is the cluster's (clipped at 2), its overload degree the simulator's on it
    np.testing.assert_array_equal(u.window.utilisation, np.minimum(u.sim.cluster.utilisation_matrix(), 2.0))
    assert u.window.overload_degree == float(np.mean(np.sqrt(np.mean(u.window.utilisation ** 2, axis=1))))
    for k in obs:
        np.testing.assert_array_equal(obs[k], ref[k], err_msg=k)
    assert u.window.can_act == bool(u.window.mask[:-1].any())
    # the simulator's task -> server array (read by the affinity kernel) is the tasks' own state
    assert u.sim.task_server.tolist() == [t.server if t.state == TaskState.RUNNING else -1 for t in u.sim.tasks]
    # migration rows: tasks on overloaded servers (server order, then task id) not moved in this round
    movable = [t for s in np.flatnonzero(u.sim.cluster.overloaded)
               for t in sorted(u.sim.cluster.server_tasks[s], key=lambda t: t.tid)
               if t.tid not in u.sim.round.moved_tasks]
    n_mig = u.window.kinds.count("migrate")
    assert u.window.tasks[:n_mig] == movable[:n_mig]
    assert n_mig == min(len(movable), u.W if u.config.migrate_rows is None else u.config.migrate_rows) or u._done
    again = u._make_obs()
    for k, v in obs.items():  # the caller's arrays are its own: every build returns new ones
        assert not np.shares_memory(v, again[k]), k
        np.testing.assert_array_equal(v, again[k], err_msg=k)
    rows = [r for r, t in enumerate(u.window.tasks) if t is not None]
    cols = {s: i for i, s in enumerate(u.window.destinations) if s >= 0}
    A = np.zeros((u.W, u.K))
    for r in rows:
        task = u.window.tasks[r]
        nb = task.t.parents + task.t.children
        running = [task.job.tasks[k] for k in nb if task.job.tasks[k].state == TaskState.RUNNING]
        for t in running:
            if t.server in cols:
                A[r, cols[t.server]] += 1.0 / len(nb)
        # static columns: what the per-task and per-job helpers give for this row's task
        T = obs["tasks"][r]
        np.testing.assert_array_equal(T[b._o_tstat:b._o_jstat], b._tstat(task))
        np.testing.assert_array_equal(T[b._o_jstat:b._o_jdyn], b._jstat(task.job))
        np.testing.assert_array_equal(T[b._o_jdyn:b._o_model], b._job_rows[b._job_index[task.job]])
    np.testing.assert_array_equal(obs["affinity"], A.astype(np.float32))
    assert not obs["tasks"][len(rows):].any()


def rollout_and_check(scenario: str, seed: int, steps: int) -> None:
    env_id, kw = SCENARIOS[scenario]
    env = gym.make(env_id, **kw)
    u = env.unwrapped
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    for i in range(steps):
        obs, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        if i % 7 == 0 or te or tr:
            check_simulator(u.sim)
            check_env(u, obs)
        if te or tr:
            obs, _ = env.reset()
    check_simulator(u.sim)
    check_env(u, obs)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), scenario=st.sampled_from(sorted(SCENARIOS)), steps=st.integers(30, 250))
def test_caches_match_a_rebuild_after_random_rollouts(seed, scenario, steps):
    rollout_and_check(scenario, seed, steps)


def test_caches_match_a_rebuild_long_rollout():
    rollout_and_check("default", 3, 1500)


def test_finished_jobs_leave_no_stale_state():
    env = gym.make(DEFAULT, window_jobs=6)
    u = env.unwrapped
    env.reset(seed=1)
    te = tr = False
    while not (te or tr):
        _, _, te, tr, _ = env.step(u.end_round_action if not u.window.can_act else int(np.flatnonzero(u.action_masks())[0]))
    sim = u.sim
    check_simulator(sim)
    c = sim.cluster
    if all(j.state in (JobState.FINISHED, JobState.STOPPED) for j in sim.jobs):
        assert not any(c.server_tasks) and all(len(t) == 0 for t in (c.tasks_by_id(s) for s in range(c.n_servers)))
        assert (c.server_max_free_gpu_mem == c.gpu_mem_cap[c.server_first_gpu]).all()
        assert np.allclose(c.net_mbps, 0.0) and not math.isnan(float(c.net_mbps.sum()))
    # (check_simulator's NIC counts equal the active jobs' crossings: none once every job has ended)


def random_core_commands(sim, rng) -> None:
    """One decision round of random valid commands at core level: place, migrate, requeue, preempt."""
    for _ in range(int(rng.integers(1, 12))):
        random_core_command(sim, rng, (0.6, 0.85, 0.93, 1.0))
        check_simulator(sim)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1))
def test_nic_sharing_matches_a_rebuild_after_random_commands(seed):
    # multi-replica jobs on small servers with varying resource use: most placements cross NICs, many share
    from clustergym.core.engine import SimConfig, Simulator
    from helpers import cluster, job, models

    rng = np.random.default_rng(seed)
    specs = [job(i, submit=float(rng.uniform(0, 1200)), model=str(rng.choice(["toy", "toy-layer"])),
                 P=int(rng.choice([1, 2, 4])), R=int(rng.choice([1, 2, 3])), iters=int(rng.integers(50, 400)),
                 sync=str(rng.choice(["ps", "allreduce"])), acc_req=0.5) for i in range(14)]
    sim = Simulator(cluster(4, gpus=2), specs, SimConfig(usage_change_mean_s=120.0, decide_on="always"),
                    seed=seed, models=models)
    shared = 0
    while sim.next_decision():
        random_core_commands(sim, rng)
        shared += any(j._pace.nic_key for j in sim.active_jobs.values())
    check_simulator(sim)
    assert shared > 0  # the rollout did exercise NIC sharing
