"""Sweep specifications: policy and scenario specs of the command line, load sweeps, and the run list.

A **policy spec** is ``[label=]name[:key=value,...]`` (a heuristic of ``baselines.available()`` with parameters,
values parsed as YAML) or ``[label=]path.zip`` (a saved agent). A **scenario spec** is
``[label=]env_id[:key=value,...]`` (EnvConfig fields as ``gymnasium.make`` keywords; dotted keys nest). A run is
one (policy, scenario, seed) as plain data, so it travels to worker processes as it is.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

from .files import safe_name


def _value(s: str) -> Any:
    import yaml

    try:
        return yaml.safe_load(s)
    except yaml.YAMLError:  # not YAML (e.g. an unbalanced bracket): the text itself
        return s


def parse_kv(text: str) -> dict:
    """``"a=1,b.c=x"`` -> ``{"a": 1, "b": {"c": "x"}}`` (values parsed as YAML; dotted keys nest)."""
    out: dict = {}
    if not text:
        return out
    for part in re.split(r",(?=[A-Za-z_][\w.]*=)", text):
        if not part:
            continue
        if "=" not in part:
            raise ValueError(f"expected key=value, got {part!r}")
        k, v = part.split("=", 1)
        set_nested(out, k.strip(), _value(v.strip()))
    return out


def set_nested(d: dict, key: str, value: Any) -> None:
    parts = key.split(".")
    for p in parts[:-1]:
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def deep_merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _split_label(spec: str) -> tuple[str | None, str]:
    if "=" in spec:
        head, rest = spec.split("=", 1)
        if ":" not in head and "/" not in head and head:
            return head, rest
    return None, spec


def parse_policy(spec: str) -> dict:
    """``[label=]name[:k=v,...]`` or ``[label=]path.zip`` -> {"label", "kind", "name"/"path", "params"}."""
    label, body = _split_label(spec)
    if body.endswith(".zip") or os.sep in body or body.startswith("."):
        return {"label": safe_name(label or Path(body).stem), "kind": "agent", "path": str(body), "params": {}}
    name, _, kv = body.partition(":")
    params = parse_kv(kv)
    if label is None:
        label = name if not params else name + "-" + "-".join(f"{k}{v}" for k, v in params.items())
    return {"label": safe_name(label), "kind": "heuristic", "name": name, "params": params}


def parse_scenario(spec: str) -> dict:
    """``[label=]env_id[:k=v,...]`` -> {"label", "env_id", "kwargs"}."""
    label, body = _split_label(spec)
    env_id, _, kv = body.partition(":")
    if label is None:
        label = env_id.split("/")[-1]
    return {"label": safe_name(label), "env_id": env_id, "kwargs": parse_kv(kv)}


def base_window_jobs(env_id: str, kwargs: dict) -> int:
    if "window_jobs" in kwargs:
        return int(kwargs["window_jobs"])
    from clustergym.config import EnvConfig
    from clustergym.scenarios import SCENARIOS

    return int(SCENARIOS.get(env_id, {}).get("window_jobs", EnvConfig().window_jobs))


def expand_loads(scenarios: list[dict], loads: Sequence[float] | None, mode: str = "jobs") -> list[dict]:
    """One scenario per (scenario, load x); adds ``base`` (the scenario label) and ``load`` to each."""
    out = []
    for sc in scenarios:
        if not loads:
            out.append({**sc, "base": sc.get("base", sc["label"]), "load": sc.get("load", 1.0)})
            continue
        for x in loads:
            kw = dict(sc["kwargs"])
            if mode == "jobs":
                kw["window_jobs"] = max(1, int(round(base_window_jobs(sc["env_id"], kw) * x)))
            elif mode == "generator":
                kw = deep_merge(kw, {"workload": "generator", "generator": {"load": float(x)}})
            else:
                raise ValueError(f"load mode must be 'jobs' or 'generator', got {mode!r}")
            out.append({"label": f"{sc['label']}@x{x:g}", "env_id": sc["env_id"], "kwargs": kw,
                        "base": sc["label"], "load": float(x)})
    return out


def run_key(policy: str, scenario: str, seed: int) -> str:
    return f"{safe_name(policy)}__{safe_name(scenario)}__s{int(seed)}"


def make_runs(policies: list[dict], scenarios: list[dict], seeds: Iterable[int], common: dict | None = None,
              max_steps: int | None = None) -> list[dict]:
    runs = []
    for sc in scenarios:
        kw = deep_merge(common or {}, sc["kwargs"])
        if max_steps is not None:
            kw["max_steps"] = int(max_steps)
        for p in policies:
            for s in seeds:
                runs.append({"key": run_key(p["label"], sc["label"], s), "policy": p["label"], "policy_spec": p,
                             "scenario": sc["label"], "scenario_base": sc.get("base", sc["label"]),
                             "load": float(sc.get("load", 1.0)), "env_id": sc["env_id"], "env_kwargs": kw,
                             "seed": int(s)})
    return runs
