"""Turning canonical trace rows into :class:`JobSpec` s, the way MLFS §4.1 did.

A trace gives arrival time, GPU count and run time, rarely a model and never a task graph. MLFS (§4.1)
assigned each trace job one of its ML algorithms, ran it with data and model parallelism on the job's GPUs,
and kept the trace's iteration count. We do the same with the catalogue and the DAG cost model:

- **model**: the trace's own model if it has one, resolved through :data:`MODEL_ALIASES` (Pollux names)
  or by name (case/punctuation-insensitive) against the catalogue; else a seeded draw from
  ``config.model_weights`` (default: uniform over the catalogue; :data:`MLFS_MODEL_WEIGHTS` gives the
  five MLFS algorithms). An unknown trace model is an error unless ``unknown_model="sample"`` (a trace read
  through a column mapping brings its own rule, by default "sample": :mod:`clustergym.core.trace_csv`).
- **parallelism** (MLFS: "we also set the number of model partitions to this number [of GPUs]"; SVM
  data-parallel only): with ``partitioning="max"`` n_partitions is the largest divisor of n_gpus that is
  <= the model's ``max_partitions`` (and ``config.max_partitions``), 1 for ``parallelism == "none"``;
  n_replicas = n_gpus / n_partitions, so n_partitions x n_replicas == n_gpus always. ``"random"`` draws
  the partition count uniformly among those admissible divisors; ``"data"`` uses 1 partition.
- **GPU count**: the trace's, or with ``gpu_choices`` (e.g. :data:`MLFS_GPU_CHOICES`) a uniform draw from
  those counts per job, as MLFS §4.1 did ("randomly selected from {1, 2, 4, 8, 16, 32}"); the job keeps its
  trace duration, so its iteration budget is the trace's run time on the redrawn GPUs.
- **sync**: parameter server with probability ``ps_probability``, else all-reduce.
- **iterations**: ``max_iterations = max(1, round(duration / t_it))`` where ``t_it`` is
  :func:`clustergym.core.dag.reference_iteration_time` on dedicated ``reference_gpu`` GPUs (default V100, the
  MLFS testbed GPU) packed onto reference servers: the job re-runs its trace duration on the reference
  hardware. The reference server (GPUs per server, NIC and intra-server bandwidth) is the target cluster's
  when one is given (:func:`reference_server`: the server shape holding most of its GPUs), so a job
  placed compactly on an idle cluster runs about its trace duration. Without a cluster it is 8 GPUs,
  10 Gbit/s NIC, 100 Gbit/s intra-server. (An earlier version always used 8 GPUs per server with a
  100 Gbit/s link; on the 4-GPU/10 Gbit/s MLFS cluster every multi-server job then ran slower than t_e
  before any contention and missed its 1.1 t_e deadline whatever the scheduler did.)
- **deadline**: the trace's, if it has one; else ``submit + max(1.1 t_e, t_r)``, t_e = max_iterations x
  t_it, t_r ~ U[0.5, 24] h (MLFS §4.1).
- **urgency** ~ U{1..10}; **accuracy requirement**: the trace's, else U[0.6, 0.95] x the final accuracy
  of the model's curve (Pollux's Philly CSV has no completion status to use as MLFS did).
- **SLO class** from ``slo_mix`` (UniSched classes; default all "strict": every MLFS job has a deadline);
  **stop option** from ``stop_mix`` (default all "run-all": users submit their iteration counts, as on
  today's clusters, MLFS §3.5 option i) and **stop_changeable** with probability
  ``stop_changeable_probability`` (default 1: the system may change every job's option). MLFS's own
  schedulers then run every changeable job with OptStop (§4: "we assume that all jobs use OptStop") and the
  comparison methods run the iterations the users asked for (a scheduler's choice:
  ``Policy.system_stop_option``); ``stop_mix={"opt-stop": 1}`` gives OptStop to every job whatever the
  scheduler.
- **data size** ~ U[100, 1000] MB, **communication volumes** (PS<->worker, worker<->worker) ~ U[50, 100]
  MB each (MLFS §4.1).

All randomness comes from one ``numpy.random.Generator(PCG64(seed))``; every draw is made for every job
in a fixed order (whether or not the trace overrides it), so the same seed gives identical specs in any
process, and adding a trace column does not shift the other draws.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd

from .config import number_error
from .trace_schema import source_row
from .workload import MLFS_GPU_CHOICES, MLFS_MODEL_WEIGHTS, SLO_CLASSES, STOP_OPTIONS, JobSpec  # noqa: F401

# Source-trace model names -> catalogue model names (resolved loosely, see _norm).
MODEL_ALIASES: dict[str, str] = {
    # Pollux (OSDI '21) applications
    "cifar10": "ResNet-18", "imagenet": "ResNet-50", "ncf": "Recommendation", "bert": "BERT",
    "deepspeech2": "DeepSpeech2", "yolov3": "YOLOv3",
    # MLFS §4.1 algorithm names
    "lm": "LSTM", "resnet": "ResNet-50",
}

# An even UniSched MIX2-style mix (UniSched gives no proportions).
UNISCHED_MIX2: dict[str, float] = {"best-effort": 1.0, "soft": 1.0, "strict": 1.0}


@dataclass(frozen=True)
class MappingConfig:
    model_weights: Mapping[str, float] | None = None
    keep_trace_model: bool = True
    aliases: Mapping[str, str] = field(default_factory=lambda: dict(MODEL_ALIASES))  # extend MODEL_ALIASES
    unknown_model: str = "error"            # "error" | "sample"
    partitioning: str = "max"               # "max" | "random" | "data"
    max_partitions: int | None = None
    ps_probability: float = 0.5
    reference_gpu: str = "V100"
    # Reference server for t_it; None = the target cluster's (see reference_server), else 8 / 10 / 100.
    gpus_per_server: int | None = None
    nic_gbps: float | None = None
    intra_gbps: float | None = None
    deadline_factor: float = 1.1
    deadline_range_h: tuple[float, float] = (0.5, 24.0)
    urgency_range: tuple[int, int] = (1, 10)
    accuracy_fraction: tuple[float, float] = (0.6, 0.95)
    slo_mix: Mapping[str, float] = field(default_factory=lambda: {"strict": 1.0})
    stop_mix: Mapping[str, float] = field(default_factory=lambda: {"run-all": 1.0})
    stop_changeable_probability: float = 1.0
    data_size_mb: tuple[float, float] = (100.0, 1000.0)
    comm_mb: tuple[float, float] = (50.0, 100.0)
    use_trace_fields: bool = True           # deadline / urgency / accuracy_requirement from the trace
    # MLFS §4.1 GPU counts: None = the trace's; a tuple = each job's count redrawn uniformly from it (see redraw_gpus)
    gpu_choices: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        # aliases given extend the default table (and win over it): a trace's own names need not restate it
        object.__setattr__(self, "aliases", {**MODEL_ALIASES, **dict(self.aliases)})
        if self.unknown_model not in ("error", "sample"):
            raise ValueError("unknown_model must be 'error' or 'sample'")
        if self.partitioning not in ("max", "random", "data"):
            raise ValueError("partitioning must be 'max', 'random' or 'data'")
        if not 0.0 <= self.ps_probability <= 1.0 or not 0.0 <= self.stop_changeable_probability <= 1.0:
            raise ValueError("probabilities must be in [0, 1]")
        for name, mix, allowed in (("slo_mix", self.slo_mix, SLO_CLASSES), ("stop_mix", self.stop_mix, STOP_OPTIONS)):
            bad = set(mix) - set(allowed)
            if bad or not mix or any(w < 0 for w in mix.values()) or sum(mix.values()) <= 0:
                raise ValueError(f"{name} must give non-negative weights over {allowed}, summing > 0 (got {dict(mix)})")
        lo, hi = self.urgency_range
        if not 1 <= lo <= hi <= 10:
            raise ValueError("urgency_range must lie in 1..10")
        if self.gpus_per_server is not None and int(self.gpus_per_server) < 1:
            raise ValueError(f"gpus_per_server must be >= 1 (got {self.gpus_per_server!r})")
        for name in ("nic_gbps", "intra_gbps"):
            v = getattr(self, name)
            if v is not None and not v > 0:
                raise ValueError(f"{name} must be > 0 (got {v!r})")
        if self.gpu_choices is not None:
            choices = tuple(self.gpu_choices) if isinstance(self.gpu_choices, (list, tuple)) else ()
            if not choices or not all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) and c >= 1
                                      for c in choices):
                raise ValueError(f"gpu_choices must be None or a non-empty list of GPU counts >= 1 (got {self.gpu_choices!r})")
            object.__setattr__(self, "gpu_choices", tuple(int(c) for c in choices))
        self._check_ranges()

    def _check_ranges(self) -> None:
        """The numeric draws' parameters: finite, in range, (low, high) pairs ordered; weights finite and >= 0."""
        checks = (("deadline_factor", self.deadline_factor, 0.0, True, math.inf),
                  ("max_partitions", self.max_partitions, 1.0, False, math.inf))
        for name, v, lo, lo_open, hi in checks:
            why = None if v is None else number_error(v, lo, lo_open, hi, integer=name == "max_partitions")
            if why:
                raise ValueError(f"{name} {why} (got {v!r})")
        for name, hi in (("deadline_range_h", math.inf), ("accuracy_fraction", 1.0), ("data_size_mb", math.inf),
                         ("comm_mb", math.inf)):
            pair = getattr(self, name)
            if len(pair) != 2 or any(number_error(v, 0.0, False, hi) for v in pair) or pair[0] > pair[1]:
                raise ValueError(f"{name} must be (low, high) with 0 <= low <= high <= {hi:g}, finite (got {pair!r})")
        for name, mix in (("model_weights", self.model_weights or {}), ("slo_mix", self.slo_mix),
                          ("stop_mix", self.stop_mix)):
            bad = {k: w for k, w in mix.items() if number_error(w, 0.0)}
            if bad:
                raise ValueError(f"{name}: weights must be finite numbers >= 0 (got {bad})")


