"""The SJF-BSBF experiments (eval/experiments_sjfbsbf.py): the Pollux-like workload, one small core run, and the
named experiments through eval/compare.py (core runs: files, resume, claims and figures)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustergym.eval import compare
from clustergym.eval.experiment_kit import EXPERIMENTS
from clustergym.eval.experiments_sjfbsbf import (RUNNER, VARIANTS, cluster, core_episode, pollux_mix,
                                                 workload)
from clustergym.eval.experiments_sjfbsbf_env import ENV_RUNNER
from clustergym.eval.specs import SweepSpecError, core_runs


def test_workload_follows_the_bundled_pollux_mix_and_is_seeded():
    models, gpus = pollux_mix()
    assert set(models) == {"BERT", "ResNet-18", "DeepSpeech2", "ResNet-50", "Recommendation", "YOLOv3"}
    assert max(gpus) == 32 and 48 not in gpus and gpus[1] == 503.0  # 503 of the 1,280 Pollux jobs use 1 GPU
    a, b = workload(30, 3), workload(30, 3)
    assert a == b and a != workload(30, 4)
    assert {j.model for j in a} <= set(models) and {j.n_gpus for j in a} <= set(gpus)
    assert all(j.n_partitions == 1 and j.sync == "allreduce" for j in a)


def test_one_small_core_episode_of_a_variant():
    assert {"sjf-bsbf", "sjf-bsbf-xi", "sjf-bsbf-isolate"} <= set(EXPERIMENTS)
    assert cluster(100.0).servers[0].nic_gbps == 100.0 and sum(s.n_gpus for s in cluster().servers) == 64
    args = {"n_jobs": 12, "nic_gbps": 10.0, "sim": {"interference": "constant", "interference_xi": 1.5}}
    rec, jobs = core_episode("sjf-bsbf/no-sub-batch", args, 0)
    assert rec["finished"] == 12 and rec["interference_xi"] == 1.5 and rec["nic_gbps"] == 10.0
    assert len(jobs) == 12 and jobs["jct"].notna().all()
    assert VARIANTS["sjf-bsbf/exclusive"] == ("sjf-bsbf", {"sharing": "none"})


def test_core_runs_have_an_identity_and_refuse_collisions():
    sc = {"label": "a", "args": {"n_jobs": 5, "nic_gbps": 10.0, "sim": {}}}
    (r,) = core_runs(["sjf-bsbf"], [sc], [3], RUNNER)
    assert r["env_id"] is None and r["identity"]["runner"] == RUNNER and r["identity"]["args"] == sc["args"]
    with pytest.raises(SweepSpecError):
        core_runs(["sjf-bsbf"], [sc, {**sc, "args": {**sc["args"], "n_jobs": 6}}], [3], RUNNER)


@pytest.mark.slow
def test_compare_runs_the_xi_experiment_quick_with_its_figure_and_resumes(tmp_path):
    out = tmp_path / "xi"
    argv = ["--experiment", "sjf-bsbf-xi", "--quick", "--workers", "0", "--no-progress", "--bootstrap", "0",
            "--out", str(out)]
    assert compare.main(argv) == 0
    assert (out / "figures" / "mean_jct_vs_xi.png").stat().st_size > 0
    assert (out / "figures" / "metrics_xi1.5.png").exists()
    claims = (out / "claims.md").read_text()
    assert "xi = 1.5: mean JCT of sjf-bsbf vs sjf-ffs" in claims and "mean_jct_vs_xi.png" in (out / "report.md").read_text()
    saved = json.loads(next((out / "runs").glob("sjf-ffs__xi1__s0.json")).read_text())
    assert saved["run"]["runner"] == RUNNER and saved["identity"]["args"]["sim"]["interference_xi"] == 1.0
    stamp = (out / "runs" / "sjf-ffs__xi1__s0.json").stat().st_mtime_ns
    assert compare.main(argv) == 0  # resumed: every run reused
    assert (out / "runs" / "sjf-ffs__xi1__s0.json").stat().st_mtime_ns == stamp


def test_the_isolation_experiment_draws_its_paired_figure_from_run_files(tmp_path):
    """An experiment's own figure from its run files (6 jobs, one seed, through the sweep: the test stays fast;
    ``sjf-bsbf`` draws the same figure)."""
    name, figure = "sjf-bsbf-isolate", "paired_mean_jct.png"
    exp = EXPERIMENTS[name](tmp_path, quick=True, seeds=[0])
    runs = [{**r, "runner_args": {**r["runner_args"], "n_jobs": 6}} for r in exp["runs"]]
    compare.sweep(runs, tmp_path, workers=0, progress=False)
    agg = compare.aggregate(tmp_path, runs, reference=exp["reference"], title=name, bootstrap=0,
                            extra_figures=exp["figures"])
    assert (tmp_path / "figures" / figure).stat().st_size > 0
    assert any(f.name == figure for f in agg["figures"])
    assert all(row["measured"].endswith("(n=1)") for row in exp["claims"](agg))  # "–" where a pair had no data


def test_the_xi_figures_paired_panel_is_each_policy_against_exclusive_on_the_same_xi_and_seed(monkeypatch):
    import numpy as np
    import pandas as pd

    from clustergym.eval import plots
    from clustergym.eval.experiment_kit import paired_rel
    from clustergym.eval.experiments_sjfbsbf import EXCLUSIVE, XI_POLICIES, _xi_figure

    rng = np.random.default_rng(0)
    ep = pd.DataFrame([{"scenario": f"xi{x:g}", "interference_xi": x, "policy": p, "seed": s,
                        "mean_jct": float(rng.uniform(1000, 5000))}
                       for x in (1.0, 2.0) for p in XI_POLICIES for s in range(4)])
    drawn = {}
    monkeypatch.setattr(plots, "x_curves", lambda panels, *a, **k: drawn.update({p[0]: p[3] for p in panels}))
    _xi_figure(ep, Path("."), list(XI_POLICIES))
    rel = drawn["rel_mean_jct"].set_index(["policy", "x"])
    assert sorted(rel.index) == sorted((p, x) for p in XI_POLICIES[:-1] for x in (1.0, 2.0))
    for (p, x), r in rel.iterrows():
        m, lo, hi, _ = paired_rel(ep, p, EXCLUSIVE, "mean_jct", where=lambda d, x=x: d["interference_xi"] == x)
        assert (r["mean"], r["ci_lo"], r["ci_hi"]) == pytest.approx((m, lo, hi), rel=1e-12)
    means = drawn["mean_jct"].set_index(["policy", "x"])["mean"]
    exclusive = ep[(ep["policy"] == EXCLUSIVE) & (ep["interference_xi"] == 2.0)]
    assert means[(EXCLUSIVE, 2.0)] == pytest.approx(exclusive["mean_jct"].mean())


def test_the_env_experiment_plays_each_policy_through_the_env_and_checks_the_core_run(tmp_path):
    """``sjf-bsbf-env`` on 12 jobs and one seed: with both column sets the env's run is the core run (the claim
    says so), and a label that names no column set is refused."""
    from clustergym.eval.experiments_sjfbsbf_env import env_episode

    exp = EXPERIMENTS["sjf-bsbf-env"](tmp_path, quick=True, seeds=[0])
    runs = [{**r, "runner_args": {**r["runner_args"], "n_jobs": 12}} for r in exp["runs"]]
    assert len(runs) == 10 and {r["runner"] for r in runs} == {RUNNER, ENV_RUNNER}
    compare.sweep(runs, tmp_path, workers=0, progress=False)
    agg = compare.aggregate(tmp_path, runs, reference=exp["reference"], title="sjf-bsbf-env", bootstrap=0,
                            extra_figures=exp["figures"])
    claims = {row["claim"]: row["agrees"] for row in exp["claims"](agg)}
    assert claims["pollux60: mean JCT of sjf-bsbf/env-both vs the core run"].startswith("yes")
    assert claims["pollux60: mean JCT of sjf-ffs/env-both vs the core run"].startswith("yes")
    assert (tmp_path / "figures" / "paired_mean_jct.png").stat().st_size > 0
    with pytest.raises(ValueError, match="columns one of"):
        env_episode("sjf-bsbf/env-all", {"n_jobs": 4, "nic_gbps": 10.0}, 0)
