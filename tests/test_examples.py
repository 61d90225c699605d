"""Every script of examples/ runs, as a user runs it (a subprocess from another folder), with small knobs."""
from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run_example(name: str, *args: str, cwd: Path, python: str = sys.executable) -> dict:
    """Run ``examples/<name>`` and return the dict it prints last."""
    out = subprocess.run([python, str(EXAMPLES / name), *args], cwd=cwd, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return ast.literal_eval(out.stdout.strip().splitlines()[-1])


def test_every_example_has_a_test():
    tested = {"sb3_maskable_ppo.py", "torchrl_masked_rollout.py", "vector_env_masks.py", "evaluate_my_policy.py",
              "rllib_ppo.py"}
    assert {p.name for p in EXAMPLES.glob("*.py")} == tested


def test_sb3_maskable_ppo(tmp_path):
    res = run_example("sb3_maskable_ppo.py", "--steps", "64", "--episodes", "1", "--window-jobs", "6",
                      "--out", str(tmp_path / "ppo.zip"), cwd=tmp_path)
    assert res["steps"] == 64 and (tmp_path / "ppo.zip").exists()
    for name in ("ppo", "fifo"):
        assert res[name]["mean_jct_h"] > 0


def test_torchrl_masked_rollout(tmp_path):
    pytest.importorskip("torchrl")
    res = run_example("torchrl_masked_rollout.py", "--steps", "60", "--window-jobs", "6", cwd=tmp_path)
    assert res["steps"] == 60 and res["all_actions_in_mask"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_vector_env_masks(tmp_path, mode):
    # the light scenario: random actions end its 8-job windows within 60 steps (the contended default's
    # 8-job windows of jobs up to 32 GPUs take random actions far longer)
    res = run_example("vector_env_masks.py", "--mode", mode, "--num-envs", "2", "--steps", "60",
                      "--env-id", "clustergym/GPUClusterLight-v1", cwd=tmp_path)
    assert res["num_envs"] == 2 and res["episodes_ended"] > 0


def test_evaluate_my_policy_on_the_protocol(tmp_path):
    out = tmp_path / "results"
    subprocess.run([sys.executable, str(EXAMPLES / "evaluate_my_policy.py"), "--out", str(out), "--workers", "2"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=600)
    doc = json.loads((out / "protocol.json").read_text())
    assert doc["complete"] and doc["protocol"]["name"] == "smoke-v1"
    assert doc["policies"]["mine"]["kind"] == "callable"
    assert doc["policies"]["mine"]["source"] == str(EXAMPLES / "evaluate_my_policy.py")
    assert {r["policy"] for r in doc["results"]} == {"mine", "mlf-h"}


@pytest.mark.rllib
def test_rllib_ppo(tmp_path):
    pytest.importorskip("ray.rllib")
    res = run_example("rllib_ppo.py", "--iterations", "1", "--batch", "256", "--episodes", "1",
                      "--out", str(tmp_path / "ckpt"), cwd=tmp_path)
    assert res["episodes"] == 1 and (tmp_path / "ckpt" / "rllib_checkpoint.json").exists()