def trace_mapping_config(rules: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None) -> MappingConfig:
    """The MappingConfig of a trace: the model rules its column mapping set (``load_csv``'s ``attrs["mapping"]``:
    ``aliases``, ``unknown_model``) under ``overrides`` (MappingConfig fields; their aliases extend the trace's)."""
    base, over = dict(rules or {}), dict(overrides or {})
    if "aliases" in base and "aliases" in over:
        over["aliases"] = {**base["aliases"], **over["aliases"]}
    return MappingConfig(**{**base, **over})


# Used when neither the config nor a cluster gives the reference server.
DEFAULT_REFERENCE_SERVER = (8, 10.0, 100.0)


def reference_server(cluster: Any) -> tuple[int, float, float]:
    """(GPUs per server, NIC Gbit/s, intra-server Gbit/s) of the server shape that holds the most GPUs
    of ``cluster`` (ties: the first such shape in server order)."""
    held: dict[tuple[int, float, float], int] = {}
    for s in cluster.servers:
        if s.n_gpus > 0:
            key = (int(s.n_gpus), float(s.nic_gbps), float(s.intra_gbps))
            held[key] = held.get(key, 0) + int(s.n_gpus)
    if not held:
        return DEFAULT_REFERENCE_SERVER
    return max(held, key=held.__getitem__)  # max keeps the first of equal counts (dict order)


