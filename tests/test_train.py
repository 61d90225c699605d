"""train/ppo.py: smoke run of the real script (tiny settings), resume, config checks."""
from __future__ import annotations

import csv
import json
import re
import warnings
from pathlib import Path

import pytest
import yaml

from clustergym.agents.io import PICKLE_WARNING
from clustergym.config import OBJECTIVE_NAMES, ConfigError
from clustergym.eval.specs import code_version
from clustergym.train import ppo
from clustergym.train.config import load_config
from clustergym.train.rundir import kept_checkpoint
from clustergym.train.threads import numeric_platform
from helpers import markdown_rows

ROOT = Path(__file__).resolve().parent.parent

TINY = {"env": {"window_jobs": 10}, "n_envs": 1, "train_max_steps": 100, "timesteps": 256, "n_steps": 128, "batch_size": 64, "n_epochs": 1,
        "bc_steps": 20, "bc_episodes": 2, "bc_holdout_episodes": 1, "bc_dagger_rounds": 1, "bc_dagger_episodes": 1,
        "bc_dagger_steps": 10, "bc_dagger_max_steps": 100, "eval_freq": 128, "eval_episodes": 1,
        "eval_max_steps": 100, "final_eval_episodes": 2, "final_eval_max_steps": 100,
        "final_baselines": ["fifo", "mlf-h"], "progress_bar": False, "expert_episodes": 1}


def _cfg(overrides=None, config_file=None):
    return load_config(config_file, overrides)


def _scalars(tb_dir: Path) -> dict[str, list]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb_dir))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


def test_smoke_run_writes_everything(tmp_path, capsys):
    cfg = _cfg({**TINY, "out": str(tmp_path / "run"), "log_every": 1, "progress_bar": True})
    res = ppo.train(cfg)
    out = Path(res["out"])
    captured = capsys.readouterr()
    console = captured.out.splitlines()
    for bar in ("expert rollouts", "held-out rollouts", "BC", "DAgger 1/1 rollouts", "DAgger 1/1 BC", "PPO", "eval",
                "agent", "mlf-h"):  # every phase's progress bar (on stderr)
        assert re.search(rf"\r{bar}: +\d+%", captured.err), bar
    # the run folder and a TensorBoard command that needs no activated venv come first
    assert console[0] == f"Run folder: {out}"
    tb = console[1].removeprefix("TensorBoard: ").split()
    assert tb[0].endswith("tensorboard") and Path(tb[0]).exists() and tb[1:] == ["--logdir", str(out / "tb")]
    # every line fits 100 columns (but for the run folder's path itself); the last ones say where results are
    assert [line for line in console if len(line.replace(str(out), "")) > 100] == []
    assert any(line.startswith("[256/256 steps") for line in console)  # the status line of training episodes
    done = console.index(f"Done. Results in {out}:")
    assert "results.md" in console[done + 1] and console[-1] == console[1].replace("TensorBoard", "  TensorBoard")
    table = markdown_rows("\n".join(console[:done]))
    assert table[0][:3] == ["policy", "return", "JCT (h)"] and len(table[0]) <= 6  # the compact table
    for f in ("config.yaml", "final_model.zip", "best_model.zip", "results.csv", "paired.csv", "results.md", "episodes.csv",
              "bc.json", "checkpoints/last.zip", "state.json"):
        assert (out / f).exists(), f
    rows = markdown_rows((out / "results.md").read_text())
    assert {"agent", "fifo", "mlf-h"} <= {r[0] for r in rows}
    assert "mean_jct" in rows[0] and "deadline_ratio" in rows[0]
    assert ["mlf-h", "mean_jct_censored"] in [r[:2] for r in rows]  # the paired comparison
    saved = yaml.safe_load((out / "config.yaml").read_text())
    assert saved["timesteps"] == 256 and saved["env"] == {"window_jobs": 10}
    for f in ("results.csv", "paired.csv", "episodes.csv"):  # each names the env id (its version: the dynamics)
        with open(out / f) as fh:
            assert {r["env_id"] for r in csv.DictReader(fh)} == {saved["scenario"]}, f
    tags = _scalars(out / "tb" / "ppo_1")
    assert "train/value_loss" in tags and "eval/episode_return" in tags and "eval/mean_jct" in tags
    assert "episode/return" in tags and "summary/mean_jct" in tags and "summary/deadline_ratio" in tags
    assert res["num_timesteps"] == 256


