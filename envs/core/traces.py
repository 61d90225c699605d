"""Job traces: the canonical trace schema and loaders for the bundled and external job logs.

Canonical trace = a :class:`pandas.DataFrame`, one row per job, sorted by ``submit_time`` (stable):

============================  ========  ===========================================================
column                        dtype     meaning
============================  ========  ===========================================================
``job_id``                    int64     0..n-1 in submit order (loaders number jobs after sorting)
``submit_time``               float64   seconds from the trace start (file loaders: earliest submit = 0)
``n_gpus``                    int64     GPUs the job asked for (>= 1)
``duration``                  float64   run time in seconds (>= 0); NaN only where a source has no
                                        run time (Pollux workloads, see :func:`load_pollux_workload`)
``model`` (optional)          str       model / application name as the source spells it
``deadline`` (optional)       float64   absolute deadline, seconds on the same clock as submit_time
``urgency`` (optional)        int64     1..10
``accuracy_requirement`` (o)  float64   0..1
``cluster``, ``user`` (o)     str       virtual cluster / user, where the source has them
============================  ========  ===========================================================

Loaders may keep extra source columns (e.g. Pollux's ``batch_size``, PAI's ``job_name``).
``df.attrs`` records ``source`` (file), ``t0`` (the absolute time of submit_time 0, when known) and
``filters`` (``{rule: rows removed}`` for every explicit filter that was applied).

Errors: malformed input raises :class:`TraceError` naming the file, the row, the column and the reason.
Rows are numbered the way a user finds them in the file: **row N is the N-th data row, 1-based, header
excluded**; the message also gives the physical line number (header lines counted). Validation is
vectorised; the error reports the first offending row. Nothing is dropped silently: filters are explicit
options, logged and counted in ``df.attrs["filters"]``.
"""
from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "n_gpus", "duration")
OPTIONAL_COLUMNS: tuple[str, ...] = ("model", "deadline", "urgency", "accuracy_requirement", "cluster", "user")
CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS

POLLUX_WORKLOADS: tuple[str, ...] = tuple(f"workload-{i}" for i in range(1, 9))

PAI_JOB_COLUMNS: tuple[str, ...] = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS: tuple[str, ...] = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                                     "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")

_TIME_UNITS: dict[str, float] = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


class TraceError(ValueError):
    """A malformed trace. ``row`` is the 1-based data row (header excluded), ``line`` the physical line."""

    def __init__(self, file: str | os.PathLike | None, reason: str, row: int | None = None,
                 column: str | None = None, line: int | None = None) -> None:
        self.file = str(file) if file is not None else "<data>"
        self.row, self.column, self.reason, self.line = row, column, reason, line
        where = [self.file]
        if row is not None:
            where.append(f"data row {row}" + (f" (line {line})" if line is not None else ""))
        if column is not None:
            where.append(f"column {column!r}")
        super().__init__(": ".join(where) + f": {reason}")


# ----------------------------------------------------------------------------------------------- paths

def traces_dir() -> Path:
    """The bundled ``traces/`` folder (repository root), or ``$CLUSTERGYM_TRACES`` if set."""
    env = os.environ.get("CLUSTERGYM_TRACES")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "traces"


# ------------------------------------------------------------------------------ vectorised validation

