"""The project's agent on Ray RLlib (agents/rllib_pairwise.py, train/rllib_ppo.py) and sweeps on a Ray cluster
(eval/ray_backend.py). Marked rllib: ``make test-rllib`` runs them in the rllib venv against a local two-node
cluster (tests/ray_cluster.py)."""
from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.rllib

SCENARIO = "clustergym/GPUCluster-v1"
TINY_ENV = '{"window_jobs": 6}'
# a warm start, no PPO step (timesteps 0): the checkpoint holds the cloned weights
TINY_BC = ["--env", TINY_ENV, "--bc-episodes", "2", "--bc-holdout-episodes", "1", "--bc-steps", "30",
           "--bc-dagger-rounds", "0", "--n-steps", "64", "--batch-size", "32", "--n-epochs", "1", "--no-progress"]


@pytest.fixture(scope="module")
def cluster():
    pytest.importorskip("ray.rllib")
    from ray_cluster import cluster_address

    with cluster_address(nodes=2, num_cpus=1) as address:
        yield address


def _obs_batch(env, seeds, steps: int = 12):
    """Observations of a few MLF-H steps on each seed, stacked."""
    from clustergym import baselines

    agent = baselines.make("mlf-h", env=env)
    seen = []
    for seed in seeds:
        obs, _ = env.reset(seed=seed)
        for _ in range(steps):
            seen.append(obs)
            obs, _, term, trunc, _ = env.step(int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0]))
            if term or trunc:
                break
    return {k: np.stack([o[k] for o in seen]) for k in seen[0]}


def test_pairwise_module_computes_the_sb3_policys_logits_and_values():
    pytest.importorskip("ray.rllib")
    import torch as th
    from ray.rllib.core.columns import Columns

    from clustergym.agents.policies import masked_logits, overload_threshold
    from clustergym.agents.rllib_pairwise import load_sb3_policy
    from clustergym.scenarios import make_env
    from clustergym.train.config import load_config
    from clustergym.train.ppo import new_model
    from clustergym.train.rllib_ppo import module_spec

    cfg = load_config(overrides={"env": {"window_jobs": 6}, "d": 16})
    env = make_env(SCENARIO, cfg.train_env_config())
    model = new_model(cfg, env, None)
    module = module_spec(cfg, env).build()
    assert module.model_config["overload_threshold"] == overload_threshold(env)
    obs = {k: th.as_tensor(v, dtype=th.float32) for k, v in _obs_batch(env, [0, 1]).items()}
    with th.no_grad():
        before = module.forward_inference({Columns.OBS: obs})[Columns.ACTION_DIST_INPUTS]
        load_sb3_policy(module, model.policy)
        out = module.forward_train({Columns.OBS: obs})
        values = module.compute_values({Columns.OBS: obs}, out[Columns.EMBEDDINGS])
        sb3_logits = masked_logits(model.policy, obs, None)
        sb3_values = model.policy.predict_values(obs).squeeze(-1)
    logits = out[Columns.ACTION_DIST_INPUTS]
    assert not th.equal(before, logits)  # the copy changed the module
    assert th.allclose(logits, sb3_logits, atol=1e-6)
    assert th.allclose(values, sb3_values, atol=1e-6)
    mask = obs["action_mask"] > 0.5
    assert (logits[~mask] == -1e8).all()  # masked actions: probability 0 in RLlib's categorical


