"""Named scenarios (registered Gymnasium ids) and the episode workload source.

Every id runs on windows of the bundled Philly trace unless it says "generated" or "Pollux";
``docs/workloads.md`` has each one's measured offered load, peak demand and queueing
(``python -m clustergym.eval.scenarios``).

====================================  ===================================================================
id                                    configuration (any field can be overridden in ``gymnasium.make``)
====================================  ===================================================================
``clustergym/GPUCluster-v1``          the contended default: mlfs-80 (20 x 4 V100), 100-job windows, GPU
                                      counts redrawn from MLFS's {1, ..., 32}, arrivals scaled to offered load
                                      1.5 (:data:`CONTENDED_DEFAULT`)
``clustergym/GPUClusterLight-v1``     the EnvConfig defaults: mlfs-80, 50-job windows with the trace's GPU
                                      counts and arrival times (hardly ever queues)
``clustergym/MLFS80-Philly-v1``       the light scenario spelled out (mlfs-80, Philly, 50-job windows)
``clustergym/MLFS80-x{x}-v1``         MLFS §4.1's setting, x in 0.25, 0.5, 1, 2, 3 (:func:`mlfs_config`):
                                      620·x jobs from the start of a randomly drawn week, MLFS's GPU counts
                                      and five algorithms, the trace's arrival times
``clustergym/Hetero-v1``              hetero-16 (4 servers: V100/P100/K80/T4), 40 generated jobs at load 1
``clustergym/Hare160-Philly-v1``      hare-160 (Hare's 40-server heterogeneous cluster), 100 Philly jobs, K=40
``clustergym/MLFS2474-v1``            mlfs-2474 (Philly's 550 servers), 1000 Philly jobs, W=32, K=32
``clustergym/Pollux-v1``              pollux-64 (Pollux's testbed: 16 x 4 T4), one whole Pollux workload per
                                      episode (160 jobs over 8 h, the workload's arrival times, run times drawn
                                      from Philly's GPU-time buckets); train = workloads 1-4, test = 5-8
``clustergym/UniSched-v1``            UniSched's MIX1 (:func:`unisched_config`): mlfs-80, 100 generated jobs
                                      of 5-180 minutes at load 1, GPU counts from {1, 2, 4, 8, 16}, half
                                      strict-SLO (deadline U[1.1, 2] x run time) and half best-effort,
                                      5/10-minute leases, reward on SLO misses and best-effort JCT
``clustergym/UniSched64-v1``          the same MIX1 on UniSched's physical testbed, unisched-64 (16 x 4 V100,
                                      200 Gbps InfiniBand), where the paper ran jobs of this shape
====================================  ===================================================================

Each id also has a ``-v2``: the same scenario, where every running job can be preempted whole at every decision
point. Its window gives a running job shown by migration rows a running-job row too
(``EnvConfig.preempt_migrating``; on ``-v1`` a job with a task on an overloaded server cannot be, and UniSched
through the env parts from its core run), and offers preemption while no task waits
(``EnvConfig.preempt_empty_queue``; on ``-v1`` it cannot, and HLAS's rescheduling, which preempts a job to place
it again on faster GPUs, parts from its core run).
"""
from __future__ import annotations

import functools
import json
import math
import warnings
from typing import TYPE_CHECKING, Any

import numpy as np

from .core.workload import MLFS_GPU_CHOICES, MLFS_MODEL_WEIGHTS, UNISCHED_DEADLINE_SPAN, slo_mix_with_fraction

if TYPE_CHECKING:
    import pandas as pd

WEEK_S = 7 * 86400.0
# The default scenario: contended (measured in docs/workloads.md). Philly's own GPU counts (93 % single-GPU
# jobs) leave 80 GPUs idle at any offered load up to 3 on 60-150-job windows; MLFS's counts make them queue.
CONTENDED_DEFAULT: dict[str, Any] = {"window_jobs": 100, "load": 1.5,
                                     "mapping": {"gpu_choices": list(MLFS_GPU_CHOICES)}}
# MLFS §4.1 ran 620·x jobs on its 80 GPUs for these x.
MLFS_X: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 3.0)


