"""Synthetic workload generator (MLFS §4.1 sizes, Philly-fitted durations, Poisson/diurnal arrivals, load)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from clustergym.core import generator as G
from clustergym.core import traces as T
from clustergym.core.workload import JobSpec


def test_fitted_constants_match_bundled_philly():
    philly = T.load_philly()
    mu, sigma = G.fit_lognormal(philly["duration"])
    assert (mu, sigma) == pytest.approx(G.PHILLY_LOGNORMAL, abs=1e-5)
    counts = philly["n_gpus"].value_counts()
    assert G.PHILLY_GPU_WEIGHTS == {g: int(counts[g]) for g in G.GPU_CHOICES}


def test_trace_schema_and_determinism():
    a = G.generate_trace(1000, seed=4, cluster_gpus=80)
    b = G.generate_trace(1000, seed=4, cluster_gpus=80)
    c = G.generate_trace(1000, seed=5, cluster_gpus=80)
    assert a.equals(b) and not a.equals(c)
    T.validate(a)
    assert set(a["n_gpus"]) == set(G.GPU_CHOICES)
    assert a["job_id"].tolist() == list(range(1000))


def test_poisson_mean_interarrival():
    df = G.generate_trace(50_000, seed=1, cluster_gpus=2474, load=1.0)
    gaps = np.diff(np.concatenate([[0.0], df["submit_time"].to_numpy()]))
    assert gaps.mean() == pytest.approx(1.0 / df.attrs["rate"], rel=0.02)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.03)   # exponential: CV = 1


@pytest.mark.parametrize("load", [0.8, 1.2, 1.6])
def test_load_factor_measured(load):
    # Measured offered load = sum(g x d) / (horizon x cluster GPUs); the heavy log-normal tail makes the
    # sample noisy, so bound durations to [1 min, 7 days] (the rate accounts for the truncation exactly).
    df = G.generate_trace(100_000, seed=2, cluster_gpus=960, load=load, min_duration=60, max_duration=7 * 86400)
    assert G.offered_load(df, 960) == pytest.approx(load, rel=0.05)
    assert df.attrs["mean_duration"] == pytest.approx(df["duration"].mean(), rel=0.03)


def test_load_factor_scales_arrival_rate_only():
    lo = G.generate_trace(5000, seed=9, cluster_gpus=80, load=0.8)
    hi = G.generate_trace(5000, seed=9, cluster_gpus=80, load=1.6)
    assert hi.attrs["rate"] == pytest.approx(2 * lo.attrs["rate"])
    assert np.allclose(hi["submit_time"] * 2, lo["submit_time"])
    assert (hi["n_gpus"] == lo["n_gpus"]).all() and (hi["duration"] == lo["duration"]).all()
    assert G.offered_load(hi, 80) == pytest.approx(2 * G.offered_load(lo, 80))


def test_untruncated_lognormal_load_and_mean():
    df = G.generate_trace(200_000, seed=3, cluster_gpus=2474, load=1.0)
    mu, sigma = G.PHILLY_LOGNORMAL
    assert df.attrs["mean_duration"] == pytest.approx(math.exp(mu + sigma ** 2 / 2))
    assert G.offered_load(df, 2474) == pytest.approx(1.0, rel=0.15)


def test_diurnal_arrivals():
    df = G.generate_trace(40_000, seed=6, cluster_gpus=2474, arrival="diurnal", diurnal_amplitude=0.5,
                          diurnal_period=3600.0)
    t = df["submit_time"].to_numpy()
    assert np.all(np.diff(t) >= 0)
    full = t[t < (t[-1] // 3600) * 3600]
    assert len(full) / ((t[-1] // 3600) * 3600) == pytest.approx(df.attrs["rate"], rel=0.03)
    peak = np.sin(2 * np.pi * full / 3600.0) > 0
    assert peak.mean() == pytest.approx((math.pi + 1.0) / (2 * math.pi), abs=0.02)   # (pi + 2A) / 2pi


def test_gpu_weights_and_bootstrap_durations():
    df = G.generate_trace(20_000, seed=8, cluster_gpus=80, gpu_weights=G.PHILLY_GPU_WEIGHTS, duration="philly")
    assert (df["n_gpus"] == 1).mean() == pytest.approx(76627 / sum(G.PHILLY_GPU_WEIGHTS.values()), abs=0.01)
    philly = set(T.load_philly()["duration"])
    assert set(df["duration"]) <= philly
    with pytest.raises(ValueError):
        G.generate_trace(10, seed=0, cluster_gpus=8, gpu_weights=[1, 2])
    with pytest.raises(ValueError):
        G.generate_trace(10, seed=0, cluster_gpus=8, arrival="bursty")


def test_generate_job_specs(monkeypatch):
    pytest.importorskip("clustergym.core.catalogue_data")
    a = G.generate(300, seed=12, cluster_gpus=80, load=1.2)
    b = G.generate(300, seed=12, cluster_gpus=80, load=1.2)
    assert a == b and all(isinstance(s, JobSpec) for s in a)
    assert {s.n_gpus for s in a} <= set(G.GPU_CHOICES)
    assert all(s.deadline > s.submit_time and s.max_iterations >= 1 for s in a)
    assert G.generate(300, seed=13, cluster_gpus=80, load=1.2) != a
