"""Contended workloads: arrival compression (EnvConfig.load), MLFS §4.1's setting, the contended default, the
layering of a registered scenario's fields, the queued-time metric and the characterisation command."""
from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym.config import ConfigError, EnvConfig
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.mapping import MLFS_GPU_CHOICES, MLFS_MODEL_WEIGHTS, MappingConfig, reference_run_time, \
    to_job_specs
from clustergym.core.traces import arrival_span, compress_arrivals, load_philly, window, window_offered_load
from clustergym.eval import scenarios as characterise
from clustergym.scenarios import MLFS_X, SCENARIOS, WEEK_S, make_env, mlfs_id, scenario_fields, trace_part
from helpers import cluster, job, markdown_rows, models

DEFAULT = "clustergym/GPUCluster-v1"
LIGHT = "clustergym/GPUClusterLight-v1"


# ------------------------------------------------------------------ offered load and compression, by hand
def test_offered_load_and_compression_by_hand():
    # three jobs at t = 0, 100, 300 s; GPUs 1, 2, 4; reference run times 100, 50, 25 s: 100 GPU-s each
    t, gpus, run = [0.0, 100.0, 300.0], np.array([1, 2, 4]), np.array([100.0, 50.0, 25.0])
    assert arrival_span(t) == pytest.approx(3 * 300 / 2)  # n mean gaps: 3 x 150 s = 450 s
    assert window_offered_load(t, gpus * run, cluster_gpus=2) == pytest.approx(300 / (2 * 450))  # = 1/3
    new = compress_arrivals(t, gpus * run, 2, load=1.0)  # gaps scaled by (1/3) / 1
    np.testing.assert_allclose(new, [0.0, 100 / 3, 100.0])
    assert window_offered_load(new, gpus * run, 2) == pytest.approx(1.0)
    # the first arrival stays; a load below the window's own stretches: span 2 x 10 s, 20 GPU-s on 1 GPU = load
    # 1, so load 0.5 doubles the gap
    np.testing.assert_allclose(compress_arrivals([50.0, 60.0], [10.0, 10.0], 1, load=0.5), [50.0, 70.0])


@pytest.mark.parametrize("bad", [0, -1.0, math.nan, math.inf, -math.inf, True, "1", None])
def test_compression_refuses_a_load_that_is_not_finite_and_positive(bad):
    with pytest.raises(ValueError, match="load must be a finite number > 0"):
        compress_arrivals([0.0, 10.0], [1.0, 1.0], 1, bad)


def test_compression_needs_two_distinct_arrivals():
    with pytest.raises(ValueError, match="all arrive at t = 5 s"):
        compress_arrivals([5.0, 5.0, 5.0], [1.0, 1.0, 1.0], 4, 1.0)
    with pytest.raises(ValueError, match="at least two arrivals"):
        compress_arrivals([5.0], [1.0], 4, 1.0)


def test_generated_trace_at_load_x_measures_x_with_the_window_definition():
    from clustergym.core.generator import generate_trace, offered_load

    df = generate_trace(20_000, seed=3, cluster_gpus=80, load=1.3, max_duration=7 * 86400.0)
    work = (df["n_gpus"] * df["duration"]).to_numpy()
    assert window_offered_load(df["submit_time"], work, 80) == offered_load(df, 80)
    assert offered_load(df, 80) == pytest.approx(1.3, rel=0.05)


# ------------------------------------------------------------------ mapping: t_e and MLFS GPU counts
def test_reference_run_time_is_the_t_e_of_the_mapped_deadline():
    mlfs80 = make_env(LIGHT).unwrapped._cluster
    df = window(load_philly(), 1000.0, n_jobs=40)
    cfg = MappingConfig(deadline_range_h=(0.0, 0.0))  # t_r = 0: deadline = submit + 1.1 t_e exactly
    for sp in to_job_specs(df, 7, cfg, mlfs80):
        assert sp.deadline - sp.submit_time == pytest.approx(1.1 * reference_run_time(sp, cfg, mlfs80), rel=1e-12)