def mlfs_config(x: float) -> dict[str, Any]:
    """MLFS §4.1's experimental setting for x (EnvConfig fields): ``mlfs-80``, ``round(620 x)`` consecutive
    Philly jobs from the first job of a week drawn uniformly among the split's complete weeks, each job's GPU
    count drawn uniformly from {1, 2, 4, 8, 16, 32} (its model partitions set from it by the mapping's
    ``partitioning="max"`` rule), one of MLFS's five algorithms each, the trace's arrival times and durations
    (``load`` None), deadlines ``max(1.1 t_e, t_r)`` (the mapping's default)."""
    if not x > 0:
        raise ValueError(f"x must be > 0, got {x!r}")
    n = max(1, int(round(620 * x)))
    # FIFO takes about 30 agent steps per job on these windows (55,847 for 1,860 jobs): room for 100
    return {"cluster": "mlfs-80", "workload": "philly", "window_jobs": n, "window_period": WEEK_S,
            "max_steps": max(50_000, 100 * n),
            "mapping": {"gpu_choices": list(MLFS_GPU_CHOICES), "model_weights": dict(MLFS_MODEL_WEIGHTS)}}


def mlfs_id(x: float) -> str:
    """The registered id of :func:`mlfs_config` (x of :data:`MLFS_X`): ``clustergym/MLFS80-x{x:g}-v1``."""
    return f"clustergym/MLFS80-x{x:g}-v1"


# UniSched §IV: GPU requests up to 16 (its policy generator's limit), strict deadlines 1.1-2 x the job's
# duration, 5-minute best-effort and 10-minute SLO leases. Reward: UniSched's 100:1 ratio of an SLO job's value
# to a best-effort job's, read as one missed deadline weighing as much as 100 best-effort job-hours (our choice:
# the paper's two rewards have no common unit); the MLFS objectives are left at weight 0.
UNISCHED_GPU_CHOICES: tuple[int, ...] = (1, 2, 4, 8, 16)
UNISCHED_REWARD_WEIGHTS: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.01)


def unisched_config(slo_fraction: float = 0.5, cluster: str = "mlfs-80") -> dict[str, Any]:
    """UniSched's MIX1 workload (strict-SLO and best-effort jobs) as EnvConfig fields: each job strict-SLO with
    probability ``slo_fraction`` (seeded with the job mapping; UniSched does not give its proportions, so 0.5 by
    default), the rest best-effort. Jobs as in UniSched's physical evaluation (§V-A): generated (MLFS §4.1's
    generator, Philly's log-normal durations) with durations between 5 and 180 minutes and GPU requests up to 16
    (uniform over {1, 2, 4, 8, 16}), at offered load 1 on ``cluster`` (``unisched-64`` is that testbed)."""
    return {"cluster": cluster, "workload": "generator", "window_jobs": 100,
            "generator": {"load": 1.0, "gpu_choices": list(UNISCHED_GPU_CHOICES), "min_duration": 300.0,
                          "max_duration": 10800.0},
            "mapping": {"slo_mix": slo_mix_with_fraction(slo_fraction), "deadline_span": list(UNISCHED_DEADLINE_SPAN)},
            "sim": {"be_lease_s": 300.0, "slo_lease_s": 600.0, "usage_change_mean_s": 0.0},
            "reward_weights": list(UNISCHED_REWARD_WEIGHTS)}


SCENARIOS: dict[str, dict[str, Any]] = {
    "clustergym/GPUCluster-v1": CONTENDED_DEFAULT,
    "clustergym/GPUClusterLight-v1": {},
    "clustergym/MLFS80-Philly-v1": {"cluster": "mlfs-80", "workload": "philly", "window_jobs": 50},
    **{mlfs_id(x): mlfs_config(x) for x in MLFS_X},
    "clustergym/Hetero-v1": {"cluster": "hetero-16", "workload": "generator", "window_jobs": 40,
                             "n_destinations": 20, "generator": {"load": 1.0}},
    "clustergym/Hare160-Philly-v1": {"cluster": "hare-160", "workload": "philly", "window_jobs": 100,
                                     "n_destinations": 40},
    "clustergym/MLFS2474-v1": {"cluster": "mlfs-2474", "workload": "philly", "window_jobs": 1000,
                               "window_size": 32, "n_destinations": 32},
    "clustergym/UniSched-v1": unisched_config(),
    "clustergym/UniSched64-v1": unisched_config(cluster="unisched-64"),
    "clustergym/Pollux-v1": {"cluster": "pollux-64", "workload": "pollux", "window_jobs": 160,
                             "n_destinations": 16},
}
# -v2: each -v1 scenario with the row rules that can preempt every running job at every decision point
SCENARIOS.update({env_id[:-1] + "2": {**fields, "preempt_migrating": True, "preempt_empty_queue": True}
                  for env_id, fields in list(SCENARIOS.items())})


