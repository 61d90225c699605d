"""Sweep specifications: policy and scenario specs of the command line, load sweeps, and the run list.

A **policy spec** is ``[label=]name[:key=value,...]`` (a heuristic of ``baselines.available()`` with parameters,
values parsed as YAML) or ``[label=]path.zip`` (a saved agent). A **scenario spec** is
``[label=]env_id[:key=value,...]`` (EnvConfig fields as ``gymnasium.make`` keywords; dotted keys nest). A run is
one (policy, scenario, seed) as plain data, so it travels to worker processes as it is.

A run's **identity** is everything that decides its result: the policy (heuristic name and parameters, or the
model file's path and SHA-256), the env id with every keyword, the seed and the code version (package version
and git commit, :func:`code_version`). Its **key** (``<policy label>__<scenario label>__s<seed>``) names its
files. A sweep reuses a finished run only when the identity saved with it matches; two runs of one sweep with
the same key are refused (:class:`SweepSpecError`) before anything runs.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Iterable, Sequence

from .files import safe_name


class SweepSpecError(ValueError):
    """A sweep that cannot run as specified (e.g. two runs that would write the same files)."""


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


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<package version>`` plus ``+g<commit>`` (and ``.dirty`` with uncommitted changes to tracked files)
    when the package runs from a git checkout of its repository."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        out = version("clustergym")
    except PackageNotFoundError:
        out = "unknown"
    root = Path(__file__).resolve().parent.parent  # the repository, if the package runs from its source tree
    if not (root / "pyproject.toml").exists():
        return out

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode or Path(top.stdout.strip()).resolve() != root:
            return out
        commit = git("rev-parse", "HEAD").stdout.strip()
        dirty = git("diff", "--quiet", "HEAD").returncode != 0
    except (OSError, subprocess.SubprocessError):  # no git on this machine
        return out
    return f"{out}+g{commit}" + (".dirty" if dirty else "")


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def policy_identity(spec: dict) -> dict:
    """What decides a policy's actions: a heuristic's name and parameters, or a model file's absolute path and
    SHA-256 (None if the file is missing: the run then fails by name)."""
    if spec["kind"] == "heuristic":
        return {"kind": "heuristic", "name": spec["name"], "params": spec.get("params", {})}
    from clustergym.agents.io import resolve_model_path

    try:
        p = resolve_model_path(spec["path"]).resolve()
        st = p.stat()
        digest = _sha256(str(p), st.st_mtime_ns, st.st_size)
    except FileNotFoundError:
        p, digest = Path(spec["path"]).resolve(), None
    return {"kind": "agent", "path": str(p), "sha256": digest}


def run_identity(policy_spec: dict, env_id: str, env_kwargs: dict, seed: int) -> dict:
    return {"policy": policy_identity(policy_spec), "env_id": env_id, "env_kwargs": env_kwargs, "seed": int(seed),
            "code": code_version()}


def canonical(identity: dict) -> str:
    """The identity as one canonical string (sorted keys), for comparisons."""
    return json.dumps(identity, sort_keys=True, default=str)


def identity_difference(old: dict, new: dict) -> str:
    """The first field where two identities differ, as ``field: old -> new``."""
    flat_old, flat_new = _flatten(old), _flatten(new)
    for k in sorted(set(flat_old) | set(flat_new)):
        if flat_old.get(k, "<none>") != flat_new.get(k, "<none>"):
            return f"{k}: {flat_old.get(k, '<none>')} -> {flat_new.get(k, '<none>')}"
    return "no difference"


def _flatten(d: Any, prefix: str = "") -> dict[str, str]:
    if not isinstance(d, dict):
        return {prefix: json.dumps(d, sort_keys=True, default=str)}
    out: dict[str, str] = {}
    for k, v in d.items():
        out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def check_collisions(runs: Sequence[dict]) -> None:
    """:class:`SweepSpecError` if two runs share a key (they would write the same files): with different
    identities one would hide the other's results, with equal ones the spec is repeated."""
    first: dict[str, dict] = {}
    for r in runs:
        other = first.setdefault(r["key"], r)
        if other is r:
            continue
        if canonical(other["identity"]) == canonical(r["identity"]):
            raise SweepSpecError(f"the run {r['key']} is specified twice (policy {r['policy']!r}, scenario "
                                 f"{r['scenario']!r}, seed {r['seed']}): give each policy and scenario once")
        raise SweepSpecError(
            f"two runs would write the same files runs/{r['key']}.*: policy {r['policy']!r}, scenario "
            f"{r['scenario']!r}, seed {r['seed']}, but they differ in "
            f"{identity_difference(other['identity'], r['identity'])}; give them different labels "
            f"(label=env_id:key=value,... for scenarios, label=name:... for policies)")


def make_runs(policies: list[dict], scenarios: list[dict], seeds: Iterable[int], common: dict | None = None,
              max_steps: int | None = None) -> list[dict]:
    """Every (scenario, policy, seed) as a run: its key, labels, env id and keywords, and identity. Runs that
    would collide are refused (:func:`check_collisions`)."""
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
                             "seed": int(s), "identity": run_identity(p, sc["env_id"], kw, s)})
    check_collisions(runs)
    return runs
