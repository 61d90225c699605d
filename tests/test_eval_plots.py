"""Figures of a sweep read back: resolution, the PDF beside the PNG, units, styles, and the one clipping rule."""
import numpy as np
import pandas as pd
import pytest
from matplotlib.container import ErrorbarContainer
from PIL import Image

from clustergym.eval import plots

H = 3600.0


def _long(scenario_cols: dict) -> pd.DataFrame:
    """Two policies, raw 95 % intervals that leave the feasible ranges (JCT and traffic below 0, the deadline
    ratio above 1), and overload counts whose ticks would need an offset."""
    rows = []
    for p, shift in (("a", 0.0), ("b", 1.0)):
        rows += [
            {"policy": p, "metric": "mean_jct", "mean": (1 + shift) * H, "ci_lo": -2 * H, "ci_hi": (4 + shift) * H},
            {"policy": p, "metric": "deadline_ratio", "mean": 0.9, "ci_lo": 0.6, "ci_hi": 1.2},
            {"policy": p, "metric": "bandwidth_mb", "mean": 5e5, "ci_lo": -1e5, "ci_hi": 9e5 + shift},
            {"policy": p, "metric": "overload_occurrences", "mean": 1e9 + shift, "ci_lo": 1e9 - 1, "ci_hi": 1e9 + 2}]
    return pd.DataFrame([{**scenario_cols, **r} for r in rows])


@pytest.fixture
def figures(monkeypatch):
    """The matplotlib figures the plotting functions save (still open for inspection)."""
    seen = []
    save = plots._save

    def keep(fig, path):
        seen.append(fig)
        return save(fig, path)

    monkeypatch.setattr(plots, "_save", keep)
    return seen


def _panel(fig, title: str):
    (ax,) = [a for a in fig.axes if a.get_title().startswith(title)]
    return ax


def _whiskers(ax) -> list[tuple[float, float]]:
    """(low, high) ends of every error bar of the panel, in the panel's units."""
    out = []
    for c in ax.containers:
        if not isinstance(c, ErrorbarContainer):  # a bar chart's bars (their error bars are a container too)
            continue
        for seg in c.lines[2][0].get_segments():
            out.append((float(seg[0][1]), float(seg[1][1])))
    return out


def test_clipping_rule_units_and_files(tmp_path, figures):
    path = plots.metric_bars(_long({"scenario": "s"}), "s", tmp_path / "metrics_s.png", ["a", "b"])
    assert path == tmp_path / "metrics_s.png"
    png = Image.open(path)
    assert plots.DPI >= 150 and png.info["dpi"][0] == pytest.approx(plots.DPI, abs=0.5) and png.size[0] > 1500
    assert (tmp_path / "metrics_s.pdf").read_bytes()[:5] == b"%PDF-"
    (fig,) = figures
    jct = _whiskers(_panel(fig, "mean JCT (h)"))
    assert jct == [(0.0, 4.0), (0.0, 5.0)]  # hours; -2 h clipped to 0
    assert _whiskers(_panel(fig, "deadline guarantee ratio")) == [(0.6, 1.0), (0.6, 1.0)]  # 1.2 clipped to 1
    traffic = _whiskers(_panel(fig, "cross-server traffic (GB)"))  # 900 GB: below 1 TB, so GB
    assert traffic[0] == (0.0, 900.0)
    for ax in fig.axes:  # no offset or ×10^k text above a panel (its title's place)
        assert ax.yaxis.get_offset_text().get_text() == ""
    assert "1000000000" in [t.get_text().replace(",", "") for t in _panel(fig, "overload").get_yticklabels()]