def scenario_fields(env_id: str) -> dict[str, Any]:
    """A copy of the EnvConfig fields of a registered scenario (its nested dicts copied too)."""
    if env_id not in SCENARIOS:
        raise ValueError(f"unknown scenario {env_id!r}; registered: {list(SCENARIOS)}")
    return {k: (dict(v) if isinstance(v, dict) else v) for k, v in SCENARIOS[env_id].items()}


def register_all() -> None:
    """Register every id of :data:`SCENARIOS`. The env gets the id as ``scenario``, so its fields are the layer
    under ``config=`` and keyword fields (:meth:`clustergym.config.EnvConfig.build`): a keyword such as
    ``mapping={"ps_probability": 0}`` changes that one key and keeps the scenario's other mapping settings."""
    import gymnasium as gym

    _hide_out_of_date_warning()
    for env_id in SCENARIOS:
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point="clustergym.gym_env:ClusterEnv", max_episode_steps=None,
                     kwargs={"scenario": env_id}, disable_env_checker=False)


@functools.cache
def _hide_out_of_date_warning() -> None:
    """-v1 and -v2 are both current (docs/env.md, "Versions"): -v2 adds running-job rows, it does not replace -v1.
    Gymnasium calls an id "out of date" whenever a higher version of its name is registered, which is wrong for
    these -v1 ids, so that one warning is filtered: once per process, after gymnasium's own filters (every
    change of the filters clears Python's record of the warnings already shown at each place)."""
    warnings.filterwarnings("ignore", message=r".*The environment clustergym/[\w.-]+-v1 is out of date",
                            category=DeprecationWarning)


def make_env(env_id: str, config: dict | None = None, **overrides: Any):
    """``gymnasium.make(env_id, **config, **overrides)`` of a registered scenario, without rendering unless
    asked: the env factory of evaluation, behaviour cloning and training."""
    import gymnasium as gym

    register_all()
    kw = {**dict(config or {}), **overrides}
    kw.setdefault("render_mode", None)
    return gym.make(env_id, **kw)


def mapping_key(trace_mapping: Any) -> str | None:
    """``EnvConfig.trace_mapping`` as a cache key: None, a YAML path, or a dict of ColumnMapping fields as
    canonical JSON text (prefixed ``json:``)."""
    if trace_mapping is None:
        return None
    if isinstance(trace_mapping, dict):
        return "json:" + json.dumps(trace_mapping, sort_keys=True)
    return str(trace_mapping)


@functools.lru_cache(maxsize=4)
def load_trace(path: str | None, mapping: str | None):
    """The whole trace of an episode source: the bundled Philly log (``path`` None), a file in Philly's format
    (``mapping`` None), or any CSV read through a column mapping (:func:`mapping_key`'s text; a user's trace
    warns of what its rules changed, once per process)."""
    from .core.traces import load_csv, load_philly

    if mapping is None:
        return load_philly(path)
    return load_csv(path, json.loads(mapping[5:]) if mapping.startswith("json:") else mapping)


def check_trace(cfg, cluster, load=None) -> None:
    """Load the configured trace file now, so its errors (a mapping naming a missing column, a malformed row ...)
    name the file, row and column before any episode; and refuse its jobs that ask for more GPUs than the
    cluster holds (they could never run), unless ``max_job_gpus`` leaves them out explicitly or
    ``mapping.gpu_choices`` replaces the trace's GPU counts. ``load``: the trace reader (default the cached
    :func:`load_trace`)."""
    if cfg.trace_path is None or cfg.workload != "philly":
        return
    df = (load or load_trace)(str(cfg.trace_path), mapping_key(cfg.trace_mapping))
    if cfg.max_job_gpus is not None or cfg.mapping.get("gpu_choices") is not None:
        return
    big = np.flatnonzero(df["n_gpus"].to_numpy() > cluster.n_gpus)
    if len(big):
        from .core.trace_schema import TraceError, row_list, source_row

        rows = sorted(source_row(df, i) for i in big)
        raise TraceError(df.attrs.get("source"), f"{len(big)} of {len(df)} jobs ask for more GPUs than cluster "
                         f"{cluster.name!r} holds ({cluster.n_gpus}; {row_list(rows)}, e.g. "
                         f"{int(df['n_gpus'].iloc[big[0]])} GPUs): they could never run; set max_job_gpus="
                         f"{cluster.n_gpus} to leave them out of the episodes, or use a larger cluster",
                         row=rows[0], column="n_gpus")


