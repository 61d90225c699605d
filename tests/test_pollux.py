"""Pollux's workloads as episodes (``workload="pollux"``, ``clustergym/Pollux-v1``): the train/test split of the
workloads, every job accounted for, determinism, the fields that do not apply, and the transfer-v2 protocol."""
from __future__ import annotations

import numpy as np
import pytest

from clustergym.config import ConfigError, EnvConfig
from clustergym.core.traces import pollux_split
from clustergym.eval import protocols
from clustergym.scenarios import make_env, pollux_workload

POLLUX = "clustergym/Pollux-v1"


def _episode(env, seed: int) -> tuple[list, dict]:
    _, info = env.reset(seed=seed)
    return [j.spec for j in env.unwrapped.sim.jobs], info["episode"]


@pytest.mark.parametrize("split", ["train", "test"])
def test_an_episode_is_one_whole_workload_of_its_split(split):
    env = make_env(POLLUX, split=split)
    drawn = set()
    for seed in range(12):
        specs, ep = _episode(env, seed)
        name = ep["pollux_workload"]
        drawn.add(name)
        assert name in pollux_split(split)
        jobs = pollux_workload(name)
        ids = [sp.job_id for sp in specs]
        assert sorted(ids + ep["dropped_jobs"]) == list(range(len(jobs))) == list(range(160))
        # the kept jobs are that workload's: its arrival times and GPU counts
        np.testing.assert_array_equal([sp.submit_time for sp in specs], jobs["submit_time"].to_numpy()[ids])
        assert [sp.n_gpus for sp in specs] == jobs["n_gpus"].to_numpy()[ids].tolist()
    env.close()
    assert len(drawn) > 1  # the seed chooses among the split's workloads


def test_the_same_seed_gives_the_same_jobs_in_another_env():
    a, b = make_env(POLLUX, split="test"), make_env(POLLUX, split="test")
    specs_a, ep_a = _episode(a, 7)
    _episode(a, 8)
    specs_b, ep_b = _episode(b, 7)
    assert specs_a == specs_b and ep_a == ep_b
    other, ep_other = _episode(b, 9)
    assert ep_other["duration_seed"] != ep_a["duration_seed"]
    assert [sp.max_iterations for sp in other] != [sp.max_iterations for sp in specs_a]


def test_jobs_above_max_job_gpus_are_listed_as_left_out():
    env = make_env(POLLUX, split="test", max_job_gpus=8)
    specs, ep = _episode(env, 1)
    big = np.flatnonzero(pollux_workload(ep["pollux_workload"])["n_gpus"].to_numpy() > 8).tolist()
    assert big and ep["dropped_jobs"] == big
    assert max(sp.n_gpus for sp in specs) <= 8


def test_window_jobs_takes_the_first_jobs_and_load_compresses_them():
    env = make_env(POLLUX, split="test", window_jobs=20, load=2.0)
    specs, ep = _episode(env, 3)
    assert [sp.job_id for sp in specs] + ep["dropped_jobs"] == list(range(20))
    assert ep["offered_load"] == pytest.approx(2.0)
    assert ep["arrival_scale"] == pytest.approx(ep["trace_offered_load"] / 2.0)


@pytest.mark.parametrize("field, value", [("window_jobs", 161), ("window_start", 0.0), ("window_period", 3600.0),
                                          ("trace_path", "jobs.csv"), ("train_fraction", 0.05)])
def test_fields_that_do_not_apply_to_pollux_are_named(field, value):
    with pytest.raises(ConfigError) as e:
        EnvConfig(workload="pollux", **{field: value})
    assert e.value.field == field
    with pytest.raises(ConfigError) as e:
        make_env(POLLUX, **{field: value})
    assert e.value.field == field


def test_transfer_v2_is_transfer_v1_and_the_held_out_pollux_workloads():
    v1, v2 = protocols.get("transfer-v1"), protocols.get("transfer-v2")
    assert v2.scenarios[:-1] == v1.scenarios and v2.seeds == v1.seeds and v2.subject == "agent"
    (pollux,) = v2.scenarios[-1:]
    assert (pollux.label, pollux.env_id, pollux.kwargs) == ("pollux-w", POLLUX, {"max_steps": 16_000})
    assert "pollux-w" not in [s.label for s in v1.scenarios]
    text = protocols.describe(v2)
    assert "one whole 'test' Pollux workload per seed" in text and POLLUX in text
