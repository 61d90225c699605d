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
import os
from dataclasses import dataclass, field, fields
from typing import Any, Mapping

from .reward import default_weights, objective_names


def __getattr__(name: str) -> Any:
    # OBJECTIVE_NAMES follows the objective registry (clustergym.reward), including objectives registered later
    if name == "OBJECTIVE_NAMES":
        return objective_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
      of the trace); None = drawn from ``self.np_random`` uniformly over job indices of the split.
      ``split``: ``"train"`` or ``"test"``; the trace is cut by :func:`clustergym.core.traces.split_trace` at
      ``train_fraction`` of its jobs (MLFS trained MLF-RL on the first 50 %), so train and test windows are disjoint.
      ``max_job_gpus``: trace jobs asking for more GPUs are dropped before windowing (None = the cluster's
      GPU count: larger jobs could never run). Mapped jobs whose tasks together need more CPU, memory or
      GPU memory than the whole cluster are left out too; their ids are in ``info["episode"]["dropped_jobs"]``.
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
    Observation and actions (the row rule: :mod:`clustergym.window`)
      ``window_size`` (W rows; 64, so the whole queue of a contended 80-GPU cluster fits, docs/env.md),
      ``rows_per_job`` (cap on one job's waiting rows; 1 = one row per waiting job; None = no cap),
      ``migrate_rows`` (cap on migration-candidate rows, so tasks on overloaded servers cannot fill the
      window and starve the queue of a policy that does not migrate; None = no cap),
      ``preemption`` (running-job rows' "back to the queue" action suspends the whole job, while tasks
      wait; on, so preemptive policies such as Tiresias can act), ``running_rows`` (at most that many
      running-job rows; None = no cap), ``stop_option_actions`` (three columns per row that change the row's
      job's stopping rule, MLFS §3.5, under ``Simulator.stop_option_error``),
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
    split: str = "train"
    train_fraction: float = 0.5
    max_job_gpus: int | None = None
    generator: dict = field(default_factory=dict)
    mapping: dict = field(default_factory=dict)
    mapping_seed: int | None = None
    sim: dict = field(default_factory=dict)
    reward_weights: tuple = field(default_factory=default_weights)
    time_scale: float = 3600.0
    # 1 TB of cross-server traffic per job = 1: under MLF-H on the default training windows g3 and g1 are then of
    # one size, so beta alone sets their balance as MLFS intends. Measured (2.82 TB per job, mean JCT 3.02 h):
    #   .venv/bin/python -c "from clustergym.eval.rollout import evaluate; import numpy as np;
    #   r = evaluate('mlf-h', 'clustergym/GPUCluster-v0', {}, range(100, 120));
    #   print(np.mean([x['bandwidth_mb'] / x['jobs'] / 1e6 for x in r]), np.mean([x['mean_jct'] / 3600 for x in r]))"
    bytes_scale: float = 1.0e6
    invalid_action: str = "penalty"
    invalid_penalty: float = -0.1
    vector_reward: bool = False
    window_size: int = 64
    rows_per_job: int | None = 1
    migrate_rows: int | None = 8
    preemption: bool = True
    running_rows: int | None = 16
    stop_option_actions: bool = True
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
        if self.loss_history < 1:
            raise ConfigError("loss_history must be >= 1")
        if self.running_rows is not None and self.running_rows < 0:
            raise ConfigError(f"running_rows must be >= 0 or None, got {self.running_rows}")
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
        import yaml

        with open(path) as f:
            d = yaml.safe_load(f) or {}
        return cls.from_dict(d)

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["reward_weights"] = list(self.reward_weights)
        return d

    def replace(self, **overrides: Any) -> "EnvConfig":
        d = self.to_dict()
        d.update(overrides)
        return EnvConfig.from_dict(d)

    @classmethod
    def build(cls, config: "EnvConfig | Mapping[str, Any] | str | os.PathLike | None" = None, **overrides: Any) -> "EnvConfig":
        """``config`` (EnvConfig, dict, YAML path or None) with keyword ``overrides`` on top."""
        if config is None:
            base = cls()
        elif isinstance(config, EnvConfig):
            base = config
        elif isinstance(config, Mapping):
            base = cls.from_dict(config)
        elif isinstance(config, (str, os.PathLike)):
            base = cls.from_yaml(config)
        else:
            raise ConfigError(f"config must be an EnvConfig, a dict or a YAML path, got {type(config).__name__}")
        return base.replace(**overrides) if overrides else base

