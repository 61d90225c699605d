"""Load trained agents (saved by SB3's ``model.save``, e.g. by train/ppo.py).

.. warning:: SB3 ``.zip`` files contain pickled Python objects; loading one can run arbitrary code. Load only
   files you trust (your own runs).

``load_agent(path)`` accepts a model zip or a run folder (then ``best_model.zip`` if present, else
``final_model.zip``, else the last checkpoint). The algorithm (MaskablePPO or PPO) is read from the run's
``config.yaml`` next to the file when there is one, else tried in that order.
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import yaml

PICKLE_WARNING = ("SB3 zip files contain pickled Python objects: loading one can execute arbitrary code. "
                  "Load only trusted files.")


def _algo_class(algo: str):
    if algo == "maskable":
        from sb3_contrib import MaskablePPO

        return MaskablePPO
    if algo == "ppo":
        from stable_baselines3 import PPO

        return PPO
    raise ValueError(f"unknown algo {algo!r}; choose 'maskable' or 'ppo'")


def resolve_model_path(path: str | os.PathLike) -> Path:
    p = Path(path)
    if p.is_dir():
        for name in ("best_model.zip", "final_model.zip", "checkpoints/last.zip"):
            if (p / name).exists():
                return p / name
        raise FileNotFoundError(f"no best_model.zip, final_model.zip or checkpoints/last.zip in {p}")
    if not p.exists() and p.with_suffix(".zip").exists():
        p = p.with_suffix(".zip")
    if not p.exists():
        raise FileNotFoundError(p)
    return p


def run_config(model_path: Path) -> dict | None:
    for d in (model_path.parent, model_path.parent.parent):
        f = d / "config.yaml"
        if f.exists():
            with open(f) as fh:
                return yaml.safe_load(fh) or {}
    return None


class AgentLoadError(RuntimeError):
    """A model file that none of the algorithms tried can load (truncated, corrupt or not an SB3 zip)."""


def load_agent(path: str | os.PathLike, env=None, device: str = "cpu", algo: str | None = None):
    """Load a saved agent (MaskablePPO or PPO). Warns every time that the file can execute code: Python's
    warning filter shows it once per calling line by default."""
    import clustergym.agents.policies  # noqa: F401  (custom policy classes must be importable)

    warnings.warn(PICKLE_WARNING, UserWarning, stacklevel=2)
    p = resolve_model_path(path)
    if algo is None:
        cfg = run_config(p)
        algo = (cfg or {}).get("algo")
    tries = [algo] if algo else ["maskable", "ppo"]
    err = None
    for a in tries:
        try:
            return _algo_class(a).load(str(p), env=env, device=device)
        except Exception as e:  # noqa: BLE001 - try the next algorithm
            err = e
    raise AgentLoadError(f"could not load {p} as {' or '.join(tries)}: {type(err).__name__}: {err}") from err
