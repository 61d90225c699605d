"""Aggregation, tables, figures and the Markdown report of a sweep (synthetic run files, no simulation)."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from clustergym.eval import compare, files, report, specs


def _fake_runs(tmp_path, loads=(1.0,)):
    runs = []
    rng = np.random.default_rng(0)
    for x in loads:
        for p, base in (("mlf-h", 1000.0), ("fifo", 1500.0)):
            for s in (0, 1, 2):
                sc = "sc" if len(loads) == 1 else f"sc@x{x:g}"
                key = specs.run_key(p, sc, s)
                row = {"policy": p, "scenario": sc, "scenario_base": "sc", "load": x, "seed": s,
                       "mean_jct": base * x + 10 * s, "p99_jct": 3 * base, "deadline_ratio": 0.9 - 0.1 * (p == "fifo"),
                       "mean_accuracy": 0.8, "accuracy_ratio": 0.9, "bandwidth_mb": 100.0 + s, "mean_waiting": 50.0,
                       "overload_occurrences": 3, "migrations": 0, "unfinished": 0, "truncated": False,
                       "decision_mean_us": 100.0, "decision_p99_us": 300.0}
                files.atomic_write_text(tmp_path / "runs" / f"{key}.json", json.dumps({"row": row}))
                jobs = __import__("pandas").DataFrame({"policy": p, "scenario": sc, "seed": s,
                                                       "jct": rng.lognormal(7, 1, 20) * (1 + (p == "fifo"))})
                files.atomic_write_csv(jobs, tmp_path / "runs" / f"{key}.jobs.csv")
                runs.append({"key": key, "policy": p})
    return runs


def test_report_single_scenario(tmp_path):
    runs = _fake_runs(tmp_path)
    agg = compare.aggregate(tmp_path, runs, reference="mlf-h", title="T", notes="hello", bootstrap=500)
    for f in ("episodes.csv", "jobs.csv", "summary_long.csv", "summary.csv", "summary.md", "report.md",
              "summary_iqm.csv"):
        assert (tmp_path / f).exists(), f
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("# T") and "hello" in text and "## Summary" in text
    assert re.search(r"\| sc +\| fifo +\|", text) and "+49.5%" in text  # (1510 - 1010) / 1010
    # the IQM of the per-seed (fifo - mlf-h)/mlf-h = 500/1000, 500/1010, 500/1020: of 3 values trim_mean cuts
    # floor(3/4) = 0 at each end, so it is their mean
    iqm = pd.read_csv(tmp_path / "summary_iqm.csv").set_index("metric").loc["mean_jct"]
    assert iqm["policy"] == "fifo" and iqm["n"] == 3
    assert iqm["iqm"] == pytest.approx(np.mean([500 / 1000, 500 / 1010, 500 / 1020]))
    assert iqm["iqm_lo"] <= iqm["iqm"] <= iqm["iqm_hi"]
    assert "## Interquartile mean of (y − mlf-h)/mlf-h" in text and "+49.5% [" in text
    long = agg["long"]
    f = long[(long.policy == "fifo") & (long.metric == "mean_jct")].iloc[0]
    assert f["rel_diff"] == (1510 - 1010) / 1010
    pngs = list((tmp_path / "figures").glob("*.png"))
    assert {p.name for p in pngs} == {"jct_cdf_sc.png", "metrics_sc.png"}
    for p in pngs:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"figures/{p.name}" in text
    report.write_claims(tmp_path, [{"claim": "c", "paper": "p", "measured": "m", "agrees": "yes"}])
    report.write_claims(tmp_path, [{"claim": "c2", "paper": "p", "measured": "m", "agrees": "no"}])
    text = (tmp_path / "report.md").read_text()
    assert text.count("## Paper claims") == 1 and re.search(r"\| c2 +\|", text) and not re.search(r"\| c +\|", text)


def test_report_load_sweep(tmp_path):
    runs = _fake_runs(tmp_path, loads=(0.5, 1.0, 2.0))
    agg = compare.aggregate(tmp_path, runs, reference="mlf-h", figures=False)  # figures: covered above
    text = (tmp_path / "report.md").read_text()
    assert "## mean_jct by load factor x" in text and "x=0.5" in text and "x=2" in text
    from clustergym.eval import plots

    p = plots.load_curves(agg["load_long"], "sc", tmp_path / "load_sc.png", ["mlf-h", "fifo"])
    assert p is not None and p.read_bytes()[:4] == b"\x89PNG"
    assert (tmp_path / "summary_by_load.csv").exists()
    assert agg["load_long"]["load"].nunique() == 3
