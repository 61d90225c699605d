"""The ``-v2`` ids' row rules, by which every running job can be preempted whole at every decision point:
``EnvConfig.preempt_migrating`` (a running job shown by migration rows also gets a running-job row) and
``EnvConfig.preempt_empty_queue`` (preemption offered while no task waits)."""
import gymnasium as gym
import numpy as np
import pandas as pd
import pytest

import clustergym  # noqa: F401  (registers the ids)
from clustergym import baselines
from clustergym.baselines.base import Policy, run
from clustergym.core.commands import Command, execute
from clustergym.core.engine import Simulator
from clustergym.core.view import ClusterView
from clustergym.eval.rollout import predictor, rollout

V1, V2 = "clustergym/GPUCluster-v1", "clustergym/GPUCluster-v2"
# every busy server overloaded, and every task on one shown as a migration row
HOT = dict(window_jobs=30, migrate_rows=None, sim={"overload_threshold": 0.05})


def _step_until(env, found, steps: int):
    """Step FIFO-like (first valid placement, else end the round) until ``found(u)`` returns something; returns it,
    or None."""
    u = env.unwrapped
    for _ in range(steps):
        hit = found(u)
        if hit is not None:
            return hit
        w, mask = u.window, u.action_masks()
        place = [r for r, k in enumerate(w.kinds) if k == "place"]
        a = next((w.encode(r, c) for r in place for c in range(u.K) if mask[w.encode(r, c)]), u.end_round_action)
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            return None
    return None


def _first_dual_state(env_id: str, seed: int = 0, steps: int = 600):
    """Until some fully placed running job has migration rows while tasks wait; returns (env, that job) or
    (env, None)."""
    env = gym.make(env_id, **HOT)
    env.reset(seed=seed)

    def dual(u):
        w = u.window
        migrating = {t.job for t, k in zip(w.tasks, w.kinds) if k == "migrate"}
        job = next((j for j in migrating if j.n_placed == len(j.tasks) and j not in u.sim.round.moved_jobs), None)
        return job if job is not None and u.sim.queue else None

    return env, _step_until(env, dual, steps)


def test_v1_rows_leave_a_migrating_job_without_its_preemption():
    env, job = _first_dual_state(V1)
    assert job is not None
    w = env.unwrapped.window
    assert not any(k == "running" and t.job is job for t, k in zip(w.tasks, w.kinds))
    assert w.action(Command("preempt", jid=job.jid)) is None


def test_v2_gives_a_migrating_job_a_running_row_that_preempts_it_whole():
    env, job = _first_dual_state(V2)
    assert job is not None
    u = env.unwrapped
    w = u.window
    rows = [r for r, (t, k) in enumerate(zip(w.tasks, w.kinds)) if k == "running" and t.job is job]
    assert len(rows) == 1
    mig = next(r for r, (t, k) in enumerate(zip(w.tasks, w.kinds)) if k == "migrate" and t.job is job)
    mask = u.action_masks()
    a = w.encode(rows[0], w.D)
    assert mask[a]
    # the stop options stay on the migration row only: one action per command
    stop_cols = range(w.D + 1, w.D + 1 + w.n_stop)
    assert not any(mask[w.encode(rows[0], c)] for c in stop_cols)
    assert w.n_stop and any(mask[w.encode(mig, c)] for c in stop_cols)
    assert f"migration row {mig}" in w.why_invalid(w.encode(rows[0], w.D + 1), u.sim)
    assert w.action(Command("preempt", jid=job.jid)) == a
    env.step(a)
    assert job.n_placed == 0  # every task of the job is back in the queue


def test_v2_changes_only_the_row_rules():
    from clustergym.scenarios import SCENARIOS, scenario_fields

    v1 = [i for i in SCENARIOS if i.endswith("-v1")]
    assert v1 and all(i[:-1] + "2" in SCENARIOS for i in v1)
    for i in v1:
        f1, f2 = scenario_fields(i), scenario_fields(i[:-1] + "2")
        for flag in ("preempt_migrating", "preempt_empty_queue"):
            assert f2.pop(flag) is True and flag not in f1
        assert f1 == f2


def _first_empty_queue_state(env_id: str, seed: int = 0, steps: int = 3000):
    """Until the env stops at a decision point with no task waiting and a fully placed running job shown that was
    not moved in this round; returns (env, its running-job row) or (env, None)."""
    env = gym.make(env_id, window_jobs=30)
    env.reset(seed=seed)

    def idle_queue_row(u):
        w = u.window
        running = [r for r, k in enumerate(w.kinds) if k == "running" and w.tasks[r].job not in u.sim.round.moved_jobs]
        return running[0] if running and not u.sim.queue else None

    return env, _step_until(env, idle_queue_row, steps)


@pytest.mark.parametrize("env_id", [V1, V2])
def test_preemption_while_nothing_waits_only_on_v2(env_id):
    # overload decision points with the queue empty: on -v1 a running-job row carries its stop options only,
    # on -v2 its "back to the queue" preempts the job (Hare's rescheduling: to be placed again elsewhere)
    env, row = _first_empty_queue_state(env_id)
    assert row is not None
    u = env.unwrapped
    w = u.window
    a, job = w.encode(row, w.D), w.tasks[row].job
    if env_id == V1:
        assert not u.action_masks()[a]
        assert "preempt_empty_queue is off" in w.why_invalid(a, u.sim)
        return
    assert u.action_masks()[a] and w.action(Command("preempt", jid=job.jid)) == a
    env.step(a)
    assert job.n_placed == 0 and u.sim.queue  # its tasks wait now, placeable in this round


