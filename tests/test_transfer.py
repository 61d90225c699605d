"""The same agent on other scenarios: loading onto other spaces (agents/io.py) and the paired protocols
(transfer-v1, transfer-smoke-v1 in eval/protocols.py)."""
from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from clustergym.agents.io import AgentLoadError, load_agent
from clustergym.agents.policies import overload_threshold, policy_spec
from clustergym.eval import compare, protocols
from clustergym.scenarios import make_env

TRAINED_ON = ("clustergym/GPUCluster-v1", {"window_jobs": 5})
# Hare-160: 40 destination columns and 8-GPU servers, against the contended default's 20 and 4
OTHER = ("clustergym/Hare160-Philly-v1", {"window_jobs": 5, "split": "test"})


def _save_agent(path, policy: str = "pairwise"):
    """An untrained agent of ``policy`` built on the contended default's spaces, saved as SB3 does."""
    from sb3_contrib import MaskablePPO

    env = make_env(*TRAINED_ON)
    cls, kw = policy_spec(policy, "maskable", net_arch=[16, 16],
                          overload_threshold=overload_threshold(env) if policy == "pairwise" else None)
    MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0).save(path)
    return path


def _load(path, env):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the pickle warning, tested in test_agents.py
        return load_agent(path, env=env)


def test_a_pairwise_agent_loads_onto_another_scenarios_spaces_and_plays_valid_actions(tmp_path):
    saved = _save_agent(tmp_path / "agent.zip")
    env = make_env(*OTHER)
    assert env.observation_space != make_env(*TRAINED_ON).observation_space
    model = _load(saved, env)
    assert model.observation_space == env.observation_space and model.action_space == env.action_space
    original = _load(saved, None)
    trained = original.policy.state_dict()
    assert all(np.array_equal(v.numpy(), trained[k].numpy()) for k, v in model.policy.state_dict().items())
    obs, _ = env.reset(seed=30_000)
    for _ in range(20):
        mask = env.unwrapped.action_masks()
        a, _ = model.predict(obs, deterministic=True, action_masks=mask)
        assert mask[int(a)]
        obs, _, term, trunc, _ = env.step(int(a))
        if term or trunc:
            break


def test_an_mlp_agent_on_another_scenarios_spaces_is_a_named_error(tmp_path):
    saved = _save_agent(tmp_path / "mlp.zip", policy="mlp")
    with pytest.raises(AgentLoadError, match=r"weights tied to the sizes it was trained on .*only the pairwise "
                                             r"policy transfers"):
        _load(saved, make_env(*OTHER))
    assert _load(saved, make_env(*TRAINED_ON)).observation_space == make_env(*TRAINED_ON).observation_space


def test_the_model_file_is_read_once_and_a_damaged_one_is_named_in_the_error(tmp_path, monkeypatch):
    saved = _save_agent(tmp_path / "agent.zip")
    reads = []
    read_bytes = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self) or read_bytes(self))
    _load(saved, make_env(*OTHER))  # the space check and the load share one read
    assert reads == [saved]
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(AgentLoadError, match=re.escape(f"Error: the file {tmp_path / 'bad.zip'} wasn't a zip-file")):
        _load(tmp_path / "bad.zip", make_env(*OTHER))


def _main(out, *args):
    return compare.main(["--out", str(out), "--workers", "0", "--no-progress", "--no-figures", "--bootstrap", "0",
                         *args])


def test_a_transfer_protocol_needs_the_subject_by_its_label(tmp_path, capsys):
    assert _main(tmp_path, "--protocol", "transfer-v1", "--policies", "mlf-h", "fifo") == 2
    assert "compares the policy labelled 'agent' with the others" in capsys.readouterr().err
    assert "paired: the policy labelled 'agent'" in protocols.describe(protocols.get("transfer-v1"))


