"""The one episode loop (eval/rollout.py): every kind of policy, its records, and the tables built from them."""
from __future__ import annotations

import json

import numpy as np
import pytest

from clustergym.config import OBJECTIVE_NAMES
from clustergym.eval import compare, specs
from clustergym.eval.rollout import evaluate, predictor, rollout
from clustergym.eval.stats import (DIRECTIONS, HIGHER_IS_BETTER, SUMMARY_METRICS, TABLE_METRICS, direction,
                                   metric_intervals, paired_table, results_table)
from clustergym.scenarios import make_env

ENV_ID = "clustergym/GPUCluster-v1"
SMALL = {"split": "test", "window_jobs": 6, "cluster": "tiny-8"}


def test_t_interval_and_table():
    recs = [{"episode_return": x, "mean_jct": 10 * x} for x in (1.0, 2.0, 3.0)]
    s = metric_intervals(recs, ("episode_return", "mean_jct"))
    assert s["episode_return"]["mean"] == pytest.approx(2.0)
    assert s["episode_return"]["half"] == pytest.approx(4.303 * 1.0 / np.sqrt(3), rel=1e-4)
    rows, md = results_table({"a": recs, "b": recs}, ("episode_return", "mean_jct"))
    assert len(rows) == 4 and md.count("\n") == 4 and "± " in md


def test_evaluate_heuristic_records():
    recs = evaluate("mlf-h", ENV_ID, {"split": "test", "window_jobs": 10}, [1, 2], max_steps=400)
    assert [r["seed"] for r in recs] == [1, 2]
    for r in recs:
        for k in ("episode_return", "agent_steps", "mean_jct", "deadline_ratio", "accuracy_ratio", "bandwidth_mb",
                  "migrations", "overload_occurrences", "truncated", "terminated", "decision_mean_us"):
            assert k in r
        assert r["policy"] == "mlf-h" and r["terminated"] != r["truncated"]


def test_max_steps_truncates_and_the_return_is_the_sum_of_rewards():
    (rec,) = evaluate("random", ENV_ID, SMALL, [3], max_steps=5)
    assert rec["agent_steps"] == 5 and rec["truncated"] and not rec["terminated"]
    env = make_env(ENV_ID, {**SMALL, "max_steps": 5})
    agent = predictor("random", env)
    obs, _ = env.reset(seed=3)
    total = 0.0
    for _ in range(5):
        obs, r, *_ = env.step(agent.act(obs, env.unwrapped.action_masks()))
        total += r
    assert rec["episode_return"] == total


def test_objective_sums_make_up_the_return_also_with_vector_rewards():
    (scalar,) = evaluate("mlf-h", ENV_ID, SMALL, [2])
    (vector,) = evaluate("mlf-h", ENV_ID, {**SMALL, "vector_reward": True}, [2])
    weights = make_env(ENV_ID, SMALL).unwrapped.config.reward_weights
    sums = [scalar[f"objective_{n}"] for n in OBJECTIVE_NAMES]
    assert scalar["episode_return"] == pytest.approx(float(np.dot(weights, sums)), abs=1e-9)
    deadline = sums[OBJECTIVE_NAMES.index("deadline")]
    assert scalar["terminated"] and deadline == pytest.approx(scalar["deadline_ratio"])  # g2 sums to the ratio
    # (repr: equal NaNs, e.g. mean_be_jct of a workload without best-effort jobs, compare equal)
    assert repr({k: v for k, v in vector.items() if "us" not in k and k != "wall_s"}) == repr({
        k: v for k, v in scalar.items() if "us" not in k and k != "wall_s"})


def test_paired_table_by_hand():
    agent = [{"seed": s, "mean_jct_censored": j, "deadline_ratio": d} for s, j, d in
             ((1, 100.0, 1.0), (2, 200.0, 0.9), (3, 300.0, 1.0))]
    other = [{"seed": s, "mean_jct_censored": j, "deadline_ratio": d} for s, j, d in
             ((3, 330.0, 1.0), (1, 100.0, 0.8), (2, 190.0, 0.9))]  # paired by seed, not by position
    rows, md = paired_table({"agent": agent, "mlf-h": other})
    jct = next(r for r in rows if r["metric"] == "mean_jct_censored")
    # differences 0, +10, -30: mean -20/3, s = sqrt(((20/3)^2 + (50/3)^2 + (70/3)^2)/2), t(0.975, 2) = 4.303
    s = np.sqrt(((20 / 3) ** 2 + (50 / 3) ** 2 + (70 / 3) ** 2) / 2)
    assert jct["mean_diff"] == pytest.approx(-20 / 3)
    assert jct["ci95_high"] - jct["mean_diff"] == pytest.approx(4.3027 * s / np.sqrt(3), rel=1e-4)
    assert (jct["better"], jct["equal"], jct["worse"]) == (1, 1, 1)
    dl = next(r for r in rows if r["metric"] == "deadline_ratio")
    assert (dl["better"], dl["equal"], dl["worse"]) == (1, 2, 0)  # higher is better for deadlines
    assert "| mlf-h | mean_jct_censored |" in md
    with pytest.raises(ValueError, match="seed"):
        paired_table({"agent": agent, "fifo": other[:2]})