def test_resume_continues_steps_and_logs(tmp_path, capsys):
    out = tmp_path / "run"
    cfg = _cfg({**TINY, "timesteps": 512, "bc_steps": 0, "final_eval_episodes": 1, "final_baselines": ["mlf-h"],
                "out": str(out)})
    first = ppo.train(cfg, stop_at=256)
    assert first["interrupted"] and first["num_timesteps"] == 256
    before = _scalars(out / "tb" / "ppo_1")
    with pytest.raises(SystemExit):  # flags that differ from the saved config are refused
        ppo.main(["--resume", str(out), "--seed", "7"])
    assert "refuses" in capsys.readouterr().err
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = ppo.main(["--resume", str(out), "--no-progress"])
    # the checkpoint and then the best model are loaded: the warning that zips run code is shown once
    assert [str(w.message) for w in caught].count(PICKLE_WARNING) == 1
    assert not res["interrupted"] and res["num_timesteps"] == 512
    assert not (out / "tb" / "ppo_2").exists()  # same TensorBoard run continued
    after = _scalars(out / "tb" / "ppo_1")
    assert max(s for s, _ in after["train/value_loss"]) > max(s for s, _ in before["train/value_loss"])
    assert max(s for s, _ in after["train/value_loss"]) >= 384
    with pytest.raises(SystemExit):  # fewer steps than saved: refused
        ppo.main(["--resume", str(out), "--timesteps", "256"])
    more = ppo.main(["--resume", str(out), "--timesteps", "640", "--no-progress"])  # extends the finished run
    assert not more["interrupted"] and more["num_timesteps"] == 640
    assert yaml.safe_load((out / "config.yaml").read_text())["timesteps"] == 640
    assert max(s for s, _ in _scalars(out / "tb" / "ppo_1")["eval/mean_jct_censored"]) == 640
    # which code ran each part of the run: the start and both resumes, from the step each began at
    code = json.loads((out / "state.json").read_text())["code"]
    assert [c["from_step"] for c in code] == [0, 256, 512] and {c["code"] for c in code} == {code_version()}
    assert all(c["numerics"] == numeric_platform() for c in code)  # and on which CPU kernels


def test_a_resume_on_other_cpu_kernels_is_recorded_and_warned_about(tmp_path):
    from clustergym.train.rundir import RunFolder

    folder = RunFolder(tmp_path / "run")
    here = numeric_platform()
    folder.record_code("v", 0, here)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        folder.record_code("v", 256, here)  # the same machine: no warning
    other = {**here, "cpu_capability": "AVX2" if here["cpu_capability"] != "AVX2" else "AVX512"}
    with pytest.warns(RuntimeWarning, match=r"resumes on .*from step 512 on, its weights will differ"):
        folder.record_code("v", 512, other)
    assert [c["numerics"]["cpu_capability"] for c in folder.state["code"]] == [here["cpu_capability"]] * 2 + [
        other["cpu_capability"]]


