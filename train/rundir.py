"""The run folder of a training run: its files, its lock, and where ``--resume`` continues from.

Every file is written whole or not at all (:mod:`clustergym.eval.files`: a temporary name, then ``os.replace``),
so a run killed at any moment leaves the previous version of each file. ``checkpoints/last.zip`` and
``state.json`` are written together at each checkpoint; ``--resume`` continues from ``last.zip`` and, if that
is missing or unreadable, says so and falls back to ``final_model.zip`` then ``best_model.zip``; with none
usable it stops with :class:`ResumeError`. A folder that already holds a run is never started again from step 0.

While a run is live its folder is locked (``run.lock``, an exclusive ``flock``, which the OS releases when the
process dies): a second run or a ``--resume`` into it stops with :class:`RunLocked`. The lock file names its
holder; a lock file left by a dead process is taken over with a message.
"""
from __future__ import annotations

import csv
import json
import os
import socket
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import yaml

from clustergym.eval.files import atomic_write, atomic_write_text, remove_stale_temps

# where --resume may continue from, in order of preference
CHECKPOINTS = ("checkpoints/last.zip", "final_model.zip", "best_model.zip")


def kept_checkpoint(step: int) -> str:
    """The run folder's name for the model evaluated at ``step`` with ``keep_checkpoints``."""
    return f"checkpoints/step-{step:09d}.zip"


class RunFolderError(RuntimeError):
    """A run folder that cannot be used as asked; the message says why and what to do."""


class RunLocked(RunFolderError):
    """Another live process is writing the run folder."""


class ResumeError(RunFolderError):
    """Nothing usable to resume from."""


class RunLock:
    """An exclusive, non-blocking lock on ``<folder>/run.lock`` for the life of a run."""

    def __init__(self, folder: Path):
        self.path = folder / "run.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX
            warnings.warn(f"no fcntl on this platform: {self.path.parent} is not locked against a second run",
                          stacklevel=2)
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_fd(fd)
                os.close(fd)
                raise RunLocked(f"{self.path.parent} is in use by a live run ({holder or 'holder unknown'}); "
                                f"wait for it to end, or stop it (Ctrl-C or SIGTERM saves a checkpoint) and "
                                f"then --resume") from None
            try:  # the holder may have released and removed the file between our open and flock
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        stale = _read_fd(fd)
        if stale:
            print(f"Taking over the lock of {self.path.parent} left by a process that is gone ({stale})", flush=True)
        holder = f"process {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, holder.encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still holding it: a waiting process re-checks the file
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _display(path: Path) -> str:
    """``path`` relative to the working directory if it lies inside it, else absolute."""
    path = Path(os.path.abspath(path))
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _read_fd(fd: int) -> str:
    return os.pread(fd, 4096, 0).decode(errors="replace").strip()