def test_metric_directions_are_one_table():
    assert {"episode_return", "deadline_ratio", "accuracy_ratio", "mean_accuracy", "finished"} == HIGHER_IS_BETTER
    assert direction("mean_jct_censored") == -1 and direction("episode_return") == 1
    with pytest.raises(ValueError, match="'jobs' has no better direction"):
        direction("jobs")
    # every table column is a metric of the records; every direction is of a known metric
    assert set(TABLE_METRICS) <= set(SUMMARY_METRICS) and set(DIRECTIONS) <= set(SUMMARY_METRICS)


class _AnyKeywords:
    """A predict-er that records the keywords it was called with and acts like MLF-H."""

    def __init__(self, env):
        from clustergym import baselines

        self.mlfh, self.calls = baselines.make("mlf-h", env), []

    def _act(self, obs, **kw):
        self.calls.append(sorted(kw))
        return self.mlfh.predict(obs, action_masks=kw.get("action_masks")), None

    def predict(self, obs, **kw):
        return self._act(obs, **kw)


class _MasksOnly(_AnyKeywords):
    def predict(self, obs, action_masks=None):
        return self._act(obs, action_masks=action_masks)


class _ObsOnly(_AnyKeywords):
    def predict(self, obs):
        return self._act(obs)


@pytest.mark.parametrize("cls,expected", [(_AnyKeywords, ["action_masks", "deterministic"]),
                                          (_MasksOnly, ["action_masks"]), (_ObsOnly, [])])
def test_predictor_passes_only_the_keywords_predict_accepts(cls, expected):
    env = make_env(ENV_ID, SMALL)
    pol = cls(env)
    rec = rollout(env, predictor(pol, env, "x"), 0)
    assert pol.calls and all(c == expected for c in pol.calls)
    ref = evaluate("mlf-h", ENV_ID, SMALL, [0])[0]
    assert rec["mean_jct"] == ref["mean_jct"] and rec["agent_steps"] == ref["agent_steps"]


@pytest.mark.parametrize("algo", ["maskable", "ppo"])
def test_predictor_drives_sb3_models(algo):
    """MaskablePPO gets the env's mask; plain PPO gets none (the pairwise network masks itself): both only
    ever take valid actions, deterministically."""
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    from clustergym.agents.policies import overload_threshold, policy_spec

    # an untrained network may end every round and leave the jobs waiting to the 30-day horizon: 500 steps
    env = make_env(ENV_ID, {**SMALL, "invalid_action": "raise", "max_steps": 500})
    cls, kw = policy_spec("pairwise", algo, overload_threshold=overload_threshold(env))
    model = (MaskablePPO if algo == "maskable" else PPO)(cls, env, policy_kwargs=kw, n_steps=64, device="cpu", seed=0)
    a = rollout(env, predictor(model, env, "agent"), 1)
    b = rollout(env, predictor(model, env, "agent"), 1)
    assert a["agent_steps"] > 0 and a["policy"] == "agent"
    np.testing.assert_equal({k: v for k, v in a.items() if "us" not in k and k != "wall_s"},  # NaN == NaN
                            {k: v for k, v in b.items() if "us" not in k and k != "wall_s"})


def test_sweep_runs_and_evaluation_share_the_loop(tmp_path):
    """compare.run_one and evaluate() play the same episode for the same policy, config and seed."""
    sc = specs.expand_loads([specs.parse_scenario(f"s={ENV_ID}:split=test,window_jobs=6,cluster=tiny-8")], None)
    (run,) = specs.make_runs([specs.parse_policy("mlf-h")], sc, [4])
    row = compare.run_one(run, str(tmp_path))
    rec = evaluate("mlf-h", ENV_ID, SMALL, [4])[0]
    for k in ("episode_return", "agent_steps", "mean_jct", "bandwidth_mb", "terminated", "window_start"):
        assert row[k] == rec[k], k
    saved = json.loads((tmp_path / "runs" / f"{run['key']}.json").read_text())["row"]
    assert saved["episode_return"] == rec["episode_return"] and saved["scenario"] == "s"
