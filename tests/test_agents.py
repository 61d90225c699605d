"""PPO agents: pairwise policy (masking, size invariance), behaviour cloning of MLF-H, evaluation, save/load."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401
from clustergym.agents.bc import (action_masks, agreement, behaviour_clone, collect, collect_dagger, disagreement_split,
                                   merge, observations)
from clustergym.agents.policies import MASKED_LOGIT, masked_logits, overload_threshold, policy_spec
from clustergym.scenarios import make_env

ROOT = Path(__file__).resolve().parent.parent
ENV_ID = "clustergym/GPUCluster-v1"
LIGHT_ID = "clustergym/GPUClusterLight-v1"
# test_bc_reproduces_mlfh_on_heldout_states, measured on the 2-core AVX2 development machine (deterministic on one
# machine; an AVX-512 one gives 0.898 and 0.926: torch's kernels differ, docs/training.md "Runs on another CPU")
MEASURED = {"agreement": 0.889, "row_agreement": 0.932}


def _model(env, policy="pairwise", algo="maskable", seed=0):
    from sb3_contrib import MaskablePPO
    from stable_baselines3 import PPO

    cls, kw = policy_spec(policy, algo, overload_threshold=overload_threshold(env))
    Algo = MaskablePPO if algo == "maskable" else PPO
    return Algo(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=seed)


def _obs_tensor(obs):
    return {k: th.as_tensor(v[None], dtype=th.float32) for k, v in obs.items()}


def _state_batch(env, seed: int, n: int, pick=lambda valid, i: valid[0]) -> dict[str, th.Tensor]:
    """The first ``n`` observations of an episode stepped with ``pick(valid actions, step)``, as one batch."""
    obs, _ = env.reset(seed=seed)
    states = []
    for i in range(n):
        states.append(obs)
        obs, *_ = env.step(int(pick(np.flatnonzero(env.unwrapped.action_masks()), i)))
    return {k: th.as_tensor(np.stack([s[k] for s in states]), dtype=th.float32) for k in states[0]}


@pytest.mark.parametrize("algo", ["maskable", "ppo"])
def test_pairwise_logits_respect_mask(algo):
    env = make_env(ENV_ID, {"window_jobs": 15})
    model = _model(env, algo=algo)
    obs, _ = env.reset(seed=3)
    feats = model.policy.extract_features(_obs_tensor(obs), model.policy.pi_features_extractor)
    logits = model.policy.mlp_extractor.forward_actor(feats)[0]
    mask = env.unwrapped.action_masks()
    assert logits.shape == (env.unwrapped.n_actions,)
    assert th.all(logits[~th.as_tensor(mask)] == MASKED_LOGIT)
    for _ in range(30):  # plain PPO too never picks an invalid action with this policy
        a, _ = model.predict(obs, deterministic=False)
        assert mask[int(a)]


def test_pairwise_weights_transfer_to_other_sizes():
    big = make_env(ENV_ID, {"window_jobs": 10})
    small = make_env(ENV_ID, {"window_jobs": 10, "cluster": "tiny-8", "window_size": 5, "n_destinations": 3})
    m_big, m_small = _model(big), _model(small)
    m_small.policy.load_state_dict(m_big.policy.state_dict())  # no weight depends on W, K or G
    obs, _ = small.reset(seed=0)
    a, _ = m_small.predict(obs, deterministic=True, action_masks=small.unwrapped.action_masks())
    assert small.unwrapped.action_masks()[int(a)]


@pytest.mark.slow  # 16 MLF-H episodes, 4 DAgger episodes and 700 BC steps: ~3 min idle, more on a loaded machine
@pytest.mark.timeout(1800)
def test_bc_reproduces_mlfh_on_heldout_states():
    """BC on 12 MLF-H training windows plus one DAgger round (the cloned policy's own rollouts on 4 more windows,
    labelled by MLF-H); agreement measured on MLF-H's rollouts on 4 other windows (states BC never saw).
    MEASURED holds this test's own printout on the 2-core development machine (``pytest -m slow -s -k
    bc_reproduces``): agreement after BC + DAgger and agreement on the task row. Thresholds sit 0.05 below."""
    cfg = {"split": "train"}
    env_id = LIGHT_ID  # MEASURED was measured there: the light scenario's 50-job windows
    data = collect("mlf-h", env_id, cfg, range(100, 112))
    hold = collect("mlf-h", env_id, cfg, range(900, 904))  # other windows: states BC never saw
    env = make_env(env_id, cfg)
    model = _model(env)
    before = agreement(model.policy, hold)
    behaviour_clone(model.policy, data, steps=500, batch_size=128, lr=1e-3, seed=0)
    first = agreement(model.policy, hold)
    dd = collect_dagger(model.policy, "mlf-h", env_id, cfg, range(300, 304))
    behaviour_clone(model.policy, merge(data, dd), steps=200, batch_size=128, lr=1e-3, seed=1)
    agree = agreement(model.policy, hold)
    split = disagreement_split(model.policy, hold)
    with th.no_grad():
        obs = {k: th.as_tensor(v, dtype=th.float32) for k, v in observations(hold).items()}
        pred = masked_logits(model.policy, obs, th.as_tensor(action_masks(hold))).argmax(-1).numpy()
    cols = env.unwrapped.window.C
    row_agree = float(np.mean(pred // cols == hold["actions"] // cols))
    print(json.dumps({"states": len(data["actions"]), "dagger_states": len(dd["actions"]),
                      "holdout": len(hold["actions"]), "before": before, "after_bc": first, "agreement": agree,
                      "row_agreement": row_agree, "disagreement": split}))
    assert agree >= MEASURED["agreement"] - 0.05 and agree > before + 0.3
    assert row_agree >= MEASURED["row_agreement"] - 0.05
    assert sum(split.values()) == pytest.approx(1 - agree)


def test_saved_agent_reloads_in_subprocess_with_identical_actions(tmp_path):
    env = make_env(ENV_ID, {"split": "test", "window_jobs": 15})
    model = _model(env)
    model.save(tmp_path / "agent.zip")
    (tmp_path / "config.yaml").write_text("algo: maskable\n")
    obs, _ = env.reset(seed=5)
    mine = []
    for _ in range(25):
        a, _ = model.predict(obs, deterministic=True, action_masks=env.unwrapped.action_masks())
        mine.append(int(a))
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    script = f"""
import json, warnings, envs
from clustergym.agents.io import load_agent
from clustergym.scenarios import make_env
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    model = load_agent({str(tmp_path / 'agent.zip')!r})
assert any("pickle" in str(x.message) for x in w)
env = make_env("{ENV_ID}", {{"split": "test", "window_jobs": 15}})
obs, _ = env.reset(seed=5)
acts = []
for _ in range({len(mine)}):
    a, _ = model.predict(obs, deterministic=True, action_masks=env.unwrapped.action_masks())
    acts.append(int(a))
    obs, _, term, trunc, _ = env.step(a)
    if term or trunc:
        break
