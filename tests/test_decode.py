"""Deterministic decoding of an agent's action distribution (agents/decode.py) and the agent spec that picks it
(eval/specs.py)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch as th

from clustergym.agents.decode import DecodedAgent, greedy_action, row_kind_mode, with_decode
from clustergym.agents.io import load_agent
from clustergym.agents.policies import overload_threshold, policy_spec
from clustergym.eval import specs
from clustergym.scenarios import make_env

W, K, C = 2, 3, 6  # two rows, three destinations, then back-to-queue and two stop options


def _probs(cells: dict[tuple[int, int], float], end: float = 0.0) -> th.Tensor:
    p = th.zeros(W * C + 1)
    for (row, col), v in cells.items():
        p[row * C + col] = v
    p[-1] = end
    assert abs(float(p.sum()) - 1.0) < 1e-6
    return p.unsqueeze(0)


def test_a_placement_spread_over_destinations_beats_a_more_probable_single_action():
    # row 0's placement: 0.18 on each of three destinations (0.54 in all); row 1's stop option: 0.36
    p = _probs({(0, 0): 0.18, (0, 1): 0.18, (0, 2): 0.18, (1, 4): 0.36}, end=0.10)
    assert int(p.argmax()) == 1 * C + 4  # the joint argmax sets the stop option
    assert int(row_kind_mode(p, W, C, K)) == 0 * C + 0  # row 0 placed, on its first most probable column


def test_the_most_probable_column_of_the_chosen_row_is_taken():
    p = _probs({(1, 0): 0.1, (1, 2): 0.3, (0, 3): 0.2, (0, 5): 0.2}, end=0.2)
    assert int(row_kind_mode(p, W, C, K)) == 1 * C + 2


def test_a_single_column_decision_and_end_round():
    p = _probs({(0, 0): 0.1, (0, 1): 0.1, (1, 3): 0.45}, end=0.35)
    assert int(row_kind_mode(p, W, C, K)) == 1 * C + 3  # back to the queue, a decision of its own
    p = _probs({(0, 0): 0.2, (0, 1): 0.2, (1, 3): 0.1}, end=0.5)
    assert int(row_kind_mode(p, W, C, K)) == W * C  # end round beats every decision
    p = _probs({(0, 0): 0.25, (0, 1): 0.25}, end=0.5)
    assert int(row_kind_mode(p, W, C, K)) == W * C  # a tie goes to end round


def test_act_first_ends_the_round_only_on_half_the_probability():
    # two waiting jobs' placements, 0.3 each: row-kind ends the round on 0.4, act-first places row 0
    spread = _probs({(0, 0): 0.3, (1, 0): 0.3}, end=0.4)
    assert int(row_kind_mode(spread, W, C, K)) == W * C
    assert int(row_kind_mode(spread, W, C, K, decode="act-first")) == 0 * C + 0
    # acting, it takes row-kind's decision among the rest: row 1's placement summed over two columns (0.3)
    # beats row 0's stop option (0.2)
    rest = _probs({(0, 4): 0.2, (1, 1): 0.15, (1, 2): 0.15, (0, 0): 0.05}, end=0.45)
    assert int(row_kind_mode(rest, W, C, K, decode="act-first")) == 1 * C + 1
    more = _probs({(0, 4): 0.15, (1, 1): 0.1, (1, 2): 0.1, (0, 0): 0.05}, end=0.6)
    assert int(row_kind_mode(more, W, C, K, decode="act-first")) == W * C
    half = _probs({(0, 0): 0.5}, end=0.5)
    assert int(row_kind_mode(half, W, C, K, decode="act-first")) == W * C  # a tie goes to end round


def test_batched_rows_decode_independently():
    a = _probs({(0, 0): 0.18, (0, 1): 0.18, (0, 2): 0.18, (1, 4): 0.36}, end=0.10)
    b = _probs({(1, 0): 0.1, (1, 2): 0.3, (0, 3): 0.2, (0, 5): 0.2}, end=0.2)
    both = row_kind_mode(th.cat((a, b, a)), W, C, K)
    assert both.tolist() == [0, 1 * C + 2, 0]


def test_greedy_action_decodes_logits_under_the_mask():
    # the RLlib path: one state's logits; row 0's placement spread over three columns, row 1's stop option alone
    obs = {"tasks": np.zeros((W, 5)), "servers": np.zeros((K, 4))}
    logits = np.full(W * C + 1, -5.0)
    logits[[0, 1, 2]] = np.log(0.18)
    logits[1 * C + 4] = np.log(0.36)
    logits[1 * C + 5] = 3.0  # the most probable action, but masked
    logits[-1] = np.log(0.10)
    mask = np.ones(W * C + 1, dtype=bool)
    mask[1 * C + 5] = False
    assert greedy_action(logits, mask, obs, "joint") == 1 * C + 4
    assert greedy_action(logits, mask, obs, "row-kind") == 0
    mask[[0, 1, 2]] = False  # row 0 cannot be placed: the stop option is the most probable decision left
    assert greedy_action(logits, mask, obs, "row-kind") == 1 * C + 4
    end = np.full(W * C + 1, -5.0)
    end[[0, 1 * C]], end[-1] = 0.0, 0.3  # two rows' placements of equal weight, "end round" a little above each
    assert greedy_action(end, np.ones(W * C + 1, dtype=bool), obs, "row-kind") == W * C
    assert greedy_action(end, np.ones(W * C + 1, dtype=bool), obs, "act-first") == 0
    with pytest.raises(ValueError, match="unknown decode"):
        greedy_action(logits, mask, obs, "sample")


def _agent(tmp_path):
    from sb3_contrib import MaskablePPO

    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": 6})
    cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    path = tmp_path / "agent.zip"
    MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0).save(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return env, path, load_agent(path, env=env)


@pytest.mark.parametrize("decode", ["row-kind", "act-first"])
def test_a_decoded_agent_plays_valid_actions_and_matches_the_mode_of_its_distribution(tmp_path, decode):
    env, _, model = _agent(tmp_path)
    agent = with_decode(model, decode)
    assert isinstance(agent, DecodedAgent) and with_decode(model, "joint") is model
    u = env.unwrapped
    obs, _ = env.reset(seed=3)
    for _ in range(30):
        mask = u.action_masks()
        a, _ = agent.predict(obs, action_masks=mask, deterministic=True)
        assert mask[int(a)]
        t, _ = model.policy.obs_to_tensor(obs)
        probs = model.policy.get_distribution(t, action_masks=mask).distribution.probs
        mode = row_kind_mode(probs, u.window.W, u.window.C, u.window.K, decode)
        assert int(a) == int(mode[0])
        s, _ = agent.predict(obs, action_masks=mask, deterministic=False)  # sampling is the model's
        assert mask[int(s)]
        obs, _, term, trunc, _ = env.step(int(a))
        if term or trunc:
            break
    with pytest.raises(ValueError, match="unknown decode 'mean'"):
        with_decode(model, "mean")


def test_the_agent_spec_takes_decode_and_refuses_anything_else(tmp_path):
    env, path, _ = _agent(tmp_path)
    spec = specs.parse_policy(f"a={path}:decode=row-kind")
    assert spec == {"label": "a", "kind": "agent", "path": str(path), "params": {"decode": "row-kind"}}
    assert specs.policy_identity(spec)["params"] == {"decode": "row-kind"}
    assert "params" not in specs.policy_identity(specs.parse_policy(str(path)))  # identities of old runs stay
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the pickle warning, tested in test_agents.py
        assert isinstance(specs.load_policy(spec, env), DecodedAgent)
    specs.check_policy(spec)
    for bad, why in ((f"{path}:decode=mean", "unknown decode 'mean'"),
                     (f"{path}:temperature=2", r"takes only decode=, not \['temperature'\]")):
        with pytest.raises(specs.PolicySpecError, match=why):
            specs.check_policy(specs.parse_policy(bad))


def test_an_rllib_checkpoint_spec_takes_decode_too(tmp_path):
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / specs.RLLIB_MARKER).write_text("{}")
    spec = specs.parse_policy(f"r={ckpt}:decode=row-kind")
    assert spec["kind"] == "rllib" and spec["params"] == {"decode": "row-kind"}
    assert specs.policy_identity(spec)["params"] == {"decode": "row-kind"}
    with pytest.raises(specs.PolicySpecError, match="unknown decode 'mean'"):
        specs.check_policy(specs.parse_policy(f"r={ckpt}:decode=mean"))
