"""Typed configuration of the Gymnasium environment (:class:`EnvConfig`).

Build it directly, from a dict (``EnvConfig.from_dict``) or from YAML (``EnvConfig.from_yaml``). Unknown
keys are rejected by name, at the top level and inside the nested ``sim`` (:class:`clustergym.core.engine.SimConfig`
fields), ``mapping`` (:class:`clustergym.core.mapping.MappingConfig` fields) and ``generator`` (keyword arguments
of :func:`clustergym.core.generator.generate_trace`) dicts.

``gymnasium.make("clustergym/GPUCluster-v1", **fields)`` accepts every field below as a keyword, plus
``config=`` (an EnvConfig, a dict or a YAML path) that the keywords then override.
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Mapping

from .core.config import number_error

from .reward import default_weights, objective_names


def __getattr__(name: str) -> Any:
    # OBJECTIVE_NAMES follows the objective registry (clustergym.reward), including objectives registered later
    if name == "OBJECTIVE_NAMES":
        return objective_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# the fields holding dicts: a layer of configuration updates them key by key (EnvConfig.replace)
_NESTED = ("sim", "mapping", "generator")
_GENERATOR_KEYS = ("load", "arrival", "gpu_choices", "gpu_weights", "duration", "lognormal", "min_duration",
                   "max_duration", "diurnal_amplitude", "diurnal_period", "diurnal_phase", "nas_fraction",
                   "nas_group_size", "nas_pace_sigma")


class ConfigError(ValueError):
    """A bad environment configuration; the message names the offending key (``field``, when one field is at
    fault)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        self.field = field
        super().__init__(message)


class EmptyEpisodeError(ConfigError):
    """The configuration selects no job for an episode (a window start past the trace, a cluster that leaves out
    every job ...); allowed only with ``EnvConfig(allow_empty_episode=True)``."""


# Upper bounds on sizes, so a typo cannot exhaust memory or hang the env (the largest registered scenario uses
# 1,000-job windows and 32 x 33 + 1 actions)
MAX_WINDOW_JOBS = 1_000_000
MAX_ACTIONS = 2 ** 20  # window_size x (n_destinations + 1) + 1
MAX_SUB_BATCH_ACTIONS = 12  # sub-batch columns: accumulation steps 1, 2, 4, ... 2048
MAX_HISTORY = 1_000_000  # loss_history, render_history