print(json.dumps(acts))
"""
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1]) == mine


def test_row_feature_columns_match_the_observation_layout():
    from clustergym.core.catalogue_data import model_names
    from clustergym.observation import task_columns
    from clustergym.agents.policies import job_columns

    for h, models in ((5, model_names()), (3, model_names()), (1, model_names()[:2])):
        names = task_columns(models, h)
        cols = job_columns(len(names))
        assert [names[cols[k]] for k in ("urgency", "job_index", "slack", "placed")] == [
            "urgency", "job_index", "deadline_slack", "placed_share"]
    for h in (3, 7):  # the env's own layout, with the default and a non-default loss history
        env = make_env(ENV_ID, {"window_jobs": 5, "loss_history": h})
        names = env.unwrapped.obs_builder.task_cols
        cols = job_columns(env.observation_space["tasks"].shape[1])
        assert [names[cols[k]] for k in ("urgency", "job_index", "slack", "placed")] == [
            "urgency", "job_index", "deadline_slack", "placed_share"]


def test_separate_critic_encoder_trains_and_clones():
    """share_encoder=False: the critic has its own encoder; BC and the agreement measure use the actor's."""
    from sb3_contrib import MaskablePPO

    env = make_env(ENV_ID, {"window_jobs": 8})
    cls, kw = policy_spec("pairwise", "maskable", share_encoder=False, overload_threshold=overload_threshold(env))
    model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0)
    p = model.policy
    assert p.pi_features_extractor is not p.vf_features_extractor
    data = collect("mlf-h", ENV_ID, {"window_jobs": 8}, [1])
    vf_before = [t.detach().clone() for t in p.vf_features_extractor.parameters()]
    pi_before = [t.detach().clone() for t in p.pi_features_extractor.parameters()]
    behaviour_clone(p, data, steps=5, batch_size=16, value_coef=0.0)
    assert all(th.equal(a, b) for a, b in zip(vf_before, p.vf_features_extractor.parameters()))  # actor-only loss
    assert not all(th.equal(a, b) for a, b in zip(pi_before, p.pi_features_extractor.parameters()))  # actor learns
    assert agreement(p, data) > 0.0
    model.learn(64)


