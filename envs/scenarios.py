"""Named scenarios (registered Gymnasium ids) and the episode workload source.

=================================  ====================================================================
id                                 configuration (any field can be overridden in ``gymnasium.make``)
=================================  ====================================================================
``clustergym/GPUCluster-v0``       defaults: mlfs-80 (20 x 4 V100), 50-job windows of the Philly trace
``clustergym/MLFS80-Philly-v0``    the same, spelled out (MLFS §4.1 80-GPU testbed on Philly)
``clustergym/Hetero-v0``           hetero-16 (4 servers: V100/P100/K80/T4), 40 generated jobs at load 1
``clustergym/Hare160-Philly-v0``   hare-160 (Hare's 40-server heterogeneous cluster), 100 Philly jobs, K=40
``clustergym/MLFS2474-v0``         mlfs-2474 (Philly's 550 servers), 1000 Philly jobs, W=32, K=32
=================================  ====================================================================
"""
from __future__ import annotations

import functools
from typing import Any

import numpy as np

SCENARIOS: dict[str, dict[str, Any]] = {
    "clustergym/GPUCluster-v0": {},
    "clustergym/MLFS80-Philly-v0": {"cluster": "mlfs-80", "workload": "philly", "window_jobs": 50},
    "clustergym/Hetero-v0": {"cluster": "hetero-16", "workload": "generator", "window_jobs": 40,
                             "n_destinations": 20, "generator": {"load": 1.0}},
    "clustergym/Hare160-Philly-v0": {"cluster": "hare-160", "workload": "philly", "window_jobs": 100,
                                     "n_destinations": 40},
    "clustergym/MLFS2474-v0": {"cluster": "mlfs-2474", "workload": "philly", "window_jobs": 1000,
                               "window_size": 32, "n_destinations": 32},
}


def register_all() -> None:
    import gymnasium as gym

    for env_id, kwargs in SCENARIOS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point="clustergym.gym_env:ClusterEnv", max_episode_steps=None,
                     kwargs=dict(kwargs), disable_env_checker=False)


def make_env(env_id: str, config: dict | None = None, **overrides: Any):
    """``gymnasium.make(env_id, **config, **overrides)`` of a registered scenario, without rendering unless
    asked: the env factory of evaluation, behaviour cloning and training."""
    import gymnasium as gym

    register_all()
    kw = {**dict(config or {}), **overrides}
    kw.setdefault("render_mode", None)
    return gym.make(env_id, **kw)


@functools.lru_cache(maxsize=4)
def _philly(path: str | None):
    from .core.traces import load_philly

    return load_philly(path)


@functools.lru_cache(maxsize=16)
def trace_part(path: str | None, max_gpus: int, split: str, train_fraction: float):
    """The (train or held-out) part of the trace, jobs above ``max_gpus`` GPUs dropped (before splitting,
    so the split point does not depend on the cluster)."""
    from .core.traces import split_trace

    df = _philly(path)
    train, test = split_trace(df, train_fraction)
    part = train if split == "train" else test
    part = part[part["n_gpus"] <= max_gpus]
    return part.reset_index(drop=True)


def cluster_spec(cfg):
    from .core import presets

    if cfg.cluster_file:
        return presets.load_cluster(cfg.cluster_file)
    return presets.cluster_preset(cfg.cluster)


def episode_jobs(cfg, cluster, rng: np.random.Generator) -> tuple[list, dict]:
    """Job specs of one episode and a description (window start, seeds). All randomness from ``rng``."""
    from .core.mapping import MappingConfig, to_job_specs

    mcfg = MappingConfig(**cfg.mapping) if cfg.mapping else None
    draw_map = int(rng.integers(2**62))
    map_seed = int(cfg.mapping_seed) if cfg.mapping_seed is not None else draw_map
    info: dict[str, Any] = {"mapping_seed": map_seed, "clock_offset": 0.0}
    if cfg.workload == "generator":
        from .core.generator import generate_trace

        gen_seed = int(rng.integers(2**62))
        kw = dict(cfg.generator)
        load = kw.pop("load", 1.0)
        arrival = kw.pop("arrival", "poisson")
        df = generate_trace(cfg.window_jobs, gen_seed, cluster.n_gpus, load, arrival, **kw)
        if cfg.max_job_gpus is not None or (df["n_gpus"] > cluster.n_gpus).any():
            df = df[df["n_gpus"] <= (cfg.max_job_gpus or cluster.n_gpus)].reset_index(drop=True)
        info.update(generator_seed=gen_seed, window_start=0.0)
    else:
        from .core.traces import window

        max_gpus = cfg.max_job_gpus or cluster.n_gpus
        part = trace_part(cfg.trace_path, int(max_gpus), cfg.split, float(cfg.train_fraction))
        n = len(part)
        if n == 0:
            if not cfg.allow_empty_episode:
                from .config import EmptyEpisodeError

                raise EmptyEpisodeError(f"the {cfg.split} part of the trace has no job of at most {max_gpus} GPUs "
                                        f"(max_job_gpus, or the GPU count of cluster {cluster.name!r})", "max_job_gpus")
            return [], {**info, "window_start": 0.0, "dropped_jobs": []}
        t = part["submit_time"].to_numpy()
        if cfg.window_start is not None:
            start = float(cfg.window_start)
            if cfg.split == "test":
                start += float(t[0])  # window_start is relative to the start of the chosen part
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
    specs = to_job_specs(df, map_seed, mcfg, cluster)
    # a mapped job whose tasks can never hold slots together (e.g. 16 CPU-heavy replicas on 128 cores) could
    # never start and would hold the episode open: leave it out, and say so in the info
    from .core.catalogue_data import get_model
    from .core.dag import build_tasks
    from .core.resources import cluster_totals, never_runs

    kept, dropped = [], []
    totals = cluster_totals(cluster)
    for sp in specs:
        (kept if never_runs(build_tasks(sp, get_model(sp.model)), cluster, totals) is None else dropped).append(sp)
    info["dropped_jobs"] = [sp.job_id for sp in dropped]
    return kept, info


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
                      float(cfg.train_fraction))
    t = part["submit_time"].to_numpy()
    return (f"window_start={cfg.window_start!r} s selects no job: the last job of the {cfg.split} part is submitted "
            f"at {t[-1] - (t[0] if cfg.split == 'test' else 0.0):.0f} s (window_start is relative to the part's "
            "first job for the test split)", "window_start")
