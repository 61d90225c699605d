"""The sweep runner: per-run files, resume after interruption (only missing runs execute), parallel workers."""
import json
import os
import signal

import pandas as pd
import pytest

from clustergym.eval import compare, specs

SCEN = "tiny=clustergym/GPUClusterLight-v1:cluster=tiny-8,window_jobs=4,split=test"
pytestmark = pytest.mark.reliability  # part of the reliability suite (make test-slow)


def _runs(policies=("fifo", "nomig=mlf-h:migrate=false"), seeds=(0, 1)):
    pols = [specs.parse_policy(p) for p in policies]
    sc = specs.expand_loads([specs.parse_scenario(SCEN)], None)
    return specs.make_runs(pols, sc, seeds)


def test_specs_parse():
    p = specs.parse_policy("nomig=mlf-h:migrate=false,alpha=0.5")
    assert p == {"label": "nomig", "kind": "heuristic", "name": "mlf-h", "params": {"migrate": False, "alpha": 0.5}}
    assert specs.parse_policy("mlf-h")["label"] == "mlf-h"
    a = specs.parse_policy("ppo=runs/agent.zip")
    assert a["kind"] == "agent" and a["label"] == "ppo" and a["path"] == "runs/agent.zip"
    s = specs.parse_scenario("h=clustergym/Hetero-v1:window_jobs=5,generator.load=2")
    assert s["kwargs"] == {"window_jobs": 5, "generator": {"load": 2}}
    ex = specs.expand_loads([specs.parse_scenario("clustergym/GPUClusterLight-v1:window_jobs=40")], [0.25, 2], "jobs")
    assert [e["kwargs"]["window_jobs"] for e in ex] == [10, 80] and ex[0]["label"] == "GPUClusterLight-v1@x0.25"


def test_resume_reruns_only_missing(tmp_path):
    runs = _runs()
    assert len(runs) == 4
    r1 = compare.sweep(runs, tmp_path, workers=0, progress=False)
    assert sorted(r1["executed"]) == sorted(r["key"] for r in runs) and not r1["failed"]
    for r in runs:
        assert (tmp_path / "runs" / f"{r['key']}.json").exists()
        assert (tmp_path / "runs" / f"{r['key']}.jobs.csv").exists()
    assert not list((tmp_path / "runs").glob("*.tmp"))  # atomic writes leave no temp files
    victim = runs[2]["key"]
    (tmp_path / "runs" / f"{victim}.json").unlink()  # "interrupted" before this run finished
    before = {r["key"]: (tmp_path / "runs" / f"{r['key']}.json").stat().st_mtime_ns for r in runs if r["key"] != victim}
    r2 = compare.sweep(runs, tmp_path, workers=0, progress=False)
    assert r2["executed"] == [victim]
    assert len(r2["skipped"]) == 3
    after = {k: (tmp_path / "runs" / f"{k}.json").stat().st_mtime_ns for k in before}
    assert before == after  # finished runs untouched
    row = json.loads((tmp_path / "runs" / f"{victim}.json").read_text())["row"]
    assert row["policy"] == runs[2]["policy"] and row["decision_mean_us"] > 0 and "mean_jct" in row


def test_parallel_spawn_matches_inprocess(tmp_path):
    runs = _runs(policies=("fifo",), seeds=(0, 1))
    r = compare.sweep(runs, tmp_path / "par", workers=2, mp_context="spawn", progress=False)
    assert len(r["executed"]) == 2 and not r["failed"]
    compare.sweep(runs[:1], tmp_path / "seq", workers=0, progress=False)
    ep_par, _ = compare.collect(tmp_path / "par", runs[:1])
    ep_seq, _ = compare.collect(tmp_path / "seq", runs[:1])
    for m in ("mean_jct", "deadline_ratio", "bandwidth_mb", "makespan"):
        assert ep_par[m].iloc[0] == ep_seq[m].iloc[0]  # seeded: same episode in a worker process


def test_failed_run_reported_not_written(tmp_path):
    runs = _runs(policies=("nope",), seeds=(0,))
    r = compare.sweep(runs, tmp_path, workers=0, progress=False)
    assert list(r["failed"]) == [runs[0]["key"]] and not r["executed"]
    assert not (tmp_path / "runs" / f"{runs[0]['key']}.json").exists()