@pytest.mark.filterwarnings("ignore:SB3 zip files contain pickled")  # the test loads the files it wrote
def test_keep_checkpoints_keeps_every_evaluated_model_from_when_it_is_turned_on(tmp_path):
    """Off, only last.zip is in checkpoints/; turned on at --resume, each later evaluation's model is kept under
    its step (the last one is the model of the run's end)."""
    out = tmp_path / "run"
    ppo.train(_cfg({**TINY, "timesteps": 256, "bc_steps": 0, "final_eval_episodes": 0, "out": str(out)}))
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["last.zip"]
    ppo.main(["--resume", str(out), "--timesteps", "512", "--keep-checkpoints", "true", "--no-progress"])
    state = json.loads((out / "state.json").read_text())
    later = [e["step"] for e in state["evals"] if e["step"] > 256]
    assert len(later) >= 2
    kept = sorted(p.name for p in (out / "checkpoints").glob("step-*.zip"))
    assert kept == [Path(kept_checkpoint(s)).name for s in later]
    from clustergym.agents.io import load_agent

    last, kept_last = (load_agent(p, algo="maskable") for p in (out / "checkpoints" / "last.zip",
                                                                 out / kept_checkpoint(later[-1])))
    assert later[-1] == 512 and all((a == b).all() for a, b in zip(last.policy.state_dict().values(),
                                                                   kept_last.policy.state_dict().values()))


