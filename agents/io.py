"""Load trained agents (saved by SB3's ``model.save``, e.g. by train/ppo.py).

.. warning:: SB3 ``.zip`` files contain pickled Python objects; loading one can run arbitrary code. Load only
   files you trust (your own runs).

``load_agent(path)`` accepts a model zip or a run folder (then ``best_model.zip`` if present, else
``final_model.zip``, else the last checkpoint). The algorithm (MaskablePPO or PPO) is read from the run's
``config.yaml`` next to the file when there is one, else tried in that order.

An agent given an ``env`` whose observation or action space differs from the one it was trained on (another
scenario: other W, K or GPUs per server) loads onto that env's spaces when its policy is the pairwise one,
none of whose weights depends on those sizes (``clustergym.agents.policies``); the MLP policy's weights are
tied to the sizes, so it stops with :class:`AgentLoadError` naming both spaces.
"""
from __future__ import annotations

import io
import os
import warnings
import zipfile
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
    blob = p.read_bytes()  # read once: the space check and every algorithm tried unpack it from memory
    spaces = _spaces_of(env, blob, p) if env is not None else None
    err = None
    for a in tries:
        try:
            return _algo_class(a).load(_ModelBytes(blob, p), env=env, device=device, custom_objects=spaces)
        except Exception as e:  # noqa: BLE001 - try the next algorithm
            err = e
    raise AgentLoadError(f"could not load {p} as {' or '.join(tries)}: {type(err).__name__}: {err}") from err


class _ModelBytes(io.BytesIO):
    """A model file's bytes as SB3 loads them, shown as the file's path (SB3's errors name what they load)."""

    def __init__(self, blob: bytes, path: Path) -> None:
        super().__init__(blob)
        self.path = path

    def __str__(self) -> str:
        return str(self.path)


def _spaces_of(env, blob: bytes, path: Path) -> dict | None:
    """SB3 ``custom_objects`` that load the agent saved as ``blob`` (the bytes of the zip at ``path``) onto ``env``'s
    observation and action spaces when they differ from the saved ones and its policy is size-invariant
    (pairwise); None when they are equal or the saved spaces cannot be read (loading then reports the file). A
    size-tied policy on other spaces: AgentLoadError. Reads only the zip's ``data`` entry (spaces and policy
    class), not the weights."""
    from stable_baselines3.common.save_util import json_to_data

    from clustergym.agents.policies import size_invariant

    try:
        with zipfile.ZipFile(io.BytesIO(blob)) as archive:
            data = json_to_data(archive.read("data").decode())
    except Exception:  # noqa: BLE001 - an unreadable file is reported by the load itself
        return None
    ours = {"observation_space": env.observation_space, "action_space": env.action_space}
    if all(data.get(k) == v for k, v in ours.items()):
        return None
    if not size_invariant(data.get("policy_class")):
        raise AgentLoadError(
            f"{path}: its policy {getattr(data.get('policy_class'), '__name__', '?')} has weights tied to the "
            f"sizes it was trained on ({data.get('observation_space')}, {data.get('action_space')}), not to "
            f"this env's ({env.observation_space}, {env.action_space}); only the pairwise policy transfers "
            f"to other scenarios")
    return {**ours, "policy_kwargs": _layout_for(env, dict(data.get("policy_kwargs") or {}), path)}


def _layout_for(env, saved: dict, path: Path) -> dict:
    """The saved pairwise ``policy_kwargs`` with ``env``'s action layout (GPU slots per server, sub-batch
    columns: :func:`~clustergym.agents.policies.action_layout`); AgentLoadError when the env has a column set
    the policy has no head for, or lacks one it has (its weights would not match)."""
    from clustergym.agents.policies import action_layout

    layout = action_layout(env)
    for key, setting in (("gpu_slots", "gpu_actions"), ("sub_batches", "sub_batch_actions")):
        if bool(saved.get(key, 0)) != bool(layout[key]):
            raise AgentLoadError(f"{path}: its policy was trained {'with' if saved.get(key) else 'without'} the "
                                 f"env's {setting} columns and this env has them {'on' if layout[key] else 'off'}")
    return {**saved, **{k: v for k, v in layout.items() if v}}
