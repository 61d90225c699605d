"""The PPO probe (train/probes.py): its statistics by hand, and a run that is the same with it as without."""
import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch as th

from clustergym.train.probes import PolicyProbe, probe_stats, rollout_stats

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _logp(rows):
    p = th.tensor(rows, dtype=th.float64)
    return th.where(p > 0, p.log(), th.full_like(p, -math.inf))


def test_probe_stats_by_hand():
    # three actions, the last "end round"; state 0: the teacher places (action 0), state 1: it ends the round;
    # state 1 has action 1 masked
    start = _logp([[0.5, 0.25, 0.25], [0.5, 0.0, 0.5]])
    now = _logp([[0.25, 0.25, 0.5], [0.25, 0.0, 0.75]])
    s = probe_stats(now, start, np.array([0, 2]))
    kl0 = 0.5 * math.log(0.5 / 0.25) + 0.25 * 0.0 + 0.25 * math.log(0.25 / 0.5)
    kl1 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)  # the masked action adds no term
    assert s["kl_from_start"] == pytest.approx((kl0 + kl1) / 2)
    h0 = -(0.25 * math.log(0.25) * 2 + 0.5 * math.log(0.5))
    h1 = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    assert s["entropy"] == pytest.approx((h0 + h1) / 2)
    assert s["agreement"] == pytest.approx(0.5)  # state 0's most probable action is "end round", state 1's too
    assert s["teacher_cross_entropy"] == pytest.approx((math.log(4) - math.log(0.75)) / 2)
    assert s["end_prob_teacher_acts"] == pytest.approx(0.5)
    assert s["end_prob_teacher_ends"] == pytest.approx(0.75)
    assert s["ends_where_teacher_acts"] == 1.0  # 0.5 on "end round" is at least half


def test_probe_stats_without_a_teacher_end():
    lp = _logp([[0.7, 0.2, 0.1]])
    s = probe_stats(lp, lp, np.array([0]))
    assert s["kl_from_start"] == 0.0 and s["ends_where_teacher_acts"] == 0.0
    assert math.isnan(s["end_prob_teacher_ends"])  # no state where the teacher ends: no mean, not 0


def test_rollout_stats_by_hand():
    actions = np.array([[3], [0], [3], [1]])
    adv = np.array([2.0, 0.0, 2.0, 0.0])  # mean 1, std 1
    s = rollout_stats(actions, adv, end=3)
    assert s["end_share"] == 0.5
    assert s["advantage_end"] == pytest.approx(1.0, rel=1e-6)
    assert s["advantage_act"] == pytest.approx(-1.0, rel=1e-6)
    assert math.isnan(rollout_stats(np.array([0, 1]), np.array([1.0, 2.0]), end=3)["advantage_end"])


def test_every_must_be_positive():
    with pytest.raises(ValueError, match="every must be >= 1"):
        PolicyProbe({"actions": np.zeros(1)}, every=0)


def test_a_run_is_the_same_with_the_probe_as_without(tmp_path):
    from test_train import TINY, _cfg, _scalars

    from clustergym.agents.io import load_agent
    from clustergym.train import ppo

    weights = {}
    for states in (0, 64):
        out = tmp_path / f"run{states}"
        ppo.train(_cfg({**TINY, "timesteps": 384, "final_eval_episodes": 0, "probe_states": states,
                        "probe_every": 2, "out": str(out)}))
        weights[states] = load_agent(out / "final_model.zip").policy.state_dict()
    assert all(th.equal(weights[0][k], weights[64][k]) for k in weights[0])
    tags = _scalars(tmp_path / "run64" / "tb" / "ppo_1")
    assert [s for s, _ in tags["probe/kl_from_start"]] == [128, 384]  # rollouts 1 and 3 of 3
    assert tags["probe/kl_from_start"][0][1] == 0.0 and tags["probe/kl_from_start"][1][1] > 0
    assert "rollout/advantage_end" in tags and "probe/end_prob_teacher_acts" in tags
    assert not any(t.startswith("probe/") for t in _scalars(tmp_path / "run0" / "tb" / "ppo_1"))
