"""Job trace loaders: the bundled Philly log, Pollux workloads, Alibaba PAI 2020, any CSV through a column
mapping; windows and splits. Every loader returns the canonical trace of :mod:`clustergym.core.trace_schema`
and raises :class:`TraceError` naming the file, row, column and reason for malformed input.
"""
from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import pandas as pd

from .trace_schema import (CANONICAL_COLUMNS, CHECKS, OPTIONAL_COLUMNS, REQUIRED_COLUMNS, TIME_UNITS,  # noqa: F401
                           Checker, TraceError, TraceWarning, apply_min_duration, audit, finish, read_csv,
                           source_row, traces_dir, validate)
from .trace_csv import ColumnMapping, as_column_mapping, load_csv  # noqa: F401  (any CSV: the loaders' family)

log = logging.getLogger(__name__)

POLLUX_WORKLOADS: tuple[str, ...] = tuple(f"workload-{i}" for i in range(1, 9))

PAI_JOB_COLUMNS: tuple[str, ...] = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS: tuple[str, ...] = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                                     "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")


# --------------------------------------------------------------------------------------------- Philly

def load_philly(path: str | os.PathLike | None = None, limit: int | None = None,
                min_duration: float | None = None, checks: str | None = None) -> pd.DataFrame:
    """The Microsoft Philly job log as processed by Pollux (bundled: ``traces/philly.csv.gz``).

    Source columns ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, the submission time), ``duration`` (s),
    ``num_gpus``, ``gpu_time``, ``cluster``. submit_time = seconds from the earliest timestamp; rows are
    sorted by submit time (stable: ties keep file order) and numbered 0..n-1 in that order.
    ``limit`` keeps the first ``limit`` jobs by submit time. ``min_duration`` (explicit filter, off by
    default) removes jobs shorter than that many seconds and records the count in ``attrs["filters"]``.
    ``checks`` (:func:`~clustergym.core.trace_schema.audit`): default ``"warn"`` for a file you give,
    ``"report"`` for the bundled trace, whose counts (unsorted rows, 65 duplicated rows) ``traces/README.md``
    states.
    """
    checks = checks or ("warn" if path is not None else "report")
    path = Path(path) if path is not None else traces_dir() / "philly.csv.gz"
    raw, rows = read_csv(path, dtype={"timestamp": "string", "cluster": "string"})
    ck = Checker(path, raw, 1, rows)
    ck.require("timestamp", "duration", "num_gpus")
    ts = ck.datetime("timestamp", "%Y-%m-%d %H:%M:%S")
    dur = ck.numeric("duration", min_value=0, what="duration")
    gpus = ck.numeric("num_gpus", integer=True, min_value=1, what="GPU count")
    t0 = ts.min() if len(ts) else None
    out = pd.DataFrame({"submit_time": (ts - t0).dt.total_seconds() if len(ts) else pd.Series(dtype=float),
                        "n_gpus": gpus, "duration": dur})
    if "cluster" in raw:
        out["cluster"] = raw["cluster"]
    out["source_row"] = rows
    report = audit(out, path, checks, raw)
    filters: dict[str, int] = {}
    out = apply_min_duration(out, min_duration, path, filters)
    out = finish(out, path, t0, filters, rebase=False, report=report)
    if limit is not None:
        out = out.iloc[:int(limit)].copy()
    return out


# ------------------------------------------------------------------------------------ Pollux workloads

def _pollux_path(name_or_path: str | int | os.PathLike) -> Path:
    s = str(name_or_path)
    if s.isdigit():
        s = f"workload-{s}"
    if s in POLLUX_WORKLOADS:
        d = traces_dir() / "pollux-workloads"
        for cand in (d / f"{s}.csv", d / f"{s}.csv.gz"):
            if cand.exists():
                return cand
        raise TraceError(d / f"{s}.csv", "bundled Pollux workload not found")
    return Path(name_or_path)


