"""The bad-input table of issue 20: every bad input of its "Why" list, each asserting its named error (or
named warning) and that the message names the field, file/row or job at fault. Part of the reliability suite
(``make test-slow`` runs it with the slow tests; it is fast, so the default suite runs it too)."""
from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from clustergym.baselines.base import run
from clustergym.baselines.simple import FIFO
from clustergym.config import ConfigError, EmptyEpisodeError, EnvConfig
from clustergym.core.engine import SimConfig, SimConfigError, Simulator, StallWarning, UnplaceableJob
from clustergym.core.presets import ClusterFileError, load_cluster
from clustergym.core.trace_schema import TraceError, TraceWarning
from clustergym.core.traces import load_csv
from clustergym.eval import specs
from clustergym.scenarios import make_env
from clustergym.train.rundir import ResumeError, RunFolder, RunLock, RunLocked
from clustergym.window import InvalidAction
from helpers import MODELS, cluster, job, models, toy_model

pytestmark = pytest.mark.reliability
NAN, INF = float("nan"), float("inf")
TINY = {"cluster": "tiny-8", "window_jobs": 4}
COLS = {"columns": {"job_id": "id", "submit_time": "t", "n_gpus": "g", "duration": "d"}}


def env_config(**kw):
    return lambda tmp: EnvConfig(**kw)


def step_with(action, mode):
    def go(tmp):
        env = make_env("clustergym/GPUCluster-v1", **TINY, invalid_action=mode)
        env.reset(seed=0)
        env.step(action)
    return go


def episode(**kw):
    return lambda tmp: make_env("clustergym/GPUClusterLight-v1", **kw).reset(seed=0)


def cluster_file(text, name="c.yaml"):
    def go(tmp):
        p = tmp / name
        p.write_text(text)
        return load_cluster(p)
    return go


def csv(text, mapping=COLS, **kw):
    def go(tmp):
        p = tmp / "jobs.csv"
        p.write_text(text)
        return load_csv(p, mapping, **kw)
    return go


def never_placeable(tmp):
    MODELS["cpu20"] = toy_model("cpu20", cpu=20.0)
    try:  # 3 tasks of 20 cores on 2 x 32-core servers: never two on one server
        Simulator(cluster(2), [job(5, model="cpu20", R=3)], models=models)
    finally:
        del MODELS["cpu20"]


def fifo_spin(tmp):
    sim = Simulator(cluster(1, 4), [job(R=8)], SimConfig(), models=models)  # 8 tasks, FIFO: one per GPU
    run(sim, FIFO())
    assert sim.stalled


def colliding_scenarios(tmp):
    sc = [specs.parse_scenario("clustergym/GPUCluster-v1:window_jobs=10"),
          specs.parse_scenario("clustergym/GPUCluster-v1:window_jobs=60")]
    specs.make_runs([specs.parse_policy("fifo")], specs.expand_loads(sc, None), [0])


def resume_without_state(tmp):
    RunFolder(tmp / "run").load_state()


def resume_truncated_state(tmp):
    (tmp / "run").mkdir()
    (tmp / "run" / "state.json").write_text('{"best_score": [0.0, ')
    RunFolder(tmp / "run").load_state()


def second_run_in_live_folder(tmp):
    with RunLock(tmp):
        RunLock(tmp).acquire()