def test_config_rejects_unknown_keys(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("timesteps: 10\nlearning_rat: 0.1\n")
    with pytest.raises(ConfigError, match="learning_rat"):
        _cfg(None, str(f))
    n = len(OBJECTIVE_NAMES)
    with pytest.raises(ConfigError, match=f"{n} values"):
        _cfg({"reward_weights": "1,2,3"})
    assert _cfg({"reward_weights": ",".join(["1"] + ["0"] * (n - 1))}).reward_weights == [1.0] + [0.0] * (n - 1)


@pytest.mark.parametrize("key,value", [("final_eval_episodes", -1), ("eval_episodes", 0), ("n_envs", 0),
                                       ("timesteps", 1.5), ("batch_size", "64"), ("bc_steps", True)])
def test_config_rejects_bad_counts(key, value):
    with pytest.raises(ConfigError, match=rf"{key} must be an integer >= \d, got {value!r}"):
        _cfg({key: value})


def test_config_count_dependencies_and_none_caps():
    with pytest.raises(ConfigError, match="bc_episodes must be >= 1"):
        _cfg({"bc_episodes": 0})
    assert _cfg({"bc_episodes": 0, "bc_steps": 0, "train_max_steps": None}).train_max_steps is None


def test_row_kind_decoding_drives_the_evaluations_and_is_named_in_the_results(tmp_path, monkeypatch):
    from clustergym.agents import decode

    calls = []
    real = decode.row_kind_mode
    monkeypatch.setattr(decode, "row_kind_mode", lambda *a: calls.append(1) or real(*a))
    out = tmp_path / "run"
    ppo.train(_cfg({**TINY, "timesteps": 128, "bc_steps": 0, "eval_freq": 0, "final_eval_episodes": 1,
                    "final_baselines": ["fifo"], "decode": "row-kind", "out": str(out)}))
    assert calls  # the checkpoint selection's and the final table's agent steps went through it
    assert "row-kind decoding" in (out / "results.md").read_text()
    assert yaml.safe_load((out / "config.yaml").read_text())["decode"] == "row-kind"


def test_a_decoded_agent_is_evaluated_while_the_pipelined_envs_reset(tmp_path):
    """Periodic evaluations with act-first decoding during PPO on the pipelined vector env, whose next reset is
    under way when an evaluation starts: the decoding's destination columns must not be read from it."""
    out = tmp_path / "run"
    ppo.train(_cfg({**TINY, "n_envs": 2, "vec_env": "pipelined", "n_steps": 32, "timesteps": 128, "bc_steps": 0,
                    "eval_freq": 64, "final_eval_episodes": 1, "final_baselines": ["fifo"], "decode": "act-first",
                    "out": str(out)}))
    assert "act-first decoding" in (out / "results.md").read_text()


def test_no_final_table(tmp_path):
    out = tmp_path / "run"
    res = ppo.train(_cfg({**TINY, "timesteps": 128, "bc_steps": 0, "final_eval_episodes": 0, "out": str(out)}))
    assert res["results_md"] is None and res["num_timesteps"] == 128
    assert (out / "final_model.zip").exists() and not (out / "results.md").exists()


def test_help_lists_flags(capsys):
    with pytest.raises(SystemExit):
        ppo.main(["--help"])
    text = capsys.readouterr().out
    for flag in ("--scenario", "--timesteps", "--n-envs", "--seed", "--config", "--bc-steps", "--reward-weights",
                 "--out", "--resume", "--device", "--policy", "--algo", "--eval-episodes", "--eval-freq"):
        assert flag in text


def test_every_setting_has_a_flag_read_as_its_type():
    from clustergym.train.config import FIELDS, config_from_args, make_parser

    parser = make_parser()
    flags = {o for a in parser._actions for o in a.option_strings}
    assert {"--" + f.replace("_", "-") for f in FIELDS if f != "progress_bar"} | {"--no-progress"} <= flags
    args = parser.parse_args(["--bc-episodes", "2", "--learning-rate", "3e-5", "--target-kl", "none",
                              "--net-arch", "[64, 32]", "--share-encoder", "false", "--env", "{window_jobs: 10}",
                              "--final-baselines", "[fifo]", "--train-max-steps", "None", "--no-progress"])
    cfg, resume = config_from_args(args)
    assert not resume and cfg.bc_episodes == 2 and cfg.learning_rate == 3e-5 and cfg.target_kl is None
    assert cfg.net_arch == [64, 32] and cfg.share_encoder is False and cfg.env == {"window_jobs": 10}
    assert cfg.final_baselines == ["fifo"] and cfg.train_max_steps is None and cfg.progress_bar is False
    assert config_from_args(parser.parse_args([]))[0] == load_config()  # no flag: the defaults
    with pytest.raises(SystemExit):
        parser.parse_args(["--bc-episodes", "two"])


@pytest.mark.parametrize("overrides,message", [
    ({"select_metric": "mean_jt"}, "select_metric: metric 'mean_jt' has no better direction"),
    ({"select_metric": "jobs"}, "select_metric: metric 'jobs' has no better direction"),
    ({"expert": "mlf-x"}, "expert: 'mlf-x' is not a heuristic"),
    ({"final_baselines": ["fifo", "nope"]}, "final_baselines: 'nope' is not a heuristic"),
    ({"eval_baselines": "fifo"}, "eval_baselines must be a list"),
    ({"learning_rate": "3e-5"}, "write 3.0e-5"),
    ({"gamma": 1.5}, r"gamma must be in \(0, 1\]"),
    ({"gamma_hour": 0.0}, r"gamma_hour must be in \(0, 1\]"),
    ({"vec_env": "threads"}, r"vec_env must be one of \['auto', 'dummy', 'subproc', 'grouped', 'pipelined'\]"),
    ({"expert_candidates": "mlf-h"}, "expert_candidates must be a list"),
    ({"expert_episodes": 0}, "expert_episodes must be an integer >= 1"),
    ({"clip_range": float("nan")}, "clip_range must be a finite number"),
    ({"reward_weights": [1, 0, 0, 0, 0, 0, float("inf")]}, "all finite"),
    ({"scenario": "clustergym/Nope-v0"}, "not a registered env id"),
    ({"net_arch": [64, 0]}, "net_arch must be a list of layer widths"),
    ({"share_encoder": "yes"}, "share_encoder must be true or false"),
    ({"seed": -1}, "seed must be an integer >= 0"),
    ({"bc_end_coef": -1.0}, r"bc_end_coef must be in \[0, inf\], got -1.0"),
    ({"search_proposer": "mlfs-h+c"}, "search_proposer: 'mlfs-h\\+c' attaches a controller"),
    ({"search_proposer": "mlf-x"}, "search_proposer: 'mlf-x' is not a heuristic"),
    ({"search_proposal": "best"}, r"search_proposal must be one of \['agent', 'random'\]"),
    ({"search_horizon_s": -1.0}, r"search_horizon_s must be in \[0, inf\]"),
    ({"search_foresight": "some"}, r"search_foresight must be one of \['oracle', 'arrivals', 'none'\]"),
    ({"decode": "mean"}, r"decode must be one of \['joint', 'row-kind', 'act-first'\]")])
def test_config_rejects_bad_values_by_name(overrides, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(overrides)


def test_checkpoint_selection_cannot_be_won_by_leaving_jobs_unfinished():
    # a run that leaves jobs waiting until the step cap has a flattering censored JCT; it must still lose
    leaves_jobs = ppo.selection_score({"unfinished": 2.0, "mean_jct_censored": 900.0, "episode_return": -1.0},
                                      "mean_jct_censored")
    finishes = ppo.selection_score({"unfinished": 0.0, "mean_jct_censored": 2000.0, "episode_return": -50.0},
                                   "mean_jct_censored")
    faster = ppo.selection_score({"unfinished": 0.0, "mean_jct_censored": 1500.0}, "mean_jct_censored")
    assert finishes < leaves_jobs and faster < finishes
    # higher-is-better metrics are negated so that smaller is always better
    assert ppo.selection_score({"deadline_ratio": 0.9}, "deadline_ratio") < ppo.selection_score(
        {"deadline_ratio": 0.8}, "deadline_ratio")
    # a missing or NaN value (e.g. no job ended) ranks last in either direction, never first
    for metric, value in (("deadline_ratio", 0.1), ("mean_jct_censored", 1e9)):
        assert ppo.selection_score({metric: value}, metric) < ppo.selection_score({metric: float("nan")}, metric)
        assert ppo.selection_score({metric: value}, metric) < ppo.selection_score({}, metric)


@pytest.mark.parametrize("eval_episodes", [5, 20])
def test_checkpoint_selection_and_final_table_use_disjoint_windows(tmp_path, eval_episodes):
    """The best checkpoint is picked on the periodic-evaluation windows; the final table must not reuse them
    (it would then report the selection's luck). Checked on the trace jobs the default windows hold; with 20
    validation windows, seed 20012 (61 jobs shared with the final windows) is passed over."""
    from clustergym.scenarios import make_env

    cfg = _cfg({"out": str(tmp_path), "eval_episodes": eval_episodes})
    env = make_env(cfg.scenario, cfg.env_config("test"))

    def jobs(seeds):
        out = set()
        for s in seeds:
            env.reset(seed=s)
            out |= {j.spec.job_id for j in env.unwrapped.sim.jobs}
        return out

    val, final = cfg.val_seeds(), cfg.final_seeds()
    assert len(val) == cfg.eval_episodes and len(final) == cfg.final_eval_episodes
    assert not set(val) & set(final)
    assert not jobs(val) & jobs(final)
    assert jobs([20012]) & jobs(final)
    assert val == [s for s in range(20000, 20021) if s != 20012][:eval_episodes]


def test_validation_windows_that_cannot_be_kept_apart_are_refused():
    from clustergym.train.windows import disjoint_seeds

    assert disjoint_seeds("clustergym/GPUCluster-v1", {"split": "test", "window_jobs": 10}, 100, 2, [100], max_skipped=1) == [101, 102]
    with pytest.raises(ConfigError, match="no 1 validation windows from seed 100"):
        disjoint_seeds("clustergym/GPUCluster-v1", {"split": "test", "window_jobs": 10}, 100, 1, [100], max_skipped=0)


def test_a_run_whose_validation_windows_cannot_be_kept_apart_stops_before_it_starts(tmp_path, monkeypatch, capsys):
    from clustergym.train import windows

    monkeypatch.setattr(windows, "MAX_SKIPPED", 0)  # seed 10000 is a final window: skipping it is one too many
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        ppo.main([f"--{k.replace('_', '-')}={v}" for k, v in {"val_seed": 10000, "eval_episodes": 1,
                                                               "final_eval_episodes": 1}.items()] + ["--out", str(out)])
    assert "no 1 validation windows from seed 10000" in capsys.readouterr().err
    assert not out.exists()


def test_relative_reward_run_trains_on_it_and_evaluates_on_the_plain_objective(tmp_path, monkeypatch):
    import cloudpickle

    cfg = _cfg({**TINY, "reward_baseline": "mlf-h", "train_max_steps": 2000, "env": {"window_jobs": 4},
                "out": str(tmp_path / "rel"), "final_eval_episodes": 1, "bc_dagger_rounds": 0})
    wrapper = ppo.reward_wrapper(cfg, cfg.train_env_config())
    cloudpickle.loads(cloudpickle.dumps(wrapper))  # SubprocVecEnv ships it to the workers
    twin_configs = []  # the env config of every twin built: the BC warm start's and PPO's

    def recording(cfg_, ecfg):
        twin_configs.append(dict(ecfg))
        return wrapper
    monkeypatch.setattr(ppo, "reward_wrapper", recording)
    res = ppo.train(cfg)
    # one step cap for the heuristic's curve, whether it shapes the critic's BC targets or PPO's rewards
    assert len(twin_configs) == 2 and all(c["max_steps"] == 2000 for c in twin_configs)
    monkeypatch.undo()
    env = ppo.training_envs(cfg)
    assert type(env.envs[0]).__name__ == "RelativeToHeuristic"  # Monitor inside: logged returns stay the objective
    env.close()
    assert res["num_timesteps"] == 256 and "mlf-h" in [r[0] for r in markdown_rows(res["results_md"])]
    tags = _scalars(tmp_path / "rel" / "tb" / "ppo_1")
    assert "episode/return_minus_baseline" in tags and "episode/cut_by_step_cap" in tags
    assert ppo.reward_wrapper(_cfg({"reward_baseline": None}), {}) is None  # the env's own reward


def test_reward_baseline_flag_and_its_errors():
    assert _cfg({}).reward_baseline is None  # the env's own reward by default
    assert _cfg({}, str(ROOT / "train" / "long.yaml")).reward_baseline == "mlf-h"
    with pytest.raises(ConfigError, match="reward_baseline"):
        _cfg({"reward_baseline": "mlf-x"})
    for none in ("none", "None"):  # as the flag or a YAML file spells it: the env's own reward
        assert _cfg({"reward_baseline": none}).reward_baseline is None


def test_value_warmup_trains_only_the_critic_first():
    """During the warm-up every parameter outside the critic stays the clone's; after it the actor learns."""
    import torch as th
    from sb3_contrib import MaskablePPO

    from clustergym.agents.policies import overload_threshold, policy_spec
    from clustergym.scenarios import make_env
    from clustergym.train.callbacks import ValueWarmup

    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": 6, "cluster": "tiny-8", "window_size": 8,
                                                "n_destinations": 4})
    cls, kw = policy_spec("pairwise", "maskable", d=16, overload_threshold=overload_threshold(env))
    model = MaskablePPO(cls, env, n_steps=64, batch_size=32, n_epochs=2, learning_rate=1e-3, policy_kwargs=kw, seed=0)
    pol = model.policy
    critic = {n for n, _ in pol.named_parameters() if n.startswith(("mlp_extractor.vf", "value_net"))}
    assert critic and len(critic) < len(list(pol.parameters()))

    def snapshot():
        return {n: p.detach().clone() for n, p in pol.named_parameters()}

    before = snapshot()
    model.learn(64, callback=ValueWarmup(64))
    mid = snapshot()
    assert all(th.equal(before[n], mid[n]) for n in before if n not in critic)  # the actor and encoder: unchanged
    assert any(not th.equal(before[n], mid[n]) for n in critic)
    model.learn(64, callback=ValueWarmup(64), reset_num_timesteps=False)
    after = snapshot()
    assert any(not th.equal(mid[n], after[n]) for n in mid if n not in critic)  # then the actor learns