# ------------------------------------------------------------------------- catalogue / DAG (lazy)

def _catalogue() -> tuple[Sequence[str], Callable[[str], Any]]:
    from . import catalogue_data

    return list(catalogue_data.model_names()), catalogue_data.get_model


def _reference_iteration_time() -> Callable[..., float]:
    from .dag import reference_iteration_time

    return reference_iteration_time


def _norm(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def resolve_model(name: str, names: Sequence[str], aliases: Mapping[str, str] = MODEL_ALIASES) -> str | None:
    """Catalogue name for a trace / config model name (alias table first, then loose name match)."""
    by_norm = {_norm(n): n for n in names}
    alias = {_norm(k): v for k, v in aliases.items()}
    key = _norm(name)
    if key in by_norm:
        return by_norm[key]
    if key in alias:
        return by_norm.get(_norm(alias[key]))
    return None


def split_gpus(n_gpus: int, parallelism: str, max_partitions: int, mode: str = "max", u: float = 0.0) -> tuple[int, int]:
    """(n_partitions, n_replicas) for a job of ``n_gpus`` GPUs; see the module docstring for the rule."""
    if n_gpus < 1:
        raise ValueError("n_gpus must be >= 1")
    cap = 1 if (parallelism == "none" or mode == "data") else max(1, int(max_partitions))
    divisors = [d for d in range(1, min(n_gpus, cap) + 1) if n_gpus % d == 0]
    p = divisors[-1] if mode != "random" else divisors[min(int(u * len(divisors)), len(divisors) - 1)]
    return p, n_gpus // p


def _pick(mix: Mapping[str, float], u: np.ndarray, order: Sequence[str]) -> np.ndarray:
    keys = [k for k in order if mix.get(k, 0) > 0]
    w = np.array([mix[k] for k in keys], dtype=float)
    cdf = np.cumsum(w / w.sum())
    idx = np.minimum(np.searchsorted(cdf, u, side="right"), len(keys) - 1)
    return np.array(keys, dtype=object)[idx]


def _col(df: pd.DataFrame, name: str) -> np.ndarray | None:
    return df[name].to_numpy() if name in df.columns else None


def _draws(rng: np.random.Generator, n: int, cfg: MappingConfig) -> dict[str, np.ndarray]:
    """The random fields of ``n`` jobs, one array each, drawn in a fixed order (part of the mapping's
    reproducibility: reordering them changes every mapped workload)."""
    d = {"model": rng.random(n), "part": rng.random(n), "sync": rng.random(n)}
    d["t_r"] = rng.uniform(cfg.deadline_range_h[0] * 3600.0, cfg.deadline_range_h[1] * 3600.0, n)
    d["urgency"] = rng.integers(cfg.urgency_range[0], cfg.urgency_range[1] + 1, n)
    d["acc_frac"] = rng.uniform(cfg.accuracy_fraction[0], cfg.accuracy_fraction[1], n)
    d["slo"] = _pick(cfg.slo_mix, rng.random(n), SLO_CLASSES)
    d["stop"] = _pick(cfg.stop_mix, rng.random(n), STOP_OPTIONS)
    d["changeable"] = rng.random(n) < cfg.stop_changeable_probability
    d["data_mb"] = rng.uniform(cfg.data_size_mb[0], cfg.data_size_mb[1], n)
    d["comm_ps"] = rng.uniform(cfg.comm_mb[0], cfg.comm_mb[1], n)
    d["comm_w"] = rng.uniform(cfg.comm_mb[0], cfg.comm_mb[1], n)
    return d


def _sample_models(cfg: MappingConfig, names: Any, u: np.ndarray) -> list[str]:
    """A catalogue model per job from uniform draws ``u``: uniform over the catalogue, or by
    ``cfg.model_weights``."""
    if cfg.model_weights is None:
        pool = list(names)
        weights = np.ones(len(pool))
    else:
        pool, wl = [], []
        for k, w in cfg.model_weights.items():
            r = resolve_model(k, names, cfg.aliases)
            if r is None:
                raise ValueError(f"model_weights: {k!r} is not in the catalogue {list(names)}")
            if w > 0:
                pool.append(r)
                wl.append(float(w))
        weights = np.array(wl)
        if not pool:
            raise ValueError("model_weights: no model with positive weight")
    cdf = np.cumsum(weights / weights.sum())
    return [pool[i] for i in np.minimum(np.searchsorted(cdf, u, side="right"), len(pool) - 1)]


def _trace_model(raw: str, names: Any, cfg: MappingConfig, where: str) -> str | None:
    """The catalogue model a trace's model name resolves to; None (keep the sampled one) if it resolves to
    none and ``cfg.unknown_model`` is "sample"."""
    r = resolve_model(raw, names, cfg.aliases)
    if r is None and cfg.unknown_model == "error":
        raise ValueError(f"{where}: trace model {raw!r} is not in the catalogue {list(names)} nor in the alias "
                         "table; add an alias or use unknown_model='sample'")
    return r


def _where(df: pd.DataFrame, i: int, jid: int, source: str) -> str:
    """Job ``jid`` at row ``i`` of ``df``, named by its row in the trace's file (a window's rows are not)."""
    return f"job {jid} ({source or 'trace'} data row {source_row(df, i)})"


def _given(column: np.ndarray | None, i: int, otherwise: Callable[[], Any]) -> Any:
    """The trace's value in row ``i`` of ``column`` (as a float) when present, else ``otherwise()``."""
    if column is not None and not pd.isna(column[i]):
        return float(column[i])
    return otherwise()


# ------------------------------------------------------------ MLFS §4.1 GPU counts (option gpu_choices)

def redraw_gpus(rng: np.random.Generator, n: int, choices: Sequence[int]) -> np.ndarray:
    """``n`` GPU counts drawn uniformly from ``choices`` (MLFS §4.1: "The number of GPUs needed by each ML job
    was randomly selected from {1, 2, 4, 8, 16, 32}"). :func:`to_job_specs` draws them from its generator
    after every other field, so setting ``gpu_choices`` changes no other draw of the mapping."""
    pool = np.asarray(tuple(choices), dtype=np.int64)
    return pool[rng.integers(0, len(pool), n)]


# ----------------------------------------------------------------------------- reference hardware

def _reference_hardware(cfg: MappingConfig, cluster: Any) -> tuple[int, float, float]:
    """(GPUs per server, NIC Gbit/s, intra-server Gbit/s) of t_it: the config's fields, else the cluster's
    :func:`reference_server`, else :data:`DEFAULT_REFERENCE_SERVER`."""
    base = reference_server(cluster) if cluster is not None else DEFAULT_REFERENCE_SERVER
    gps, nic, intra = (base[i] if v is None else v
                       for i, v in enumerate((cfg.gpus_per_server, cfg.nic_gbps, cfg.intra_gbps)))
    return int(gps), float(nic), float(intra)


def reference_run_time(spec: JobSpec, config: MappingConfig | None = None, cluster: Any = None) -> float:
    """t_e of a job: ``max_iterations`` x its iteration time on the reference hardware, i.e. how long it runs
    alone on dedicated ``reference_gpu`` GPUs packed onto reference servers. For a job :func:`to_job_specs`
    mapped with the same ``config`` and ``cluster`` it is the t_e of its deadline ``max(1.1 t_e, t_r)``."""
    cfg = config or MappingConfig()
    _, get_model = _catalogue()
    t_it = _reference_iteration_time()(get_model(spec.model), spec.n_partitions, spec.n_replicas, spec.sync,
                                       cfg.reference_gpu, spec.comm_ps_mb, spec.comm_worker_mb,
                                       *_reference_hardware(cfg, cluster))
    return spec.max_iterations * float(t_it)


def to_job_specs(df: pd.DataFrame, seed: int, config: MappingConfig | None = None,
                 cluster: Any = None) -> list[JobSpec]:
    """Map a canonical trace (see :mod:`clustergym.core.traces`) to job specs. Deterministic in ``seed``.
    ``cluster`` (a :class:`~clustergym.core.hardware.ClusterSpec`) supplies the reference server for the
    fields ``config`` leaves as None. Without ``config``, the trace's own model rules apply
    (:func:`trace_mapping_config` of ``df.attrs["mapping"]``, set by ``load_csv``), else the defaults."""
    cfg = config or trace_mapping_config(df.attrs.get("mapping"))
    ref_server = _reference_hardware(cfg, cluster)
    names, get_model = _catalogue()
    ref_time = _reference_iteration_time()
    n = len(df)
    rng = np.random.Generator(np.random.PCG64(seed))
    d = _draws(rng, n, cfg)
    sampled = _sample_models(cfg, names, d["model"])

    trace_model = _col(df, "model") if cfg.keep_trace_model else None
    trace_deadline, trace_urg, trace_acc = (_col(df, c) if cfg.use_trace_fields else None
                                            for c in ("deadline", "urgency", "accuracy_requirement"))
    job_ids = df["job_id"].to_numpy()
    submit = df["submit_time"].to_numpy(dtype=float)
    gpus = df["n_gpus"].to_numpy() if cfg.gpu_choices is None else redraw_gpus(rng, n, cfg.gpu_choices)
    dur = df["duration"].to_numpy(dtype=float)
    source = Path(str(df.attrs.get("source", ""))).name if df.attrs.get("source") else ""  # file name: machine-independent

    models: dict[str, Any] = {}
    cache: dict[tuple, float] = {}
    specs: list[JobSpec] = []
    for i in range(n):
        jid = int(job_ids[i])
        if not math.isfinite(dur[i]) or dur[i] < 0:
            raise ValueError(f"{_where(df, i, jid, source)}: duration {dur[i]!r} is missing or negative; "
                             "fill it first (e.g. traces.fill_pollux_durations)")
        name = sampled[i]
        if trace_model is not None and not pd.isna(trace_model[i]):
            name = _trace_model(str(trace_model[i]), names, cfg, _where(df, i, jid, source)) or name
        model = models.get(name)
        if model is None:
            model = models[name] = get_model(name)
        cap = model.max_partitions if cfg.max_partitions is None else min(model.max_partitions, cfg.max_partitions)
        p, r = split_gpus(int(gpus[i]), model.parallelism, cap, cfg.partitioning, float(d["part"][i]))
        sync = "ps" if d["sync"][i] < cfg.ps_probability else "allreduce"
        key = (name, p, r, sync, float(d["comm_ps"][i]), float(d["comm_w"][i]))
        t_it = cache.get(key)
        if t_it is None:  # the same arguments as the key, then the reference server
            t_it = cache[key] = float(ref_time(model, *key[1:3], sync, cfg.reference_gpu, *key[4:],
                                               int(ref_server[0]), float(ref_server[1]), float(ref_server[2])))
        if not t_it > 0:
            raise ValueError(f"job {jid}: reference iteration time {t_it!r} for {name} must be > 0")
        iters = max(1, int(round(dur[i] / t_it)))
        t_e = iters * t_it
        deadline = _given(trace_deadline, i, lambda: float(submit[i] + max(cfg.deadline_factor * t_e, d["t_r"][i])))
        urg = int(_given(trace_urg, i, lambda: d["urgency"][i]))
        acc = _given(trace_acc, i, lambda: float(min(1.0, max(0.0, d["acc_frac"][i] * model.curve.final_accuracy))))
        specs.append(JobSpec(
            job_id=jid, submit_time=float(submit[i]), model=name, n_partitions=p, n_replicas=r,
            max_iterations=iters, accuracy_requirement=acc, deadline=deadline, urgency=urg, sync=sync,
            slo_class=str(d["slo"][i]), stop_option=str(d["stop"][i]), stop_changeable=bool(d["changeable"][i]),
            data_size_mb=float(d["data_mb"][i]), comm_ps_mb=float(d["comm_ps"][i]), comm_worker_mb=float(d["comm_w"][i]),
            reference_runtime=float(dur[i]), source=source))
    return specs
