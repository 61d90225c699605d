"""The warm start's teacher: MLFS-H+C with MLF-C as stop-option actions (an agent can imitate it), which
heuristics can be cloned, and ``expert: best`` choosing on training windows only."""
from __future__ import annotations

import pytest

from clustergym import baselines
from clustergym.agents.bc import imitation_error
from clustergym.baselines.base import Command
from clustergym.config import ConfigError
from clustergym.core.commands import execute
from clustergym.core.config import SimConfig
from clustergym.core.engine import Simulator
from clustergym.core.view import ClusterView
from clustergym.train import teacher
from clustergym.train.config import load_config

import helpers


def _round(sim, pol, view) -> list[Command]:
    """One decision round of ``pol`` at core level; the commands it took."""
    taken = []
    while (cmd := pol.decide(view)) is not None:
        pol.observe(view, cmd)
        execute(sim, cmd)
        taken.append(cmd)
    return taken


def test_mlfc_as_actions_moves_and_restores_like_the_controller():
    """Three one-GPU jobs on one GPU: the first round puts the changeable jobs on OptStop (MLFS's option) and
    places one job; two wait (overload), so in the next round the changeable job goes to "requirement" through
    a stop-option command (one change per job and round: the round rule), the one its user locked does not;
    once nothing waits, it is restored to OptStop the same way. No controller is attached."""
    specs = [helpers.job(0, iters=100, acc_req=0.5, stop="run-all"),
             helpers.job(1, iters=100, acc_req=0.5, stop="run-all", stop_changeable=False),
             helpers.job(2, iters=100, acc_req=0.5)]
    sim = Simulator(helpers.cluster(1, gpus=1), specs, SimConfig(usage_change_mean_s=0.0), 0, models=helpers.models)
    pol = baselines.make("mlfs-h+c-act")
    pol.attach(sim)
    assert sim.controllers == []
    view = ClusterView(sim)
    assert sim.next_decision()
    taken = _round(sim, pol, view)
    j0, j1, _ = sim.jobs
    assert sim.queue and view.cluster_overloaded()
    assert taken[0] == Command("stop-option", jid=j0.jid, option="opt-stop")
    assert [c.kind for c in taken].count("place") == 1
    assert not any(c.option == "requirement" for c in taken)  # j0's rule already changed in this round
    sim.round.clear()  # the next round at the same state (no time passes, so the overload stays)
    taken = _round(sim, pol, view)
    assert Command("stop-option", jid=j0.jid, option="requirement") in taken
    assert j0.stop_option == "requirement" and j0.target_iters == 50 and pol.control.moved(j0.jid)
    assert j1.stop_option == "run-all"
    sim.queue.clear()  # the overload is gone
    sim.round.clear()
    assert not view.cluster_overloaded()
    moved = [c.jid for c in taken if c.kind == "stop-option" and c.option == "requirement"]
    assert _round(sim, pol, view) == [Command("stop-option", jid=j, option="opt-stop") for j in moved]
    assert j0.stop_option == "opt-stop" and not pol.control.moved(j0.jid)


def test_mlfc_as_actions_acts_through_the_env(monkeypatch):
    """In the env, the action form's stop-option changes are env actions (the stop-option columns), and on a
    contended window it moves jobs to their requirement as MLFS-H+C's controller does."""
    import numpy as np

    from clustergym.scenarios import make_env

    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": 50})
    agent = baselines.make("mlfs-h+c-act", env=env)
    obs, info = env.reset(seed=3)
    u = env.unwrapped
    C, K, done, to_req = u.window.C, u.K, False, 0
    while not done:
        a = int(agent.predict(obs, action_masks=u.action_masks())[0])
        if a != u.end_round_action and a % C > K:
            to_req += u.window.command(a).option == "requirement"
        obs, r, term, trunc, info = env.step(a)
        done = term or trunc
    assert u.sim.controllers == [] and to_req >= 5
    assert np.isfinite(info["summary"]["mean_jct"])


def test_only_heuristics_acting_through_actions_can_be_cloned():
    assert imitation_error("mlf-h") is None and imitation_error("mlfs-h+c-act") is None
    assert "controller" in imitation_error("mlfs-h+c") and "mlfs-h+c-act" in imitation_error("mlfs-h+c")
    assert "not a heuristic" in imitation_error("nope")
    with pytest.raises(ConfigError, match="expert: 'mlfs-h\\+c' attaches a controller"):
        load_config(overrides={"expert": "mlfs-h+c"})
    with pytest.raises(ConfigError, match="expert_candidates: 'mlfs-h\\+c' attaches"):
        load_config(overrides={"expert_candidates": ["mlf-h", "mlfs-h+c"]})
    with pytest.raises(ConfigError, match="expert_candidates must name"):
        load_config(overrides={"expert_candidates": []})


def test_best_teacher_is_chosen_on_training_windows_only(monkeypatch):
    """``expert: best`` ranks the candidates by the checkpoint rule on training windows (split "train", its
    own seeds), never on the validation or final-table windows."""
    import clustergym.eval.rollout as rollout

    calls = []
    fake = {"fifo": (0.0, 900.0), "sjf": (0.0, 500.0), "mlf-h": (1.0, 100.0)}  # (unfinished, mean_jct_censored)

    def evaluate(policy, env_id, config, seeds, **kw):
        seeds = list(seeds)
        calls.append((policy, config["split"], seeds))
        u, j = fake[policy]
        return [{"unfinished": u, "mean_jct_censored": j, "mean_jct": j} for _ in seeds]

    monkeypatch.setattr(rollout, "evaluate", evaluate)
    cfg = load_config(overrides={"expert_candidates": ["fifo", "sjf", "mlf-h"], "expert_episodes": 3,
                                 "progress_bar": False, "seed": 2})
    name, table = teacher.choose_teacher(cfg)
    assert name == "sjf"  # mlf-h's lower JCT does not count: it leaves jobs unfinished
    assert [c[0] for c in calls] == ["fifo", "sjf", "mlf-h"] and {c[1] for c in calls} == {"train"}
    seeds = calls[0][2]
    assert seeds == teacher.teacher_seeds(cfg) and len(seeds) == 3
    held_out = set(cfg.val_seeds()) | set(cfg.final_seeds())
    assert not set(seeds) & held_out
    assert table["chosen"] == "sjf" and table["candidates"]["sjf"]["mean_jct_censored"] == 500.0
    assert teacher.choose_teacher(load_config(overrides={"expert": "fifo"})) == ("fifo", {})