def load_pollux_workload(name_or_path: str | int | os.PathLike, checks: str = "warn") -> pd.DataFrame:
    """A Pollux (OSDI '21) workload: ``workload-1`` .. ``workload-8`` (bundled) or a path.

    Source columns ``name, time, application, num_replicas, batch_size``: submit_time = ``time`` (s from the
    workload start, not rebased), n_gpus = ``num_replicas``, model = ``application`` (Pollux names: bert,
    cifar10, deepspeech2, imagenet, ncf, yolov3; :mod:`clustergym.core.mapping` aliases them to the catalogue).
    Pollux runs each job to convergence, so the workload has **no duration: the column is NaN**; use
    :func:`fill_pollux_durations` (explicit, seeded) before mapping to job specs. ``checks``: what unsorted
    rows, duplicated rows and reused job names do (:func:`~clustergym.core.trace_schema.audit`).
    """
    path = _pollux_path(name_or_path)
    raw, rows = read_csv(path, dtype={"name": "string", "application": "string"})
    ck = Checker(path, raw, 1, rows)
    ck.require("name", "time", "application", "num_replicas")
    t = ck.numeric("time", min_value=0, what="submit time")
    n = ck.numeric("num_replicas", integer=True, min_value=1, what="GPU count")
    ck.fail(raw["application"].isna().to_numpy(), "application", lambda i: "missing value")
    out = pd.DataFrame({"submit_time": t, "n_gpus": n, "duration": np.nan,
                        "model": raw["application"].astype(str), "name": raw["name"].astype(str)})
    if "batch_size" in raw:
        out["batch_size"] = ck.numeric("batch_size", integer=True, min_value=1).astype("int64")
    out["source_row"] = rows
    report = audit(out, path, checks, raw, ids=raw["name"])
    return finish(out, path, None, {}, rebase=False, report=report)


# Each bundled workload holds 160 jobs over about 8 hours (tests/test_traces.py checks it).
POLLUX_WORKLOAD_JOBS = 160


def pollux_split(split: str, train_fraction: float = 0.5) -> tuple[str, ...]:
    """The bundled Pollux workloads of a split: train = the first ``round(8 x train_fraction)`` of
    :data:`POLLUX_WORKLOADS` (workload-1 .. workload-4 at 0.5), test = the rest, so the two never share a
    workload. ValueError if either would be empty."""
    k = int(round(len(POLLUX_WORKLOADS) * train_fraction))
    if not 0 < k < len(POLLUX_WORKLOADS):
        raise ValueError(f"train_fraction {train_fraction!r} puts {k} of the {len(POLLUX_WORKLOADS)} Pollux "
                         "workloads in the train split: each split needs at least one")
    if split not in ("train", "test"):
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    return POLLUX_WORKLOADS[:k] if split == "train" else POLLUX_WORKLOADS[k:]


# Pollux's simulator/workload.py assigned applications by the Philly job's GPU time (SOURCE.md):
# < 1 GPU-h -> cifar10/ncf, < 10 -> deepspeech2/bert, < 100 -> yolov3, else imagenet.
POLLUX_GPU_HOUR_BUCKETS: dict[str, tuple[float, float]] = {
    "cifar10": (0.0, 1.0), "ncf": (0.0, 1.0), "deepspeech2": (1.0, 10.0), "bert": (1.0, 10.0),
    "yolov3": (10.0, 100.0), "imagenet": (100.0, math.inf)}


def fill_pollux_durations(df: pd.DataFrame, seed: int, philly: pd.DataFrame | None = None) -> pd.DataFrame:
    """Give Pollux workload jobs a duration, consistently with how Pollux labelled them.

    Rule: for each job, draw a Philly job (bundled trace, seeded) whose GPU time lies in the job's
    application bucket (:data:`POLLUX_GPU_HOUR_BUCKETS`), and set duration = that GPU time / the job's
    n_gpus. The job keeps its GPU-time class, which is what Pollux's application label encodes.
    Returns a copy; rows that already have a duration are left alone.
    """
    philly = load_philly() if philly is None else philly
    gh = (philly["duration"] * philly["n_gpus"] / 3600.0).to_numpy()
    rng = np.random.default_rng(seed)
    out = df.copy()
    need = out["duration"].isna().to_numpy()
    u = rng.random(len(out))
    durs = out["duration"].to_numpy(dtype=float).copy()
    pools: dict[str, np.ndarray] = {}
    for i in np.flatnonzero(need):
        app = str(out["model"].iloc[i]).lower()
        if app not in POLLUX_GPU_HOUR_BUCKETS:
            raise TraceError(df.attrs.get("source"), f"no GPU-time bucket for application {app!r}",
                             row=source_row(df, i), column="model")
        if app not in pools:
            lo, hi = POLLUX_GPU_HOUR_BUCKETS[app]
            pools[app] = np.sort(gh[(gh >= lo) & (gh < hi)])
        pool = pools[app]
        durs[i] = pool[min(int(u[i] * len(pool)), len(pool) - 1)] * 3600.0 / float(out["n_gpus"].iloc[i])
    out["duration"] = durs
    out.attrs = dict(df.attrs)
    return out