@pytest.mark.parametrize("kw", [HOT, {"window_jobs": 40}])
def test_v2_random_valid_actions_all_execute(kw):
    # every action the mask allows executes (invalid_action="raise"); a job with migration rows and a partly
    # placed gang, or more such jobs than running rows, leaves no running row to mask
    env = gym.make(V2, **kw, invalid_action="raise")
    u = env.unwrapped
    env.reset(seed=3)
    rng = np.random.default_rng(0)
    duals = 0
    for _ in range(1500):
        mask = u.action_masks()
        duals += bool(u.window._dual_jobs)
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            env.reset()
    assert duals > 0


def _records(sim) -> pd.DataFrame:
    return pd.DataFrame(sim.job_records()).select_dtypes("number")


def _env_and_core(env_id: str, seed: int, **kw) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-job numeric records of UniSched through ``env_id`` (``predict``) and of its core run on the same jobs."""
    env = gym.make(env_id, max_steps=None, **kw)
    u = env.unwrapped
    rollout(env, predictor("unisched", env), seed)
    sim = Simulator(u._cluster, [j.spec for j in u.sim.jobs], u.sim_config, seed=u.episode["sim_seed"],
                    models=u._models)
    run(sim, baselines.make("unisched"))
    return _records(u.sim), _records(sim)


@pytest.mark.parametrize("version, same", [("v1", False), ("v2", True)])
def test_unisched_through_the_env_is_its_core_run_with_v2_rows(version, same):
    # UniSched suspends running jobs at their lease ends; on v1 a job with a task on an overloaded server has no
    # action that does, so the runs part (30-job window, seed 1)
    e, c = _env_and_core(f"clustergym/UniSched-{version}", 1, window_jobs=30)
    assert (e.shape == c.shape and np.array_equal(e.to_numpy(), c.to_numpy())) is same


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(5))
def test_unisched_v2_through_the_env_is_its_core_run_on_the_registered_scenario(seed):
    e, c = _env_and_core("clustergym/UniSched-v2", seed)
    pd.testing.assert_frame_equal(e, c)


class _PlaceThenPreempt(Policy):
    """Places every candidate on server 0, then asks to preempt every placed job."""
    name = "place-then-preempt"

    def preferences(self, view, cands):
        for t in cands.place:
            yield Command("place", t.tid, 0)
        for j in view.active_jobs():
            if j.n_placed:
                yield Command("preempt", jid=j.jid)


def test_core_level_round_rule_matches_the_window_no_preemption_of_a_job_placed_this_round():
    from helpers import cluster, job, models

    # one 4-GPU server and two jobs
    sim = Simulator(cluster(1), [job(0, R=4, iters=500), job(1, R=1, iters=500)], models=models)
    pol = _PlaceThenPreempt()
    assert sim.next_decision()
    view = ClusterView(sim)
    taken = []
    while (cmd := pol.decide(view)) is not None and len(taken) < 50:  # without the rule: place, preempt, ...
        pol.observe(view, cmd)
        execute(sim, cmd)
        taken.append(cmd.kind)
    assert taken and set(taken) == {"place"}  # jobs placed; their preemption waits for another round
    assert sim.job(0).n_placed == len(sim.job(0).tasks)
    assert "placed, moved or preempted in this round" in view.command_error(Command("preempt", jid=0))
    assert sim.next_decision()
    assert pol.decide(view) == Command("preempt", jid=0)


@pytest.mark.parametrize("empty_queue, same", [(False, False), (True, True)])
def test_hlas_through_the_env_is_its_core_run_with_preemption_while_nothing_waits(empty_queue, same):
    # HLAS's rescheduling preempts a job to place it again on GPUs where its round ends sooner, also with the
    # queue empty (at an overload decision point); without -v2's preempt_empty_queue the runs part (50-job
    # held-out window 20002; every running job shown, as for Tiresias below)
    env = gym.make(V2, split="test", window_jobs=50, running_rows=None, max_steps=None,
                   preempt_empty_queue=empty_queue)
    u = env.unwrapped
    rollout(env, predictor("hlas", env), 20002)
    sim = Simulator(u._cluster, [j.spec for j in u.sim.jobs], u.sim_config, seed=u.episode["sim_seed"],
                    models=u._models)
    run(sim, baselines.make("hlas"))
    e, c = _records(u.sim), _records(sim)
    assert (e.shape == c.shape and np.array_equal(e.to_numpy(), c.to_numpy())) is same


def test_tiresias_through_the_env_is_its_core_run_with_every_running_job_shown():
    # -v2 rows and no cap on running-job rows: every preemption Tiresias makes at core level is an action (on
    # -v1, or with the default cap of 16 running-job rows, the runs part); 50-job held-out window 20001
    env = gym.make(V2, split="test", window_jobs=50, running_rows=None, max_steps=None)
    u = env.unwrapped
    rollout(env, predictor("tiresias", env), 20001)
    sim = Simulator(u._cluster, [j.spec for j in u.sim.jobs], u.sim_config, seed=u.episode["sim_seed"],
                    models=u._models)
    run(sim, baselines.make("tiresias"))
    pd.testing.assert_frame_equal(_records(u.sim), _records(sim))
