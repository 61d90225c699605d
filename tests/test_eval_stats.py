"""Statistics of the evaluation harness against hand-computed values."""
import math

import numpy as np
import pandas as pd
import pytest

from clustergym.eval import stats


@pytest.mark.parametrize("df,q", [(1, 12.7062), (2, 4.3027), (4, 2.7764), (9, 2.2622), (29, 2.0452), (120, 1.9799)])
def test_t_quantile_table(df, q):
    assert stats.t_quantile(0.975, df) == pytest.approx(q, abs=1e-4)


def test_t_quantile_symmetric_and_cdf_inverse():
    assert stats.t_quantile(0.025, 5) == pytest.approx(-stats.t_quantile(0.975, 5))
    assert stats.t_cdf(stats.t_quantile(0.9, 7), 7) == pytest.approx(0.9, abs=1e-10)
    assert stats.t_quantile(0.95, 10) == pytest.approx(1.8125, abs=1e-4)


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


def test_bootstrap_brackets_mean():
    x = np.arange(20, dtype=float)
    m, lo, hi = stats.bootstrap_interval(x, n_boot=500)
    assert m == pytest.approx(9.5) and lo < 9.5 < hi


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
    assert a["ci_half"] == pytest.approx(stats.t_quantile(0.975, 2) * 100 / math.sqrt(3))
    assert a["rel_diff"] == 0.0
    md = stats.to_markdown(stats.wide_table(long, ["mean_jct"]))
    assert md.startswith("| scenario | policy | mean_jct | Δmean_jct |") and "+3.3%" in md