# (id, what to do with a tmp folder, the named error or warning, a regex the message must match)
CASES = [
    # configuration: NaN / inf, negative costs, absurd values, unordered ranges
    ("time_scale NaN", env_config(time_scale=NAN), ConfigError, r"time_scale must be a number, not NaN"),
    ("time_scale inf", env_config(time_scale=INF), ConfigError, r"time_scale must be finite"),
    ("bytes_scale NaN", env_config(bytes_scale=NAN), ConfigError, r"bytes_scale must be a number, not NaN"),
    ("bytes_scale 0", env_config(bytes_scale=0.0), ConfigError, r"bytes_scale must be > 0"),
    ("reward_weights NaN", env_config(reward_weights=(NAN, 1, 1, 1, 1, 0, 0)), ConfigError,
     r"reward_weights\[jct\] must be a number, not NaN"),
    ("reward_weights inf", env_config(reward_weights=(1, INF, 1, 1, 1, 0, 0)), ConfigError,
     r"reward_weights\[deadline\] must be finite"),
    ("reward_weights negative", env_config(reward_weights=(1, 1, -1, 1, 1, 0, 0)), ConfigError,
     r"reward_weights\[bandwidth\] must be >= 0"),
    ("reward_weights all 0", env_config(reward_weights=(0, 0, 0, 0, 0, 0, 0)), ConfigError, r"reward_weights are all 0"),
    ("invalid_penalty NaN", env_config(invalid_penalty=NAN), ConfigError, r"invalid_penalty must be a number, not NaN"),
    ("invalid_penalty positive", env_config(invalid_penalty=0.5), ConfigError, r"invalid_penalty must be <= 0"),
    ("window_jobs 2.5", env_config(window_jobs=2.5), ConfigError, r"window_jobs must be an integer"),
    ("window_jobs 1e9", env_config(window_jobs=10 ** 9), ConfigError, r"window_jobs must be <= 1e\+06"),
    ("window 1e6 x 1e6 actions", env_config(window_size=10 ** 6, n_destinations=10 ** 6), ConfigError,
     r"window_size x 1000004 columns \+ 1 = .* actions exceeds 1048576"),
    ("window_start NaN", env_config(window_start=NAN), ConfigError, r"window_start must be a number, not NaN"),
    ("window_start negative", env_config(window_start=-5.0), ConfigError, r"window_start must be >= 0"),
    ("max_sim_time NaN", env_config(max_sim_time=NAN), ConfigError, r"max_sim_time must be a number, not NaN"),
    ("preemption 'yes'", env_config(preemption="yes"), ConfigError, r"preemption must be True or False"),
    ("mapping_seed -1", env_config(mapping_seed=-1), ConfigError, r"mapping_seed must be >= 0"),
    ("negative cost (sim)", env_config(sim={"migration_base_s": -5.0}), ConfigError,
     r"sim: SimConfig\.migration_base_s must be >= 0"),
    ("usage_min > usage_max", env_config(sim={"usage_min": 1.2, "usage_max": 1.1}), ConfigError,
     r"sim: SimConfig\.usage_max must be >= usage_min"),
    ("absurd threshold", env_config(sim={"overload_threshold": 5.0}), ConfigError,
     r"sim: SimConfig\.overload_threshold must be <= 1"),
    ("negative cost (core)", lambda tmp: SimConfig(suspend_s=-1.0), SimConfigError, r"SimConfig\.suspend_s must be >= 0"),
    ("negative volumes (mapping)", env_config(mapping={"comm_mb": (-50.0, -10.0)}), ConfigError,
     r"mapping: comm_mb must be \(low, high\) with 0 <= low <= high"),
    ("NaN deadline factor (mapping)", env_config(mapping={"deadline_factor": NAN}), ConfigError,
     r"mapping: deadline_factor must be a number, not NaN"),
    ("no horizon, no stall timeout", lambda tmp: SimConfig(stall_timeout_s=INF), SimConfigError,
     r"SimConfig\.stall_timeout_s must be finite when horizon_s is infinite"),
    # actions: integers only, in every mode
    ("step(-0.5) penalty", step_with(-0.5, "penalty"), InvalidAction, r"integer"),
    ("step(-0.5) raise", step_with(-0.5, "raise"), InvalidAction, r"integer"),
    ("step(None) penalty", step_with(None, "penalty"), InvalidAction, r"integer"),
    ("step(None) raise", step_with(None, "raise"), InvalidAction, r"integer"),
    # episodes without jobs
    ("window start outside the trace", episode(**TINY, window_start=1e12), EmptyEpisodeError,
     r"empty episode: window_start=1000000000000\.0 s selects no job"),
    ("cluster that drops every job", episode(cluster="tiny-8", workload="generator", window_jobs=1,
                                             generator={"gpu_choices": [8]}, mapping={"model_weights": {"A3C": 1}}),
     EmptyEpisodeError, r"empty episode: all 1 jobs of the episode were left out"),
    # cluster files
    ("cluster file count 1e8", cluster_file('{"servers": [{"gpu_type": "V100", "n_gpus": 4, "cpu_cores": 32, '
                                            '"memory_gb": 244, "count": 1e8}]}', "c.json"), ClusterFileError,
     r"c\.json: servers\[0\]\.count: the file would hold 1e\+08 servers, more than the 100000 allowed"),
    ("cluster file 1000 GPUs per server", cluster_file("servers:\n- {gpu_type: V100, n_gpus: 1000, cpu_cores: 32, "
                                                       "memory_gb: 244}\n"), ClusterFileError,
     r"servers\[0\]\.n_gpus: at most 32 GPUs per server"),
    # traces
    ("header-only trace", csv("id,t,g,d\n"), TraceError, r"jobs\.csv: no data rows"),
    ("duplicate job ids", csv("id,t,g,d\na,0,1,10\na,5,1,10\n", checks="error"), TraceError,
     r"jobs\.csv: data row 2 \(line 3\): job id 'a' already used by data row 1"),
    ("duplicated rows", csv("id,t,g,d\na,0,1,10\na,0,1,10\n", checks="error"), TraceError,
     r"data row 2 \(line 3\): identical to data row 1"),
    ("unsorted rows", csv("id,t,g,d\na,9,1,10\nb,0,1,10\n", checks="error"), TraceError,
     r"data row 2 \(line 3\): submitted before an earlier row"),
    ("duplicate ids, counted", csv("id,t,g,d\na,0,1,10\na,5,1,10\n"), TraceWarning, r"1 of 2 rows: duplicate ids"),
    ("unattainable deadlines", csv("t,g,d,dl\n0,1,100,50\n", {"columns": {"submit_time": "t", "n_gpus": "g",
                                                                         "duration": "d", "deadline": "dl"}}),
     TraceWarning, r"1 of 1 rows: unattainable deadlines"),
    # the core: jobs no policy could place, runs that could never end
    ("job no policy could place", never_placeable, UnplaceableJob, r"job 5 \(cpu20\): its 3 tasks can never hold"),
    ("job wider than FIFO can place", fifo_spin, StallWarning, r"run stalled: no job progressed"),
    # sweeps and training state
    ("scenarios writing the same files", colliding_scenarios, specs.SweepSpecError,
     r"two runs would write the same files .*window_jobs: 10 -> 60"),
    ("resume without state", resume_without_state, ResumeError, r"state\.json not found"),
    ("resume with a truncated state", resume_truncated_state, ResumeError, r"state\.json is unreadable"),
    ("a second run in a live folder", second_run_in_live_folder, RunLocked, r"in use by a live run"),
]