# ------------------------------------------------------------------------------------ Alibaba PAI 2020

def _read_pai(path: Path, columns: tuple[str, ...]) -> tuple[pd.DataFrame, np.ndarray, int]:
    """PAI tables are headerless; accept a header row too if it spells the expected column names."""
    with open(path, "rt", encoding="utf-8", errors="replace") as fh:
        first = fh.readline().strip().split(",")
    has_header = first[:2] == list(columns[:2])
    if has_header:
        raw, rows = read_csv(path, dtype="string")
    else:
        raw, rows = read_csv(path, header=None, dtype="string")
        if raw.shape[1] != len(columns):
            raise TraceError(path, f"expected {len(columns)} columns {list(columns)}, found {raw.shape[1]}")
        raw.columns = list(columns)
    return raw, rows, int(has_header)


def _pai_task_totals(task_path: Path, tasks: pd.DataFrame, header_lines: int, job_names: set) -> pd.DataFrame:
    """Per job of ``job_names``: its tasks' earliest start, latest end, summed GPUs (plan_gpu percent x
    instances) and first GPU type."""
    tasks = tasks[tasks["job_name"].isin(job_names)].reset_index(drop=True)
    tck = Checker(task_path, tasks, header_lines, tasks["_row"].to_numpy())
    ts = tck.numeric("start_time", min_value=0, what="start_time")
    te = tck.numeric("end_time", min_value=0, what="end_time")
    tck.fail((te < ts).to_numpy(), "end_time",
             lambda i: f"negative duration: end_time {tasks['end_time'].iloc[i]} < start_time {tasks['start_time'].iloc[i]}")
    inst = tck.numeric("inst_num", integer=True, min_value=1, what="inst_num")
    pg = tck.numeric("plan_gpu", min_value=0, allow_missing=True, what="plan_gpu").fillna(0.0)
    return pd.DataFrame({"job_name": tasks["job_name"], "ts": ts, "te": te, "g": pg / 100.0 * inst,
                         "gpu_type": tasks["gpu_type"]}).groupby("job_name", sort=False).agg(
        start=("ts", "min"), end=("te", "max"), gpus=("g", "sum"), gpu_type=("gpu_type", "first"))


