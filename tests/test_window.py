"""The window's candidate rule over the whole queue: one row per waiting job, the neutral overflow rule,
running-job rows, and the stop-option columns (clustergym.window)."""
from __future__ import annotations

from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym import baselines
from clustergym.core.commands import Command
from clustergym.core.workload import STOP_OPTIONS
from clustergym.gym_env import ClusterEnv
from clustergym.window import InvalidAction
from clustergym.window_overflow import RUNNING_ORDERS, WAITING_ORDERS, round_robin
from helpers import MODELS, StopThenFIFO, cluster, job, models


def _env(specs, n_servers=1, **cfg):
    return ClusterEnv(dict(invalid_action="raise", **cfg), cluster_spec=cluster(n_servers), job_specs=specs,
                      models=models, model_names=list(MODELS))


def _rows(u, kind="place"):
    return [t.job.jid for t, k in zip(u.window.tasks, u.window.kinds) if k == kind]


def test_one_row_per_waiting_job_reaches_every_waiting_job():
    """Default window on a contended generator workload: every waiting job whose next task fits a destination
    has exactly one row, whatever its place in the queue (the old window showed the first 16 tasks)."""
    env = gym.make("clustergym/GPUClusterLight-v1", workload="generator", window_jobs=120, generator={"load": 1.5},
                   invalid_action="raise")
    u = env.unwrapped
    env.reset(seed=3)
    agent = baselines.make("fifo", env=env)  # FIFO's head blocks, so the queue grows long (38 jobs here)
    most = 0
    for _ in range(1200):
        sim = u.sim
        fitting = {t.job.jid for t in sim.queue.values() if t.is_ready() and sim.feasible_servers(t).any()}
        rows = _rows(u)
        assert len(rows) == len(set(rows))  # one row per job
        n_running = sum(k in ("migrate", "running") for k in u.window.kinds)
        if len(fitting) <= u.W - n_running:
            assert set(rows) == fitting
        most = max(most, len(rows))
        obs, _, te, tr, _ = env.step(agent.predict(None)[0])
        if te or tr:
            break
    assert most > 16  # more waiting jobs than the old window's 16 rows (first reached at step 764)


def test_round_robin_takes_each_orderings_head_in_turn():
    J = [SimpleNamespace(jid=i, spec=SimpleNamespace(submit_time=float(i), n_gpus=g, deadline=d))
         for i, (g, d) in enumerate([(4, 9.0), (4, 8.0), (1, 7.0), (2, 1.0), (2, 5.0)])]
    key = [lambda now: lambda j: j.spec.submit_time, lambda now: lambda j: (j.spec.n_gpus, j.jid),
           lambda now: lambda j: (j.spec.deadline, j.jid)]
    # turn 1: arrival -> 0, fewest GPUs -> 2, earliest deadline -> 3; turn 2: 1, 4 (2 taken), (3, 4 taken)
    assert [j.jid for j in round_robin(J, key, 0.0, 5)] == [0, 2, 3, 1, 4]
    assert [j.jid for j in round_robin(J, key, 0.0, 2)] == [0, 2]
    assert round_robin(J, key, 0.0, 99) == round_robin(J, key, 0.0, 5)  # every job once


def _five_waiting_jobs(**cfg):
    """One 4-GPU server; job 9 (4 GPUs) holds it, then five jobs wait: (submit, GPUs, deadline) =
    j0 (10, 4, 9e5), j1 (11, 4, 8e5), j2 (12, 1, 7e5), j3 (13, 2, 1e3+14), j4 (14, 2, 5e5)."""
    specs = [job(9, model="toy-none", R=4, iters=10**6)] + [
        job(i, submit=10.0 + i, model="toy-none", R=g, deadline=d)
        for i, (g, d) in enumerate([(4, 9e5), (4, 8e5), (1, 7e5), (2, 1014.0), (2, 5e5)])]
    env = _env(specs, preemption=False, stop_option_actions=False, **cfg)
    obs, _ = env.reset(seed=0)
    env.step(env.window.action(Command("place", env.sim.job_by_id[9].tasks[0].tid, 0)))
    while len(_rows(env)) < 5:
        rows = _rows(env)
        cmd = Command("place", env.window.tasks[0].tid, 0) if rows == [9] else None
        env.step(env.window.action(cmd) if cmd else env.end_round_action)
    return env


@pytest.mark.parametrize("W,expect", [(5, [0, 1, 2, 3, 4]), (4, [0, 1, 2, 3]), (3, [0, 1, 2]), (2, [0, 2])])
def test_overflow_draws_waiting_jobs_from_every_ordering(W, expect):
    """Hand-derived: arrival's head is j0, fewest GPUs' j2, least attained service's (all 0, ties by arrival)
    j1 once j0 is taken, earliest deadline's j3; so W = 3 shows j0, j1, j2 and W = 4 adds j3. A 16-row
    arrival-order window would show j0, j1 first whatever the rule of the policy."""
    env = _five_waiting_jobs()
    assert _rows(env) == [0, 1, 2, 3, 4]
    w = env.window
    from clustergym.window import Window
    small = Window(W, w.K, preemption=False, stop_options=False)
    small.reset(env.sim)
    small.build(env.sim)
    assert [t.job.jid for t in small.tasks if t is not None] == expect
    assert small.queue_beyond == len(env.sim.queue) - len(expect)