class _Checker:
    """Vectorised column checks over a frame read from ``file``; index i = data row i+1."""

    def __init__(self, file: Any, df: pd.DataFrame, header_lines: int = 1, row_numbers: np.ndarray | None = None):
        self.file, self.df, self.header_lines = file, df, header_lines
        # row_numbers[i] = 1-based data row of frame row i (differs from i+1 only if rows were removed)
        self.rows = np.arange(1, len(df) + 1) if row_numbers is None else np.asarray(row_numbers)

    def fail(self, mask: np.ndarray | pd.Series, column: str, reason_of) -> None:
        mask = np.asarray(mask, dtype=bool)
        if mask.any():
            i = int(np.flatnonzero(mask)[0])
            row = int(self.rows[i])
            raise TraceError(self.file, reason_of(i), row=row, column=column, line=row + self.header_lines)

    def require(self, *columns: str) -> None:
        for c in columns:
            if c not in self.df.columns:
                raise TraceError(self.file, f"missing column (columns present: {list(self.df.columns)})",
                                 column=c)

    def raw(self, column: str, i: int) -> Any:
        return self.df[column].iloc[i]

    def numeric(self, column: str, *, integer: bool = False, min_value: float | None = None,
                strict_min: bool = False, allow_missing: bool = False, what: str = "") -> pd.Series:
        s = self.df[column]
        missing = s.isna().to_numpy()
        if not allow_missing:
            self.fail(missing, column, lambda i: "missing value")
        if pd.api.types.is_numeric_dtype(s) and not pd.api.types.is_bool_dtype(s):
            v = s.astype("float64")
        else:
            v = pd.to_numeric(s.astype("string").str.strip(), errors="coerce").astype("float64")
            self.fail(v.isna().to_numpy() & ~missing, column, lambda i: f"not a number: {self.raw(column, i)!r}")
        vals = v.to_numpy()
        ok = ~np.isnan(vals)
        self.fail(ok & ~np.isfinite(vals), column, lambda i: f"not a finite number: {self.raw(column, i)!r}")
        if integer:
            self.fail(ok & (vals != np.round(vals)), column, lambda i: f"not an integer: {self.raw(column, i)!r}")
        if min_value is not None:
            bad = ok & ((vals <= min_value) if strict_min else (vals < min_value))
            rel = ">" if strict_min else ">="
            self.fail(bad, column, lambda i: f"{what or 'value'} must be {rel} {min_value:g} (got {self.raw(column, i)!r})")
        return v

    def datetime(self, column: str, fmt: str | None, allow_missing: bool = False) -> pd.Series:
        s = self.df[column]
        missing = s.isna().to_numpy()
        if not allow_missing:
            self.fail(missing, column, lambda i: "missing value")
        kw = {"format": fmt} if fmt else {"format": "mixed"}
        t = pd.to_datetime(s.astype("string").str.strip(), errors="coerce", **kw)
        self.fail(t.isna().to_numpy() & ~missing, column,
                  lambda i: f"unparseable date {self.raw(column, i)!r}" + (f" (format {fmt!r})" if fmt else ""))
        return t


def _read_csv(path: Path, **kw) -> tuple[pd.DataFrame, np.ndarray]:
    """Read a CSV keeping blank lines visible, so row numbers match the file. Trailing blank lines are
    not data and are cut; an interior blank line is an error. Returns the frame and its 1-based data rows."""
    if not Path(path).exists():
        raise TraceError(path, "file not found")
    try:
        df = pd.read_csv(path, skip_blank_lines=False, **kw)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise TraceError(path, f"cannot parse CSV: {e}") from None
    blank = df.isna().all(axis=1).to_numpy()
    if blank.any():
        last = len(blank)
        while last > 0 and blank[last - 1]:
            last -= 1
        df = df.iloc[:last]
        blank = blank[:last]
        if blank.any():
            i = int(np.flatnonzero(blank)[0])
            header = 0 if kw.get("header", "infer") is None else 1
            raise TraceError(path, "empty line / empty row", row=i + 1, line=i + 1 + header)
    if len(df) == 0:
        raise TraceError(path, "no data rows (the file holds only a header)")
    return df.reset_index(drop=True), np.arange(1, len(df) + 1)


def _finish(out: pd.DataFrame, source: Any, t0: Any = None, filters: dict[str, int] | None = None,
            sort: bool = True, rebase: bool = True) -> pd.DataFrame:
    """Sort stably by submit time, rebase to the earliest submit, number jobs, set dtypes and attrs."""
    if rebase and len(out):
        first = float(out["submit_time"].min())
        out["submit_time"] = out["submit_time"] - first
        if "deadline" in out:
            out["deadline"] = out["deadline"] - first
    if sort:
        out = out.sort_values("submit_time", kind="stable").reset_index(drop=True)
    out["job_id"] = np.arange(len(out), dtype=np.int64)
    out["submit_time"] = out["submit_time"].astype("float64")
    out["n_gpus"] = out["n_gpus"].astype("int64")
    out["duration"] = out["duration"].astype("float64")
    if "urgency" in out:
        out["urgency"] = out["urgency"].astype("int64")
    order = [c for c in CANONICAL_COLUMNS if c in out] + [c for c in out.columns if c not in CANONICAL_COLUMNS]
    out = out[order]
    out.attrs = {"source": str(source), "t0": None if t0 is None else str(t0), "filters": dict(filters or {})}
    return out