def test_padding_rows_are_cut_without_changing_any_score():
    """The encoder scores only the rows up to the last present one in the batch; the logits equal those of
    the whole window (padding rows masked), for a batch whose states show different numbers of rows."""
    env = make_env(ENV_ID, {"window_jobs": 30})
    model = _model(env)
    enc = model.policy.pi_features_extractor.encoder
    o = _state_batch(env, 1, 60, lambda valid, i: valid[i % 2])
    present = (o["tasks"].abs().sum(-1) > 0).sum(1)
    assert len(set(present.tolist())) > 1 and present.max() < env.unwrapped.W
    with th.no_grad():
        cut, pooled_cut = enc(o)
        full, pooled_full = enc._scores(o)
    assert cut.shape == full.shape
    assert th.allclose(cut, full, atol=1e-4, rtol=1e-5) and th.allclose(pooled_cut, pooled_full, atol=1e-5)
    valid = o["action_mask"] > 0.5
    assert th.equal(cut.argmax(-1), full.argmax(-1)) and (cut[~valid] == -1e8).all()


def test_rows_packed_over_a_batch_score_each_state_as_alone():
    """The encoder packs the present rows of every state of a batch together; a state's logits and pooled
    embedding are those it gets scored alone (no pooling or reduction mixes states), and every absent row's
    actions are masked."""
    env = make_env(ENV_ID, {"window_jobs": 30})
    model = _model(env)
    enc = model.policy.pi_features_extractor.encoder
    o = _state_batch(env, 4, 40, lambda valid, i: valid[(7 * i) % len(valid)])
    assert len(set((o["tasks"].abs().sum(-1) > 0).sum(1).tolist())) > 1  # states with different row counts
    with th.no_grad():
        batch, pooled = enc(o)
        for i in range(0, 40, 3):
            alone, pooled_alone = enc({k: v[i:i + 1] for k, v in o.items()})
            assert th.allclose(batch[i:i + 1], alone, atol=1e-4, rtol=1e-5), i
            assert th.allclose(pooled[i:i + 1], pooled_alone, atol=1e-5), i
    rows_absent = (o["tasks"].abs().sum(-1) == 0)  # (B, W)
    C = (batch.shape[-1] - 1) // rows_absent.shape[1]
    assert (batch[:, :-1].reshape(40, -1, C)[rows_absent] == -1e8).all()


def test_only_valid_pairs_are_scored_and_the_rest_are_masked():
    """The pair scorer computes one embedding per valid (row, server) pair of the action mask, in row-major
    order, and an invalid pair's logit is the masked value whatever the network's weights."""
    from clustergym.agents.policies import MASKED_LOGIT, pair_features, valid_pairs

    env = make_env(ENV_ID, {"window_jobs": 30})
    model = _model(env)
    enc = model.policy.pi_features_extractor.encoder
    o = _state_batch(env, 2, 40, lambda valid, i: valid[i % len(valid)])
    fit = valid_pairs(o)
    x, idx = pair_features(o, 0.9)
    assert x.shape == (int(fit.sum()), 12) and th.equal(idx, fit.nonzero()) and (x[:, 0] == 1).all()
    seen = {}
    hook = enc.pair_mid.register_forward_hook(lambda m, inp, out: seen.update(n=out.shape[0]))
    with th.no_grad():
        logits, _ = enc(o)
    hook.remove()
    assert seen["n"] == int(fit.sum())
    B, W, K = fit.shape
    C = (o["action_mask"].shape[-1] - 1) // W
    pair_logits = logits[:, :-1].reshape(B, W, C)[..., :K]
    assert (pair_logits[~fit] == MASKED_LOGIT).all() and (pair_logits[fit] > MASKED_LOGIT / 2).all()


