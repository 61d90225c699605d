"""train/baseline_cache.py: a heuristic's validation means are computed once per key and read back after; the
key changes with the windows and the code version; concurrent runs compute an entry once."""
from __future__ import annotations

import json
import multiprocessing as mp
import time

import pytest

from clustergym.train import baseline_cache as C


def _key(**kw) -> str:
    args = {"heuristic": "mlf-h", "scenario": "clustergym/GPUCluster-v1", "env_config": {"split": "test"},
            "seeds": [20000, 20001], "max_steps": 10_000, "metric": "mean_jct_censored", **kw}
    return C.entry_key(**args)


def test_computed_once_then_read(tmp_path):
    path, calls = tmp_path / "cache.json", []

    def compute():
        calls.append(1)
        return {"mean_jct_censored": 12.5}

    assert C.cached(path, _key(), compute) == ({"mean_jct_censored": 12.5}, False)
    assert C.cached(path, _key(), compute) == ({"mean_jct_censored": 12.5}, True)
    assert len(calls) == 1
    assert C.cached(path, _key(seeds=[20000, 20002]), compute)[1] is False  # other windows: another entry
    assert len(calls) == 2 and len(json.loads(path.read_text())) == 2


def test_key_names_what_the_episodes_depend_on(monkeypatch):
    base = _key()
    for change in ({"heuristic": "fifo"}, {"scenario": "clustergym/Hetero-v1"}, {"env_config": {"split": "train"}},
                   {"max_steps": None}, {"metric": "mean_jct"}):
        assert _key(**change) != base, change
    monkeypatch.setattr(C, "code_version", lambda: "0.1.0+gother")  # another commit, or another uncommitted diff
    assert _key() != base


def test_two_uncommitted_diffs_are_two_code_versions(monkeypatch):
    """code_version (the sweep runner's and the cache's reuse rule) tells uncommitted edits apart by their diff."""
    import subprocess

    from clustergym.eval import specs

    monkeypatch.setattr(specs, "git_state", lambda: ("abc123", True))
    versions = []
    for diff in (b"-LIMIT = 1\n+LIMIT = 2\n", b"-LIMIT = 1\n+LIMIT = 3\n"):
        monkeypatch.setattr(specs.subprocess, "run",
                            lambda *a, d=diff, **k: subprocess.CompletedProcess(a, 0, stdout=d, stderr=b""))
        specs.code_version.cache_clear()
        versions.append(specs.code_version())
    specs.code_version.cache_clear()
    assert versions[0] != versions[1] and all("+gabc123.dirty." in v for v in versions)


def test_a_broken_cache_file_is_named(tmp_path):
    path = tmp_path / "cache.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="cache.json: not a JSON file"):
        C.cached(path, _key(), lambda: {})


def _worker(path: str, log: str) -> None:
    def compute():
        with open(log, "a") as f:
            f.write("computed\n")
        time.sleep(0.5)  # long enough for the other processes to look the entry up meanwhile
        return {"x": 1.0}

    C.cached(path, _key(), compute)


def test_concurrent_runs_compute_an_entry_once(tmp_path):
    path, log = tmp_path / "cache.json", tmp_path / "log.txt"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_worker, args=(str(path), str(log))) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert all(p.exitcode == 0 for p in procs)
    assert log.read_text().count("computed") == 1
