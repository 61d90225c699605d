"""Typed configuration of the Gymnasium environment (:class:`EnvConfig`).

Build it directly, from a dict (``EnvConfig.from_dict``) or from YAML (``EnvConfig.from_yaml``). Unknown
keys are rejected by name, at the top level and inside the nested ``sim`` (:class:`clustergym.core.engine.SimConfig`
fields), ``mapping`` (:class:`clustergym.core.mapping.MappingConfig` fields) and ``generator`` (keyword arguments
of :func:`clustergym.core.generator.generate_trace`) dicts.

``gymnasium.make("clustergym/GPUCluster-v0", **fields)`` accepts every field below as a keyword, plus
``config=`` (an EnvConfig, a dict or a YAML path) that the keywords then override.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .reward import default_weights, objective_names


def __getattr__(name: str) -> Any:
    # OBJECTIVE_NAMES follows the objective registry (clustergym.reward), including objectives registered later
    if name == "OBJECTIVE_NAMES":
        return objective_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the fields holding dicts: a layer of configuration updates them key by key (EnvConfig.replace)
_NESTED = ("sim", "mapping", "generator")
_GENERATOR_KEYS = ("load", "arrival", "gpu_choices", "gpu_weights", "duration", "lognormal", "min_duration",
                   "max_duration", "diurnal_amplitude", "diurnal_period", "diurnal_phase")


class ConfigError(ValueError):
    """A bad environment configuration; the message names the offending key."""


@dataclass
class EnvConfig:
    """Every knob of :class:`clustergym.gym_env.ClusterEnv`.

    Cluster
      ``cluster``: preset name (``clustergym.core.presets.cluster_preset``: mlfs-80, mlfs-2474, hare-160, gavel-108,
      pai-2020, tiny-8, hetero-16); ``cluster_file``: a cluster file (``load_cluster``), overrides ``cluster``.
    Workload
      ``workload``: ``"philly"`` (windows of the bundled Philly trace, or ``trace_path``) or ``"generator"``
      (:func:`clustergym.core.generator.generate_trace` with ``generator`` keyword arguments; ``load`` defaults to 1).
      ``window_jobs``: jobs per episode. ``window_start``: fix the window start (seconds into the chosen split
      of the trace); None = drawn from ``self.np_random``: uniformly over job indices of the split, or with
      ``window_period`` (s) the first job of a period of that length drawn uniformly among the split's
      complete periods (MLFS §4.1 "randomly selected one week": 604800).
      ``load``: None = the trace's own arrival times; x > 0 = every inter-arrival time of the window is scaled
      by one factor so that its offered load is x, offered load = sum over jobs of GPUs x reference run time
      (:func:`clustergym.core.mapping.reference_run_time`) / (cluster GPUs x n mean inter-arrival gaps)
      (:func:`clustergym.core.traces.window_offered_load`; the generator's ``load`` has the same meaning).
      Deadlines keep their distance from their job's submit time. Trace workloads only (a generated one
      takes ``generator.load``).
      ``split``: ``"train"`` or ``"test"``; the trace is cut by :func:`clustergym.core.traces.split_trace` at
      ``train_fraction`` of its jobs (MLFS trained MLF-RL on the first 50 %), so train and test windows are disjoint.
      ``max_job_gpus``: trace jobs asking for more GPUs are dropped before windowing (None = the cluster's
      GPU count: larger jobs could never run). Mapped jobs above it (GPU counts redrawn by
      ``mapping.gpu_choices``, which replace the trace's, so no trace job is dropped by its own count) and
      jobs whose tasks together need more CPU, memory or GPU memory than the whole cluster are left out of
      the episode; their ids are in ``info["episode"]["dropped_jobs"]``.
      ``mapping``: :class:`MappingConfig` fields; ``mapping_seed``: None = drawn from ``self.np_random`` per
      episode, an int = the same job mapping every episode.
    Simulator
      ``sim``: :class:`SimConfig` fields (thresholds h_r/h_s, tick, usage noise ...). ``horizon_s`` is set by the env
      from ``max_sim_time`` and must not be given here.
    Reward
      ``reward_weights``: beta of MLFS Eq. (7), one weight per objective of :mod:`clustergym.reward` (default:
      the registry's weights, MLFS §4.1). ``time_scale`` (s) and ``bytes_scale`` (MB) normalise g1 and g3. ``invalid_action``: ``"raise"`` or ``"penalty"``; ``invalid_penalty``: reward of an invalid
      action under "penalty". ``vector_reward``: the step reward is the objective vector g (float32)
      instead of ``beta . g``, and the env carries ``reward_space``/``reward_dim`` (the MO-Gymnasium
      convention; ``info["scalar_reward"]`` keeps ``beta . g`` plus any penalty).
    Observation
      ``window_size`` (W task rows), ``rows_per_job`` (cap on one job's rows in the window; None = no cap),
      ``migrate_rows`` (cap on migration-candidate rows, so tasks on overloaded servers cannot fill the
      window and starve the queue of a policy that does not migrate; None = no cap),
      ``preemption`` (offer running jobs as preemption rows whose "back to the queue" action suspends the
      whole job; off by default, as in MLFS's action space), ``preempt_rows`` (at most that many such rows),
      ``n_destinations`` (K server columns), ``max_gpus_per_server`` (width of the
      per-GPU load matrix; None = the cluster's largest server), ``loss_history`` (recent loss reductions per job).
    Episode
      ``max_sim_time`` (s, truncation, inf = none), ``max_steps`` (agent steps, truncation, None = none).
    Render
      ``render_history``: GPU-occupancy snapshots kept in the episode record that ``rgb_array`` draws
      (``env.unwrapped.episode_record``; bounded).
    """

    cluster: str = "mlfs-80"
    cluster_file: str | None = None
    workload: str = "philly"
    trace_path: str | None = None
    window_jobs: int = 50
    window_start: float | None = None
    window_period: float | None = None
    load: float | None = None
    split: str = "train"
    train_fraction: float = 0.5
    max_job_gpus: int | None = None
    generator: dict = field(default_factory=dict)
    mapping: dict = field(default_factory=dict)
    mapping_seed: int | None = None
    sim: dict = field(default_factory=dict)
    reward_weights: tuple = field(default_factory=default_weights)
    time_scale: float = 3600.0
    # 1 TB of cross-server traffic per job = 1: under MLF-H on the light scenario's training windows g3 and g1 are
    # then of one size, so beta alone sets their balance as MLFS intends. Measured (2.82 TB per job, mean JCT 3.02 h):
    #   .venv/bin/python -c "from clustergym.eval.rollout import evaluate; import numpy as np;
    #   r = evaluate('mlf-h', 'clustergym/GPUClusterLight-v0', {}, range(100, 120));
    #   print(np.mean([x['bandwidth_mb'] / x['jobs'] / 1e6 for x in r]), np.mean([x['mean_jct'] / 3600 for x in r]))"
    bytes_scale: float = 1.0e6
    invalid_action: str = "penalty"
    invalid_penalty: float = -0.1
    vector_reward: bool = False
    window_size: int = 16
    rows_per_job: int | None = 4
    migrate_rows: int | None = 8
    preemption: bool = False
    preempt_rows: int | None = 4
    n_destinations: int = 20
    max_gpus_per_server: int | None = None
    loss_history: int = 3
    max_sim_time: float = 30 * 86400.0
    max_steps: int | None = 50_000
    render_history: int = 256

    def __post_init__(self) -> None:
        self.reward_weights = tuple(float(w) for w in self.reward_weights)
        names = objective_names()
        if len(self.reward_weights) != len(names):
            raise ConfigError(f"reward_weights must have {len(names)} entries, one per objective {names}, "
                              f"got {len(self.reward_weights)}")
        if self.workload not in ("philly", "generator"):
            raise ConfigError(f"workload must be 'philly' or 'generator', got {self.workload!r}")
        if self.split not in ("train", "test"):
            raise ConfigError(f"split must be 'train' or 'test', got {self.split!r}")
        if not 0.0 < self.train_fraction < 1.0:
            raise ConfigError(f"train_fraction must be in (0, 1), got {self.train_fraction}")
        if self.invalid_action not in ("raise", "penalty"):
            raise ConfigError(f"invalid_action must be 'raise' or 'penalty', got {self.invalid_action!r}")
        for name in ("window_jobs", "window_size", "n_destinations"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        self._check_workload()
        if self.loss_history < 1:
            raise ConfigError("loss_history must be >= 1")
        if self.preempt_rows is not None and self.preempt_rows < 1:
            raise ConfigError(f"preempt_rows must be >= 1 or None, got {self.preempt_rows}")
        if self.migrate_rows is not None and self.migrate_rows < 0:
            raise ConfigError(f"migrate_rows must be >= 0 or None, got {self.migrate_rows}")
        if self.rows_per_job is not None and self.rows_per_job < 1:
            raise ConfigError(f"rows_per_job must be >= 1 or None, got {self.rows_per_job}")
        if self.time_scale <= 0 or self.bytes_scale <= 0:
            raise ConfigError("time_scale and bytes_scale must be > 0")
        if not self.max_sim_time > 0:
            raise ConfigError("max_sim_time must be > 0 (use inf for no limit)")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError("max_steps must be >= 1 or None")
        for name, allowed in (("sim", None), ("mapping", None), ("generator", _GENERATOR_KEYS)):
            d = getattr(self, name)
            if not isinstance(d, Mapping):
                raise ConfigError(f"{name} must be a dict, got {type(d).__name__}")
            setattr(self, name, dict(d))
        self._check_nested()

    def _check_workload(self) -> None:
        """``load``, ``window_period`` and their combinations (see the class docstring)."""
        for name in ("load", "window_period"):
            v = getattr(self, name)
            if v is None:
                continue
            ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v) and v > 0
            if not ok:
                raise ConfigError(f"{name} must be None or a finite number > 0, got {v!r}")
        if self.load is not None and self.workload == "generator":
            raise ConfigError("load sets the offered load of trace windows (workload='philly'); a generated "
                              "workload takes generator.load")
        if self.load is not None and int(self.window_jobs) < 2:
            raise ConfigError(f"load needs window_jobs >= 2 (an offered load needs two arrivals), got "
                              f"{self.window_jobs}")

    def _check_nested(self) -> None:
        from .core.engine import SimConfig

        sim_keys = {f.name for f in fields(SimConfig)}
        bad = set(self.sim) - sim_keys
        if bad:
            raise ConfigError(f"unknown sim key(s) {sorted(bad)}; known: {sorted(sim_keys)}")
        if "horizon_s" in self.sim:
            raise ConfigError("sim.horizon_s is set from max_sim_time; give max_sim_time instead")
        try:
            SimConfig(**self.sim)
        except (TypeError, ValueError) as e:
            raise ConfigError(f"sim: {e}") from None
        bad = set(self.generator) - set(_GENERATOR_KEYS)
        if bad:
            raise ConfigError(f"unknown generator key(s) {sorted(bad)}; known: {sorted(_GENERATOR_KEYS)}")
        if self.mapping:
            from .core.mapping import MappingConfig

            keys = {f.name for f in fields(MappingConfig)}
            bad = set(self.mapping) - keys
            if bad:
                raise ConfigError(f"unknown mapping key(s) {sorted(bad)}; known: {sorted(keys)}")
            try:
                MappingConfig(**self.mapping)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"mapping: {e}") from None

    # ------------------------------------------------------------------ construction
    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EnvConfig":
        if not isinstance(d, Mapping):
            raise ConfigError(f"config must be a mapping, got {type(d).__name__}")
        known = set(cls.field_names())
        bad = [k for k in d if k not in known]
        if bad:
            raise ConfigError(f"unknown config key(s) {sorted(bad)}; known: {sorted(known)}")
        kw = dict(d)
        for k in ("max_sim_time",):
            if isinstance(kw.get(k), str):
                kw[k] = float(kw[k])  # YAML ".inf" / "inf"
        return cls(**kw)

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> "EnvConfig":
        return cls.from_dict(_yaml_mapping(path))

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["reward_weights"] = list(self.reward_weights)
        return d

    def replace(self, **overrides: Any) -> "EnvConfig":
        """A copy with ``overrides``; the nested dicts (``sim``, ``mapping``, ``generator``) are updated key by
        key, so ``mapping={"ps_probability": 0}`` keeps the other mapping settings."""
        d = self.to_dict()
        for k, v in overrides.items():
            d[k] = {**d[k], **v} if k in _NESTED and isinstance(v, Mapping) and isinstance(d.get(k), Mapping) else v
        return EnvConfig.from_dict(d)

    @classmethod
    def build(cls, config: "EnvConfig | Mapping[str, Any] | str | os.PathLike | None" = None,
              base: Mapping[str, Any] | None = None, **overrides: Any) -> "EnvConfig":
        """Layers, lowest first: the defaults, ``base`` (a registered scenario's fields), ``config`` (a dict or
        YAML path: laid over ``base``; an EnvConfig: complete, replaces it) and keyword ``overrides``. Each
        layer updates the nested dicts key by key (:meth:`replace`)."""
        start = cls.from_dict(base) if base else cls()
        if config is None:
            out = start
        elif isinstance(config, EnvConfig):
            out = config
        elif isinstance(config, Mapping):
            out = start.replace(**config)
        elif isinstance(config, (str, os.PathLike)):
            d = _yaml_mapping(config)
            cls.from_dict(d)  # a file that is not a mapping of fields: named error
            out = start.replace(**d)
        else:
            raise ConfigError(f"config must be an EnvConfig, a dict or a YAML path, got {type(config).__name__}")
        return out.replace(**overrides) if overrides else out


def _yaml_mapping(path: str | os.PathLike) -> Any:
    """The YAML file's top-level value (an empty file: an empty dict); :meth:`EnvConfig.from_dict` checks it."""
    import yaml

    with open(path) as f:
        return yaml.safe_load(f) or {}