def test_first_layer_applied_part_by_part_equals_the_concatenation():
    from clustergym.agents.policies import _mlp, _mlp_of_concat

    th.manual_seed(0)
    mlp = _mlp(64 + 9, 64, 1)
    rows, options = th.randn(5, 7, 1, 64), th.randn(5, 7, 3, 9)
    want = mlp(th.cat((rows.expand(5, 7, 3, 64), options), -1))
    th.testing.assert_close(_mlp_of_concat(mlp, rows, options), want, rtol=1e-5, atol=1e-6)


def test_pair_features_use_the_envs_overload_threshold(tmp_path, monkeypatch):
    from clustergym.agents.policies import pair_features
    from clustergym.agents.io import load_agent

    env = make_env(ENV_ID, {"window_jobs": 10, "sim": {"overload_threshold": 0.8}})
    assert overload_threshold(env) == 0.8
    with pytest.raises(ValueError, match="overload_threshold"):
        policy_spec("pairwise", "maskable")
    model = _model(env)
    enc = model.policy.pi_features_extractor.encoder
    assert enc.overload_threshold == 0.8
    o = _state_batch(env, 0, 40)  # states with some load, where the headroom test can bind
    x08, _ = pair_features(o, 0.8)
    assert len(x08) > 0
    x09, _ = pair_features(o, 0.9)
    assert not th.equal(x08, x09)  # the margins h - use differ
    from clustergym.agents import policies

    seen = {}

    def recorded(*args, **kwargs):
        seen["x"], idx = pair_features(*args, **kwargs)
        return seen["x"], idx

    monkeypatch.setattr(policies, "pair_features", recorded)
    with th.no_grad():
        model.policy.extract_features(o, model.policy.pi_features_extractor)
    assert th.equal(seen["x"], x08)  # the network's pair features are those of the env's threshold
    # the threshold is saved with the model and restored on load
    model.save(tmp_path / "m.zip")
    with pytest.warns(UserWarning, match="pickle"):
        loaded = load_agent(tmp_path / "m.zip", algo="maskable")
    assert loaded.policy.pi_features_extractor.encoder.overload_threshold == 0.8
    # vector envs: read from the first sub-env
    from stable_baselines3.common.vec_env import DummyVecEnv

    venv = DummyVecEnv([lambda: make_env(ENV_ID, {"window_jobs": 5, "sim": {"overload_threshold": 0.7}})])
    assert overload_threshold(venv) == 0.7


def test_bc_maps_and_learns_stop_option_actions():
    """An expert that moves every changeable job to stop at its requirement before placing (FIFO): its
    stop-option actions are recorded like any other, and cloning puts the pairwise policy's greedy choice on
    a stop-option column in those states."""
    from clustergym.agents.bc import _labelled_rollouts
    from clustergym.baselines.agent import HeuristicAgent
    from helpers import StopThenFIFO

    env = make_env(ENV_ID, {"window_jobs": 10, "cluster": "tiny-8", "window_size": 8, "n_destinations": 4})
    agent = HeuristicAgent(StopThenFIFO(), env)

    def choose(obs, m):
        a = int(agent.predict(obs, action_masks=m)[0])
        return a, a

    data = _labelled_rollouts(env, range(2), choose, 0.99, 150)
    C = env.unwrapped.window.C
    K = env.unwrapped.K
    stop = (data["actions"] != data["masks"].shape[1] - 1) & (data["actions"] % C > K)
    assert stop.sum() >= 10  # the expert's stop-option changes are in the data
    model = _model(make_env(ENV_ID, {"window_jobs": 10, "cluster": "tiny-8", "window_size": 8,
                                     "n_destinations": 4}))
    losses = behaviour_clone(model.policy, data, steps=120, batch_size=32, lr=3e-3, seed=0)
    assert np.isfinite(losses).all() and np.mean(losses[-20:]) < np.mean(losses[:20])
    with th.no_grad():
        idx = np.flatnonzero(stop)
        obs = {k: th.as_tensor(v, dtype=th.float32) for k, v in observations(data, idx).items()}
        pred = masked_logits(model.policy, obs, th.as_tensor(action_masks(data, idx))).argmax(-1).numpy()
    assert np.mean(pred % C > K) >= 0.8


