"""Statistics of the evaluation harness against hand-computed values."""
import math

import numpy as np
import pandas as pd
import pytest

from clustergym.eval import stats


@pytest.mark.parametrize("n,q", [(2, 12.7062), (3, 4.3027), (5, 2.7764), (10, 2.2622), (30, 2.0452)])
def test_t_interval_uses_the_table_quantile(n, q):
    # values 0, 1 repeated: s known in closed form; half width = t_{.975, n-1} s / sqrt(n)
    x = np.arange(n) % 2
    half = stats.t_interval(x)[3]
    assert half == pytest.approx(q * x.std(ddof=1) / math.sqrt(n), rel=1e-4)


def test_t_interval_by_hand():
    # x = 1..5: mean 3, s = sqrt(2.5), t_{.975,4} = 2.776445 -> half = 2.776445 * 1.581139 / 2.236068 = 1.963243
    m, lo, hi, h, n = stats.t_interval([1, 2, 3, 4, 5])
    assert (m, n) == (3.0, 5)
    assert h == pytest.approx(1.963243, abs=1e-6)
    assert (lo, hi) == pytest.approx((3 - 1.963243, 3 + 1.963243), abs=1e-6)
    # two values 10, 14: mean 12, s = 2.828427, half = 12.706205 * 2.828427 / 1.414214 = 25.41241
    m, lo, hi, h, n = stats.t_interval([10.0, 14.0])
    assert h == pytest.approx(25.41241, abs=1e-4)
    # nan ignored, one value: no interval
    m, lo, hi, h, n = stats.t_interval([7.0, float("nan")])
    assert m == 7.0 and n == 1 and math.isnan(h)
    assert stats.t_interval([])[4] == 0


def test_bootstrap_brackets_mean_and_iqm():
    x = np.arange(20, dtype=float)
    m, lo, hi = stats.bootstrap_interval([x], n_boot=500, statistic="mean")
    assert m == pytest.approx(9.5) and lo < 9.5 < hi
    # IQM of 0..19 = mean of 5..14
    m, lo, hi = stats.bootstrap_interval([x], n_boot=500)
    assert m == pytest.approx(9.5) and stats.iqm(x) == pytest.approx(9.5) and lo < 9.5 < hi
    assert stats.iqm([1, 2, 3, 1000]) == pytest.approx(2.5)  # the outlier trimmed
    with pytest.raises(ValueError, match="statistic"):
        stats.bootstrap_interval([x], statistic="median")


def test_bootstrap_is_stratified():
    # two strata far apart: every resample keeps 3 values of each, so the pooled mean varies only within
    # the strata's own spread (a pooled bootstrap would mix them and give a wide interval)
    a, b = [0.0, 1.0, 2.0], [100.0, 101.0, 102.0]
    m, lo, hi = stats.bootstrap_interval([a, b], n_boot=2000, statistic="mean")
    assert m == pytest.approx(51.0) and 50.0 <= lo < 51.0 < hi <= 52.0
    # a one-value stratum is a constant; no stratum to resample gives no interval; nothing gives nan
    m, lo, hi = stats.bootstrap_interval([a, [10.0]], statistic="mean")
    assert m == pytest.approx(3.25) and 2.5 <= lo < hi <= 4.0
    assert np.isnan(stats.bootstrap_interval([[1.0], [2.0]])[1])
    assert np.isnan(stats.bootstrap_interval([[np.nan]])[0])


def test_paired_iqm_pools_scenarios_by_relative_difference():
    rows = []
    for sc, scale in (("small", 1.0), ("big", 1000.0)):
        for seed in range(4):
            rows.append({"scenario": sc, "seed": seed, "policy": "ref", "mean_jct": scale * (10 + seed)})
            rows.append({"scenario": sc, "seed": seed, "policy": "b", "mean_jct": scale * (10 + seed) * 1.2})
    t = stats.paired_iqm(pd.DataFrame(rows), "ref", ["mean_jct"], n_boot=500)
    (r,) = t.to_dict("records")
    assert r["policy"] == "b" and r["n"] == 8 and r["scenarios"] == 2
    assert r["iqm"] == pytest.approx(0.2) and r["iqm_lo"] == pytest.approx(0.2) and r["iqm_hi"] == pytest.approx(0.2)


def test_rel_diff_mlfs():
    assert stats.rel_diff(80.0, 100.0) == pytest.approx(-0.2)
    assert math.isnan(stats.rel_diff(1.0, 0.0))


def test_summarize_reference_and_paired():
    ep = pd.DataFrame({"scenario": ["s"] * 6, "policy": ["a"] * 3 + ["b"] * 3, "seed": [0, 1, 2] * 2,
                       "mean_jct": [100.0, 200.0, 300.0, 110.0, 180.0, 330.0]})
    long = stats.summarize(ep, metrics=["mean_jct"], reference="a")
    b = long[long["policy"] == "b"].iloc[0]
    assert b["mean"] == pytest.approx(620 / 3)
    assert b["rel_diff"] == pytest.approx((620 / 3 - 200) / 200)
    assert b["rel_paired_mean"] == pytest.approx(np.mean([0.1, -0.1, 0.1]))
    a = long[long["policy"] == "a"].iloc[0]
    assert a["ci_half"] == pytest.approx(4.302653 * 100 / math.sqrt(3))  # t_{.975, 2} from a table
    assert a["rel_diff"] == 0.0
    md = stats.to_markdown(stats.wide_table(long, ["mean_jct"]))
    header = [c.strip() for c in md.splitlines()[0].strip("|").split("|")]
    assert header == ["scenario", "policy", "mean_jct", "Δmean_jct"] and "+3.3%" in md


def test_to_markdown_keeps_cells_and_escapes_pipes():
    md = stats.to_markdown(pd.DataFrame({"a": ["0.900", "x|y"], "b": [1, 2]}))
    lines = md.splitlines()
    assert len(lines) == 4 and set(lines[1]) <= set("|:-")
    assert "0.900" in lines[2] and "x\\|y" in lines[3]  # not re-formatted as 0.9; the pipe escaped


def test_episode_means_keep_a_selection_metric_outside_the_table():
    from clustergym.eval.stats import TABLE_METRICS, episode_means, selection_score

    recs = [{"unfinished": 0, "slo_miss_rate": 0.5}, {"unfinished": 0, "slo_miss_rate": 0.7}]
    assert "slo_miss_rate" not in TABLE_METRICS
    means = episode_means(recs, "slo_miss_rate")
    assert means["slo_miss_rate"] == pytest.approx(0.6)
    assert selection_score(means, "slo_miss_rate") == (0.0, pytest.approx(0.6))