def _apply_min_duration(out: pd.DataFrame, min_duration: float | None, source: Any,
                        filters: dict[str, int]) -> pd.DataFrame:
    if min_duration is None:
        return out
    keep = ~(out["duration"] < min_duration)  # NaN durations are kept
    removed = int((~keep).sum())
    filters[f"duration<{min_duration:g}s"] = removed
    log.info("%s: removed %d rows with duration < %g s (explicit min_duration filter)", source, removed, min_duration)
    return out[keep].reset_index(drop=True)


def validate(df: pd.DataFrame, allow_missing_duration: bool = False, source: str = "<frame>") -> pd.DataFrame:
    """Check a frame against the canonical schema (for frames built elsewhere); returns it unchanged."""
    ck = _Checker(source, df.reset_index(drop=True))
    ck.require(*REQUIRED_COLUMNS)
    ck.numeric("job_id", integer=True, min_value=0)
    ck.numeric("submit_time", min_value=0, what="submit_time")
    ck.numeric("n_gpus", integer=True, min_value=1, what="GPU count")
    ck.numeric("duration", min_value=0, allow_missing=allow_missing_duration, what="duration")
    if "deadline" in df:
        d = ck.numeric("deadline", allow_missing=True)
        ck.fail((d <= ck.df["submit_time"]).to_numpy(), "deadline", lambda i: "deadline must be after submit_time")
    if "urgency" in df:
        u = ck.numeric("urgency", integer=True, allow_missing=True, min_value=1)
        ck.fail((u > 10).to_numpy(), "urgency", lambda i: "urgency must be in 1..10")
    if "accuracy_requirement" in df:
        a = ck.numeric("accuracy_requirement", allow_missing=True, min_value=0)
        ck.fail((a > 1).to_numpy(), "accuracy_requirement", lambda i: "accuracy_requirement must be in [0, 1]")
    if not df["submit_time"].is_monotonic_increasing:
        raise TraceError(source, "rows are not sorted by submit_time")
    return df


# --------------------------------------------------------------------------------------------- Philly

def load_philly(path: str | os.PathLike | None = None, limit: int | None = None,
                min_duration: float | None = None) -> pd.DataFrame:
    """The Microsoft Philly job log as processed by Pollux (bundled: ``traces/philly.csv.gz``).

    Source columns ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, the submission time), ``duration`` (s),
    ``num_gpus``, ``gpu_time``, ``cluster``. submit_time = seconds from the earliest timestamp; rows are
    sorted by submit time (stable: ties keep file order) and numbered 0..n-1 in that order.
    ``limit`` keeps the first ``limit`` jobs by submit time. ``min_duration`` (explicit filter, off by
    default) removes jobs shorter than that many seconds and records the count in ``attrs["filters"]``.
    """
    path = Path(path) if path is not None else traces_dir() / "philly.csv.gz"
    raw, rows = _read_csv(path, dtype={"timestamp": "string", "cluster": "string"})
    ck = _Checker(path, raw, 1, rows)
    ck.require("timestamp", "duration", "num_gpus")
    ts = ck.datetime("timestamp", "%Y-%m-%d %H:%M:%S")
    dur = ck.numeric("duration", min_value=0, what="duration")
    gpus = ck.numeric("num_gpus", integer=True, min_value=1, what="GPU count")
    t0 = ts.min() if len(ts) else None
    out = pd.DataFrame({"submit_time": (ts - t0).dt.total_seconds() if len(ts) else pd.Series(dtype=float),
                        "n_gpus": gpus, "duration": dur})
    if "cluster" in raw:
        out["cluster"] = raw["cluster"]
    filters: dict[str, int] = {}
    out = _apply_min_duration(out, min_duration, path, filters)
    out = _finish(out, path, t0, filters, rebase=False)
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


