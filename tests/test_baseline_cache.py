"""train/baseline_cache.py: a heuristic's validation means are computed once per key and read back after; the
key changes with the windows and the code; concurrent runs compute an entry once."""
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
    monkeypatch.setattr(C, "code_fingerprint", lambda: "edited")  # any source edit gives a new fingerprint
    assert _key() != base


def test_fingerprint_changes_with_any_source_file(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "rule.py").write_text("LIMIT = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(C, "PACKAGES", ("fakepkg",))
    monkeypatch.setattr(C, "DATA", ())
    C.code_fingerprint.cache_clear()
    before = C.code_fingerprint()
    (pkg / "rule.py").write_text("LIMIT = 2\n")
    C.code_fingerprint.cache_clear()
    after = C.code_fingerprint()
    C.code_fingerprint.cache_clear()
    assert before != after


def test_fingerprint_covers_the_data_files(tmp_path, monkeypatch):
    pkg = tmp_path / "fakedata"
    (pkg / "data").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "data" / "speeds.csv").write_text("model,gpu,speed\nresnet,v100,1.0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(C, "PACKAGES", ())
    monkeypatch.setattr(C, "DATA", (("fakedata", "data"),))
    prints = []
    for speed in ("1.0", "2.0"):
        (pkg / "data" / "speeds.csv").write_text(f"model,gpu,speed\nresnet,v100,{speed}\n")
        C.code_fingerprint.cache_clear()
        prints.append(C.code_fingerprint())
    C.code_fingerprint.cache_clear()
    assert prints[0] != prints[1]


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