# ------------------------------------------------------------------ a run's identity


def _main(out, *args):
    return compare.main(["--policies", "fifo", "--seeds", "0", "--out", str(out), "--workers", "0", "--no-progress",
                         "--no-figures", "--bootstrap", "0", *args])


def test_scenarios_that_would_write_the_same_files_are_refused_before_any_run(tmp_path, capsys):
    args = ["--scenarios", "clustergym/GPUClusterLight-v1:window_jobs=10,cluster=tiny-8",
            "clustergym/GPUClusterLight-v1:window_jobs=60,cluster=tiny-8"]
    assert _main(tmp_path, *args) == 2
    err = capsys.readouterr().err
    assert "two runs would write the same files runs/fifo__GPUClusterLight-v1__s0.*" in err
    assert "env_kwargs.window_jobs: 10 -> 60" in err and "give them different labels" in err
    assert not (tmp_path / "runs").exists()  # nothing ran
    with pytest.raises(specs.SweepSpecError, match="specified twice"):  # the same spec twice
        _runs(policies=("fifo", "fifo"))
    # labelled apart, both run and both appear in the table (training windows: every job of them fits tiny-8)
    assert _main(tmp_path, "--scenarios", "w10=clustergym/GPUClusterLight-v1:window_jobs=10,cluster=tiny-8",
                 "w60=clustergym/GPUClusterLight-v1:window_jobs=60,cluster=tiny-8", "--set", "split=train") == 0
    ep = pd.read_csv(tmp_path / "episodes.csv").set_index("scenario")
    assert ep.loc["w10", "n_jobs_window"] == 10 and ep.loc["w60", "n_jobs_window"] == 60


def test_rerun_with_other_set_values_runs_again_and_reports_the_new_numbers(tmp_path, capsys):
    scen = ["--scenarios", "clustergym/GPUClusterLight-v1:cluster=tiny-8"]
    assert _main(tmp_path, *scen, "--set", "window_jobs=4", "split=test") == 0
    assert pd.read_csv(tmp_path / "episodes.csv")["n_jobs_window"].tolist() == [4]
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # main's handler is gone with it
    capsys.readouterr()
    assert _main(tmp_path, *scen, "--set", "window_jobs=5", "split=test") == 0
    err = capsys.readouterr().err
    assert "1 finished runs in" in err and "env_kwargs.window_jobs: 4 -> 5" in err
    assert "executed 1, skipped 0" in err
    assert pd.read_csv(tmp_path / "episodes.csv")["n_jobs_window"].tolist() == [5]  # the new numbers
    # the same command again reuses the run; re-aggregating with the old values is refused by name
    assert _main(tmp_path, *scen, "--set", "window_jobs=5", "split=test") == 0
    assert "executed 0, skipped 1" in capsys.readouterr().err
    assert _main(tmp_path, *scen, "--set", "window_jobs=4", "split=test", "--report-only") == 2
    assert "were made by another spec than this one" in capsys.readouterr().err


def test_identity_covers_policy_parameters_model_file_and_code_version(tmp_path):
    (a,) = _runs(policies=("x=mlf-h:migrate=false",), seeds=(0,))
    (b,) = _runs(policies=("x=mlf-h:migrate=true",), seeds=(0,))
    assert a["key"] == b["key"] and specs.identity_difference(a["identity"], b["identity"]) == \
        "policy.params.migrate: false -> true"
    assert a["identity"]["code"] == specs.code_version() and specs.code_version().startswith("0.")
    model = tmp_path / "m.zip"
    model.write_bytes(b"one")
    first = specs.policy_identity(specs.parse_policy(str(model)))
    model.write_bytes(b"two")
    os.utime(model, ns=(1, 1))  # another file at the same path
    assert specs.policy_identity(specs.parse_policy(str(model)))["sha256"] != first["sha256"]
    assert specs.policy_identity(specs.parse_policy(str(tmp_path / "gone.zip")))["sha256"] is None