@pytest.mark.parametrize("case, do, named, pattern", CASES, ids=[c[0] for c in CASES])
def test_bad_input_gets_its_named_error(tmp_path, case, do, named, pattern):
    if issubclass(named, Warning):
        with pytest.warns(named, match=pattern):
            do(tmp_path)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", TraceWarning)
            with pytest.raises(named, match=pattern):
                do(tmp_path)


@pytest.mark.parametrize("field, value", [
    ("time_scale", NAN), ("bytes_scale", -1.0), ("invalid_penalty", 1.0), ("window_jobs", 0), ("window_size", 1.5),
    ("n_destinations", 0), ("rows_per_job", 0), ("migrate_rows", -1), ("running_rows", -1), ("loss_history", 0),
    ("max_gpus_per_server", 0), ("max_job_gpus", 0), ("max_steps", 0), ("render_history", 0),
    ("train_fraction", NAN), ("train_fraction", 1.0), ("window_start", INF), ("vector_reward", 1),
    ("allow_empty_episode", "no"), ("split", "validation"), ("workload", "alibaba"), ("invalid_action", "ignore"),
])
def test_each_env_config_field_names_itself(field, value):
    with pytest.raises(ConfigError, match=field) as e:
        EnvConfig(**{field: value})
    assert e.value.field == field


def test_an_empty_episode_is_allowed_when_asked_for():
    env = make_env("clustergym/GPUCluster-v1", **TINY, window_start=1e12, allow_empty_episode=True)
    _, info = env.reset(seed=0)
    assert info["episode"]["n_jobs"] == 0 and info["summary"]["jobs"] == 0 and math.isnan(info["summary"]["mean_jct"])
    _, r, te, tr, _ = env.step(env.unwrapped.end_round_action)
    assert r == 0.0 and te and not tr


def test_integral_numbers_are_accepted_as_counts():
    cfg = EnvConfig(window_jobs=np.int64(12), window_size=8.0, max_steps=1e3)
    assert (cfg.window_jobs, cfg.window_size, cfg.max_steps) == (12, 8, 1000)
    assert all(type(v) is int for v in (cfg.window_jobs, cfg.window_size, cfg.max_steps))
