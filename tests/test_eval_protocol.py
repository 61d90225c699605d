"""Policy specs of every kind, the held-out default split, and the benchmark protocols of eval/compare.py."""
from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from clustergym.eval import compare, protocols, specs
from clustergym.eval.rollout import EVAL_DEFAULTS, evaluate
from clustergym.scenarios import SCENARIOS

POLICY_MODULE = '''
from clustergym import baselines


def make(env, name="mlf-h"):
    """A heuristic through the callable route: its results must equal the heuristic's own."""
    return baselines.make(name, env)


def no_predict(env):
    return object()


NOT_CALLABLE = 3
'''


@pytest.fixture
def policy_module(tmp_path, monkeypatch):
    """A module ``my_policies`` in the working directory (not installed, not on sys.path)."""
    (tmp_path / "my_policies.py").write_text(POLICY_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(__import__("sys").modules, "my_policies", raising=False)
    return tmp_path / "my_policies.py"


def _main(out, *args):
    return compare.main(["--out", str(out), "--workers", "0", "--no-progress", "--no-figures", "--bootstrap", "0",
                         *args])


# ------------------------------------------------------------------ parsing and checks


def test_policy_specs_of_every_kind(tmp_path):
    assert specs.parse_policy("mlf-h")["kind"] == "heuristic"
    p = specs.parse_policy("mlf-h:migrate=false")
    assert p["kind"] == "heuristic" and p["name"] == "mlf-h" and p["params"] == {"migrate": False}
    c = specs.parse_policy("mine=pkg.mod:make_policy:temperature=0.5")
    assert (c["kind"], c["label"], c["target"], c["params"]) == ("callable", "mine", "pkg.mod:make_policy",
                                                                 {"temperature": 0.5})
    assert specs.parse_policy("pkg.mod:Factory.build")["target"] == "pkg.mod:Factory.build"
    assert specs.parse_policy("runs/x/best_model.zip")["kind"] == "agent"
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    assert specs.parse_policy(str(ckpt))["kind"] == "agent"  # a folder without RLlib's marker: a training run
    (ckpt / specs.RLLIB_MARKER).write_text("{}")
    r = specs.parse_policy(f"rl={ckpt}")
    assert (r["kind"], r["label"], r["path"]) == ("rllib", "rl", str(ckpt))


@pytest.mark.parametrize("spec,match", [
    ("mlfh", r"'mlfh' is not a heuristic \(mlf-h, .*\), a model file .* nor a module:callable"),
    ("mlf-h:bogus=1", r"heuristic 'mlf-h' with \{'bogus': 1\}: .*unexpected keyword argument 'bogus'"),
    ("./gone.zip", r"no SB3 model file or training run folder at './gone.zip'"),
    ("no_such_module_xyz:make", r"cannot import module 'no_such_module_xyz'"),
    ("my_policies:missing", r"'my_policies:missing': no attribute 'missing'"),
    ("my_policies:NOT_CALLABLE", r"is a int, not a callable"),
    ("my_policies:no_predict", r"returned a object without a predict\(obs, action_masks=...\) method"),
    ("my_policies:make:name=nope", r"my_policies:make\(env, \*\*\{'name': 'nope'\}\) failed: KeyError"),
])
def test_a_bad_policy_spec_is_refused_by_name_before_any_run(policy_module, tmp_path, capsys, spec, match):
    with pytest.raises(specs.PolicySpecError, match=match):
        specs.check_policies(protocols.get("smoke-v1").runs([specs.parse_policy(spec)]))
    assert _main(tmp_path / "out", "--protocol", "smoke-v1", "--policies", "fifo", spec) == 2
    assert "error: policy" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_files_that_are_not_sb3_models_are_refused(tmp_path):
    (tmp_path / "text.zip").write_text("not a zip")
    with zipfile.ZipFile(tmp_path / "other.zip", "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(specs.PolicySpecError, match="is not a readable zip"):
        specs.check_policy(specs.parse_policy(str(tmp_path / "text.zip")))
    with pytest.raises(specs.PolicySpecError, match="is a zip but not an SB3 model"):
        specs.check_policy(specs.parse_policy(str(tmp_path / "other.zip")))


def test_an_rllib_checkpoint_without_ray_names_the_extra(tmp_path, monkeypatch):
    (tmp_path / specs.RLLIB_MARKER).write_text("{}")
    real = specs.importlib.util.find_spec
    monkeypatch.setattr(specs.importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    with pytest.raises(specs.PolicySpecError, match=r"Ray is not installed: install the rllib extra"):
        specs.check_policy(specs.parse_policy(str(tmp_path)))


def test_identity_covers_a_callables_source_and_an_rllib_checkpoints_files(policy_module, tmp_path):
    spec = specs.parse_policy("my_policies:make")
    first = specs.policy_identity(spec)
    assert first["source"] == str(policy_module) and first["sha256"]
    policy_module.write_text(POLICY_MODULE + "\n# another version\n")
    os.utime(policy_module, ns=(1, 1))
    assert specs.identity_difference(first, specs.policy_identity(spec)).startswith("sha256:")
    ckpt = tmp_path / "ckpt"
    (ckpt / "learner").mkdir(parents=True)
    (ckpt / specs.RLLIB_MARKER).write_text("{}")
    (ckpt / "learner" / "state.pkl").write_bytes(b"one")
    a = specs.policy_identity(specs.parse_policy(str(ckpt)))
    (ckpt / "learner" / "state.pkl").write_bytes(b"two")
    os.utime(ckpt / "learner" / "state.pkl", ns=(1, 1))
    b = specs.policy_identity(specs.parse_policy(str(ckpt)))
    assert a["kind"] == "rllib" and a["sha256"] != b["sha256"]


# ------------------------------------------------------------------ held-out windows by default


def test_evaluation_plays_held_out_windows_unless_told_and_says_so(tmp_path, capsys):
    assert EVAL_DEFAULTS == {"split": "test"}
    small = {"window_jobs": 5, "cluster": "tiny-8"}
    (default,) = evaluate("fifo", "clustergym/GPUCluster-v1", small, [3])
    (test,) = evaluate("fifo", "clustergym/GPUCluster-v1", {**small, "split": "test"}, [3])
    (train,) = evaluate("fifo", "clustergym/GPUCluster-v1", {**small, "split": "train"}, [3])
    assert default["window_start"] == test["window_start"] != train["window_start"]
    assert default["env_id"] == "clustergym/GPUCluster-v1"
    scen = ["--scenarios", "clustergym/GPUCluster-v1:window_jobs=5,cluster=tiny-8", "--policies", "fifo", "--seeds", "3"]
    assert _main(tmp_path / "a", *scen) == 0
    assert "split=test (held-out windows)" in capsys.readouterr().err
    ep = pd.read_csv(tmp_path / "a" / "episodes.csv")
    assert ep["window_start"].tolist() == [test["window_start"]] and ep["env_id"].tolist() == [test["env_id"]]
    assert _main(tmp_path / "b", *scen, "--set", "split=train") == 0
    assert "split=train (training windows: not held out)" in capsys.readouterr().err
    assert pd.read_csv(tmp_path / "b" / "episodes.csv")["window_start"].tolist() == [train["window_start"]]


# ------------------------------------------------------------------ protocols


def test_protocols_name_registered_ids_held_out_windows_and_seeds_training_never_draws():
    from clustergym.train.config import TrainConfig

    cfg = TrainConfig()
    taken = set(cfg.val_seeds()) | set(cfg.final_seeds())
    for name, p in protocols.PROTOCOLS.items():
        assert p.split == "test" and p.seeds and not taken & set(p.seeds), name
        text = protocols.describe(p)
        for s in p.scenarios:
            assert s.env_id in SCENARIOS, (name, s.env_id)  # a renamed (re-versioned) id must be updated here
            assert s.env_id in text
        policies = [specs.parse_policy("fifo")] + ([specs.parse_policy(f"{p.subject}=mlf-h")] if p.subject else [])
        runs = p.runs(policies)
        assert len(runs) == len(policies) * sum(len(p.seeds_of(s)) for s in p.scenarios)
        assert {r["env_kwargs"]["split"] for r in runs} == {"test"}
        for s in p.scenarios:  # each scenario plays its own seeds, else the protocol's
            assert {r["seed"] for r in runs if r["scenario"] == s.label} == set(p.seeds_of(s)), (name, s.label)
    # the seeds seeds_of gives, pinned: the 1,000-job scenarios play two windows, the others the protocol's four
    transfer = protocols.get("transfer-v1").runs([specs.parse_policy("fifo"), specs.parse_policy("agent=mlf-h")])
    assert {r["seed"] for r in transfer if r["scenario"] == "mlfs2474-philly"} == {30_000, 30_001}
    assert {r["seed"] for r in transfer if r["scenario"] == "contended80-philly"} == set(range(30_000, 30_004))
    with pytest.raises(specs.SweepSpecError, match="unknown protocol 'nope'; known: core-v1"):
        protocols.get("nope")


def test_a_protocol_fixes_its_scenarios_and_seeds(tmp_path, capsys):
    for extra in (["--scenarios", "clustergym/Hetero-v1"], ["--seeds", "1"], ["--set", "window_jobs=3"],
                  ["--max-steps", "10"]):
        assert _main(tmp_path, "--protocol", "smoke-v1", *extra) == 2
        assert f"drop {extra[0]}" in capsys.readouterr().err


def test_protocol_results_file_records_env_ids_versions_and_machine(policy_module, tmp_path):
    out = tmp_path / "out"
    assert _main(out, "--protocol", "smoke-v1", "--policies", "mlf-h", "mine=my_policies:make", "fifo") == 0
    doc = json.loads((out / "protocol.json").read_text())
    p = protocols.get("smoke-v1")
    assert doc["protocol"] == p.definition() and doc["complete"] and doc["failed_runs"] == []
    assert doc["policies"]["mine"]["kind"] == "callable" and doc["policies"]["mine"]["source"] == str(policy_module)
    prov = doc["provenance"]
    for pkg in ("clustergym", "gymnasium", "numpy", "torch", "stable-baselines3"):
        assert prov["packages"][pkg], pkg
    assert prov["code_version"] == specs.code_version() and prov["machine"]["cpu_count"] == os.cpu_count()
    assert prov["machine"]["platform"] and prov["python"]
    res = pd.DataFrame(doc["results"])
    assert set(res["env_id"]) == {s.env_id for s in p.scenarios}
    assert set(res["policy"]) == {"mlf-h", "mine", "fifo"}
    jct = res[res["metric"] == "mean_jct"].set_index("policy")
    assert (jct["n"] == len(p.seeds)).all()
    assert jct.at["mine", "mean"] == jct.at["mlf-h", "mean"]  # the callable wrapping MLF-H plays MLF-H
    assert jct.at["fifo", "mean"] != jct.at["mlf-h", "mean"]
    episodes = pd.read_csv(out / "episodes.csv")
    assert set(episodes["seed"]) == set(p.seeds) and set(episodes["env_id"]) == {s.env_id for s in p.scenarios}
    md = (out / "protocol.md").read_text()
    for text in ("# Protocol smoke-v1", "split: `test`", "clustergym/MLFS80-Philly-v1", "gymnasium",
                 f"{os.cpu_count()} CPUs", "| mine ", "| mlf-h ", "JCT (h)"):
        assert text in md, text


@pytest.mark.rllib
def test_an_rllib_checkpoint_plays_the_protocol_with_valid_actions(tmp_path):
    pytest.importorskip("ray.rllib")
    from clustergym.agents.rllib import RLlibPolicy
    from clustergym.eval.rollout import predictor, rollout
    from clustergym.scenarios import make_env
    from clustergym.train.rllib_ppo import main as train_rllib

    res = train_rllib(["--env", '{"window_jobs": 8}', "--policy", "mlp", "--net-arch", "[32, 32]", "--bc-steps", "0",
                       "--timesteps", "256", "--n-steps", "256", "--batch-size", "64", "--n-epochs", "1",
                       "--final-eval-episodes", "0", "--num-cpus", "1", "--no-progress",
                       "--out", str(tmp_path / "run")])
    ckpt = Path(res["checkpoint"])
    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": 8, "split": "test", "invalid_action": "raise"})
    policy = RLlibPolicy(ckpt, env)
    a, b = (rollout(env, predictor(policy, env, "rl"), 30_000) for _ in range(2))  # a masked action would raise
    assert a["agent_steps"] > 0 and a["episode_return"] == b["episode_return"]  # greedy: deterministic
    with pytest.raises(ValueError, match="deterministic=False"):
        policy.predict(env.reset(seed=0)[0], deterministic=False)
    decoded = RLlibPolicy(ckpt, env, decode="row-kind")
    c = rollout(env, predictor(decoded, env, "rl-row-kind"), 30_000)  # a masked action would raise
    assert c["agent_steps"] > 0
    out = tmp_path / "out"
    assert _main(out, "--protocol", "smoke-v1", "--policies", f"rl={ckpt}", "fifo") == 0
    doc = json.loads((out / "protocol.json").read_text())
    assert doc["policies"]["rl"]["kind"] == "rllib" and doc["policies"]["rl"]["sha256"]
    assert doc["provenance"]["packages"]["ray"] and doc["complete"]


def test_the_protocol_page_formats_paired_rows_as_paired_table_does_in_the_pages_units():
    from clustergym.eval.stats import paired_table

    from helpers import markdown_rows

    rows, md = paired_table({"agent": [{"seed": 0, "mean_jct_censored": 9000.0}],
                             "fifo": [{"seed": 0, "mean_jct_censored": 1800.0}]}, metrics=["mean_jct_censored"])
    assert markdown_rows(md)[0][2] == "agent − vs"
    assert markdown_rows(md)[1] == ["fifo", "mean_jct_censored", "7200", "[–, –]", "0/0/1"]  # seconds, one window
    # the page: hours, and a JSON NaN (None) shows as "–" like a nan
    page = protocols.paired_page_table([{"scenario": "s", **rows[0], "ci95_low": None, "ci95_high": 3 * 3600.0}])
    assert markdown_rows(page)[1] == ["s", "fifo", "JCT censored (h)", "2.00", "[–, 3.00]", "0/0/1", "1"]