def test_the_warm_start_reaches_the_checkpoint_and_the_final_table(tmp_path):
    pytest.importorskip("ray.rllib")
    from clustergym.agents.rllib import RLlibPolicy
    from clustergym.eval.rollout import evaluate
    from clustergym.train.rllib_ppo import main

    out = tmp_path / "run"
    res = main([*TINY_BC, "--expert", "mlf-h", "--timesteps", "0", "--final-eval-episodes", "2", "--final-baselines",
                "[fifo, mlf-h]", "--final-eval-max-steps", "400", "--num-cpus", "1", "--out", str(out)])
    bc = json.loads((out / "bc.json").read_text())
    assert res["iteration"] == 0 and bc["expert"] == "mlf-h" and bc["train_states"] > 0
    for f in ("config.yaml", "bc.json", "results.md", "results.csv", "paired.csv", "episodes.csv",
              "rllib_checkpoint/rllib_checkpoint.json"):
        assert (out / f).exists(), f
    md = (out / "results.md").read_text()
    assert md.startswith(f"# {SCENARIO}: agent (pairwise, RLlib PPO, final checkpoint (iteration 0)) vs heuristics")
    rows = {line.split("|")[1].strip() for line in md.splitlines() if line.startswith("| ")}
    assert {"agent", "fifo", "mlf-h"} <= rows
    # the table's agent is the checkpoint played greedily: its records are those of RLlibPolicy on the same windows
    from clustergym.scenarios import make_env

    env = make_env(SCENARIO, {"window_jobs": 6, "split": "test"})
    policy = RLlibPolicy(out / "rllib_checkpoint", env)
    env.close()
    again = evaluate(policy, SCENARIO, {"window_jobs": 6}, [10_000, 10_001], name="agent", max_steps=400)
    assert again[0]["agent_steps"] > 0
    import csv

    with open(out / "episodes.csv") as f:
        agent_rows = [r for r in csv.DictReader(f) if r["policy"] == "agent"]
    # (censored mean JCT, not the return: the table's episodes score with the training reward, JCT only by default)
    assert [float(r["mean_jct_censored"]) for r in agent_rows] == pytest.approx([r["mean_jct_censored"] for r in again])
    assert [int(float(r["agent_steps"])) for r in agent_rows] == [r["agent_steps"] for r in again]
    # the checkpoint holds exactly the weights train/ppo.py's warm start gives with the same settings
    import torch as th

    from clustergym.agents.rllib_pairwise import sb3_state_dict
    from clustergym.train.config import load_config
    from clustergym.train.ppo import new_model, warm_start
    from clustergym.train.rllib_ppo import RLLIB_DEFAULTS
    from clustergym.train.rundir import RunFolder

    cfg = load_config(overrides={"env": {"window_jobs": 6}, "bc_episodes": 2, "bc_holdout_episodes": 1, "bc_steps": 30,
                                 "bc_dagger_rounds": 0, "progress_bar": False, "expert": "mlf-h"},
                      defaults=RLLIB_DEFAULTS)
    env = make_env(SCENARIO, cfg.train_env_config())
    model = new_model(cfg, env, None)
    warm_start(cfg, RunFolder(tmp_path / "sb3"), model)
    env.close()
    expected, got = sb3_state_dict(model.policy), policy.module.state_dict()
    assert set(expected) == set(got) and all(th.equal(got[k], expected[k]) for k in expected)


def test_trains_across_a_two_node_cluster(cluster, tmp_path):
    from clustergym.train.rllib_ppo import main

    # a tiny warm start: its weights are set on the remote env runners too (set_module_state checks each)
    res = main(["--env", TINY_ENV, "--policy", "pairwise", "--d", "16", "--bc-steps", "5", "--bc-episodes", "1",
                "--bc-holdout-episodes", "0", "--bc-dagger-rounds", "0", "--timesteps", "128",
                "--n-steps", "64", "--batch-size", "32", "--n-epochs", "1", "--final-eval-episodes", "0",
                "--num-env-runners", "2", "--address", cluster, "--no-progress", "--out", str(tmp_path / "run")])
    assert res["iteration"] == 2 and res["env_steps"] >= 128
    assert res["nodes"] == 2  # one env runner per node: 1 CPU each
    assert (tmp_path / "run" / "rllib_checkpoint" / "rllib_checkpoint.json").exists()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed once the socket is


def test_an_unreachable_address_stops_training_before_any_work(tmp_path, capsys):
    pytest.importorskip("ray.rllib")
    from clustergym.train.rllib_ppo import main

    address = f"127.0.0.1:{_closed_port()}"
    with pytest.raises(SystemExit) as e:
        main(["--bc-steps", "0", "--address", address, "--out", str(tmp_path / "run")])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert f"cannot reach the Ray cluster at '{address}'" in err
    assert not (tmp_path / "run").exists()


def _rows(out: Path) -> dict[str, dict]:
    """Each run file's row without its wall-clock fields."""
    timing = {"wall_s", "decision_mean_us", "decision_p99_us"}
    return {p.name: {k: v for k, v in json.loads(p.read_text())["row"].items() if k not in timing}
            for p in sorted((out / "runs").glob("*.json"))}


def test_a_ray_sweep_writes_the_local_sweeps_files_and_resumes(cluster, tmp_path, capsys):
    from clustergym.eval.compare import main as compare

    base = ["--policies", "mlf-h", "fifo", "--set", "window_jobs=6", "--seeds", "0", "1", "--no-figures",
            "--no-progress", "--bootstrap", "0", "--timeline"]
    local, remote = tmp_path / "local", tmp_path / "ray"
    assert compare([*base, "--workers", "0", "--out", str(local)]) == 0
    assert compare([*base, "--backend", "ray", "--address", cluster, "--out", str(remote)]) == 0
    assert "executed 4, skipped 0" in capsys.readouterr().err
    assert _rows(remote) == _rows(local) and len(_rows(local)) == 4
    for folder in ("runs", "timelines"):  # every file a run writes comes back from its node
        assert sorted(p.name for p in (remote / folder).iterdir()) == sorted(p.name for p in (local / folder).iterdir())
    for name in ("summary.md", "report.md", "episodes.csv"):
        assert (remote / name).exists(), name
    # resume: a removed run is played again, the others are skipped
    (remote / "runs" / "fifo__GPUCluster-v1__s1.json").unlink()
    assert compare([*base, "--backend", "ray", "--address", cluster, "--out", str(remote)]) == 0
    assert "executed 1, skipped 3" in capsys.readouterr().err
    assert _rows(remote) == _rows(local)
