"""agents/bc_data.py: the compact BC dataset gives back exactly the states it was given, and BC on it is the
same computation as on the dense arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch as th
from hypothesis import given, settings
from hypothesis import strategies as st

import clustergym  # noqa: F401
from clustergym.agents.bc import _labelled_rollouts, action_masks, behaviour_clone, merge, observations
from clustergym.agents.bc_data import PackedBits, StateBuffer, concat, dense, nbytes, subset
from clustergym.agents.policies import overload_threshold, policy_spec
from clustergym.baselines import make as make_heuristic
from clustergym.scenarios import make_env


@st.composite
def states_with_padding(draw):
    """Up to 12 states of shape (W, F) whose rows are zero at random, often at the end (the window's padding)."""
    W, F, n = draw(st.integers(1, 8)), draw(st.integers(1, 4)), draw(st.integers(1, 12))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    states = rng.normal(size=(n, W, F)).astype(np.float32)
    for s in states:
        s[rng.random(W) < 0.3] = 0.0  # zero rows anywhere
        s[rng.integers(0, W + 1):] = 0.0  # and a zero tail
    return states


@settings(max_examples=60, deadline=None)
@given(states_with_padding(), st.data())
def test_trimmed_rows_give_back_the_states(states, data):
    buf = StateBuffer()
    for s in states:
        buf.append(s)
    store = buf.build()
    assert store.shape == states.shape
    idx = np.array(data.draw(st.lists(st.integers(0, len(states) - 1), max_size=20)), dtype=np.int64)
    np.testing.assert_array_equal(dense(store, idx), states[idx])
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=len(states), max_size=len(states))))
    part = subset(store, keep)
    np.testing.assert_array_equal(dense(part, np.arange(len(part))), states[keep])
    both = concat([store, part])
    np.testing.assert_array_equal(dense(both, np.arange(len(both))), np.concatenate([states, states[keep]]))


def test_packed_bits_give_back_masks_of_their_dtype_and_refuse_other_values():
    rng = np.random.default_rng(0)
    for dtype in (bool, np.int8):
        masks = (rng.random((7, 1537)) < 0.2).astype(dtype)
        buf = StateBuffer(binary=True)
        for m in masks:
            buf.append(m)
        store = buf.build()
        out = dense(store, np.arange(7))
        assert out.dtype == masks.dtype
        np.testing.assert_array_equal(out, masks)
        assert store.nbytes == 7 * 193  # 1537 bits in 193 bytes
    with pytest.raises(ValueError, match="0/1 vectors"):
        PackedBits.part(np.array([0, 2, 1], np.int8))
    with pytest.raises(ValueError, match="shape"):
        buf = StateBuffer()
        buf.append(np.zeros((3, 2)))
        buf.append(np.zeros((4, 2)))


def _expert_rollout(env, n_steps):
    """MLF-H's states on one contended window, recorded twice: by the BC collector and densely here."""
    expert = make_heuristic("mlf-h", env=env)
    seen_obs, seen_masks = [], []

    def choose(obs, m):
        seen_obs.append({k: v.copy() for k, v in obs.items()})
        seen_masks.append(m.copy())
        a = int(expert.predict(obs, action_masks=m)[0])
        return a, a

    data = _labelled_rollouts(env, [10], choose, 0.99, n_steps)
    return data, seen_obs, seen_masks


def test_collected_states_are_the_envs_and_take_less_memory():
    env = make_env("clustergym/GPUCluster-v1", {"split": "train"})
    data, seen_obs, seen_masks = _expert_rollout(env, 400)
    n = len(data["actions"])
    assert n == len(seen_obs) == 400
    obs = observations(data)
    for k in seen_obs[0]:
        np.testing.assert_array_equal(obs[k], np.stack([o[k] for o in seen_obs]))
        assert obs[k].dtype == seen_obs[0][k].dtype
    np.testing.assert_array_equal(action_masks(data), np.stack(seen_masks))
    dense_bytes = sum(o.nbytes for o in seen_obs[0].values()) * n + seen_masks[0].nbytes * n
    assert nbytes(data) < dense_bytes / 2  # the window's padding rows are most of a state


def test_behaviour_cloning_is_the_same_on_the_compact_and_the_dense_dataset():
    env = make_env("clustergym/GPUCluster-v1", {"split": "train", "window_jobs": 20})
    data, _, _ = _expert_rollout(env, 150)
    data = merge(data, data)
    flat = {"obs": observations(data), "masks": action_masks(data), "actions": data["actions"],
            "returns": data["returns"], "episodes": data["episodes"]}
    losses, weights = [], []
    for d in (data, flat):
        from sb3_contrib import MaskablePPO

        cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
        model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0)
        losses.append(behaviour_clone(model.policy, d, steps=12, batch_size=32, seed=3))
        weights.append(th.cat([p.detach().flatten() for p in model.policy.parameters()]))
    assert losses[0] == losses[1]
    assert th.equal(weights[0], weights[1])


def test_memory_benchmark_reports_the_stored_and_dense_sizes():
    from clustergym.eval import bench_bc_memory

    row = bench_bc_memory.main(["--windows", "1", "--max-steps", "60"])
    assert row["states"] == 60 and 0 < row["stored_bytes"] < row["dense_bytes"]
