"""The heuristics' validation scores, shared by the runs that would compute the same ones.

Every run scores the ``eval_baselines`` on its validation windows once (``baseline_means`` in
``train/ppo.py``). The windows do not depend on the training seed, so the five runs of ``train/seeds.py``
computed the same numbers five times (about 4 minutes each with 20 windows and four heuristics). With
``baseline_cache`` set to a JSON file, a run looks each heuristic up there first and stores what it computes.

An entry is keyed by everything its episodes depend on: the heuristic, the scenario, the env config of the
validation split, the window seeds, the step cap, the selection metric, and the code's version
(:func:`clustergym.eval.specs.code_version`, the sweep runner's rule for reusing a result: the package version,
the commit, and a digest of any uncommitted diff of tracked files), so an edit to the simulator, a heuristic or
their data does not reuse old scores (an installed wheel is known by its version alone). Runs that reach the
same entry together take turns under an exclusive ``flock`` on ``<file>.lock``: the first
computes it, the others then read it.
"""
from __future__ import annotations

import fcntl
import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from clustergym.eval.files import atomic_write_text
from clustergym.eval.specs import canonical, code_version

Means = dict[str, float]


def entry_key(heuristic: str, scenario: str, env_config: dict, seeds: list[int], max_steps: int | None,
              metric: str) -> str:
    """The cache key of one heuristic's validation means (module docstring)."""
    return canonical({"heuristic": heuristic, "scenario": scenario, "env": env_config, "seeds": list(seeds),
                      "max_steps": max_steps, "metric": metric, "code": code_version()})


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _read(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"baseline_cache {path}: not a JSON file ({e}); remove it to start a new cache") from None
    if not isinstance(data, dict):
        raise ValueError(f"baseline_cache {path}: expected a JSON object of entries, got {type(data).__name__}")
    return data


def cached(path: str | Path, key: str, compute: Callable[[], Means]) -> tuple[Means, bool]:
    """(the means stored under ``key`` in the cache file ``path``, True), or (``compute()``, False) after storing
    them there. Holds the file's lock throughout, so concurrent runs compute each entry once."""
    path = Path(path)
    with _locked(path):
        hit = _read(path).get(key)
        if hit is not None:
            return hit, True
        means = compute()
        entries = _read(path)
        entries[key] = means
        atomic_write_text(path, json.dumps(entries, indent=1, sort_keys=True))
        return means, False