def test_gpu_choices_redraws_counts_and_no_other_draw():
    df = window(load_philly(), 0.0, n_jobs=600)
    own = to_job_specs(df, 11)
    mlfs = to_job_specs(df, 11, MappingConfig(gpu_choices=MLFS_GPU_CHOICES))
    counts = np.array([s.n_gpus for s in mlfs])
    assert set(counts) == set(MLFS_GPU_CHOICES)  # all six drawn, nothing else
    assert np.bincount(np.searchsorted(MLFS_GPU_CHOICES, counts)).min() > 600 / 6 * 0.6  # about uniform
    assert all(s.n_partitions * s.n_replicas == s.n_gpus for s in mlfs)
    for a, b in zip(own, mlfs):  # drawn after every other field: the rest of the mapping is unchanged
        assert (a.model, a.sync, a.urgency, a.data_size_mb, a.comm_ps_mb) == (b.model, b.sync, b.urgency,
                                                                              b.data_size_mb, b.comm_ps_mb)
    for bad in ([], [0, 2], [1.5], "1,2"):
        with pytest.raises(ValueError, match="gpu_choices"):
            MappingConfig(gpu_choices=bad)


# ------------------------------------------------------------------ the env's load
def _specs(env_id, seed, **kw):
    env = make_env(env_id, kw)
    _, info = env.reset(seed=seed)
    return env, [j.spec for j in env.unwrapped.sim.jobs], info["episode"]


def test_env_load_sets_the_windows_offered_load_and_keeps_deadlines_relative():
    kw = dict(window_jobs=40, split="test")
    env, own, ep0 = _specs(LIGHT, 3, **kw)
    env, fast, ep = _specs(LIGHT, 3, load=2.5, **kw)
    assert "offered_load" not in ep0 and ep["window_start"] == ep0["window_start"]
    assert [s.job_id for s in own] == [s.job_id for s in fast]  # same jobs, same order
    u = env.unwrapped
    work = np.array([s.n_gpus * reference_run_time(s, None, u._cluster) for s in fast])
    t = np.array([s.submit_time for s in fast])
    assert window_offered_load(t, work, 80) == pytest.approx(2.5) and ep["offered_load"] == pytest.approx(2.5)
    t_own = np.array([s.submit_time for s in own])
    assert ep["trace_offered_load"] == pytest.approx(window_offered_load(t_own, work, 80))
    assert ep["arrival_scale"] == pytest.approx(ep["trace_offered_load"] / 2.5)
    np.testing.assert_allclose(t - t[0], (t_own - t_own[0]) * ep["arrival_scale"], rtol=1e-9, atol=1e-6)
    for a, b in zip(own, fast):  # everything but the submit time is the job's own; deadlines move with it
        assert b.deadline - b.submit_time == pytest.approx(a.deadline - a.submit_time)
        assert (a.model, a.n_gpus, a.max_iterations, a.urgency) == (b.model, b.n_gpus, b.max_iterations, b.urgency)


@pytest.mark.parametrize("bad", [0, -0.5, math.nan, math.inf, "high"])
def test_env_load_must_be_finite_and_positive(bad):
    with pytest.raises(ConfigError, match=r"^load must be ") as err:
        EnvConfig(load=bad)
    assert err.value.field == "load"


def test_env_load_combinations_that_cannot_work_are_named():
    with pytest.raises(ConfigError, match="generator.load"):
        EnvConfig(workload="generator", load=1.0)
    with pytest.raises(ConfigError, match="load needs window_jobs >= 2"):
        EnvConfig(window_jobs=1, load=1.0)
    with pytest.raises(ConfigError, match="window_period must be"):
        EnvConfig(window_period=0)
    with pytest.raises(ConfigError, match="job_specs= are used as given"):
        clustergym.gym_env.ClusterEnv(load=1.0, job_specs=[job()])


def test_jobs_that_cannot_fit_are_left_out_counted_and_the_rest_compressed():
    # tiny-8 (8 GPUs) with MLFS's GPU counts: the 16- and 32-GPU jobs can never start
    env, specs, ep = _specs(DEFAULT, 0, cluster="tiny-8", window_jobs=40)
    mapping = MappingConfig(gpu_choices=MLFS_GPU_CHOICES)
    drawn = to_job_specs(window(trace_part(None, None, "train", 0.5), ep["window_start"], n_jobs=40),
                         ep["mapping_seed"], mapping, env.unwrapped._cluster)
    assert ep["dropped_jobs"] == [s.job_id for s in drawn if s.n_gpus > 8]
    assert [s.job_id for s in specs] == [s.job_id for s in drawn if s.n_gpus <= 8]
    work = [s.n_gpus * reference_run_time(s, mapping, env.unwrapped._cluster) for s in specs]
    assert window_offered_load([s.submit_time for s in specs], work, 8) == pytest.approx(1.5)
    # max_job_gpus caps the redrawn counts too
    _, specs4, ep4 = _specs(DEFAULT, 0, cluster="tiny-8", window_jobs=40, max_job_gpus=4)
    assert ep4["dropped_jobs"] == [s.job_id for s in drawn if s.n_gpus > 4] and max(s.n_gpus for s in specs4) == 4


