"""The round rule (envs/core/rounds.py): one record in the simulator, checked by command_error and execute, read
by the env's window and the heuristics."""
import gymnasium as gym
import pytest

import clustergym  # noqa: F401  (registers the ids)
from clustergym.core.commands import Command, command_error, execute
from clustergym.core.engine import Simulator
from clustergym.core.job import InvalidCommand
from helpers import cluster, job, models


def _sim() -> Simulator:
    # two 4-GPU servers, a 2-GPU job and a 1-GPU job (changeable stopping rules)
    sim = Simulator(cluster(2), [job(0, R=2, iters=500), job(1, R=1, iters=500)],
                    models=models)
    assert sim.next_decision()
    return sim


def _refused(sim: Simulator, cmd: Command, reason: str) -> None:
    assert reason in (command_error(sim, cmd) or "")
    with pytest.raises(InvalidCommand, match=reason):
        execute(sim, cmd)


def test_a_task_placed_in_a_round_is_not_moved_again_in_it_but_is_in_the_next():
    sim = _sim()
    t0, t1 = (t.tid for t in sim.job(0).tasks)
    execute(sim, Command("place", t0, 0))
    execute(sim, Command("place", t1, 0))
    _refused(sim, Command("migrate", t0, 1), f"task {t0} was already placed or moved in this round")
    _refused(sim, Command("requeue", t0), f"task {t0} was already placed or moved in this round")
    _refused(sim, Command("preempt", jid=0), "a task of job 0 was placed, moved or preempted in this round")
    assert sim.round.moved_tasks == {t0, t1} and sim.round.moved_jobs == {sim.job(0)}
    assert sim.next_decision()  # the next round
    assert not sim.round.moved_tasks and command_error(sim, Command("migrate", t0, 1)) is None


def test_a_requeued_task_may_be_placed_again_in_the_round_and_then_stays():
    sim = _sim()
    t = sim.job(1).tasks[0].tid
    execute(sim, Command("place", t, 0))
    sim.next_decision()
    execute(sim, Command("requeue", t))
    assert command_error(sim, Command("place", t, 1)) is None  # a waiting task is always placeable
    execute(sim, Command("place", t, 1))
    _refused(sim, Command("requeue", t), "already placed or moved")


def test_a_stopping_rule_changes_once_per_round():
    sim = _sim()
    execute(sim, Command("stop-option", jid=0, option="opt-stop"))
    _refused(sim, Command("stop-option", jid=0, option="run-all"), "stopping rule was already changed")


def test_the_env_window_reads_the_simulators_record():
    env = gym.make("clustergym/GPUCluster-v1", window_jobs=20)
    env.reset(seed=0)
    u = env.unwrapped
    w = u.window
    assert w._record is u.sim.round  # the window reads the simulator's record, keeps none of its own
    for _ in range(200):  # place tasks until a placement leaves the round open
        place = [w.encode(r, c) for r, k in enumerate(w.kinds) if k == "place" for c in range(u.K)]
        a = next(i for i in place if u.action_masks()[i])
        tid = w.command(a).tid
        env.step(a)
        if u._round_actions:
            break
    assert tid in u.sim.round.moved_tasks
    assert w.action(Command("requeue", tid)) is None  # not offered: it was placed in this round