def test_init_from_starts_ppo_from_a_saved_agent(tmp_path):
    """``init_from`` copies a saved agent's policy weights into the new model instead of a warm start: with no
    PPO step the new run's step-0 checkpoint holds exactly those weights."""
    import torch as th

    from clustergym.agents.io import load_agent

    base = {**TINY, "bc_steps": 20, "timesteps": 0, "final_eval_episodes": 0}
    first = ppo.train(_cfg({**base, "out": str(tmp_path / "a")}))
    second = ppo.train(_cfg({**base, "bc_steps": 0, "init_from": first["out"], "out": str(tmp_path / "b")}))
    with pytest.warns(UserWarning, match="pickle"):
        a = load_agent(first["out"]).policy.state_dict()
        b = load_agent(Path(second["out"]) / "best_model.zip").policy.state_dict()
    assert a.keys() == b.keys() and all(th.equal(a[k], b[k]) for k in a)
    with pytest.raises(ConfigError, match="init_from: .* not found"):
        _cfg({"init_from": str(tmp_path / "missing.zip")})


def test_a_search_proposer_makes_the_search_the_warm_starts_labeller(tmp_path):
    res = ppo.train(_cfg({**TINY, "timesteps": 0, "final_eval_episodes": 0, "expert": "mlf-h-req",
                          "search_proposer": "mlfs-h+c-act", "search_horizon_s": 600.0, "out": str(tmp_path / "r")}))
    bc = json.loads((Path(res["out"]) / "bc.json").read_text())
    assert bc["expert"] == "mlf-h-req"
    assert bc["search"] == {"proposer": "mlfs-h+c-act", "horizon_s": 600.0, "proposal": "agent", "terminal": "none",
                            "foresight": "oracle"}