def load_pai_jobs(job_table: str | os.PathLike, task_table: str | os.PathLike,
                  statuses: Iterable[str] = ("Terminated", "Failed"), drop_cpu_only: bool = True,
                  checks: str = "warn") -> pd.DataFrame:
    """Alibaba PAI 2020 (``pai_job_table.csv`` + ``pai_task_table.csv``, headerless as released).

    Rules (documented in ``docs/workloads.md``):

    - submit_time: the job table's ``start_time`` (Unix seconds; the trace's job submission time), rebased
      to the earliest submit.
    - duration: from the job's tasks: ``max(task end_time) - min(task start_time)`` (run time, queueing
      excluded). A task with end < start is an error.
    - n_gpus: ``ceil(sum over tasks of plan_gpu / 100 * inst_num)`` (plan_gpu is percent of one GPU; PAI
      shares GPUs fractionally, a gang needs the rounded-up total).
    - statuses: only jobs whose status is in ``statuses`` are kept (default Terminated and Failed: both
      ran to an end and held GPUs; Running/Waiting jobs have no end). Removed jobs are counted in
      ``attrs["filters"]``. Tasks of kept jobs must have numeric start and end times.
    - ``drop_cpu_only``: jobs whose tasks request no GPU are removed and counted (else: TraceError).
      Jobs with no task rows are removed and counted as well.
    - ``checks``: what job-table rows out of submit order do (:func:`~clustergym.core.trace_schema.audit`;
      a repeated ``job_name`` is always an error).
    """
    job_path, task_path = Path(job_table), Path(task_table)
    jobs, jrows, jh = _read_pai(job_path, PAI_JOB_COLUMNS)
    tasks, trows, th = _read_pai(task_path, PAI_TASK_COLUMNS)
    jck, tck = Checker(job_path, jobs, jh, jrows), Checker(task_path, tasks, th, trows)
    jck.require(*PAI_JOB_COLUMNS)
    tck.require(*PAI_TASK_COLUMNS)
    jck.fail(jobs["job_name"].isna().to_numpy(), "job_name", lambda i: "missing value")
    jck.fail(jobs["job_name"].duplicated().to_numpy(), "job_name",
             lambda i: f"duplicate job_name {jobs['job_name'].iloc[i]!r}")
    statuses = tuple(statuses)
    filters: dict[str, int] = {}
    keep = jobs["status"].isin(statuses).to_numpy()
    filters[f"status not in {list(statuses)}"] = int((~keep).sum())
    jobs, jrows = jobs[keep].reset_index(drop=True), jrows[keep]
    jck = Checker(job_path, jobs, jh, jrows)
    submit = jck.numeric("start_time", min_value=0, what="start_time")

    agg = _pai_task_totals(task_path, tasks.assign(_row=trows), th, set(jobs["job_name"]))
    merged = jobs[["job_name", "user"]].assign(submit_time=submit.to_numpy(), _row=jrows).merge(
        agg, left_on="job_name", right_index=True, how="left")
    no_tasks = merged["start"].isna().to_numpy()
    filters["no task rows"] = int(no_tasks.sum())
    merged = merged[~no_tasks]
    cpu_only = (merged["gpus"] <= 0).to_numpy()
    if cpu_only.any() and not drop_cpu_only:
        r = int(merged["_row"].iloc[int(np.flatnonzero(cpu_only)[0])])
        raise TraceError(job_path, "job requests no GPU (plan_gpu empty or 0 in all its tasks)",
                         row=r, column="job_name", line=r + jh)
    filters["CPU-only (no plan_gpu)"] = int(cpu_only.sum())
    merged = merged[~cpu_only]
    for rule, n in filters.items():
        if n:
            log.info("%s: removed %d jobs: %s", job_path, n, rule)
    out = pd.DataFrame({"submit_time": merged["submit_time"].to_numpy(),
                        "n_gpus": np.ceil(merged["gpus"].to_numpy() - 1e-9).astype(np.int64),
                        "duration": (merged["end"] - merged["start"]).to_numpy(),
                        "user": merged["user"].to_numpy(), "job_name": merged["job_name"].to_numpy(),
                        "gpu_type": merged["gpu_type"].to_numpy(), "source_row": merged["_row"].to_numpy()})
    report = audit(out, job_path, checks, header_lines=jh)
    t0 = float(out["submit_time"].min()) if len(out) else None
    return finish(out, job_path, t0, filters, report=report)


# ------------------------------------------------------------------------------- windows and splits

def window(df: pd.DataFrame, start: float, n_jobs: int | None = None, duration: float | None = None,
           rebase: bool = True) -> pd.DataFrame:
    """Cut an episode: the jobs submitted at or after ``start`` (seconds), either the first ``n_jobs`` of
    them or those submitted before ``start + duration`` (exactly one of the two). With ``rebase``,
    submit times and deadlines are shifted by ``-start`` (the window opens at t = 0). ``job_id`` keeps the
    source numbering, so windows can be traced back to the trace."""
    if (n_jobs is None) == (duration is None):
        raise ValueError("window: give exactly one of n_jobs and duration")
    t = df["submit_time"].to_numpy()
    lo = int(np.searchsorted(t, start, side="left"))
    if n_jobs is not None:
        if n_jobs < 0:
            raise ValueError("window: n_jobs must be >= 0")
        hi = min(len(df), lo + int(n_jobs))
    else:
        if duration < 0:
            raise ValueError("window: duration must be >= 0")
        hi = int(np.searchsorted(t, start + duration, side="left"))
    out = df.iloc[lo:hi].copy()
    if rebase:
        out["submit_time"] = out["submit_time"] - start
        if "deadline" in out:
            out["deadline"] = out["deadline"] - start
    out.attrs = {**df.attrs, "window": {"start": float(start), "n_jobs": n_jobs, "duration": duration}}
    return out