def test_a_window_without_arrival_span_keeps_its_times_and_says_so():
    # tiny-8 keeps 2 of this held-out window's 6 jobs (the others ask for 16 or 32 GPUs), both submitted at 354 s
    kw = {"split": "test", "window_jobs": 6, "cluster": "tiny-8"}
    with pytest.warns(UserWarning, match=r"load=1.5 not applied .* all arrive at t = 354 s"):
        env, specs, ep = _specs(DEFAULT, 0, **kw)
    _, own, _ = _specs(DEFAULT, 0, load=None, **kw)
    assert [s.submit_time for s in specs] == [s.submit_time for s in own] == [354.0, 354.0]
    assert ep["offered_load"] == math.inf and ep["arrival_scale"] == 1.0 and "354 s" in ep["load_not_applied"]
    rec = characterise.characterise(DEFAULT, kw, [0], "fifo", None)[0]
    assert rec["jobs"] == 2 and not rec["truncated"]


@pytest.mark.timeout(300)
def test_a_pathological_load_finishes():
    # x = 50: the window's arrivals nearly coincide; the episode still ends in a bounded number of steps, by
    # termination or at the 30-day horizon (FIFO runs every job's iterations, and Philly has jobs of weeks)
    env = make_env(DEFAULT, {"window_jobs": 30, "load": 50.0, "split": "test"})
    rec = characterise.characterise(DEFAULT, {"window_jobs": 30, "load": 50.0, "split": "test"}, [1], "fifo", None)
    assert rec[0]["offered_load"] == pytest.approx(50.0)
    assert rec[0]["agent_steps"] < 10_000
    assert rec[0]["unfinished"] == 0 or rec[0]["truncated"]
    env.close()


# ------------------------------------------------------------------ scenarios and their layering
def test_registered_fields_are_a_layer_under_config_and_keywords():
    u = gym.make(DEFAULT, mapping={"ps_probability": 0.0}).unwrapped
    assert u.config.mapping == {"gpu_choices": list(MLFS_GPU_CHOICES), "ps_probability": 0.0}
    assert (u.config.window_jobs, u.config.load) == (100, 1.5)
    u = gym.make(DEFAULT, config={"window_jobs": 7, "cluster": "tiny-8"}, load=None).unwrapped
    assert (u.config.window_jobs, u.config.cluster, u.config.load) == (7, "tiny-8", None)
    assert u.config.mapping["gpu_choices"] == list(MLFS_GPU_CHOICES)
    scenario_fields(DEFAULT)["mapping"]["gpu_choices"] = None  # a copy: the registry is untouched
    assert SCENARIOS[DEFAULT]["mapping"]["gpu_choices"] == list(MLFS_GPU_CHOICES)


def test_light_scenario_is_the_envconfig_defaults():
    assert gym.make(LIGHT).unwrapped.config == EnvConfig()


