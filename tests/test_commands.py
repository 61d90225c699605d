"""Scheduler commands (clustergym.core.commands): the stop-option command and its rule (MLFS §3.5)."""
from __future__ import annotations

import pytest

from clustergym.core.commands import Command, command_error, execute
from clustergym.core.engine import InvalidCommand, SimConfig, Simulator
from clustergym.core.job import JobState

from helpers import cluster, job, models


def _sim(*specs):
    sim = Simulator(cluster(), list(specs), SimConfig(usage_change_mean_s=0.0), seed=0, models=models)
    assert sim.next_decision()
    return sim


def test_stop_option_moves_only_to_cheaper_options_the_user_allowed():
    sim = _sim(job(0, stop="opt-stop", stop_changeable=True), job(1, stop="run-all", stop_changeable=False))
    cheaper = Command("stop-option", jid=0, option="requirement")
    assert command_error(sim, cheaper) is None
    dearer = Command("stop-option", jid=0, option="run-all")
    assert "not cheaper" in command_error(sim, dearer)
    assert "did not allow" in command_error(sim, Command("stop-option", jid=1, option="opt-stop"))
    assert "already uses" in command_error(sim, Command("stop-option", jid=0, option="opt-stop"))
    assert "unknown stop option" in command_error(sim, Command("stop-option", jid=0, option="half"))
    assert "unknown job id" in command_error(sim, Command("stop-option", jid=7, option="opt-stop"))
    execute(sim, cheaper)
    j0 = sim.job(0)
    assert j0.stop_option == "requirement" and j0.target_iters == j0.target_for("requirement")
    # the user's own option can always be given back, in a later round (the round rule: once per round)
    back = Command("stop-option", jid=0, option="opt-stop")
    assert "already changed in this round" in command_error(sim, back)
    assert sim.next_decision() and command_error(sim, back) is None
    with pytest.raises(InvalidCommand, match="not cheaper"):
        sim.set_stop_option(0, "run-all")


def test_a_job_past_its_new_target_finishes_at_once():
    # job 1 arrives at t = 30 s: the next decision point (the round tick after it) comes before job 0's 100th
    # iteration (1 s each)
    sim = _sim(job(0, iters=100, acc_req=0.1, stop="run-all", stop_changeable=True), job(1, submit=30.0))
    j = sim.job(0)
    for t in j.tasks:
        execute(sim, Command("place", t.tid, 0))
    assert sim.next_decision() and sim.now < 100.0
    assert j.state == JobState.ACTIVE and j.target_for("requirement") < sim.now - 1.0
    execute(sim, Command("stop-option", jid=0, option="requirement"))
    assert j.state == JobState.FINISHED