def arrival_span(submit_time: Sequence[float] | np.ndarray) -> float:
    """The time over which a window's ``n`` jobs arrive: ``n`` mean inter-arrival gaps,
    ``n (t_last - t_first) / (n - 1)`` (so ``n / span`` is the window's arrival rate, the rate the generator's
    ``load`` sets). Needs at least two jobs; 0 when they all arrive at one instant."""
    t = np.asarray(submit_time, dtype=float)
    if len(t) < 2:
        raise ValueError(f"arrival_span: need at least two arrivals, got {len(t)}")
    return float(len(t) * (t.max() - t.min()) / (len(t) - 1))


def window_offered_load(submit_time: Sequence[float] | np.ndarray, work: Sequence[float] | np.ndarray,
                        cluster_gpus: int) -> float:
    """Offered load of a window: ``sum(work) / (cluster_gpus x arrival_span)``, where ``work`` is each job's
    GPU-seconds (GPUs x its reference run time: how long it takes alone on the reference hardware).
    Equal to ``rate x mean work / cluster_gpus`` with the window's own arrival rate and mean work: the
    definition of :mod:`clustergym.core.generator`'s ``load``. inf when every job arrives at one instant."""
    w = np.asarray(work, dtype=float)
    if len(w) != len(submit_time):
        raise ValueError(f"window_offered_load: {len(w)} work values for {len(submit_time)} arrivals")
    if cluster_gpus < 1:
        raise ValueError(f"window_offered_load: cluster_gpus must be >= 1, got {cluster_gpus}")
    span = arrival_span(submit_time)
    return float(w.sum() / (cluster_gpus * span)) if span > 0 else math.inf


def check_load(load: Any) -> float:
    """``load`` as a float, or ValueError naming it unless it is a finite number > 0."""
    x = float(load) if isinstance(load, (int, float, np.integer, np.floating)) else math.nan
    if isinstance(load, bool) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"load must be a finite number > 0, got {load!r}")
    return x


def compress_arrivals(submit_time: Sequence[float] | np.ndarray, work: Sequence[float] | np.ndarray,
                      cluster_gpus: int, load: float) -> np.ndarray:
    """New arrival times for a window whose offered load (:func:`window_offered_load`) becomes ``load``:
    every inter-arrival gap is multiplied by one factor (``window_offered_load / load``; < 1 compresses,
    > 1 stretches), the first arrival stays where it is and the order of arrivals is kept."""
    x = check_load(load)
    t = np.asarray(submit_time, dtype=float)
    current = window_offered_load(t, work, cluster_gpus)
    if not math.isfinite(current):
        raise ValueError(f"load={load}: the window's {len(t)} jobs all arrive at t = {t.min():g} s, so there is "
                         "no inter-arrival time to scale")
    t0 = float(t.min())
    return t0 + (t - t0) * (current / x)


def split_trace(df: pd.DataFrame, train_fraction: float, by: str = "jobs") -> tuple[pd.DataFrame, pd.DataFrame]:
    """Split a trace by time into (train, held-out) parts that are disjoint and together complete.

    The cut is a time ``c``: train = jobs submitted before ``c``, held-out = the rest. ``by="jobs"`` puts
    the cut at the submit time of job ``round(train_fraction * n)`` (jobs sharing that submit time all go
    to held-out, so the fraction is approximate when times tie); ``by="time"`` cuts the time span
    [first, last submit] at ``train_fraction``. Neither part is rebased (use :func:`window` for episodes).
    """
    if not 0.0 <= train_fraction <= 1.0:
        raise ValueError("split_trace: train_fraction must be in [0, 1]")
    t = df["submit_time"].to_numpy()
    if len(t) == 0:
        return df.copy(), df.copy()
    if by == "jobs":
        k = int(round(train_fraction * len(t)))
        cut = math.inf if k >= len(t) else t[k]
    elif by == "time":
        cut = t[0] + train_fraction * (t[-1] - t[0]) if train_fraction < 1.0 else math.inf
    else:
        raise ValueError("split_trace: by must be 'jobs' or 'time'")
    k = int(np.searchsorted(t, cut, side="left"))
    train, test = df.iloc[:k].copy(), df.iloc[k:].copy()
    train.attrs = {**df.attrs, "split": ("train", float(cut))}
    test.attrs = {**df.attrs, "split": ("held-out", float(cut))}
    return train, test