class RunFolder:
    """The files of one run. ``state`` is what ``state.json`` holds: step count, best score and step,
    the heuristics' validation means, BC statistics, the periodic evaluations, whether the run finished."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.state: dict[str, Any] = {"best_score": None, "best_step": None, "baselines": {}, "bc": None,
                                      "evals": [], "num_timesteps": 0}

    def lock(self) -> RunLock:
        self.path.mkdir(parents=True, exist_ok=True)
        return RunLock(self.path)

    def tensorboard_command(self) -> str:
        """A command that starts TensorBoard on this run's logs without activating the venv: the ``tensorboard``
        script beside this Python (paths relative to the working directory when inside it)."""
        script = Path(sys.executable).parent / "tensorboard"
        exe = _display(script) if script.exists() else f"{_display(Path(sys.executable))} -m tensorboard.main"
        return f"{exe} --logdir {_display(self.path / 'tb')}"

    # ------------------------------------------------------------------------------------------ starting
    def start(self, config: dict) -> None:
        """Begin a new run here: refused if the folder already holds one (resume it instead)."""
        held = [n for n in ("config.yaml", "state.json", *CHECKPOINTS) if (self.path / n).exists()]
        if held:
            raise RunFolderError(f"{self.path} already holds a run ({', '.join(held)}): continue it with --resume "
                                 f"{self.path}, or give another --out")
        remove_stale_temps(self.path)
        self.write_config(config)

    def write_config(self, config: dict) -> None:
        atomic_write_text(self.path / "config.yaml", yaml.safe_dump(config, sort_keys=False))

    # ------------------------------------------------------------------------------------------ state
    def load_state(self) -> None:
        """Read ``state.json`` to resume the run (and clear the temporary files of writers that were killed)."""
        for folder in (self.path, self.path / "checkpoints"):
            remove_stale_temps(folder)
        f = self.path / "state.json"
        if not f.exists():
            raise ResumeError(f"{f} not found: the run never reached its first checkpoint; start it again "
                              f"(delete {self.path} or give another --out)")
        try:
            self.state.update(json.loads(f.read_text()))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ResumeError(f"{f} is unreadable ({e}): the run's step count and best checkpoint are unknown, "
                              f"so it cannot be continued") from None

    def record_code(self, version: str, step: int, numerics: dict[str, str] | None = None) -> None:
        """Note in the state which code ran from ``step`` on, and on what ``numerics`` (train/threads.py's
        ``numeric_platform``; one entry per start or resume, saved with the next checkpoint), so results can be
        traced to a commit and a machine even when the run spans several. A resume on other numerics warns:
        the rest of the run will not match an uninterrupted one."""
        runs = self.state.setdefault("code", [])
        before = next((r["numerics"] for r in reversed(runs) if "numerics" in r), None)
        if numerics is not None and before is not None and before != numerics:
            warnings.warn(f"{self.path} ran on {before} and resumes on {numerics}: from step {step:,} on, its "
                          f"weights will differ from those of an uninterrupted run", RuntimeWarning, stacklevel=2)
        runs.append({"from_step": int(step), "code": version, **({"numerics": numerics} if numerics else {})})

    def save_state(self) -> None:
        atomic_write_text(self.path / "state.json", json.dumps(self.state, indent=1, default=float))

    # ------------------------------------------------------------------------------------------ files
    def write_text(self, name: str, text: str) -> None:
        atomic_write_text(self.path / name, text)

    def write_json(self, name: str, obj: Any) -> None:
        self.write_text(name, json.dumps(obj, indent=1, default=float))

    def write_csv(self, name: str, rows: list[dict]) -> None:
        """Rows of dicts; the columns are every key in order of first appearance."""
        keys = list(dict.fromkeys(k for r in rows for k in r))

        def write(f):
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        atomic_write(self.path / name, write)

    def save_model(self, model, name: str) -> Path:
        return atomic_write(self.path / name, model.save, binary=True)

    def checkpoint(self, model) -> None:
        """``checkpoints/last.zip`` and the state at the model's step count."""
        self.save_model(model, CHECKPOINTS[0])
        self.state["num_timesteps"] = int(model.num_timesteps)
        self.save_state()

    # ------------------------------------------------------------------------------------------ resuming
    def load_checkpoint(self, env, device: str, algo: str):
        """The model to continue from: the first usable file of ``CHECKPOINTS`` (a fallback is announced, and the
        evaluations after its step are dropped from the state: they are redone); :class:`ResumeError` if none.
        Loading a zip can execute code (``clustergym.agents.io`` warns)."""
        from clustergym.agents.io import load_agent

        problems = []
        for name in CHECKPOINTS:
            p = self.path / name
            if not p.exists():
                problems.append(f"{name} missing")
                continue
            try:
                model = load_agent(p, env=env, device=device, algo=algo)
            except Exception as e:  # noqa: BLE001 - truncated or corrupt: try the next file
                problems.append(f"{name} unreadable ({type(e).__name__}: {e})")
                continue
            if problems:
                step, was = int(model.num_timesteps), int(self.state.get("num_timesteps") or 0)
                print(f"warning: {'; '.join(problems)}: resuming from {name} at step {step:,} instead of {was:,}; "
                      f"the steps since are trained again", file=sys.stderr, flush=True)
                self.state["evals"] = [e for e in self.state["evals"] if e["step"] <= step]
            return model
        raise ResumeError(f"nothing to resume in {self.path}: {'; '.join(problems)}")