def load_pollux_workload(name_or_path: str | int | os.PathLike) -> pd.DataFrame:
    """A Pollux (OSDI '21) workload: ``workload-1`` .. ``workload-8`` (bundled) or a path.

    Source columns ``name, time, application, num_replicas, batch_size``: submit_time = ``time`` (s from the
    workload start, not rebased), n_gpus = ``num_replicas``, model = ``application`` (Pollux names: bert,
    cifar10, deepspeech2, imagenet, ncf, yolov3; :mod:`clustergym.core.mapping` aliases them to the catalogue).
    Pollux runs each job to convergence, so the workload has **no duration: the column is NaN**; use
    :func:`fill_pollux_durations` (explicit, seeded) before mapping to job specs.
    """
    path = _pollux_path(name_or_path)
    raw, rows = _read_csv(path, dtype={"name": "string", "application": "string"})
    ck = _Checker(path, raw, 1, rows)
    ck.require("name", "time", "application", "num_replicas")
    t = ck.numeric("time", min_value=0, what="submit time")
    n = ck.numeric("num_replicas", integer=True, min_value=1, what="GPU count")
    ck.fail(raw["application"].isna().to_numpy(), "application", lambda i: "missing value")
    out = pd.DataFrame({"submit_time": t, "n_gpus": n, "duration": np.nan,
                        "model": raw["application"].astype(str), "name": raw["name"].astype(str)})
    if "batch_size" in raw:
        out["batch_size"] = ck.numeric("batch_size", integer=True, min_value=1).astype("int64")
    return _finish(out, path, None, {}, rebase=False)


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
                             row=i + 1, column="model")
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
        raw, rows = _read_csv(path, dtype="string")
    else:
        raw, rows = _read_csv(path, header=None, dtype="string")
        if raw.shape[1] != len(columns):
            raise TraceError(path, f"expected {len(columns)} columns {list(columns)}, found {raw.shape[1]}")
        raw.columns = list(columns)
    return raw, rows, int(has_header)


