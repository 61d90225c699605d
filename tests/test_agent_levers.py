"""eval/agent_levers.py: the fixed-stop setting leaves no stop option, the action counts add up to the steps,
and the tables pair the agent with each policy per setting."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

_spec = importlib.util.spec_from_file_location("agent_levers", Path(__file__).parents[1] / "eval" / "agent_levers.py")
L = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(L)

SMALL = {"window_jobs": 12}


def _actions(rec: dict) -> dict:
    return {k[len("actions_"):]: v for k, v in rec.items() if k.startswith("actions_") and v == v}


def test_counts_add_up_and_fixed_stop_leaves_no_stop_option():
    default = L.play("mlfs-h+c-act", "mlfs-h+c-act", "default", [10_000, 10_001], 3_000, SMALL)
    fixed = L.play("mlfs-h+c-act", "mlfs-h+c-act", "fixed-stop", [10_000, 10_001], 3_000, SMALL)
    for rec in default + fixed:
        assert sum(_actions(rec).values()) == rec["agent_steps"] > 0
    assert any(k.startswith("stop-option") for r in default for k in _actions(r))  # MLF-C acts on this window
    assert not any(k.startswith("stop-option") for r in fixed for k in _actions(r))
    plain = L.play("mlf-h", "mlf-h", "default", [10_000], 3_000, SMALL)[0]
    assert not _actions(plain)  # only the policies of COUNTED are counted


def test_tables_pair_the_agent_per_setting():
    recs = []
    for setting, shift in (("default", -10.0), ("fixed-stop", 5.0)):
        for seed in (1, 2, 3):
            base = {"setting": setting, "seed": seed, "mean_accuracy": 0.7, "deadline_ratio": 1.0,
                    "accuracy_ratio": 1.0, "unfinished": 0}
            recs.append({**base, "policy": "agent", "mean_jct_censored": 100.0 + seed + shift, "actions_place": 3})
            recs.append({**base, "policy": "mlf-h", "mean_jct_censored": 100.0 + seed})
    paired, md = L.tables(pd.DataFrame(recs))
    jct = paired[paired["metric"] == "mean_jct_censored"].set_index("setting")["mean_diff"]
    assert jct["default"] == -10.0 and jct["fixed-stop"] == 5.0
    assert "## default" in md and "## fixed-stop" in md


def test_main_plays_the_agent_with_the_decoding_asked_for(tmp_path, monkeypatch):
    import warnings

    from sb3_contrib import MaskablePPO

    from clustergym.agents import decode
    from clustergym.agents.policies import overload_threshold, policy_spec
    from clustergym.scenarios import make_env

    env = make_env(L.CONTENDED)
    cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0).save(tmp_path / "a.zip")
    calls = []
    real = decode.row_kind_mode
    monkeypatch.setattr(decode, "row_kind_mode", lambda *a: calls.append(1) or real(*a))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the pickle warning, tested in test_agents.py
        assert L.main(["--agent", str(tmp_path / "a.zip"), "--seeds", "10000", "10000", "--policies", "mlf-h",
                       "--max-steps", "20", "--decode", "row-kind", "--out", str(tmp_path / "out")]) == 0
    assert len(calls) == 2 * 20  # every agent step of both settings was decoded row-kind
    assert "(row-kind decoding)" in (tmp_path / "out" / "levers.md").read_text()
