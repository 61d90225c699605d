"""The canonical job-trace schema, its validation and the reading helpers every trace loader shares.

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
options, logged and counted in ``df.attrs["filters"]``. File loaders keep each job's data row in the column
``source_row``, so later errors (the mapping to job specs, a window) name the row of the file. A trace with
no job left (a header-only file, or filters that remove every row) is refused.

What the schema tolerates but a user should know is counted by :func:`audit` into ``df.attrs["report"]``:
``unsorted_rows`` (rows submitted before an earlier row of the file; the trace is sorted stably),
``duplicate_rows`` (identical in every column to an earlier row), ``duplicate_ids`` (a job id or name seen in
an earlier, different row) and ``unattainable_deadlines`` (deadline - submit shorter than the job's own run
time). The loaders' ``checks`` parameter says what else happens (:data:`CHECKS`): ``"warn"`` (the default for
your files) a :class:`TraceWarning` per kind with its count and first row; ``"error"`` a :class:`TraceError` at
the first unsorted, duplicated or duplicate-id row (an unattainable deadline stays a warning: the job is valid,
it just cannot meet it); ``"report"`` the counts only.
"""
from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "submit_time", "n_gpus", "duration")
OPTIONAL_COLUMNS: tuple[str, ...] = ("model", "deadline", "urgency", "accuracy_requirement", "cluster", "user")
CANONICAL_COLUMNS: tuple[str, ...] = REQUIRED_COLUMNS + OPTIONAL_COLUMNS


TIME_UNITS: dict[str, float] = {"ms": 1e-3, "s": 1.0, "min": 60.0, "h": 3600.0}


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


class TraceWarning(UserWarning):
    """Something a trace's rows hold that the schema tolerates (unsorted, duplicated, unattainable deadlines)."""


CHECKS: tuple[str, ...] = ("warn", "error", "report")


# ----------------------------------------------------------------------------------------------- paths

def traces_dir() -> Path:
    """``$CLUSTERGYM_TRACES`` if set, else the bundled traces: the data package ``clustergym.traces`` (the
    repository's ``traces/`` folder, which ``pyproject.toml`` maps onto it), found through ``importlib.resources``
    so the same path works in a checkout, an editable install and an installed wheel."""
    env = os.environ.get("CLUSTERGYM_TRACES")
    if env:
        return Path(env)
    from importlib import resources

    bundled = resources.files("clustergym.traces")
    if not isinstance(bundled, Path):  # e.g. imported from a zip archive: the loaders read files by path
        raise TraceError(str(bundled), "the bundled traces are not a folder on disk (is clustergym installed as a "
                         "zip?); install it unpacked or set $CLUSTERGYM_TRACES to a folder holding the traces")
    return bundled


# ------------------------------------------------------------------------------ vectorised validation

class Checker:
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


def read_csv(path: Path, **kw) -> tuple[pd.DataFrame, np.ndarray]:
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


def source_row(df: pd.DataFrame, i: int) -> int:
    """The file's data row of row ``i`` of a canonical trace (``source_row``); ``i + 1`` for a frame built in
    memory (generated, or assembled without a file)."""
    return int(df["source_row"].iloc[i]) if "source_row" in df.columns else i + 1


def row_list(rows: Any, limit: int = 5) -> str:
    """``"data rows 3, 7, 9 and 4 more"``: the first ``limit`` of the 1-based data rows ``rows``, for messages."""
    rows = [int(r) for r in rows]
    shown = ", ".join(str(r) for r in rows[:limit])
    return f"data row{'s' if len(rows) > 1 else ''} {shown}" + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def audit(out: pd.DataFrame, source: Any, checks: str, raw: pd.DataFrame | None = None, ids: Any = None,
          header_lines: int = 1) -> dict[str, int]:
    """Count the rows of ``out`` (converted, in file order, with ``source_row``) that are out of submit order,
    duplicated in ``raw`` (the file's rows, same order), reuse an id of ``ids`` or have an unattainable deadline;
    warn or raise as ``checks`` says (module docstring). Returns the counts (``df.attrs["report"]``)."""
    if checks not in CHECKS:
        raise ValueError(f"checks must be one of {CHECKS}, got {checks!r}")
    rows = out["source_row"].to_numpy()
    t = out["submit_time"].to_numpy(dtype=float)
    n = len(t)
    first = np.full(n, -1)  # per row: the earlier row it repeats (duplicates), for the messages
    dup_rows = np.zeros(n, dtype=bool)
    if raw is not None and n:
        h = pd.util.hash_pandas_object(raw.reset_index(drop=True), index=False)
        dup_rows = h.duplicated().to_numpy()
        first = pd.Series(np.arange(n)).groupby(h.to_numpy(), dropna=False).transform("min").to_numpy()
    dup_ids = np.zeros(n, dtype=bool)
    if ids is not None and n:
        ids = pd.Series(np.asarray(ids)).reset_index(drop=True)
        dup_ids = ids.duplicated().to_numpy() & ~dup_rows
        first = np.where(dup_ids, pd.Series(np.arange(n)).groupby(ids.to_numpy(), dropna=False).transform("min").to_numpy(), first)
    unsorted = np.zeros(n, dtype=bool)
    unsorted[1:] = t[1:] < np.maximum.accumulate(t)[:-1]
    late = np.zeros(n, dtype=bool)
    if "deadline" in out and n:
        late = ((out["deadline"] - out["submit_time"]) < out["duration"]).to_numpy()
    found = (("unsorted_rows", unsorted, lambda i: "submitted before an earlier row (the trace is sorted by submit time)"),
             ("duplicate_rows", dup_rows, lambda i: f"identical to data row {rows[first[i]]}"),
             ("duplicate_ids", dup_ids, lambda i: f"job id {ids.iloc[i]!r} already used by data row {rows[first[i]]}"),
             ("unattainable_deadlines", late, lambda i: "deadline - submit shorter than the job's run time"))
    report = {name: int(mask.sum()) for name, mask, _ in found}
    for name, mask, why in found:
        if not report[name] or checks == "report":
            continue
        i = int(np.flatnonzero(mask)[0])
        if checks == "error" and name != "unattainable_deadlines":
            raise TraceError(source, f"{why(i)} ({name}; load with checks='warn' to count them instead)",
                             row=int(rows[i]), line=int(rows[i]) + header_lines)
        warnings.warn(f"{source}: {report[name]} of {n} rows: {name.replace('_', ' ')}; the first, data row "
                      f"{rows[i]}: {why(i)}", TraceWarning, stacklevel=3)
    log.info("%s: %s", source, report)
    return report


def finish(out: pd.DataFrame, source: Any, t0: Any = None, filters: dict[str, int] | None = None,
           sort: bool = True, rebase: bool = True, report: dict[str, int] | None = None) -> pd.DataFrame:
    """Refuse an empty trace; sort stably by submit time, rebase to the earliest submit, number jobs, set dtypes
    and attrs (``report``: :func:`audit`'s counts)."""
    if not len(out):
        raise TraceError(source, f"no job left (filters applied: {dict(filters or {})})")
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
    out.attrs = {"source": str(source), "t0": None if t0 is None else str(t0), "filters": dict(filters or {}),
                 "report": dict(report or {})}
    if "source_row" in out:
        out["source_row"] = out["source_row"].astype("int64")
    return out


def apply_min_duration(out: pd.DataFrame, min_duration: float | None, source: Any,
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
    ck = Checker(source, df.reset_index(drop=True))
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
