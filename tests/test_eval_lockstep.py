"""Lockstep evaluation (eval/rollout.py evaluate_lockstep): one env per seed stepped together, one batched
predict per round; the records are evaluate's."""
from __future__ import annotations

import numpy as np
import pytest

from clustergym.eval.rollout import evaluate, evaluate_lockstep

ENV_ID = "clustergym/GPUCluster-v1"
SMALL = {"window_jobs": 8, "cluster": "tiny-8"}
TIMING = ("decision_mean_us", "decision_p99_us", "wall_s")


class RowWise:
    """A model whose batched predict is exactly its single one, row by row: a valid action that depends on
    the state (the mask's k-th valid index, k from the queue's features), so episodes differ in length."""

    name = "row-wise"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def _one(self, tasks: np.ndarray, mask: np.ndarray) -> int:
        valid = np.flatnonzero(mask)
        return int(valid[int(abs(tasks.sum()) * 7) % len(valid)])

    def predict(self, observation, state=None, episode_start=None, deterministic=True, action_masks=None):
        tasks = observation["tasks"]
        if action_masks.ndim == 1:  # one state (evaluate's loop)
            return np.array(self._one(tasks, action_masks)), None
        self.batches.append(len(action_masks))
        return np.array([self._one(t, m) for t, m in zip(tasks, action_masks)]), None


def _without_timing(records: list[dict]) -> list[dict]:
    """The records without their wall-clock fields, NaN as None (NaN is unequal to itself)."""
    return [{k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items() if k not in TIMING}
            for r in records]


def test_lockstep_gives_the_sequential_records_for_a_row_wise_model():
    seeds = [5, 3, 11, 7]
    model, ended = RowWise(), []
    together = evaluate_lockstep(model, ENV_ID, SMALL, seeds, max_steps=300, on_episode_end=ended.append)
    alone = evaluate(RowWise(), ENV_ID, SMALL, seeds, max_steps=300)
    assert _without_timing(together) == _without_timing(alone)
    assert [r["seed"] for r in together] == seeds and {r["policy"] for r in together} == {"row-wise"}
    # the batch shrinks as episodes end, and every agent step is in exactly one batch
    lengths = sorted(r["agent_steps"] for r in together)
    assert lengths[0] < lengths[-1], "the seeds should give episodes of different lengths"
    assert model.batches[0] == len(seeds) and model.batches[-1] == 1 and sorted(model.batches, reverse=True) == model.batches
    assert sum(model.batches) == sum(lengths)
    # each record is reported once, as its episode ends: shortest first
    assert sorted(r["seed"] for r in ended) == sorted(seeds)
    assert [r["agent_steps"] for r in ended] == sorted(r["agent_steps"] for r in ended)
    assert all(r["decision_mean_us"] > 0 and r["wall_s"] > 0 for r in together)


def test_lockstep_caps_episodes_at_max_steps():
    recs = evaluate_lockstep(RowWise(), ENV_ID, SMALL, [1, 2], max_steps=4)
    assert [r["agent_steps"] for r in recs] == [4, 4] and all(r["truncated"] for r in recs)


@pytest.mark.parametrize("decode", ["joint", "row-kind"])
def test_lockstep_plays_a_maskable_ppo_model_with_valid_actions(decode):
    from sb3_contrib import MaskablePPO

    from clustergym.agents.decode import with_decode
    from clustergym.agents.policies import overload_threshold, policy_spec
    from clustergym.scenarios import make_env

    env = make_env(ENV_ID, SMALL)
    cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0)
    recs = evaluate_lockstep(with_decode(model, decode, env), ENV_ID, {**SMALL, "invalid_action": "raise"},
                             [1, 2, 3], max_steps=200)
    assert [r["seed"] for r in recs] == [1, 2, 3]
    assert all(r["agent_steps"] > 0 and r["terminated"] != r["truncated"] for r in recs)
