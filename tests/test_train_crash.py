"""Training runs survive interruption: atomic run files, resume fallbacks, the run-folder lock, SIGTERM and
Ctrl-C (also with SubprocVecEnv workers) stopping with a checkpoint."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clustergym.eval import files
from clustergym.train import ppo
from clustergym.train.config import load_config
from clustergym.train.rundir import ResumeError, RunLock, RunLocked

ROOT = Path(__file__).resolve().parent.parent
TINY = {"env": {"window_jobs": 10}, "n_envs": 1, "train_max_steps": 100, "timesteps": 512, "n_steps": 128, "batch_size": 64,
        "n_epochs": 1, "bc_steps": 0, "eval_freq": 128, "eval_episodes": 1, "eval_max_steps": 100,
        "final_eval_episodes": 1, "final_eval_max_steps": 100, "final_baselines": ["fifo"],
        "eval_baselines": ["fifo"], "progress_bar": False}
TINY_FLAGS = ["--env", "{window_jobs: 10}", "--n-envs", "1", "--train-max-steps", "100", "--n-steps", "128", "--batch-size", "64",
              "--n-epochs", "1", "--bc-steps", "0", "--eval-episodes", "1", "--eval-max-steps", "100",
              "--eval-baselines", "[fifo]", "--final-eval-episodes", "1", "--final-eval-max-steps", "100",
              "--final-baselines", "[fifo]", "--no-progress"]
PICKLE = pytest.mark.filterwarnings("ignore:SB3 zip files contain pickled")
pytestmark = pytest.mark.reliability  # part of the reliability suite (make test-slow)


def _interrupted_run(out: Path, stop_at: int = 256) -> dict:
    res = ppo.train(load_config(overrides={**TINY, "out": str(out)}), stop_at=stop_at)
    assert res["interrupted"] and res["num_timesteps"] == stop_at
    return res


def test_atomic_write_keeps_the_previous_file_when_the_writer_dies(tmp_path):
    target = tmp_path / "state.json"
    target.write_text("old")

    def dies_halfway(f):
        f.write("new, half of it")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        files.atomic_write(target, dies_halfway)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["state.json"]


@PICKLE
def test_every_run_file_is_moved_into_place(tmp_path, monkeypatch):
    """Each file of a finished run folder (TensorBoard's event files aside) is written under a temporary name
    and then renamed; a reader never sees a half-written model, state or table."""
    replaced, real = [], os.replace
    monkeypatch.setattr(files.os, "replace", lambda a, b: (replaced.append(Path(b)), real(a, b))[1])
    out = tmp_path / "run"
    res = ppo.train(load_config(overrides={**TINY, "timesteps": 128, "bc_steps": 5, "bc_episodes": 1,
                                           "bc_holdout_episodes": 1, "bc_dagger_rounds": 0, "out": str(out)}))
    assert not res["interrupted"]
    written = {p for p in out.rglob("*") if p.is_file() and "tb" not in p.relative_to(out).parts}
    names = {str(p.relative_to(out)) for p in written}
    assert {"config.yaml", "state.json", "bc.json", "best_model.zip", "final_model.zip", "checkpoints/last.zip",
            "results.md", "results.csv", "episodes.csv", "paired.csv"} == names  # no lock, no temp file left
    assert written <= set(replaced)


@PICKLE
def test_resume_falls_back_to_the_last_good_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    _interrupted_run(out)
    last = out / "checkpoints" / "last.zip"
    for damage, stop_at in (("truncated", 384), ("missing", None)):
        state = json.loads((out / "state.json").read_text())
        if damage == "missing":
            last.unlink()
        else:
            last.write_bytes(last.read_bytes()[:1000])
            (last.parent / ".last.zip.x1y2.tmp").write_bytes(b"left by a writer that was killed")
        with pytest.warns(UserWarning, match="pickled Python objects"):  # loading a zip can execute code
            res = ppo.train(load_config(overrides={**TINY, "out": str(out)}), resume=True, stop_at=stop_at)
        err = capsys.readouterr().err
        assert f"checkpoints/last.zip {'missing' if damage == 'missing' else 'unreadable (AgentLoadError'}" in err
        assert (f"resuming from best_model.zip at step {state['best_step']:,} instead of "
                f"{state['num_timesteps']:,}") in err
        steps = [e["step"] for e in json.loads((out / "state.json").read_text())["evals"]]
        assert steps == sorted(set(steps))  # the evaluations after the fallback step were dropped, then redone
        assert not list(out.rglob("*.tmp"))
    assert not res["interrupted"] and res["num_timesteps"] == 512


def test_resume_with_nothing_to_resume_from_stops_by_name(tmp_path):
    out = tmp_path / "run"
    _interrupted_run(out)
    for name in ("checkpoints/last.zip", "best_model.zip"):
        (out / name).write_bytes(b"not a zip")
    cfg = load_config(overrides={**TINY, "out": str(out)})
    with pytest.raises(ResumeError, match=r"nothing to resume in .*last.zip unreadable.*final_model.zip missing.*"
                                          r"best_model.zip unreadable"):
        ppo.train(cfg, resume=True)
    (out / "state.json").write_text('{"best_score": [0.0, ')  # truncated by something other than this code
    with pytest.raises(ResumeError, match="state.json is unreadable"):
        ppo.train(cfg, resume=True)
    (out / "state.json").unlink()  # a run stopped during its warm start has a config but no state yet
    with pytest.raises(ResumeError, match="never reached its first checkpoint"):
        ppo.train(cfg, resume=True)


def test_a_new_run_never_restarts_a_folder_that_holds_one(tmp_path, capsys):
    out = tmp_path / "run"
    _interrupted_run(out)
    before = (out / "checkpoints" / "last.zip").read_bytes()
    with pytest.raises(SystemExit):
        ppo.main([*TINY_FLAGS, "--out", str(out)])
    err = capsys.readouterr().err
    assert "already holds a run" in err and f"continue it with --resume {out}" in err
    assert (out / "checkpoints" / "last.zip").read_bytes() == before


def test_a_live_run_folder_is_locked(tmp_path, capsys):
    out = tmp_path / "run"
    _interrupted_run(out)
    with RunLock(out):  # as a live run holds it
        with pytest.raises(SystemExit):
            ppo.main(["--resume", str(out), "--no-progress"])
        err = capsys.readouterr().err
        assert f"in use by a live run (process {os.getpid()} on" in err
        with pytest.raises(RunLocked):
            RunLock(out).acquire()
    assert not (out / "run.lock").exists()  # released and removed


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    out = tmp_path / "run"
    out.mkdir()
    code = ("import os, sys; from pathlib import Path; from clustergym.train.rundir import RunLock; "
            "RunLock(Path(sys.argv[1])).acquire(); print(os.getpid(), flush=True); os._exit(0)")
    dead = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True, check=True)
    assert (out / "run.lock").exists()  # the process died holding it
    lock = RunLock(out)
    lock.acquire()
    assert f"left by a process that is gone (process {dead.stdout.strip()} on" in capsys.readouterr().out
    lock.release()


def _stop_by_signal(tmp_path: Path, sig: int, n_envs: int, whole_group: bool,
                    vec_env: str = "subproc") -> tuple[subprocess.CompletedProcess, Path]:
    """Start ``train/ppo.py`` as a user would, send ``sig`` once PPO learns, return its outcome."""
    out = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "train" / "ppo.py"), *TINY_FLAGS, "--timesteps", "1000000", "--eval-freq",
           "100000", "--n-envs", str(n_envs), "--vec-env", vec_env if n_envs > 1 else "dummy", "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True)
    lines = []
    for line in proc.stdout:  # eval@0 is printed just before PPO starts
        lines.append(line)
        if line.strip().startswith("eval@0"):
            break
    time.sleep(0.3)  # into the learning loop
    os.killpg(proc.pid, sig) if whole_group else proc.send_signal(sig)  # a terminal's Ctrl-C reaches the group
    stdout, stderr = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(cmd, proc.returncode, "".join(lines) + stdout, stderr), out


def _assert_stopped_with_checkpoint(done: subprocess.CompletedProcess, out: Path, sig: int) -> None:
    name = signal.Signals(sig).name
    assert done.returncode == 128 + sig, done.stderr
    assert f"{name}: stopping after the current step" in done.stdout
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    step = int(done.stdout.split("Interrupted at step ")[1].split(";")[0].replace(",", ""))
    assert step > 0 and json.loads((out / "state.json").read_text())["num_timesteps"] == step
    assert (out / "checkpoints" / "last.zip").exists() and not (out / "run.lock").exists()


@PICKLE
def test_sigterm_during_ppo_stops_after_the_step_with_a_checkpoint(tmp_path, monkeypatch, capsys):
    """In this process: SIGTERM arrives during the periodic evaluation at step 128 (a rollout's start); PPO
    stops after the next env step (129, one env), checkpoints, and main() exits as the signal would (128 + 15);
    --resume then finishes the run."""
    real = ppo._evaluate_and_checkpoint

    def terminated_during(cfg, folder, model, logger):
        if model.num_timesteps == 128:
            os.kill(os.getpid(), signal.SIGTERM)
        real(cfg, folder, model, logger)
    monkeypatch.setattr(ppo, "_evaluate_and_checkpoint", terminated_during)
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as e:
        ppo.main([*TINY_FLAGS, "--timesteps", "512", "--eval-freq", "128", "--out", str(out)])
    assert e.value.code == 128 + signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # the handler is removed with the run
    text = capsys.readouterr().out
    assert "SIGTERM: stopping after the current step" in text and "Interrupted at step 129;" in text
    state = json.loads((out / "state.json").read_text())
    assert state["num_timesteps"] == 129 and [e["step"] for e in state["evals"]] == [0, 128]
    monkeypatch.undo()
    res = ppo.main(["--resume", str(out), "--no-progress"])
    assert not res["interrupted"] and res["num_timesteps"] == 513  # whole rollouts of 128 from step 129


WORKER_VEC_ENVS = ("subproc", "grouped", "pipelined")  # the vec envs whose envs live in worker processes


@pytest.mark.slow  # a training process with env workers: ~6 s
@pytest.mark.parametrize("vec_env", WORKER_VEC_ENVS)
def test_sigterm_to_the_whole_group_stops_parallel_training_with_a_checkpoint(tmp_path, vec_env):
    """What a batch scheduler does; the env workers (and the forkserver that starts the grouped and pipelined
    ones) get the signal too and must not die of it."""
    done, out = _stop_by_signal(tmp_path, signal.SIGTERM, n_envs=2, whole_group=True, vec_env=vec_env)
    _assert_stopped_with_checkpoint(done, out, signal.SIGTERM)


@pytest.mark.slow  # a training process with env workers: ~6 s
@pytest.mark.parametrize("vec_env", WORKER_VEC_ENVS)
def test_ctrl_c_stops_training_with_a_checkpoint(tmp_path, vec_env):
    done, out = _stop_by_signal(tmp_path, signal.SIGINT, n_envs=2, whole_group=True, vec_env=vec_env)
    _assert_stopped_with_checkpoint(done, out, signal.SIGINT)


@pytest.mark.slow  # a training process: ~4 s
def test_sigterm_to_the_main_process_alone(tmp_path):
    done, out = _stop_by_signal(tmp_path, signal.SIGTERM, n_envs=1, whole_group=False)
    _assert_stopped_with_checkpoint(done, out, signal.SIGTERM)