def test_mlfs_scenarios_follow_section_4_1():
    assert [mlfs_id(x) for x in MLFS_X] == ["clustergym/MLFS80-x0.25-v1", "clustergym/MLFS80-x0.5-v1",
                                            "clustergym/MLFS80-x1-v1", "clustergym/MLFS80-x2-v1",
                                            "clustergym/MLFS80-x3-v1"]
    assert [SCENARIOS[mlfs_id(x)]["window_jobs"] for x in MLFS_X] == [155, 310, 620, 1240, 1860]
    part = trace_part(None, None, "train", 0.5)
    t = part["submit_time"].to_numpy()
    n_weeks = int((t[-1] - t[0]) // WEEK_S)
    starts = set()
    for seed in range(4):
        env, specs, ep = _specs(mlfs_id(0.25), seed)
        k = ep["window_period_index"]
        assert 0 <= k < n_weeks and ep["window_start"] == pytest.approx(t[0] + k * WEEK_S)
        starts.add(k)
        first = part[part["submit_time"] >= ep["window_start"]].iloc[0]
        assert specs[0].job_id == int(first["job_id"]) and len(specs) == 155  # the week's first 155 jobs
        assert {s.n_gpus for s in specs} <= set(MLFS_GPU_CHOICES) and len({s.n_gpus for s in specs}) == 6
        assert {s.model for s in specs} <= set(MLFS_MODEL_WEIGHTS)
        assert all(s.n_partitions == 1 for s in specs if s.model == "SVM")  # SVM: data parallel only
    assert len(starts) > 1


def test_unisched64_is_mix1_on_unischeds_testbed():
    # the same workload, mapping, leases and reward as UniSched-v1, on the cluster UniSched ran MIX1 on
    for v in ("1", "2"):
        testbed, mix1 = scenario_fields(f"clustergym/UniSched64-v{v}"), scenario_fields(f"clustergym/UniSched-v{v}")
        assert testbed.pop("cluster") == "unisched-64" and mix1.pop("cluster") == "mlfs-80"
        assert testbed == mix1
    env = gym.make("clustergym/UniSched64-v2")
    env.reset(seed=0)
    sim = env.unwrapped.sim
    assert sim.n_jobs == 100 and sim.cluster.n_gpus == 64 and set(sim.cluster.nic_gbps.tolist()) == {200.0}


def test_default_is_contended_and_light_is_not():
    heavy = characterise.characterise(DEFAULT, {"split": "test"}, [10_000, 10_001, 10_002], "fifo", None)
    light = characterise.characterise(LIGHT, {"split": "test"}, [10_000, 10_001, 10_002], "fifo", None)
    assert all(r["offered_load"] == pytest.approx(1.5) for r in heavy)
    assert all(r["peak_demand"] > 1.5 for r in heavy) and all(r["peak_demand"] < 1 for r in light)
    # FIFO's jobs wait for GPUs on the default (measured 0.30-0.41 h on average), barely on the light one
    assert min(r["mean_waiting_h"] for r in heavy) > 0.2 > 0.05 > max(r["mean_waiting_h"] for r in light)


# ------------------------------------------------------------------ queued time and the characterisation
def test_queued_time_counts_waits_beyond_one_tick():
    # one GPU, two 100-s jobs at t = 0; the policy runs one job at a time. A: 0-100 s; B waits for the tick at
    # 120 s and runs 120-220 s. B is queued from 0, held back from 60 s (one tick) to 120 s: 60 of 220 s.
    sim = Simulator(cluster(1, gpus=1), [job(0, iters=100), job(1, iters=100)],
                    SimConfig(usage_change_mean_s=0.0), seed=0, models=models)

    def one_at_a_time(s):
        if not any(j.n_placed for j in s.jobs) and s.ready_tasks():
            s.place(s.ready_tasks()[0].tid, 0)
    summary = sim.run(one_at_a_time)
    assert [r["first_start"] for r in sim.job_records()] == [0.0, 120.0]
    assert sim.metrics.queued_seconds == pytest.approx(60.0)
    assert summary["queued_fraction"] == pytest.approx(60.0 / 220.0)


def test_peak_demand_by_hand():
    # [0, 10) x 2 GPUs, [5, 15) x 3, [10, 20) x 4: the peak is 3 + 4 = 7 at t = 10 (the first has ended)
    assert characterise.peak_demand([0, 5, 10], [10, 10, 10], [2, 3, 4]) == 7
    assert characterise.peak_demand([0, 0], [5, 5], [1, 1]) == 2


def test_characterisation_command_writes_its_table(tmp_path, capsys):
    out = tmp_path / "t.md"
    assert characterise.main(["--scenarios", f"tiny={LIGHT}:cluster=tiny-8,window_jobs=6", "--seeds", "2",
                              "--out", str(out)]) == 0
    rows = markdown_rows(out.read_text())
    assert rows[0][:3] == ["scenario", "jobs", "offered load"] and rows[1][0] == "tiny"
    assert "python -m clustergym.eval.scenarios --scenarios" in out.read_text()
    assert str(out) in capsys.readouterr().out


def test_a_v1_id_is_not_called_out_of_date_and_other_deprecations_still_show():
    # a fresh interpreter with Python's and gymnasium's own warning filters, as a user's script has
    import subprocess
    import sys

    code = ("import warnings, gymnasium as gym, clustergym\n"
            "gym.make('clustergym/GPUCluster-v1').close()\n"
            "warnings.warn('some other deprecation', DeprecationWarning)\n")
    err = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stderr
    assert "out of date" not in err, err
    assert "some other deprecation" in err