def test_a_mask_that_marks_an_absent_row_valid_is_refused_by_name():
    """A row left out of the packing (absent) that the mask calls valid, within the rows the batch scores."""
    env = make_env(ENV_ID, {"window_jobs": 30})
    enc = _model(env).policy.pi_features_extractor.encoder
    o = _state_batch(env, 1, 40, lambda valid, i: valid[i % 2])
    rows = (o["tasks"].abs().sum(-1) > 0).sum(1)
    short = int(rows.argmin())
    assert rows.max() > rows[short]  # another state shows that row, so the batch scores it
    C = (o["action_mask"].shape[-1] - 1) // o["tasks"].shape[1]
    o["action_mask"][short, int(rows[short]) * C] = 1.0
    with pytest.raises(ValueError, match="'present' column is 0"), th.no_grad():
        enc(o)


def test_end_decision_loss_weighs_ending_against_all_other_valid_actions():
    """Three valid actions of equal logit: P(end) = 1/3, P(act) = 2/3; a state where only ending is valid has no
    choice and is left out (its gradient stays finite)."""
    from clustergym.agents.bc import end_decision_loss

    ninf = float("-inf")
    logits = th.tensor([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [ninf, ninf, 0.0]], requires_grad=True)
    loss = end_decision_loss(logits, th.tensor([2, 0, 2]))
    assert loss.item() == pytest.approx((np.log(3) - np.log(2 / 3)) / 2)
    loss.backward()
    assert th.isfinite(logits.grad).all() and float(logits.grad[2].abs().sum()) == 0.0
    assert end_decision_loss(logits[2:], th.tensor([2])).item() == 0.0  # no state with the choice


def test_end_coef_trains_the_round_ending_decision():
    """Same initial weights, same data and steps: with the auxiliary term the clone's end-vs-act cross-entropy
    ends lower than with the joint cross-entropy alone."""
    from clustergym.agents.bc import end_decision_loss

    data = collect("mlf-h", ENV_ID, {"window_jobs": 8}, [1])
    env = make_env(ENV_ID, {"window_jobs": 8})
    obs = {k: th.as_tensor(v, dtype=th.float32) for k, v in observations(data).items()}
    result = {}
    for coef in (0.0, 5.0):
        model = _model(env, seed=0)
        behaviour_clone(model.policy, data, steps=30, batch_size=32, lr=1e-3, seed=0, end_coef=coef)
        with th.no_grad():
            logits = masked_logits(model.policy, obs, th.as_tensor(action_masks(data)))
        result[coef] = float(end_decision_loss(logits, th.as_tensor(data["actions"])))
    assert result[5.0] < result[0.0]


def test_dagger_rolls_out_the_decoding_the_evaluations_use():
    """collect_dagger(decode="act-first") visits the states an act-first agent reaches when stepped by hand;
    the joint argmax of the same untrained policy visits others."""
    from clustergym.agents.decode import with_decode

    cfg = {"window_jobs": 8}
    env = make_env(ENV_ID, cfg)
    model = _model(env)
    runs = {d: collect_dagger(model.policy, "mlf-h", ENV_ID, cfg, [1], max_steps=40, decode=d)
            for d in ("joint", "act-first")}
    visited = {d: observations(run) for d, run in runs.items()}
    agent = with_decode(model, "act-first", env)
    obs, _ = env.reset(seed=1)
    for i in range(40):
        assert all(np.array_equal(visited["act-first"][k][i], v) for k, v in obs.items()), f"state {i}"
        obs, _, term, trunc, _ = env.step(int(agent.predict(obs, action_masks=env.unwrapped.action_masks()[None])[0]))
        if term or trunc:
            break
    assert not np.array_equal(visited["joint"]["tasks"], visited["act-first"]["tasks"])
