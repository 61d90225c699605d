"""Sweep specifications: policy and scenario specs of the command line, load sweeps, and the run list.

A **policy spec** is one of four kinds (:func:`parse_policy` tells them apart, :func:`load_policy` loads them):

=============  =============================================  ================================================
kind           spec                                           loaded, in the worker, as
=============  =============================================  ================================================
``heuristic``  ``[label=]name[:key=value,...]``               ``baselines.make(name, env, **params)``
``agent``      ``[label=]path.zip[:decode=row-kind]`` or a    an SB3 model (``clustergym.agents.io``),
               training run folder                            decoded as ``decode`` says
``rllib``      ``[label=]checkpoint-folder[:decode=...]``     ``clustergym.agents.rllib.RLlibPolicy`` (needs
                                                              the ``rllib`` extra)
``callable``   ``[label=]module:attr[:key=value,...]``        ``module.attr(env, **params)``: an object with
                                                              ``predict(obs, action_masks=...)`` like SB3's
=============  =============================================  ================================================

An agent's (SB3 or RLlib) one parameter, ``decode`` (``joint``, the default, ``row-kind`` or ``act-first``), is how its
deterministic action is read from its action distribution (:mod:`clustergym.agents.decode`). A spec that ends in ``.zip`` (before
any ``:decode=...``), holds a path separator or starts with ``.`` is a file: an RLlib checkpoint if it
is a folder with ``rllib_checkpoint.json``, else an SB3 agent. Otherwise ``module:attr`` with ``attr`` a dotted
Python name (no ``=`` after the colon) is a callable, anything else a heuristic (``name:key=value`` sets a
heuristic's parameters, so the two never read alike). A callable's module is imported as ``python -m`` would:
the working directory first on ``sys.path``. Values are parsed as YAML. Before any run, :func:`check_policies`
refuses with a :class:`PolicySpecError` a heuristic that ``baselines.available()`` does not list or that does
not take its parameters, a model file that is not a readable SB3 zip, an RLlib checkpoint without Ray installed
or without its module, and a callable that cannot be imported or whose result (on the first scenario's env)
has no ``predict``.

A **scenario spec** is ``[label=]env_id[:key=value,...]`` (EnvConfig fields as ``gymnasium.make`` keywords;
dotted keys nest). Every run plays held-out windows (``split="test"``, :data:`clustergym.eval.rollout.EVAL_DEFAULTS`)
unless its keywords say otherwise. A run is one (policy, scenario, seed) as plain data, so it travels to worker
processes as it is.

A run's **identity** is everything that decides its result: the policy (:func:`policy_identity`: a heuristic's
name and parameters; a model file's path and SHA-256; an RLlib checkpoint's folder and the SHA-256 over its
files; a callable's ``module:attr``, parameters and its module's source path and SHA-256, so files that module
reads, e.g. weights, are not covered), the env id with every keyword, the seed and the code version (package
version and git commit, :func:`code_version`). Its **key** (``<policy label>__<scenario label>__s<seed>``) names
its files. A sweep reuses a finished run only when the identity saved with it matches; two runs of one sweep
with the same key are refused (:class:`SweepSpecError`) before anything runs.

A **core run** (:func:`core_runs`) is played by a named runner function on the simulator directly instead of
an env: for the named experiments whose policies act with commands the env's window cannot express (SJF-BSBF's
GPUs and sub-batches). It has the same key, files and resume rule; its identity names the runner and its
arguments instead of an env.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from .files import safe_name
from .rollout import EVAL_DEFAULTS


class SweepSpecError(ValueError):
    """A sweep that cannot run as specified (e.g. two runs that would write the same files)."""


class PolicySpecError(SweepSpecError):
    """A policy spec that is neither a known heuristic, a readable checkpoint nor an importable callable."""


RLLIB_MARKER = "rllib_checkpoint.json"  # RLlib's save_to_path writes it into every checkpoint folder
RLLIB_HINT = "install the rllib extra (into a venv of its own): pip install 'clustergym[rllib]', or make test-rllib"
_AGENT_PARAMS = re.compile(r"^(?P<path>.+?):(?P<kv>[A-Za-z_]\w*=[^/]*)$")  # path:key=value,... of a file
_CALLABLE = re.compile(r"^(?P<module>[A-Za-z_][\w.]*):(?P<attr>[A-Za-z_][\w.]*)(?::(?P<kv>.*))?$")


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


def split_label(spec: str) -> tuple[str | None, str]:
    if "=" in spec:
        head, rest = spec.split("=", 1)
        if ":" not in head and "/" not in head and head:
            return head, rest
    return None, spec


# --------------------------------------------------------------------------------------------- policy specs

def parse_policy(spec: str) -> dict:
    """A policy spec (module docstring) -> {"label", "kind", "params", and "name" | "path" | "target"}."""
    label, body = split_label(spec)
    m = _CALLABLE.match(body)
    if m and not m["module"].endswith(".zip"):  # before files: a callable's parameters may name files
        params = parse_kv(m["kv"] or "")
        target = f"{m['module']}:{m['attr']}"
        return {"label": safe_name(label or _with_params(target, params)), "kind": "callable", "target": target,
                "params": params}
    m = _AGENT_PARAMS.match(body)
    path, params = (m["path"], parse_kv(m["kv"])) if m and _is_file_spec(m["path"]) else (body, {})
    if _is_file_spec(path):
        kind = "rllib" if (Path(path) / RLLIB_MARKER).is_file() else "agent"
        return {"label": safe_name(label or Path(path).stem), "kind": kind, "path": str(path), "params": params}
    name, _, kv = body.partition(":")
    params = parse_kv(kv)
    return {"label": safe_name(label or _with_params(name, params)), "kind": "heuristic", "name": name,
            "params": params}


def _is_file_spec(body: str) -> bool:
    return body.endswith(".zip") or os.sep in body or body.startswith(".")


def _with_params(name: str, params: dict) -> str:
    return name if not params else name + "-" + "-".join(f"{k}{v}" for k, v in params.items())


def _cwd_first_on_path() -> None:
    """Modules in the working directory import, as with ``python -m`` (a script's own folder comes first)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def resolve_callable(spec: dict) -> Callable:
    """The object a callable spec's ``module:attr`` names; :class:`PolicySpecError` if it cannot be imported
    or is not callable."""
    module_name, attr = spec["target"].split(":")
    _cwd_first_on_path()
    try:
        obj = importlib.import_module(module_name)
    except ImportError as e:
        raise PolicySpecError(f"policy {spec['label']!r}: cannot import module {module_name!r} of "
                              f"{spec['target']!r} ({type(e).__name__}: {e}); run from the folder that holds it "
                              f"or install it") from e
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PolicySpecError(f"policy {spec['label']!r}: {spec['target']!r}: no attribute {part!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise PolicySpecError(f"policy {spec['label']!r}: {spec['target']!r} is a {type(obj).__name__}, not a "
                              f"callable that returns a policy")
    return obj


def build_callable(spec: dict, env) -> Any:
    """``module.attr(env, **params)`` of a callable spec, checked to have a ``predict`` method."""
    params = spec.get("params", {})
    factory = resolve_callable(spec)
    try:
        policy = factory(env, **params)
    except Exception as e:  # noqa: BLE001  (named, with the cause chained)
        raise PolicySpecError(f"policy {spec['label']!r}: {spec['target']}(env, **{params}) failed: "
                              f"{type(e).__name__}: {e}") from e
    if not callable(getattr(policy, "predict", None)):
        raise PolicySpecError(f"policy {spec['label']!r}: {spec['target']}(env) returned a {type(policy).__name__}"
                              f" without a predict(obs, action_masks=...) method")
    return policy


def check_policy(spec: dict, make_env: Callable[[], Any] | None = None) -> None:
    """:class:`PolicySpecError` unless ``spec`` can be loaded (module docstring). A callable is called on
    ``make_env()`` when given, else only imported."""
    kind, label = spec["kind"], spec["label"]
    if kind == "heuristic":
        from clustergym import baselines

        if spec["name"] not in baselines.available():
            raise PolicySpecError(f"policy {label!r}: {spec['name']!r} is not a heuristic "
                                  f"({', '.join(baselines.available())}), a model file or checkpoint folder (give "
                                  f"a path: ./{spec['name']}.zip) nor a module:callable")
        try:
            baselines.make(spec["name"], **spec.get("params", {}))
        except (TypeError, ValueError) as e:
            raise PolicySpecError(f"policy {label!r}: heuristic {spec['name']!r} with {spec['params']}: {e}") from e
    elif kind == "agent":
        _check_sb3_zip(spec)
        _check_agent_params(spec)
    elif kind == "rllib":
        _check_agent_params(spec)
        if importlib.util.find_spec("ray") is None:
            raise PolicySpecError(f"policy {label!r}: {spec['path']} is an RLlib checkpoint and Ray is not "
                                  f"installed: {RLLIB_HINT}")
        from clustergym.agents.rllib import module_path

        try:
            module_path(spec["path"])
        except FileNotFoundError as e:
            raise PolicySpecError(f"policy {label!r}: {e}") from e
    elif make_env is None:
        resolve_callable(spec)
    else:
        env = make_env()
        try:
            build_callable(spec, env)
        finally:
            env.close()


def _check_sb3_zip(spec: dict) -> None:
    from clustergym.agents.io import resolve_model_path

    try:
        p = resolve_model_path(spec["path"])
        with zipfile.ZipFile(p) as z:
            names = z.namelist()
    except FileNotFoundError as e:
        raise PolicySpecError(f"policy {spec['label']!r}: no SB3 model file or training run folder at "
                              f"{spec['path']!r} ({e})") from e
    except (zipfile.BadZipFile, OSError) as e:
        raise PolicySpecError(f"policy {spec['label']!r}: {spec['path']} is not a readable zip ({e})") from e
    if "data" not in names:
        raise PolicySpecError(f"policy {spec['label']!r}: {p} is a zip but not an SB3 model (no 'data' entry)")


def _check_agent_params(spec: dict) -> None:
    from clustergym.agents.decode import check_decode

    try:
        check_decode(_decode_of(spec))
    except ValueError as e:
        raise PolicySpecError(f"policy {spec['label']!r}: {e}") from e
    others = sorted(set(spec.get("params", {})) - {"decode"})
    if others:
        raise PolicySpecError(f"policy {spec['label']!r}: an agent takes only decode=, not {others}")


def check_policies(runs: Iterable[dict]) -> None:
    """:func:`check_policy` on each distinct policy of ``runs``, a callable on the env of its first run (core runs,
    :func:`core_runs`, are their experiment's own policies: not checked here)."""
    from clustergym.scenarios import make_env

    seen: set[str] = set()
    for r in runs:
        if r["policy"] not in seen and "runner" not in r:
            seen.add(r["policy"])
            check_policy(r["policy_spec"],
                         lambda r=r: make_env(r["env_id"], r["env_kwargs"], disable_env_checker=True))


def check_scenarios(runs: Iterable[dict]) -> None:
    """Each distinct scenario of ``runs`` (env id and keywords) configured and its trace file read before any run
    starts (:func:`clustergym.scenarios.check_config`): a bad field, a mapping naming a missing column or jobs
    that never fit the cluster stop the sweep with a :class:`SweepSpecError` naming the scenario. Core runs
    (:func:`core_runs`) have no env to check."""
    from clustergym.scenarios import check_config

    seen: set[str] = set()
    for r in runs:
        if "runner" in r:
            continue
        key = canonical({"env_id": r["env_id"], "env_kwargs": r["env_kwargs"]})
        if key in seen:
            continue
        seen.add(key)
        try:
            check_config(r["env_id"], r["env_kwargs"])
        except ValueError as e:
            raise SweepSpecError(f"scenario {r['scenario']!r}: {e}") from None


def load_policy(spec: dict, env) -> Any:
    """The policy of a parsed spec for ``env``: a heuristic's agent, a loaded model, or the callable's object."""
    if spec["kind"] == "heuristic":
        from clustergym import baselines

        return baselines.make(spec["name"], env, **spec.get("params", {}))
    if spec["kind"] == "callable":
        return build_callable(spec, env)
    import torch

    torch.set_num_threads(1)  # one worker = one core
    if spec["kind"] == "rllib":
        from clustergym.agents.rllib import RLlibPolicy

        return RLlibPolicy(spec["path"], env, decode=_decode_of(spec))
    from clustergym.agents.decode import with_decode
    from clustergym.agents.io import load_agent

    return with_decode(load_agent(spec["path"], env=env), _decode_of(spec), env)


def _decode_of(spec: dict) -> str:
    """An agent spec's decoding (``joint`` unless its parameters say otherwise)."""
    return spec.get("params", {}).get("decode", "joint")


@functools.lru_cache(maxsize=64)
def _sha256(path: str, mtime_ns: int, size: int) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a file's bytes (cached while its size and modification time stay)."""
    st = path.stat()
    return _sha256(str(path), st.st_mtime_ns, st.st_size)


def tree_sha256(folder: Path) -> str:
    """SHA-256 over the files of ``folder``: each relative path with its content's SHA-256, in sorted order."""
    h = hashlib.sha256()
    for p in sorted(q for q in folder.rglob("*") if q.is_file()):
        h.update(f"{p.relative_to(folder).as_posix()}\0{file_sha256(p)}\n".encode())
    return h.hexdigest()


def policy_identity(spec: dict) -> dict:
    """What decides a policy's actions (module docstring); a digest is None where the file is missing (the
    check or the run then fails by name)."""
    kind = spec["kind"]
    if kind == "heuristic":
        return {"kind": kind, "name": spec["name"], "params": spec.get("params", {})}
    if kind == "callable":
        _cwd_first_on_path()
        try:
            found = importlib.util.find_spec(spec["target"].split(":")[0])
        except (ImportError, ValueError):
            found = None
        origin = found.origin if found is not None and found.origin and os.path.isfile(found.origin) else None
        ident = {"kind": kind, "target": spec["target"], "params": spec.get("params", {}), "source": origin,
                 "sha256": file_sha256(Path(origin)) if origin else None}
        return _with_file_params(ident, spec)
    if kind == "rllib":
        p = Path(spec["path"]).resolve()
        return _with_agent_params({"kind": kind, "path": str(p), "sha256": tree_sha256(p) if p.is_dir() else None},
                                  spec)
    from clustergym.agents.io import resolve_model_path

    try:
        p = resolve_model_path(spec["path"]).resolve()
        digest = file_sha256(p)
    except FileNotFoundError:
        p, digest = Path(spec["path"]).resolve(), None
    return _with_agent_params({"kind": "agent", "path": str(p), "sha256": digest}, spec)


def _with_file_params(ident: dict, spec: dict) -> dict:
    """A callable's identity with, for each parameter naming a model file or folder (a proposer of
    ``clustergym.eval.lookahead``), that policy's identity; without the key when none does."""
    files = {k: policy_identity(parse_policy(v)) for k, v in sorted(spec.get("params", {}).items())
             if isinstance(v, str) and _is_file_spec(v)}
    return {**ident, "param_files": files} if files else ident


def _with_agent_params(ident: dict, spec: dict) -> dict:
    """An agent's identity with its parameters; without the key when it has none, so the identities of runs
    made before agents took parameters still match."""
    return {**ident, "params": spec["params"]} if spec.get("params") else ident

# --------------------------------------------------------------------------------------------- scenarios and runs

def parse_scenario(spec: str) -> dict:
    """``[label=]env_id[:k=v,...]`` -> {"label", "env_id", "kwargs"}."""
    label, body = split_label(spec)
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
                # a generated workload's load is its generator's: a scenario's trace-window load does not apply
                kw = deep_merge(kw, {"workload": "generator", "load": None, "generator": {"load": float(x)}})
            elif mode == "arrival":
                kw["load"] = float(x)
            else:
                raise ValueError(f"load mode must be 'jobs', 'generator' or 'arrival', got {mode!r}")
            out.append({"label": f"{sc['label']}@x{x:g}", "env_id": sc["env_id"], "kwargs": kw,
                        "base": sc["label"], "load": float(x)})
    return out


def run_key(policy: str, scenario: str, seed: int) -> str:
    return f"{safe_name(policy)}__{safe_name(scenario)}__s{int(seed)}"


@functools.lru_cache(maxsize=1)
def git_state() -> tuple[str, bool] | None:
    """(commit, whether tracked files have uncommitted changes) when the package runs from a git checkout of
    its repository; None otherwise (an installed wheel, or no git on this machine)."""
    root = Path(__file__).resolve().parent.parent  # the repository, if the package runs from its source tree
    if not (root / "pyproject.toml").exists():
        return None

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)

    try:
        top = git("rev-parse", "--show-toplevel")
        if top.returncode or Path(top.stdout.strip()).resolve() != root:
            return None
        return git("rev-parse", "HEAD").stdout.strip(), git("diff", "--quiet", "HEAD").returncode != 0
    except (OSError, subprocess.SubprocessError):  # no git on this machine
        return None


