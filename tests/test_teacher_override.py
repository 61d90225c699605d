"""eval/teacher_override.py: the disagreement kinds, the override played only where its kind disagrees, the
``all`` variant reproducing the teacher alone and ``none`` the agent alone, and the paired tables."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clustergym.agents.bc import DISAGREEMENTS, disagreement_kinds
from clustergym.eval.rollout import EVAL_DEFAULTS, predictor, rollout
from clustergym.scenarios import make_env

_spec = importlib.util.spec_from_file_location("teacher_override",
                                               Path(__file__).parents[1] / "eval" / "teacher_override.py")
O = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(O)

SMALL = {"window_jobs": 12, "max_steps": 3_000}
SEEDS = [10_000, 10_001]


def test_disagreement_kinds_of_a_worked_example():
    # 3 rows x 4 columns, then "end round" = 12
    pred = np.array([5, 12, 5, 1, 6, 12])
    label = np.array([5, 5, 12, 9, 7, 12])
    kinds = [DISAGREEMENTS[k] for k in disagreement_kinds(pred, label, end=12, columns=4)]
    assert kinds == ["agree", "end", "end", "row", "destination", "agree"]


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    from sb3_contrib import MaskablePPO

    from clustergym.agents.policies import overload_threshold, policy_spec

    env = make_env(O.CONTENDED, SMALL)
    cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    return MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0)


def _alone(policy, name):
    env = make_env(O.CONTENDED, {**EVAL_DEFAULTS, **SMALL})
    return [rollout(env, predictor(policy, env, name), s) for s in SEEDS]


def test_all_is_the_teacher_and_none_the_agent(agent):
    for fix, alone in (("all", _alone("mlf-h-req", "mlf-h-req")), ("none", _alone(agent, "agent"))):
        recs = O.play(agent, "mlf-h-req", fix, SEEDS, SMALL)
        for r, a in zip(recs, alone):
            assert (r["mean_jct_censored"], r["agent_steps"]) == (a["mean_jct_censored"], a["agent_steps"])
            assert sum(r[f"n_{k}"] for k in DISAGREEMENTS) == r["agent_steps"]
            assert r["overrides"] == (r["agent_steps"] - r["n_agree"] if fix == "all" else 0)


def test_an_override_is_played_only_at_its_kind(agent):
    for fix in ("end", "destination"):
        for r in O.play(agent, "mlf-h-req", fix, SEEDS, SMALL):
            assert r["overrides"] == r[f"n_{fix}"] > 0
            if fix == "end":
                assert r["agent_ends"] + r["teacher_ends"] == r["n_end"]


def test_unknown_variant_is_refused():
    with pytest.raises(ValueError, match="unknown variant 'ends'"):
        O.overriding(None, None, "ends", None, 12, 4)


def test_tables_pair_every_variant_with_none():
    recs = [{"variant": v, "seed": s, "mean_jct_censored": 100.0 + s + d, "deadline_ratio": 1.0, "unfinished": 0,
             "mean_waiting": 1.0, "agent_steps": 10, **{k: 0 for k in O._COUNTED}}
            for v, d in (("none", 0.0), ("end", -20.0)) for s in (1, 2, 3)]
    paired, md = O.tables(pd.DataFrame(recs))
    jct = paired[paired["metric"] == "mean_jct_censored"]
    assert list(jct["mean_diff"]) == [20.0]  # none - end: the end disagreements cost the agent 20 s
    assert "`none` (the agent as it is) − variant" in md


def test_main_writes_every_variant_asked_for(agent, tmp_path):
    agent.save(tmp_path / "a.zip")
    out = tmp_path / "out"
    O.main(["--agent", str(tmp_path / "a.zip"), "--set", "window_jobs=12", "--seeds", "10000", "10000",
            "--max-steps", "3000", "--fix", "none", "end", "--out", str(out)])
    episodes = pd.read_csv(out / "episodes.csv")
    assert list(episodes["variant"]) == ["none", "end"]
    assert (out / "override.md").read_text().count("| end ") >= 2  # a row of the means and of the paired table
    assert set(pd.read_csv(out / "paired.csv")["vs"]) == {"end"}