def load_pai_jobs(job_table: str | os.PathLike, task_table: str | os.PathLike,
                  statuses: Iterable[str] = ("Terminated", "Failed"), drop_cpu_only: bool = True) -> pd.DataFrame:
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
    """
    job_path, task_path = Path(job_table), Path(task_table)
    jobs, jrows, jh = _read_pai(job_path, PAI_JOB_COLUMNS)
    tasks, trows, th = _read_pai(task_path, PAI_TASK_COLUMNS)
    jck, tck = _Checker(job_path, jobs, jh, jrows), _Checker(task_path, tasks, th, trows)
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
    jck = _Checker(job_path, jobs, jh, jrows)
    submit = jck.numeric("start_time", min_value=0, what="start_time")

    tasks = tasks.assign(_row=trows)
    tasks = tasks[tasks["job_name"].isin(set(jobs["job_name"]))].reset_index(drop=True)
    tck = _Checker(task_path, tasks, th, tasks["_row"].to_numpy())
    ts = tck.numeric("start_time", min_value=0, what="start_time")
    te = tck.numeric("end_time", min_value=0, what="end_time")
    tck.fail((te < ts).to_numpy(), "end_time",
             lambda i: f"negative duration: end_time {tasks['end_time'].iloc[i]} < start_time {tasks['start_time'].iloc[i]}")
    inst = tck.numeric("inst_num", integer=True, min_value=1, what="inst_num")
    pg = tck.numeric("plan_gpu", min_value=0, allow_missing=True, what="plan_gpu").fillna(0.0)
    agg = pd.DataFrame({"job_name": tasks["job_name"], "ts": ts, "te": te, "g": pg / 100.0 * inst,
                        "gpu_type": tasks["gpu_type"]}).groupby("job_name", sort=False).agg(
        start=("ts", "min"), end=("te", "max"), gpus=("g", "sum"), gpu_type=("gpu_type", "first"))
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
                        "gpu_type": merged["gpu_type"].to_numpy()})
    t0 = float(out["submit_time"].min()) if len(out) else None
    return _finish(out, job_path, t0, filters)


# ----------------------------------------------------------------------------------- generic CSV

_MAPPABLE = ("job_id", "submit_time", "n_gpus", "duration", "end_time", "model", "deadline", "urgency",
             "accuracy_requirement", "cluster", "user")


@dataclass
class ColumnMapping:
    """How to read an arbitrary job CSV into the canonical schema.

    ``columns`` maps canonical field -> source column. Required: ``submit_time`` and either ``duration``
    or ``end_time`` (duration = end - submit... see ``duration_from_end``); ``n_gpus`` unless a default
    is given. Optional: ``job_id`` (kept as ``source_job_id``), model, deadline, urgency,
    accuracy_requirement, cluster, user.

    - ``time_unit`` (s, ms, min, h): unit of numeric submit/end/deadline times; or ``datetime_format``
      (strftime, e.g. ``%Y-%m-%d %H:%M:%S``; ``"auto"`` lets pandas infer): those columns are dates.
    - ``duration_unit``: unit of the duration column.
    - ``gpu_scale``: n_gpus = ceil(value x gpu_scale) (e.g. 0.01 for percent-of-a-GPU columns).
    - ``defaults``: value for a canonical field whose column is absent, or whose cell is empty.
    - ``deadline_relative``: the deadline column is a span after submit (in ``duration_unit``).
    - ``min_duration``: explicit filter (seconds), off by default; the removal count is reported.
    - ``delimiter``, ``header`` (False: no header row; then ``names`` gives the column names).
    """

    columns: dict[str, str]
    time_unit: str = "s"
    datetime_format: str | None = None
    duration_unit: str = "s"
    gpu_scale: float = 1.0
    defaults: dict[str, Any] = field(default_factory=dict)
    deadline_relative: bool = False
    min_duration: float | None = None
    delimiter: str = ","
    header: bool = True
    names: list[str] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.columns) - set(_MAPPABLE)
        if unknown:
            raise ValueError(f"ColumnMapping: unknown canonical fields {sorted(unknown)}; allowed {list(_MAPPABLE)}")
        if "submit_time" not in self.columns:
            raise ValueError("ColumnMapping: columns must map 'submit_time'")
        if "duration" not in self.columns and "end_time" not in self.columns:
            raise ValueError("ColumnMapping: columns must map 'duration' or 'end_time'")
        if "n_gpus" not in self.columns and "n_gpus" not in self.defaults:
            raise ValueError("ColumnMapping: map 'n_gpus' or give defaults['n_gpus']")
        for u in (self.time_unit, self.duration_unit):
            if u not in _TIME_UNITS:
                raise ValueError(f"ColumnMapping: unknown time unit {u!r}; use one of {list(_TIME_UNITS)}")
        if not self.header and not self.names:
            raise ValueError("ColumnMapping: header=False needs names")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ColumnMapping":
        allowed = {f.name for f in fields(cls)}
        unknown = set(d) - allowed
        if unknown:
            raise ValueError(f"ColumnMapping: unknown keys {sorted(unknown)}; allowed {sorted(allowed)}")
        return cls(**dict(d))

    @classmethod
    def from_yaml(cls, path: str | os.PathLike) -> "ColumnMapping":
        import yaml

        with open(path, "rt", encoding="utf-8") as fh:
            d = yaml.safe_load(fh)
        if not isinstance(d, dict):
            raise ValueError(f"{path}: a column mapping must be a YAML mapping")
        try:
            return cls.from_dict(d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None


def load_csv(path: str | os.PathLike, mapping: ColumnMapping | Mapping[str, Any] | str | os.PathLike) -> pd.DataFrame:
    """Load any job CSV with a :class:`ColumnMapping` (or a dict, or a YAML path) into the canonical schema.
    Times are rebased to the earliest submit; rows sorted by submit time (stable) and numbered."""
    if isinstance(mapping, (str, os.PathLike)):
        mapping = ColumnMapping.from_yaml(mapping)
    elif not isinstance(mapping, ColumnMapping):
        mapping = ColumnMapping.from_dict(mapping)
    m, path = mapping, Path(path)
    kw: dict[str, Any] = {"sep": m.delimiter, "dtype": "string"}
    if not m.header:
        kw.update(header=None, names=m.names)
    raw, rows = _read_csv(path, **kw)
    hl = 1 if m.header else 0
    ck = _Checker(path, raw, hl, rows)
    ck.require(*m.columns.values())
    src = {k: m.columns[k] for k in m.columns}
    scale_t, scale_d = _TIME_UNITS[m.time_unit], _TIME_UNITS[m.duration_unit]

    def filled(canon: str) -> None:
        """Fill empty cells of a mapped column from defaults (in place on raw)."""
        if canon in m.defaults and canon in src:
            raw[src[canon]] = raw[src[canon]].fillna(str(m.defaults[canon]))

    for k in src:
        filled(k)

    def times(canon: str, allow_missing: bool = False) -> pd.Series:
        c = src[canon]
        if m.datetime_format:
            t = ck.datetime(c, None if m.datetime_format == "auto" else m.datetime_format, allow_missing)
            return t
        return ck.numeric(c, allow_missing=allow_missing) * scale_t

    sub = times("submit_time")
    is_dt = m.datetime_format is not None
    t0 = sub.min() if len(sub) else None

    def rel(t: pd.Series) -> pd.Series:
        return (t - t0).dt.total_seconds() if is_dt else t - t0

    out = pd.DataFrame({"submit_time": rel(sub) if len(sub) else sub})
    if "duration" in src:
        out["duration"] = ck.numeric(src["duration"], min_value=0, what="duration") * scale_d
    else:
        end = times("end_time")
        d = rel(end) - out["submit_time"]
        ck.fail((d < 0).to_numpy(), src["end_time"], lambda i: "negative duration: end_time before submit_time")
        out["duration"] = d
    if "n_gpus" in src:
        g = ck.numeric(src["n_gpus"], min_value=0, what="GPU count") * m.gpu_scale
        ck.fail((g <= 0).to_numpy(), src["n_gpus"], lambda i: f"zero GPUs (got {raw[src['n_gpus']].iloc[i]!r})")
        gi = np.ceil(g.to_numpy() - 1e-9)
        if m.gpu_scale == 1.0:
            ck.numeric(src["n_gpus"], integer=True)
        out["n_gpus"] = gi.astype(np.int64)
    else:
        out["n_gpus"] = int(m.defaults["n_gpus"])
    if "deadline" in src:
        if m.deadline_relative:
            dl = ck.numeric(src["deadline"], min_value=0, strict_min=True, allow_missing=True, what="deadline") * scale_d
            out["deadline"] = out["submit_time"] + dl
        else:
            out["deadline"] = rel(times("deadline", allow_missing=True))
        ck.fail((out["deadline"] <= out["submit_time"]).to_numpy(), src["deadline"],
                lambda i: "deadline must be after submit time")
    elif "deadline" in m.defaults:
        out["deadline"] = out["submit_time"] + float(m.defaults["deadline"]) * scale_d
    if "urgency" in src:
        u = ck.numeric(src["urgency"], integer=True, min_value=1, what="urgency")
        ck.fail((u > 10).to_numpy(), src["urgency"], lambda i: "urgency must be in 1..10")
        out["urgency"] = u.astype("int64")
    elif "urgency" in m.defaults:
        out["urgency"] = int(m.defaults["urgency"])
    if "accuracy_requirement" in src:
        a = ck.numeric(src["accuracy_requirement"], min_value=0, what="accuracy_requirement")
        ck.fail((a > 1).to_numpy(), src["accuracy_requirement"], lambda i: "accuracy_requirement must be in [0, 1]")
        out["accuracy_requirement"] = a
    elif "accuracy_requirement" in m.defaults:
        out["accuracy_requirement"] = float(m.defaults["accuracy_requirement"])
    for k in ("model", "cluster", "user"):
        if k in src:
            ck.fail(raw[src[k]].isna().to_numpy(), src[k], lambda i: "missing value")
            out[k] = raw[src[k]].astype(str).to_numpy()
        elif k in m.defaults:
            out[k] = str(m.defaults[k])
    if "job_id" in src:
        out["source_job_id"] = raw[src["job_id"]].astype(str).to_numpy()
    filters: dict[str, int] = {}
    out = _apply_min_duration(out, m.min_duration, path, filters)
    return _finish(out, path, t0, filters, rebase=False)


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