@functools.lru_cache(maxsize=1)
def code_version() -> str:
    """``<package version>`` plus ``+g<commit>`` (and ``.dirty.<digest of the diff>`` with uncommitted changes to
    tracked files) when the package runs from a git checkout of its repository (:func:`git_state`)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        out = version("clustergym")
    except PackageNotFoundError:
        out = "unknown"
    state = git_state()
    if state is None:
        return out
    return f"{out}+g{state[0]}" + (f".dirty.{_diff_digest()}" if state[1] else "")


def _diff_digest() -> str:
    """The first 12 hex digits of the SHA-256 of ``git diff HEAD`` in the package's checkout: two different sets
    of uncommitted edits give two versions, so no result of one is reused for the other."""
    root = Path(__file__).resolve().parent.parent
    diff = subprocess.run(["git", "-C", str(root), "diff", "--binary", "HEAD"], capture_output=True, timeout=30)
    return hashlib.sha256(diff.stdout).hexdigest()[:12]


def run_identity(policy_id: dict, env_id: str, env_kwargs: dict, seed: int) -> dict:
    """What decides a run's result (a finished run is reused only if it matches); ``policy_id``:
    :func:`policy_identity` of its policy."""
    return {"policy": policy_id, "env_id": env_id, "env_kwargs": env_kwargs, "seed": int(seed),
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
    """Every (scenario, policy, seed) as a run: its key, labels, env id and keywords (:data:`EVAL_DEFAULTS`
    under ``common`` under the scenario's own), and identity. Runs that would collide are refused
    (:func:`check_collisions`)."""
    runs = []
    pids = [policy_identity(p) for p in policies]  # once per policy (it may hash model files)
    for sc in scenarios:
        kw = deep_merge(deep_merge(EVAL_DEFAULTS, common or {}), sc["kwargs"])  # held-out windows by default
        if max_steps is not None:
            kw["max_steps"] = int(max_steps)
        for p, pid in zip(policies, pids):
            for s in seeds:
                runs.append({"key": run_key(p["label"], sc["label"], s), "policy": p["label"], "policy_spec": p,
                             "scenario": sc["label"], "scenario_base": sc.get("base", sc["label"]),
                             "load": float(sc.get("load", 1.0)), "env_id": sc["env_id"], "env_kwargs": kw,
                             "seed": int(s), "identity": run_identity(pid, sc["env_id"], kw, s)})
    check_collisions(runs)
    return runs


def core_runs(policies: Sequence[str], scenarios: Sequence[dict], seeds: Iterable[int], runner: str) -> list[dict]:
    """Every (scenario, policy, seed) as a **core run**: one that ``runner`` (``"module:function"``, called in the
    worker as ``function(policy, args, seed)`` and returning the episode record and a DataFrame of per-job
    records) plays on the simulator directly, without the Gymnasium env, for policies whose commands the env's
    window cannot express. A scenario is {"label", "args"} (the runner's arguments, plain data); a core run has
    no env id (``env_id`` None) and its identity is the runner, policy, arguments, seed and code version.
    Runs that would collide are refused (:func:`check_collisions`)."""
    runs = []
    for sc in scenarios:
        for p in policies:
            for s in seeds:
                ident = {"runner": runner, "policy": p, "args": sc["args"], "seed": int(s), "code": code_version()}
                runs.append({"key": run_key(p, sc["label"], s), "policy": p, "scenario": sc["label"],
                             "scenario_base": sc.get("base", sc["label"]), "load": float(sc.get("load", 1.0)),
                             "env_id": None, "env_kwargs": {}, "seed": int(s), "runner": runner,
                             "runner_args": sc["args"], "identity": ident})
    check_collisions(runs)
    return runs


def play_core_run(run: dict) -> tuple[dict, Any]:
    """(episode record, per-job records) of a core run (:func:`core_runs`), by its runner."""
    return resolve_callable({"target": run["runner"], "label": run["policy"]})(run["policy"], run["runner_args"],
                                                                            run["seed"])