@dataclass
class EnvConfig:
    """Every knob of :class:`clustergym.gym_env.ClusterEnv`.

    Cluster
      ``cluster``: preset name (``clustergym.core.presets.cluster_preset``: mlfs-80, mlfs-2474, hare-160, gavel-108,
      pai-2020, tiny-8, hetero-16, pollux-64, unisched-64, unisched-c96); ``cluster_file``: a cluster file
      (``load_cluster``), overrides ``cluster``.
    Workload
      ``workload``: ``"philly"`` (windows of the bundled Philly trace, or of ``trace_path``: a file in Philly's
      format, or with ``trace_mapping`` any CSV, the mapping a :class:`clustergym.core.traces.ColumnMapping` YAML
      path or dict of its fields; the file is read and checked when the env is made) or ``"generator"``
      (:func:`clustergym.core.generator.generate_trace` with ``generator`` keyword arguments; ``load`` defaults to 1;
      ``nas_fraction``, ``nas_group_size``, ``nas_pace_sigma``: NAS groups, :func:`clustergym.core.nas.make_nas_groups`)
      or ``"pollux"`` (one bundled Pollux workload per episode, drawn uniformly among the split's:
      :func:`clustergym.core.traces.pollux_split`, train = workloads 1-4 and test = 5-8 at ``train_fraction``
      0.5; run times drawn by :func:`clustergym.core.traces.fill_pollux_durations` with a seed from
      ``self.np_random``; ``window_jobs`` of at most 160 = its first that many jobs; no ``window_start``,
      ``window_period`` or ``trace_path``).
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
      GPU count: larger jobs could never run; a ``trace_path`` file's larger jobs are then an error naming
      their rows, raised when the env is made, unless ``max_job_gpus`` is given). Mapped jobs above it (GPU counts redrawn by
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
    Observation and actions (the row rule: :mod:`clustergym.window`)
      ``window_size`` (W rows; 64, so the whole queue of a contended 80-GPU cluster fits, docs/env.md),
      ``rows_per_job`` (cap on one job's waiting rows; 1 = one row per waiting job; None = no cap),
      ``migrate_rows`` (cap on migration-candidate rows, so tasks on overloaded servers cannot fill the
      window and starve the queue of a policy that does not migrate; None = no cap),
      ``preemption`` (running-job rows' "back to the queue" action suspends the whole job, while tasks
      wait; on, so preemptive policies such as Tiresias can act), ``running_rows`` (at most that many
      running-job rows; None = no cap), ``preempt_migrating`` (a running job shown by migration rows also gets
      a running-job row, so it can be preempted whole; off in the ``-v1`` ids, on in ``-v2``),
      ``preempt_empty_queue`` (a running job may be preempted while no task waits, e.g. to be placed again on
      faster GPUs, Hare's round-level rescheduling; off in ``-v1``, on in ``-v2``: it adds actions at the
      decision points there are, never a decision point),
      ``stop_option_actions`` (three columns per row that change the row's job's stopping rule, MLFS §3.5,
      under ``Simulator.stop_option_error``), ``gpu_actions`` (a destination
      column per GPU slot of each destination server, so a policy chooses the GPU, SJF-BSBF's sharing; off: the
      simulator's least-loaded GPU with room), ``sub_batch_actions`` (n columns per row that give the row's
      waiting job 1, 2, 4, ... 2^(n-1) sub-batches per iteration: gradient accumulation,
      :mod:`clustergym.core.accumulation`; 0 = none), ``n_destinations`` (K server columns), ``max_gpus_per_server`` (width of the
      per-GPU load matrix; None = the cluster's largest server), ``loss_history`` (recent loss reductions per job).
    Episode
      ``max_sim_time`` (s, truncation, inf = none), ``max_steps`` (agent steps, truncation, None = none).
      ``allow_empty_episode``: an episode without jobs raises :class:`EmptyEpisodeError` naming the setting at
      fault (a window start past the trace, a cluster that leaves out every job ...) unless this is True.
    Render
      ``render_history``: GPU-occupancy snapshots kept in the episode record that ``rgb_array`` draws
      (``env.unwrapped.episode_record``; bounded).

    Every field is validated on construction, one method per group (``_check_choices``, ``_check_workload``,
    ``_check_reward``, ``_check_observation``, ``_check_episode``, ``_check_nested``): numbers finite and in
    range, counts integers (sizes bounded by :data:`MAX_WINDOW_JOBS`, :data:`MAX_ACTIONS`, :data:`MAX_HISTORY`);
    a bad value raises :class:`ConfigError` whose ``field`` names it.
    """

    cluster: str = "mlfs-80"
    cluster_file: str | None = None
    workload: str = "philly"
    trace_path: str | None = None
    trace_mapping: str | dict | None = None
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
    # then of one size, so beta alone sets their balance as MLFS intends. Measured (2.48 TB per job, mean JCT 2.93 h):
    #   .venv/bin/python -c "from clustergym.eval.rollout import evaluate; import numpy as np;
    #   r = evaluate('mlf-h', 'clustergym/GPUClusterLight-v1', {'split': 'train'}, range(100, 120));
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
    preempt_migrating: bool = False
    preempt_empty_queue: bool = False
    stop_option_actions: bool = True
    gpu_actions: bool = False
    sub_batch_actions: int = 0
    n_destinations: int = 20
    max_gpus_per_server: int | None = None
    loss_history: int = 3
    max_sim_time: float = 30 * 86400.0
    max_steps: int | None = 50_000
    render_history: int = 256
    allow_empty_episode: bool = False

    def __post_init__(self) -> None:
        self._check_choices()
        self._check_workload()
        self._check_reward()
        self._check_observation()
        self._check_episode()
        for name in ("sim", "mapping", "generator"):
            d = getattr(self, name)
            if not isinstance(d, Mapping):
                raise ConfigError(f"{name} must be a dict, got {type(d).__name__}", name)
            setattr(self, name, dict(d))
        self._check_nested()

    def _check_choices(self) -> None:
        """Named options and switches."""
        for name, allowed in (("workload", ("philly", "generator", "pollux")), ("split", ("train", "test")),
                              ("invalid_action", ("raise", "penalty"))):
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}", name)
        for name in ("vector_reward", "preemption", "preempt_migrating", "preempt_empty_queue",
                     "stop_option_actions", "gpu_actions",
                     "allow_empty_episode"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}", name)
        if not isinstance(self.cluster, str):
            raise ConfigError(f"cluster must be a preset name, got {self.cluster!r}", "cluster")
        for name in ("cluster_file", "trace_path"):
            if getattr(self, name) is not None and not isinstance(getattr(self, name), (str, os.PathLike)):
                raise ConfigError(f"{name} must be a path or None, got {getattr(self, name)!r}", name)

    def _check_workload(self) -> None:
        """Which jobs an episode gets: trace file and its column mapping, window, split, job filter, mapping seed."""
        self._check_trace_mapping()
        self.window_jobs = _integer("window_jobs", self.window_jobs, 1, MAX_WINDOW_JOBS)
        if self.window_start is not None:
            self.window_start = _number("window_start", self.window_start, lo=0.0)
        _number("train_fraction", self.train_fraction, lo=0.0, lo_open=True, hi=1.0)
        if self.train_fraction == 1.0:
            raise ConfigError("train_fraction must be < 1 (the test split would be empty), got 1.0", "train_fraction")
        self.max_job_gpus = _integer("max_job_gpus", self.max_job_gpus, 1, none_ok=True)
        self.mapping_seed = _integer("mapping_seed", self.mapping_seed, 0, none_ok=True)
        for name in ("load", "window_period"):
            if getattr(self, name) is not None:
                setattr(self, name, _number(name, getattr(self, name), lo=0.0, lo_open=True))
        if self.load is not None and self.workload == "generator":
            raise ConfigError("load sets the offered load of trace windows (workload='philly'); a generated "
                              "workload takes generator.load (pass load=None to a registered scenario that sets "
                              "load)", "load")
        if self.workload == "pollux":
            self._check_pollux()
        if self.load is not None and self.window_jobs < 2:
            raise ConfigError(f"load needs window_jobs >= 2 (an offered load needs two arrivals), got "
                              f"{self.window_jobs}", "load")

    def _check_pollux(self) -> None:
        """A Pollux episode is one bundled workload from its first job: the fields that place a window in a trace
        or name another trace do not apply, ``window_jobs`` is at most the workload's size and
        ``train_fraction`` must leave each split a workload."""
        from .core.traces import POLLUX_WORKLOAD_JOBS, pollux_split

        for name in ("trace_path", "window_start", "window_period"):
            if getattr(self, name) is not None:
                raise ConfigError(f"{name} does not apply to workload='pollux' (an episode plays one bundled Pollux "
                                  f"workload from its first job), got {getattr(self, name)!r}", name)
        if self.window_jobs > POLLUX_WORKLOAD_JOBS:
            raise ConfigError(f"window_jobs must be at most {POLLUX_WORKLOAD_JOBS} with workload='pollux' (the jobs "
                              f"of one Pollux workload), got {self.window_jobs}", "window_jobs")
        try:
            pollux_split(self.split, self.train_fraction)
        except ValueError as e:
            raise ConfigError(str(e), "train_fraction") from None

    def _check_trace_mapping(self) -> None:
        """``trace_mapping``: a ColumnMapping (YAML path or dict of fields) for ``trace_path``, parsed now."""
        m = self.trace_mapping
        if m is None:
            return
        if not isinstance(m, (str, os.PathLike, Mapping)):
            raise ConfigError(f"trace_mapping must be a YAML path, a dict of column-mapping fields or None, got {m!r}",
                              "trace_mapping")
        if self.trace_path is None or self.workload != "philly":
            raise ConfigError("trace_mapping reads the trace_path file (workload='philly'); give trace_path",
                              "trace_mapping")
        from .core.traces import as_column_mapping

        try:
            as_column_mapping(dict(m) if isinstance(m, Mapping) else m)
        except (OSError, ValueError, TypeError) as e:
            raise ConfigError(f"trace_mapping: {e}", "trace_mapping") from None
        self.trace_mapping = dict(m) if isinstance(m, Mapping) else str(m)

    def _check_reward(self) -> None:
        """MLFS Eq. 7's weights, the normalising scales and the invalid-action penalty: finite, each in its range."""
        names = objective_names()
        w = self.reward_weights
        if isinstance(w, (str, bytes)) or not isinstance(w, Iterable):
            raise ConfigError(f"reward_weights must be {len(names)} numbers, got {w!r}", "reward_weights")
        w = tuple(w)
        if len(w) != len(names):
            raise ConfigError(f"reward_weights must have {len(names)} entries, one per objective {names}, "
                              f"got {len(w)}", "reward_weights")
        for name, v in zip(names, w):
            _number(f"reward_weights[{name}]", v, lo=0.0, field="reward_weights")
        self.reward_weights = tuple(float(v) for v in w)
        if not any(self.reward_weights) and not self.vector_reward:
            raise ConfigError("reward_weights are all 0: the scalar reward would always be 0", "reward_weights")
        self.time_scale = _number("time_scale", self.time_scale, lo=0.0, lo_open=True)
        self.bytes_scale = _number("bytes_scale", self.bytes_scale, lo=0.0, lo_open=True)
        # a cost: a positive "penalty" would reward invalid actions
        self.invalid_penalty = _number("invalid_penalty", self.invalid_penalty, hi=0.0)

    def _check_observation(self) -> None:
        """Window rows, destination columns and history lengths; the action space stays within MAX_ACTIONS."""
        self.window_size = _integer("window_size", self.window_size, 1)
        self.n_destinations = _integer("n_destinations", self.n_destinations, 1)
        self.sub_batch_actions = _integer("sub_batch_actions", self.sub_batch_actions, 0, MAX_SUB_BATCH_ACTIONS)
        # with gpu_actions the destination columns are multiplied by the cluster's GPUs per server, which only the
        # env knows: it checks the total again (ClusterEnv)
        columns = self.n_destinations + 1 + (3 if self.stop_option_actions else 0) + self.sub_batch_actions
        n_actions = self.window_size * columns + 1
        if n_actions > MAX_ACTIONS:
            raise ConfigError(f"window_size x {columns} columns + 1 = {n_actions} actions exceeds {MAX_ACTIONS}",
                              "window_size")
        self.rows_per_job = _integer("rows_per_job", self.rows_per_job, 1, none_ok=True)
        self.migrate_rows = _integer("migrate_rows", self.migrate_rows, 0, none_ok=True)
        self.running_rows = _integer("running_rows", self.running_rows, 0, none_ok=True)
        self.max_gpus_per_server = _integer("max_gpus_per_server", self.max_gpus_per_server, 1, none_ok=True)
        self.loss_history = _integer("loss_history", self.loss_history, 1, MAX_HISTORY)

    def _check_episode(self) -> None:
        """Truncation and the render record."""
        _number("max_sim_time", self.max_sim_time, lo=0.0, lo_open=True, inf_ok=True)
        self.max_steps = _integer("max_steps", self.max_steps, 1, none_ok=True)
        self.render_history = _integer("render_history", self.render_history, 1, MAX_HISTORY)

    def _check_nested(self) -> None:
        from .core.engine import SimConfig

        sim_keys = {f.name for f in fields(SimConfig)}
        bad = set(self.sim) - sim_keys
        if bad:
            raise ConfigError(f"unknown sim key(s) {sorted(bad)}; known: {sorted(sim_keys)}", "sim")
        if "horizon_s" in self.sim:
            raise ConfigError("sim.horizon_s is set from max_sim_time; give max_sim_time instead", "sim.horizon_s")
        try:
            sim = SimConfig(**self.sim, horizon_s=float(self.max_sim_time))
        except (TypeError, ValueError) as e:
            raise ConfigError(f"sim: {e}", f"sim.{getattr(e, 'field', '')}".rstrip(".")) from None
        if self.sub_batch_actions and sim.decide_on not in ("queue", "always"):
            # the simulator stops where a task fits; a job that fits only with a smaller sub-batch fits nowhere
            raise ConfigError(f"sub_batch_actions needs sim.decide_on 'queue' or 'always' (got {sim.decide_on!r}): "
                              f"a waiting job that fits only with a sub-batch would not make a decision point",
                              "sub_batch_actions")
        bad = set(self.generator) - set(_GENERATOR_KEYS)
        if bad:
            raise ConfigError(f"unknown generator key(s) {sorted(bad)}; known: {sorted(_GENERATOR_KEYS)}", "generator")
        from .core.nas import nas_option_error, nas_options

        bad = nas_option_error(*nas_options(self.generator))
        if bad:
            raise ConfigError(f"generator: {bad[1]}", f"generator.{bad[0]}")
        if self.mapping:
            from .core.mapping import MappingConfig

            keys = {f.name for f in fields(MappingConfig)}
            bad = set(self.mapping) - keys
            if bad:
                raise ConfigError(f"unknown mapping key(s) {sorted(bad)}; known: {sorted(keys)}", "mapping")
            try:
                MappingConfig(**self.mapping)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"mapping: {e}", "mapping") from None

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



def _number(name: str, v: Any, lo: float = -math.inf, lo_open: bool = False, hi: float = math.inf,
            inf_ok: bool = False, field: str | None = None) -> float:
    """``v`` as a float, or ConfigError naming ``name`` (the range rule: ``clustergym.core.config.number_error``)."""
    why = number_error(v, lo, lo_open, hi, inf_ok)
    if why:
        raise ConfigError(f"{name} {why} (got {v!r})", field or name)
    return float(v)


def _integer(name: str, v: Any, lo: int, hi: float = math.inf, none_ok: bool = False) -> int | None:
    """``v`` as an int (integral floats such as YAML's 1e3 accepted), or ConfigError naming ``name``."""
    if v is None and none_ok:
        return None
    why = number_error(v, lo, False, hi, False, integer=True)
    if why:
        raise ConfigError(f"{name} {why}{' or None' if none_ok else ''} (got {v!r})", name)
    return int(v)


def _yaml_mapping(path: str | os.PathLike) -> Any:
    """The YAML file's top-level value (an empty file: an empty dict); :meth:`EnvConfig.from_dict` checks it."""
    import yaml

    with open(path) as f:
        return yaml.safe_load(f) or {}