def test_the_throughput_line_gives_the_speed_with_and_without_the_evaluations():
    line = ppo.throughput_line(30_000, 100.0, 80.0, _cfg({"n_envs": 64, "vec_env": "pipelined"}))
    assert "300 steps/s with the periodic evaluations (80 s)" in line
    assert "1,500 steps/s training alone (64 env(s), pipelined)" in line


@pytest.mark.parametrize("threads,expected", [(1, False), (2, True)])
def test_a_run_on_several_torch_threads_trains_with_deterministic_algorithms(threads, expected, tmp_path,
                                                                             monkeypatch):
    """On several threads torch's default kernels let two runs of one seed part in the last bits of the weights;
    a run turns torch's deterministic algorithms on then, and restores the flag when it ends."""
    import torch

    seen = []
    monkeypatch.setattr(ppo, "training_envs", lambda cfg: None)
    monkeypatch.setattr(ppo, "_train", lambda *a: seen.append(torch.are_deterministic_algorithms_enabled()) or {})
    before = torch.get_num_threads()
    try:
        ppo.train(_cfg({**TINY, "torch_threads": threads, "out": str(tmp_path / "run")}))
    finally:
        torch.set_num_threads(before)
    assert seen == [expected] and not torch.are_deterministic_algorithms_enabled()


def test_runs_sharing_a_baseline_cache_score_each_heuristic_once(tmp_path, monkeypatch, capsys):
    import clustergym.eval.rollout as rollout

    played, real = [], rollout.evaluate
    monkeypatch.setattr(rollout, "evaluate", lambda policy, *a, **k: played.append(policy) or real(policy, *a, **k))
    cache = tmp_path / "cache.json"
    base = {**TINY, "timesteps": 128, "bc_steps": 0, "eval_freq": 0, "final_eval_episodes": 0,
            "eval_baselines": ["fifo"], "baseline_cache": str(cache)}
    states = []
    for k in range(2):
        ppo.train(_cfg({**base, "seed": k, "out": str(tmp_path / f"run{k}")}))
        states.append(json.loads((tmp_path / f"run{k}" / "state.json").read_text())["baselines"])
    assert played.count("fifo") == 1  # the second run read the first one's score
    assert states[0] == states[1] and "fifo" in states[0]
    assert f"(from {cache})" in " ".join(capsys.readouterr().out.split())  # say() wraps long lines