def test_overflow_keeps_partly_placed_jobs_first():
    env = _five_waiting_jobs()
    sim = env.sim
    j4 = sim.job_by_id[4]
    # half of j4's gang placed (the server's GPUs are shared by nominal fit): it must stay reachable
    env.step(env.window.action(Command("place", j4.tasks[0].tid, 0)))
    from clustergym.window import Window
    small = Window(2, env.window.K, migrate_rows=0, preemption=False, stop_options=False)
    small.reset(sim)
    small.build(sim)
    assert [t.job.jid for t in small.tasks if t is not None] == [0, 4]  # j4 first, then arrival's head


def test_running_rows_overflow_uses_the_victim_orderings():
    now = 100.0
    J = [SimpleNamespace(jid=i, spec=SimpleNamespace(submit_time=float(i), n_gpus=g, deadline=d), running_time=rt,
                         rate=0.0, n_placed=0, tasks=[], last_update=now, paused_until=0.0)
         for i, (g, d, rt) in enumerate([(1, 5.0, 50.0), (8, 6.0, 10.0), (2, 9.0, 5.0), (1, 1.0, 1.0)])]
    # most service: j1 (80 GPU-s); latest arrival: j3; most GPUs: j1 taken -> j2; latest deadline: j2 taken -> j1,
    # j0 ... -> j0
    assert [j.jid for j in round_robin(J, RUNNING_ORDERS, now, 4)] == [1, 3, 2, 0]
    assert len(WAITING_ORDERS) == len(RUNNING_ORDERS) == 4


# ---------------------------------------------------------------------------------------- stop options
def _stop_env():
    """Three running jobs on two servers: j0 run-all (changeable), j1 run-all (the user forbids changes), j2
    opt-stop (changeable); j3 waits, so the running jobs' rows stay (they may be preempted)."""
    specs = [job(0, model="toy-none", R=1, iters=10**6, stop="run-all"),
             job(1, model="toy-none", R=1, iters=10**6, stop="run-all", stop_changeable=False),
             job(2, model="toy-none", R=1, iters=10**6, stop="opt-stop"),
             job(3, model="toy-none", R=2, iters=10**6)]
    env = _env(specs, n_servers=2)
    env.reset(seed=0)
    for jid in (0, 1, 2):
        env.step(env.window.action(Command("place", env.sim.job_by_id[jid].tasks[0].tid, 0)))
    env.step(env.end_round_action)  # a new round: jobs placed in the last one may be preempted again
    return env


def _stop_mask(env, jid):
    w = env.window
    row = next(r for r, t in enumerate(w.tasks) if t is not None and t.job.jid == jid)
    return w.mask[:-1].reshape(w.W, w.C)[row, w.K + 1:].tolist(), row


def test_stop_option_columns_follow_the_simulator_rule_once_per_round():
    env = _stop_env()
    w, sim = env.window, env.sim
    assert _rows(env, "running") == [0, 1, 2] and _rows(env) == [3]
    # run-all -> opt-stop or requirement; changes forbidden by the user: none; opt-stop -> requirement only
    # (run-all costs more than the user's own)
    assert _stop_mask(env, 0)[0] == [False, True, True]
    assert _stop_mask(env, 1)[0] == [False, False, False]
    assert _stop_mask(env, 2)[0] == [False, False, True]
    assert _stop_mask(env, 3)[0] == [False, True, True]  # a waiting job's row carries its job's options too
    _, row = _stop_mask(env, 0)
    a = w.encode(row, w.K + 1 + STOP_OPTIONS.index("requirement"))
    assert w.command(a) == Command("stop-option", jid=0, option="requirement")
    obs, *_ = env.step(a)
    assert sim.job_by_id[0].stop_option == "requirement"
    mask, row = _stop_mask(env, 0)
    assert mask == [False, False, False]  # changed once in this round: not again
    with pytest.raises(InvalidAction, match="already changed in this round"):
        env.step(w.encode(row, w.K + 1))
    cols = env.obs_builder.task_cols
    assert obs["tasks"][row, cols.index("stop_requirement")] == 1 and obs["tasks"][row, cols.index("stop_run_all")] == 0
    assert obs["tasks"][row, cols.index("own_stop_run_all")] == 1
    assert obs["tasks"][row, cols.index("stop_changeable")] == 1
    assert obs["tasks"][row, cols.index("job_row")] == 1
    env.step(env.end_round_action)
    assert _stop_mask(env, 0)[0] == [True, True, False]  # a new round: back to the user's own, or to opt-stop


def test_stop_option_reasons_name_the_rule():
    env = _stop_env()
    w = env.window
    _, row = _stop_mask(env, 2)
    reason = w.why_invalid(w.encode(row, w.K + 1), env.sim)  # opt-stop job -> run-all
    assert "not cheaper" in reason and "'run-all'" in reason


def test_heuristic_stop_option_commands_map_to_actions():
    from clustergym.baselines.agent import HeuristicAgent

    env = _stop_env()
    agent = HeuristicAgent(StopThenFIFO(), env)
    changed = set()
    for _ in range(20):
        cmd = env.window.command(int(agent.predict(None)[0]))
        if cmd.kind != "stop-option":
            break
        assert cmd.option == "requirement"
        env.step(env.window.action(cmd))
        changed.add(cmd.jid)
    assert changed == {0, 2, 3}  # job 1's user did not allow it
    assert cmd.kind == "place" and cmd.tid == env.sim.job_by_id[3].tasks[0].tid  # then FIFO's placement