def test_load_figure_uses_the_same_rule(tmp_path, figures):
    long = pd.concat([_long({"scenario_base": "s", "load": x}) for x in (1.0, 2.0)], ignore_index=True)
    long.loc[long["metric"] == "bandwidth_mb", ["mean", "ci_hi"]] = [2e6, 3e6]  # 2 TB: shown in TB
    assert plots.load_curves(long, "s", tmp_path / "load_s.png", ["a", "b"]) is not None
    assert (tmp_path / "load_s.pdf").exists()
    (fig,) = figures
    assert {w[0] for w in _whiskers(_panel(fig, "mean JCT (h)"))} == {0.0}
    assert {w[1] for w in _whiskers(_panel(fig, "deadline guarantee ratio"))} == {1.0}
    assert {w for w in _whiskers(_panel(fig, "cross-server traffic (TB)"))} == {(0.0, 3.0)}
    # equal values of the two policies stand side by side: their points are shifted apart on the load axis
    xs = {c.get_label(): c.lines[0].get_xdata().astype(float) for c in _panel(fig, "mean JCT").containers}
    assert len(xs) == 2 and not np.allclose(xs["a"], xs["b"])


def test_x_curves_draw_each_policy_in_x_order_shifted_sideways_with_clipped_intervals(tmp_path, figures):
    # rows out of x order; policy b's interval leaves the feasible range (JCT below 0)
    d = pd.DataFrame([{"policy": "b", "x": 2.0, "mean": 2 * H, "ci_lo": H, "ci_hi": 3 * H},
                      {"policy": "a", "x": 2.0, "mean": 3 * H, "ci_lo": 2 * H, "ci_hi": 4 * H},
                      {"policy": "b", "x": 1.0, "mean": H, "ci_lo": -H, "ci_hi": 2 * H},
                      {"policy": "a", "x": 1.0, "mean": 2 * H, "ci_lo": H, "ci_hi": 3 * H}])
    assert plots.x_curves([("mean_jct", "mean JCT", "h", d)], "xi", "t", tmp_path / "x.png", ["a", "b"]) is not None
    (fig,) = figures
    ax = _panel(fig, "mean JCT (h)")
    lines = [c.lines[0] for c in ax.containers]
    step = 0.015  # of the x range 1
    assert [c.get_label() for c in ax.containers] == ["a", "b"]
    assert list(lines[0].get_xdata()) == pytest.approx([1 - step / 2, 2 - step / 2])
    assert list(lines[1].get_xdata()) == pytest.approx([1 + step / 2, 2 + step / 2])
    assert list(lines[1].get_ydata()) == pytest.approx([1.0, 2.0])  # hours, in x order
    assert _whiskers(ax)[2] == pytest.approx((0.0, 2.0))  # b at x=1: -1 h clipped to 0


def test_identical_policies_get_distinct_styles(tmp_path, figures):
    jobs = pd.DataFrame({"scenario": "s", "policy": ["a"] * 5 + ["b"] * 5, "jct": [1, 2, 3, 4, 5] * 2})
    plots.jct_cdf(jobs, "s", tmp_path / "cdf.png", ["a", "b"])
    lines = figures[0].axes[0].get_lines()
    assert [ln.get_label() for ln in lines] == ["a", "b"]
    assert np.array_equal(lines[0].get_ydata(), lines[1].get_ydata())  # the same curve ...
    assert lines[0].get_marker() != lines[1].get_marker()  # ... told apart by marker and line style
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    assert lines[0].get_markevery() != lines[1].get_markevery()  # markers at other points of the curve
    styles = plots.styles([str(i) for i in range(70)])
    assert len({(s["marker"], str(s["linestyle"])) for s in styles.values()}) == 70


def test_clipped_errors_rule():
    err = plots.clipped_errors("mean_jct", [10.0, 5.0], [-3.0, np.nan], [12.0, np.nan])
    assert err.tolist() == [[10.0, 0.0], [2.0, 0.0]]  # below 0 clipped; no interval, no bar
    assert plots.clipped_errors("accuracy_ratio", [0.9], [0.8], [1.3]).ravel() == pytest.approx([0.1, 0.1])
    assert plots.clipped_errors("episode_return", [-5.0], [-9.0], [-1.0]).tolist() == [[4.0], [4.0]]