def test_the_paired_table_is_the_subject_minus_each_policy_on_the_same_window(tmp_path):
    """transfer-smoke-v1 with a heuristic as the subject (seconds): every paired row equals the differences
    of episodes.csv taken by hand, on both scenarios."""
    out = tmp_path / "out"
    assert _main(out, "--protocol", "transfer-smoke-v1", "--policies", "agent=fifo", "mlf-h", "mlfs-h+c") == 0
    doc = json.loads((out / "protocol.json").read_text())
    ep = pd.read_csv(out / "episodes.csv")
    rows = pd.DataFrame(doc["paired"])
    assert set(rows["scenario"]) == {"contended80-philly", "hare160-contended"} and doc["unpaired_scenarios"] == []
    assert set(rows["vs"]) == {"mlf-h", "mlfs-h+c"} and (rows["n"] == 2).all()
    checked = rows[rows["metric"] == "mean_jct_censored"]
    assert len(checked) == 4  # 2 scenarios x 2 policies: the loop below has rows to check
    for r in checked.to_dict("records"):
        by = ep[ep["scenario"] == r["scenario"]].set_index(["policy", "seed"])["mean_jct_censored"]
        d = [by[("agent", s)] - by[(r["vs"], s)] for s in (30_000, 30_001)]
        assert r["mean_diff"] == pytest.approx(np.mean(d))
        assert r["better"] == sum(x < 0 for x in d) and r["worse"] == sum(x > 0 for x in d)
    md = (out / "protocol.md").read_text()
    assert "## Paired: agent minus each other policy, window by window" in md
    assert "| hare160-contended  | mlf-h " in md and "JCT censored (h)" in md


@pytest.mark.slow  # an untrained agent runs its windows to the 1,000-step cap: ~2 min on the shared machine
@pytest.mark.timeout(1200)
def test_a_checkpoint_path_plays_the_transfer_protocol_on_other_spaces(tmp_path):
    saved = _save_agent(tmp_path / "agent.zip")
    out = tmp_path / "out"
    assert _main(out, "--protocol", "transfer-smoke-v1", "--policies", f"agent={saved}", "mlf-h") == 0
    doc = json.loads((out / "protocol.json").read_text())
    assert doc["complete"] and doc["policies"]["agent"]["kind"] == "agent" and doc["policies"]["agent"]["sha256"]
    rows = pd.DataFrame(doc["paired"])
    assert set(rows["scenario"]) == {"contended80-philly", "hare160-contended"} and set(rows["vs"]) == {"mlf-h"}
    ep = pd.read_csv(out / "episodes.csv")
    agent = ep[ep["policy"] == "agent"]
    assert len(agent) == 4 and (agent["agent_steps"] <= 1_000).all()


def test_a_protocol_sweep_lists_a_run_that_failed_as_failed(tmp_path, monkeypatch):
    run_one, failed = compare.run_one, []

    def first_fails(run, out_dir):
        if not failed:
            failed.append(run["key"])
            raise RuntimeError("injected")
        return run_one(run, out_dir)

    monkeypatch.setattr(compare, "run_one", first_fails)
    out = tmp_path / "out"
    assert _main(out, "--protocol", "transfer-smoke-v1", "--policies", "agent=fifo", "mlf-h") == 1
    doc = json.loads((out / "protocol.json").read_text())
    assert not doc["complete"] and doc["failed_runs"] == failed


def test_a_protocol_reaggregated_with_runs_missing_says_it_is_incomplete(tmp_path):
    out = tmp_path / "out"
    assert _main(out, "--protocol", "transfer-smoke-v1", "--policies", "agent=fifo", "mlf-h") == 0
    assert json.loads((out / "protocol.json").read_text())["complete"]
    gone = "mlf-h__hare160-contended__s30001"
    (out / "runs" / f"{gone}.json").unlink()
    assert _main(out, "--protocol", "transfer-smoke-v1", "--policies", "agent=fifo", "mlf-h", "--report-only") == 0
    doc = json.loads((out / "protocol.json").read_text())
    assert not doc["complete"] and doc["failed_runs"] == [gone]
    assert "**incomplete**: 1 runs failed or missing" in (out / "protocol.md").read_text()
    # the other scenario is still paired; the one with a run missing is not, and the page says why
    assert set(pd.DataFrame(doc["paired"])["scenario"]) == {"contended80-philly"}
    assert doc["unpaired_scenarios"] == ["hare160-contended: paired_table: policy 'mlf-h' has no record for "
                                         "seed(s) [30001]"]