def check_config(env_id: str, overrides: dict | None = None) -> None:
    """Build the EnvConfig of ``env_id`` (a registered scenario) with ``overrides`` and check its trace file
    (:func:`check_trace`) without making an env: what sweeps and training call before any run starts. Raises
    ConfigError or TraceError (both ValueErrors) naming the field, or the file, row and column. The trace is read
    uncached and its warnings are left to the runs, which report each once."""
    import warnings

    from .config import EnvConfig

    cfg = EnvConfig.build(None, base=scenario_fields(env_id), **dict(overrides or {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_trace(cfg, cluster_spec(cfg), load=load_trace.__wrapped__)


@functools.lru_cache(maxsize=16)
def trace_part(path: str | None, max_gpus: int | None, split: str, train_fraction: float, mapping: str | None = None):
    """The (train or held-out) part of the trace (:func:`load_trace`), jobs above ``max_gpus`` GPUs dropped
    (before splitting, so the split point does not depend on the cluster; None = no job dropped)."""
    from .core.traces import split_trace

    df = load_trace(path, mapping)
    train, test = split_trace(df, train_fraction)
    part = train if split == "train" else test
    if max_gpus is not None:
        part = part[part["n_gpus"] <= max_gpus]
    return part.reset_index(drop=True)


def cluster_spec(cfg):
    from .core import presets

    if cfg.cluster_file:
        return presets.load_cluster(cfg.cluster_file)
    return presets.cluster_preset(cfg.cluster)


def episode_jobs(cfg, cluster, rng: np.random.Generator) -> tuple[list, dict]:
    """Job specs of one episode and a description (window start, seeds, jobs left out, arrival scaling).
    All randomness from ``rng``."""
    from .core.mapping import to_job_specs
    from .core.nas import make_nas_groups, nas_options

    mcfg = episode_mapping(cfg)
    draw_map = int(rng.integers(2**62))
    map_seed = int(cfg.mapping_seed) if cfg.mapping_seed is not None else draw_map
    info: dict[str, Any] = {"mapping_seed": map_seed, "clock_offset": 0.0}
    if cfg.workload == "generator":
        df = _generated_window(cfg, cluster, rng, info)
    elif cfg.workload == "pollux":
        df = _pollux_window(cfg, rng, info)
    else:
        df = _trace_window(cfg, cluster, rng, info)
    cap = int(cfg.max_job_gpus or cluster.n_gpus)
    specs = to_job_specs(df, map_seed, mcfg, cluster)
    if cfg.workload == "generator":
        specs = make_nas_groups(specs, info["generator_seed"], *nas_options(cfg.generator))
    kept, dropped = fitting_jobs(specs, cluster, cap)
    info["dropped_jobs"] = [sp.job_id for sp in dropped]
    if cfg.load is not None:
        kept = _compress(kept, float(cfg.load), cluster, mcfg, info)
    return kept, info


def episode_mapping(cfg):
    """The job mapping of ``cfg``'s episodes: ``cfg.mapping`` over the model rules of the trace's column mapping
    (its ``aliases`` and ``unknown_model``, :func:`clustergym.core.mapping.trace_mapping_config`); None = the
    defaults."""
    from .core.mapping import trace_mapping_config

    rules = {}
    if cfg.workload == "philly" and cfg.trace_mapping is not None:
        rules = load_trace(str(cfg.trace_path), mapping_key(cfg.trace_mapping)).attrs.get("mapping", {})
    return trace_mapping_config(rules, cfg.mapping) if rules or cfg.mapping else None


def _generated_window(cfg, cluster, rng: np.random.Generator, info: dict):
    from .core.generator import generate_trace

    gen_seed = int(rng.integers(2**62))
    kw = {k: v for k, v in cfg.generator.items() if not k.startswith("nas_")}  # (NAS groups: episode_jobs)
    load = kw.pop("load", 1.0)
    arrival = kw.pop("arrival", "poisson")
    df = generate_trace(cfg.window_jobs, gen_seed, cluster.n_gpus, load, arrival, **kw)
    if cfg.max_job_gpus is not None or (df["n_gpus"] > cluster.n_gpus).any():
        df = df[df["n_gpus"] <= (cfg.max_job_gpus or cluster.n_gpus)].reset_index(drop=True)
    info.update(generator_seed=gen_seed, window_start=0.0)
    return df


@functools.lru_cache(maxsize=8)
def pollux_workload(name: str) -> pd.DataFrame:
    """A bundled Pollux workload (:func:`clustergym.core.traces.load_pollux_workload`), read once per process."""
    from .core.traces import load_pollux_workload

    return load_pollux_workload(name)


def _pollux_window(cfg, rng: np.random.Generator, info: dict) -> pd.DataFrame:
    """The first ``window_jobs`` jobs of one Pollux workload drawn uniformly among the split's
    (:func:`clustergym.core.traces.pollux_split`), with run times drawn from Philly's GPU-time bucket of each
    job's application (:func:`clustergym.core.traces.fill_pollux_durations`, seeded from ``rng``). No job is
    filtered here: the ones the cluster cannot hold are left out by :func:`fitting_jobs` and listed in
    ``dropped_jobs``, so every job of the workload is accounted for in the episode's description."""
    from .core.traces import fill_pollux_durations, pollux_split

    names = pollux_split(cfg.split, float(cfg.train_fraction))
    name = names[int(rng.integers(len(names)))]
    duration_seed = int(rng.integers(2**62))
    jobs = pollux_workload(name).iloc[:cfg.window_jobs]
    info.update(pollux_workload=name, duration_seed=duration_seed, window_start=0.0)
    return fill_pollux_durations(jobs, duration_seed, philly=load_trace(None, None))


def _trace_window(cfg, cluster, rng: np.random.Generator, info: dict):
    """``window_jobs`` consecutive jobs of the chosen part of the trace, from ``window_start``, else from a job
    drawn uniformly (``window_period`` None) or from the first job of a period drawn uniformly."""
    from .core.traces import window

    # with mapping.gpu_choices the trace's GPU counts are replaced, so they filter no job
    max_gpus = None if cfg.mapping.get("gpu_choices") is not None else int(cfg.max_job_gpus or cluster.n_gpus)
    part = trace_part(cfg.trace_path, max_gpus, cfg.split, float(cfg.train_fraction), mapping_key(cfg.trace_mapping))
    n = len(part)
    if n == 0:
        if not cfg.allow_empty_episode:
            from .config import EmptyEpisodeError

            raise EmptyEpisodeError(f"the {cfg.split} part of the trace has no job of at most {max_gpus} GPUs "
                                    f"(max_job_gpus, or the GPU count of cluster {cluster.name!r})", "max_job_gpus")
        info["window_start"] = 0.0
        return part
    t = part["submit_time"].to_numpy()
    if cfg.window_start is not None:
        start = float(cfg.window_start)
        if cfg.split == "test":
            start += float(t[0])  # window_start is relative to the start of the chosen part
    elif cfg.window_period is not None:
        period = float(cfg.window_period)
        n_periods = max(1, int((t[-1] - t[0]) // period))  # the part's complete periods (at least one)
        k = int(rng.integers(0, n_periods))
        start = float(t[0]) + period * k
        info["window_period_index"] = k
    else:
        idx = int(rng.integers(0, max(1, n - cfg.window_jobs + 1)))
        start = float(t[idx])
    df = window(part, start, n_jobs=cfg.window_jobs)
    t0 = part.attrs.get("t0")
    if t0 is not None:
        try:
            info["clock_offset"] = float(t0.hour * 3600 + t0.minute * 60 + t0.second) + start
        except AttributeError:
            pass
    info["window_start"] = start
    return df


def fitting_jobs(specs: list, cluster, max_gpus: int) -> tuple[list, list]:
    """(jobs that fit, jobs that do not). A mapped job asking for more than ``max_gpus`` GPUs (a count
    redrawn by ``mapping.gpu_choices``; trace and generated counts above it are filtered before windowing) or
    whose tasks together exceed the cluster (e.g. 16 CPU-heavy replicas on 128 cores, or no packing of them onto the idle cluster) could never start and
    would hold the episode open to its horizon, so the env leaves it out and lists it in
    ``info["episode"]["dropped_jobs"]``."""
    from .core.catalogue_data import get_model
    from .core.dag import build_tasks
    from .core.feasibility import cluster_totals, never_runs

    kept, dropped = [], []
    totals = cluster_totals(cluster)
    for sp in specs:
        fits = sp.n_gpus <= max_gpus and never_runs(build_tasks(sp, get_model(sp.model)), cluster, totals) is None
        (kept if fits else dropped).append(sp)
    return kept, dropped


def job_work(specs: list, cluster, mapping=None) -> np.ndarray:
    """GPU-seconds each job offers: its GPUs x its reference run time
    (:func:`clustergym.core.mapping.reference_run_time` with the episode's mapping and cluster)."""
    from .core.mapping import reference_run_time

    return np.array([sp.n_gpus * reference_run_time(sp, mapping, cluster) for sp in specs], dtype=float)


def _compress(specs: list, load: float, cluster, mapping, info: dict) -> list:
    """The episode's jobs with their inter-arrival times scaled so the window's offered load
    (:func:`clustergym.core.traces.window_offered_load`) is ``load``; each deadline keeps its distance from
    its job's submit time. Records the window's own load and the scale factor in ``info``."""
    import dataclasses
    import warnings

    from .core.traces import compress_arrivals, window_offered_load

    t = np.array([sp.submit_time for sp in specs], dtype=float)
    if len(specs) < 2 or t.min() == t.max():  # no inter-arrival time to scale: the jobs keep their times
        why = (f"the window keeps {len(specs)} job(s) that fit the cluster" if len(specs) < 2 else
               f"the window's {len(specs)} kept jobs all arrive at t = {t.min():g} s")
        info.update(offered_load=math.inf if len(specs) >= 2 else math.nan, arrival_scale=1.0,
                    load_not_applied=f"{why}: no inter-arrival time to scale, arrival times kept")
        warnings.warn(f"load={load} not applied to this episode: {info['load_not_applied']}", stacklevel=2)
        return specs
    work = job_work(specs, cluster, mapping)
    own = window_offered_load(t, work, cluster.n_gpus)
    new = compress_arrivals(t, work, cluster.n_gpus, load)
    info.update(trace_offered_load=own, arrival_scale=own / load, offered_load=window_offered_load(new, work, cluster.n_gpus))
    return [dataclasses.replace(sp, submit_time=float(s), deadline=float(s) + (sp.deadline - sp.submit_time))
            for sp, s in zip(specs, new)]


def empty_episode_reason(cfg, info: dict) -> tuple[str, str]:
    """Why :func:`episode_jobs` selected no job: (message, the EnvConfig field at fault)."""
    dropped = info.get("dropped_jobs") or []
    if dropped:
        return (f"all {len(dropped)} jobs of the episode were left out: their tasks can never hold slots together "
                f"on the cluster ({cfg.cluster_file or cfg.cluster})", "cluster")
    if cfg.workload == "generator":
        limit = cfg.max_job_gpus or cluster_spec(cfg).n_gpus
        return (f"the {cfg.window_jobs} generated jobs all ask for more than {limit} GPUs (max_job_gpus, or the "
                "cluster's GPU count): use more window_jobs or generator.gpu_choices the cluster holds", "max_job_gpus")
    part = trace_part(cfg.trace_path, int(cfg.max_job_gpus or cluster_spec(cfg).n_gpus), cfg.split,
                      float(cfg.train_fraction), mapping_key(cfg.trace_mapping))
    t = part["submit_time"].to_numpy()
    return (f"window_start={cfg.window_start!r} s selects no job: the last job of the {cfg.split} part is submitted "
            f"at {t[-1] - (t[0] if cfg.split == 'test' else 0.0):.0f} s (window_start is relative to the part's "
            "first job for the test split)", "window_start")
