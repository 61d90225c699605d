"""Any job CSV read through a column mapping (:class:`ColumnMapping`, usually a YAML file): a user's own trace.

The mapping names the source columns of the canonical fields (:mod:`clustergym.core.trace_schema`), their units
and explicit filters, and the rules for what a cluster's log holds that the simulator does not model:

- **model names** outside the catalogue (``unknown_model``): ``"sample"`` (the default: such a job gets a model
  drawn by the job mapping, :class:`clustergym.core.mapping.MappingConfig` ``model_weights``; one
  :class:`TraceWarning` names each unknown name with its row count) or ``"error"`` (a :class:`TraceError` listing
  the rows). ``aliases`` maps source names onto catalogue models first (and extends the mapping's alias table).
- **fractional GPUs** (``fractional_gpus``, as PAI's ``plan_gpu`` percentages): ``"error"`` (default: the rows
  are listed) or ``"round_up"`` (the job gets ``ceil`` whole GPUs; counted and warned). The simulator gives each
  task whole GPUs; it has no fractional GPU request.
- **GPU-type constraints** (a mapped ``gpu_type`` column, as PAI's): ``"error"`` (default: the rows are listed)
  or ``"ignore"`` (the job may run on any GPU type; the column is kept as ``gpu_type``, counted and warned). The
  simulator places any job on any GPU type.

``load_csv`` records the model rules in ``df.attrs["mapping"]`` (``aliases``, ``unknown_model``):
:func:`clustergym.core.mapping.to_job_specs` and the env apply them, so the trace's mapping file alone says
how its names are read. Counts of rows a rule changed go to ``df.attrs["report"]`` (``unknown_models``,
``rounded_up_gpus``, ``ignored_gpu_types``).
"""
from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from .trace_schema import (TIME_UNITS, Checker, TraceError, TraceWarning, apply_min_duration, audit, finish,
                           read_csv, row_list)

log = logging.getLogger(__name__)

UNKNOWN_MODEL_RULES: tuple[str, ...] = ("sample", "error")
FRACTIONAL_GPU_RULES: tuple[str, ...] = ("error", "round_up")
GPU_TYPE_RULES: tuple[str, ...] = ("error", "ignore")

_MAPPABLE = ("job_id", "submit_time", "n_gpus", "duration", "end_time", "model", "deadline", "urgency",
             "accuracy_requirement", "cluster", "user", "status", "gpu_type")


@dataclass
class ColumnMapping:
    """How to read an arbitrary job CSV into the canonical schema.

    ``columns`` maps canonical field -> source column. Required: ``submit_time`` and either ``duration``
    or ``end_time`` (duration = end - submit... see ``duration_from_end``); ``n_gpus`` unless a default
    is given. Optional: ``job_id`` (kept as ``source_job_id``), model, deadline, urgency,
    accuracy_requirement, cluster, user, status (read by ``statuses``), gpu_type (see ``gpu_type_constraints``).

    - ``time_unit`` (s, ms, min, h): unit of numeric submit/end/deadline times; or ``datetime_format``
      (strftime, e.g. ``%Y-%m-%d %H:%M:%S``; ``"auto"`` lets pandas infer): those columns are dates.
    - ``duration_unit``: unit of the duration column.
    - ``gpu_scale``: n_gpus = value x gpu_scale (e.g. 0.01 for percent-of-a-GPU columns); a fractional result
      follows ``fractional_gpus``.
    - ``defaults``: value for a canonical field whose column is absent, or whose cell is empty.
    - ``deadline_relative``: the deadline column is a span after submit (in ``duration_unit``).
    - ``min_duration``: explicit filter (seconds), off by default; the removal count is reported.
    - ``statuses``: explicit filter, off by default: keep only rows whose mapped ``status`` column is one of
      these (as PAI's loader keeps Terminated and Failed jobs); the removal count is reported.
    - ``drop_zero_gpus``: explicit filter, off by default: rows asking for no GPU are removed and counted
      (else they are an error).
    - ``delimiter``, ``header`` (False: no header row; then ``names`` gives the column names).
    - ``aliases`` (source model name -> catalogue model), ``unknown_model`` (:data:`UNKNOWN_MODEL_RULES`),
      ``fractional_gpus`` (:data:`FRACTIONAL_GPU_RULES`), ``gpu_type_constraints`` (:data:`GPU_TYPE_RULES`):
      the module docstring.
    """

    columns: dict[str, str]
    time_unit: str = "s"
    datetime_format: str | None = None
    duration_unit: str = "s"
    gpu_scale: float = 1.0
    defaults: dict[str, Any] = field(default_factory=dict)
    deadline_relative: bool = False
    min_duration: float | None = None
    statuses: list[str] | None = None
    drop_zero_gpus: bool = False
    delimiter: str = ","
    header: bool = True
    names: list[str] | None = None
    aliases: dict[str, str] = field(default_factory=dict)
    unknown_model: str = "sample"
    fractional_gpus: str = "error"
    gpu_type_constraints: str = "error"

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
            if u not in TIME_UNITS:
                raise ValueError(f"ColumnMapping: unknown time unit {u!r}; use one of {list(TIME_UNITS)}")
        if not self.header and not self.names:
            raise ValueError("ColumnMapping: header=False needs names")
        if self.statuses is not None and "status" not in self.columns:
            raise ValueError("ColumnMapping: statuses needs columns['status'] (the column they are read from)")
        for name, allowed in (("unknown_model", UNKNOWN_MODEL_RULES), ("fractional_gpus", FRACTIONAL_GPU_RULES),
                              ("gpu_type_constraints", GPU_TYPE_RULES)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"ColumnMapping: {name} must be one of {list(allowed)}, got {getattr(self, name)!r}")
        self._check_aliases()

    def _check_aliases(self) -> None:
        """Every alias maps a source name onto a catalogue model."""
        from .catalogue_data import model_names
        from .mapping import resolve_model

        if not isinstance(self.aliases, Mapping):
            raise ValueError("ColumnMapping: aliases must map source model names to catalogue models, got "
                             f"{self.aliases!r}")
        names = model_names()
        bad = {k: v for k, v in self.aliases.items() if resolve_model(str(v), names, {}) is None}
        if bad:
            raise ValueError(f"ColumnMapping: aliases {bad} name no catalogue model; the catalogue: {names}")
        self.aliases = {str(k): str(v) for k, v in self.aliases.items()}

    def model_options(self) -> dict[str, Any]:
        """The job mapping's model rules this file sets (``df.attrs["mapping"]``; MappingConfig fields)."""
        return {"aliases": dict(self.aliases), "unknown_model": self.unknown_model}

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
            m = cls.from_dict(d)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{path}: {e}") from None
        m.source = str(path)  # named by errors about the columns it maps
        return m


def load_csv(path: str | os.PathLike, mapping: ColumnMapping | Mapping[str, Any] | str | os.PathLike,
             checks: str = "warn") -> pd.DataFrame:
    """Load any job CSV with a :class:`ColumnMapping` (or a dict, or a YAML path) into the canonical schema.
    Times are rebased to the earliest submit; rows sorted by submit time (stable) and numbered. ``checks``: what
    unsorted rows, duplicated rows, reused job ids and unattainable deadlines do
    (:func:`~clustergym.core.trace_schema.audit`). Model names, fractional GPUs and GPU types follow the
    mapping's rules (module docstring); ``attrs["mapping"]`` holds its model rules."""
    mapping = as_column_mapping(mapping)
    r = _MappedCsv(Path(path), mapping)
    filters: dict[str, int] = {}
    r.filter_rows(filters)
    out = pd.DataFrame({"submit_time": r.submit_times()})
    out["duration"] = r.durations(out["submit_time"])
    out["n_gpus"] = r.gpu_counts()
    r.add_deadlines(out)
    r.add_optional(out)
    r.gpu_types(out)
    r.check_models(out)
    out["source_row"] = r.ck.rows
    ids = r.raw[mapping.columns["job_id"]] if "job_id" in mapping.columns else None
    report = audit(out, path, checks, r.raw, ids, r.ck.header_lines)
    out = apply_min_duration(out, mapping.min_duration, path, filters)
    out = finish(out, path, r.t0, filters, rebase=False, report={**report, **r.counts})
    out.attrs["mapping"] = mapping.model_options()
    return out


def as_column_mapping(mapping: ColumnMapping | Mapping[str, Any] | str | os.PathLike) -> ColumnMapping:
    """A :class:`ColumnMapping` from itself, a dict of its fields or a YAML file of them."""
    if isinstance(mapping, ColumnMapping):
        return mapping
    if isinstance(mapping, (str, os.PathLike)):
        return ColumnMapping.from_yaml(mapping)
    if not isinstance(mapping, Mapping):
        raise ValueError(f"a column mapping must be a ColumnMapping, a dict or a YAML path, got {mapping!r}")
    return ColumnMapping.from_dict(mapping)


class _MappedCsv:
    """A CSV read through a :class:`ColumnMapping`: its mapped columns, checked and converted."""

    def __init__(self, path: Path, m: ColumnMapping):
        kw: dict[str, Any] = {"sep": m.delimiter, "dtype": "string"}
        if not m.header:
            kw.update(header=None, names=m.names)
        self.raw, rows = read_csv(path, **kw)
        self.m, self.path = m, path
        self.ck = Checker(path, self.raw, 1 if m.header else 0, rows)
        for canon, col in m.columns.items():
            if col not in self.raw.columns:
                raise TraceError(path, f"missing column: {getattr(m, 'source', 'the column mapping')} maps {canon} "
                                 f"to it (the file's columns: {list(self.raw.columns)})", column=col)
        self.src = dict(m.columns)
        self.counts: dict[str, int] = {}  # rows a rule of the mapping changed (attrs["report"])
        self.scale_t, self.scale_d = TIME_UNITS[m.time_unit], TIME_UNITS[m.duration_unit]
        for canon, col in self.src.items():  # empty cells of a mapped column take the default
            if canon in m.defaults:
                self.raw[col] = self.raw[col].fillna(str(m.defaults[canon]))
        self.t0: Any = None

    def filter_rows(self, filters: dict[str, int]) -> None:
        """The explicit row filters of the mapping (statuses, zero GPUs), counted into ``filters``."""
        m, raw = self.m, self.raw
        keep = np.ones(len(raw), dtype=bool)
        if m.statuses is not None:
            ok = raw[m.columns["status"]].isin([str(x) for x in m.statuses]).to_numpy()
            filters[f"status not in {list(m.statuses)}"] = int((~ok).sum())
            keep &= ok
        if m.drop_zero_gpus and "n_gpus" in m.columns:
            g = pd.to_numeric(raw[m.columns["n_gpus"]].astype("string").str.strip(), errors="coerce")
            zero = (g.to_numpy() * m.gpu_scale == 0) & keep
            filters["zero GPUs"] = int(zero.sum())
            keep &= ~zero
        if keep.all():
            return
        for rule, n in filters.items():
            if n:
                log.info("%s: removed %d rows: %s", self.path, n, rule)
        self.raw = raw[keep].reset_index(drop=True)
        self.ck = Checker(self.path, self.raw, self.ck.header_lines, self.ck.rows[keep])

    def times(self, canon: str, allow_missing: bool = False) -> pd.Series:
        c, m = self.src[canon], self.m
        if m.datetime_format:
            return self.ck.datetime(c, None if m.datetime_format == "auto" else m.datetime_format, allow_missing)
        return self.ck.numeric(c, allow_missing=allow_missing) * self.scale_t

    def rel(self, t: pd.Series) -> pd.Series:
        """Seconds since the earliest submit."""
        return (t - self.t0).dt.total_seconds() if self.m.datetime_format is not None else t - self.t0

    def submit_times(self) -> pd.Series:
        sub = self.times("submit_time")
        self.t0 = sub.min() if len(sub) else None
        return self.rel(sub) if len(sub) else sub

    def durations(self, submit: pd.Series) -> pd.Series:
        if "duration" in self.src:
            return self.ck.numeric(self.src["duration"], min_value=0, what="duration") * self.scale_d
        d = self.rel(self.times("end_time")) - submit
        self.ck.fail((d < 0).to_numpy(), self.src["end_time"], lambda i: "negative duration: end_time before submit_time")
        return d

    def gpu_counts(self) -> Any:
        m, ck = self.m, self.ck
        if "n_gpus" not in self.src:
            return int(m.defaults["n_gpus"])
        col = self.src["n_gpus"]
        g = (ck.numeric(col, min_value=0, what="GPU count") * m.gpu_scale).to_numpy()
        ck.fail(g <= 0, col, lambda i: f"zero GPUs (got {self.raw[col].iloc[i]!r})")
        whole = np.round(g)
        frac = np.abs(g - whole) > 1e-9 * np.maximum(1.0, whole)
        if frac.any():
            rows = ck.rows[frac]
            what = f"{len(rows)} rows ask for a fraction of a GPU ({row_list(rows)}; e.g. {g[frac][0]:g} GPUs)"
            if m.fractional_gpus == "error":
                raise TraceError(self.path, f"{what}: the simulator gives each task whole GPUs; set fractional_gpus: "
                                 "round_up to give each such job the next whole number, or remove the rows",
                                 row=int(rows[0]), column=col, line=int(rows[0]) + ck.header_lines)
            self.counts["rounded_up_gpus"] = len(rows)
            warnings.warn(f"{self.path}: {what}: rounded up to whole GPUs (fractional_gpus: round_up)", TraceWarning,
                          stacklevel=4)
        return np.where(frac, np.ceil(g), whole).astype(np.int64)

    def gpu_types(self, out: pd.DataFrame) -> None:
        """A mapped ``gpu_type`` column: rows that name a GPU type are refused, or with ``gpu_type_constraints:
        ignore`` loaded without the constraint (the column kept as ``gpu_type``, the rows counted)."""
        if "gpu_type" not in self.src:
            return
        col, ck = self.src["gpu_type"], self.ck
        vals = self.raw[col]
        named = (vals.notna() & (vals.astype("string").str.strip() != "")).to_numpy(dtype=bool)
        if not named.any():
            return
        rows = ck.rows[named]
        what = f"{len(rows)} rows ask for a GPU type ({row_list(rows)}; e.g. {vals[named].iloc[0]!r})"
        if self.m.gpu_type_constraints == "error":
            raise TraceError(self.path, f"{what}: the simulator places a job on any GPU type (it models no GPU-type "
                             "constraint); set gpu_type_constraints: ignore to load these jobs without it, or remove "
                             "the rows", row=int(rows[0]), column=col, line=int(rows[0]) + ck.header_lines)
        out["gpu_type"] = vals.to_numpy()
        self.counts["ignored_gpu_types"] = len(rows)
        warnings.warn(f"{self.path}: {what}: loaded without the constraint (gpu_type_constraints: ignore)",
                      TraceWarning, stacklevel=4)

    def check_models(self, out: pd.DataFrame) -> None:
        """Model names that neither the catalogue nor the aliases know: refused (``unknown_model: error``, naming
        the rows) or counted and warned once (``sample``: the job mapping draws their models)."""
        if "model" not in out or "model" not in self.src:
            return
        from .catalogue_data import model_names
        from .mapping import MODEL_ALIASES, resolve_model

        names, aliases = model_names(), {**MODEL_ALIASES, **self.m.aliases}
        known = {v: resolve_model(v, names, aliases) is not None for v in pd.unique(out["model"])}
        unknown = ~out["model"].map(known).to_numpy(dtype=bool)
        if not unknown.any():
            return
        counts = out["model"][unknown].value_counts(sort=False)
        listed = ", ".join(f"{k!r} ({n} rows)" for k, n in list(counts.items())[:8])
        more = f" and {len(counts) - 8} more" if len(counts) > 8 else ""
        rows = self.ck.rows[unknown]
        what = (f"{len(counts)} model names in {len(rows)} rows ({row_list(rows)}) are neither catalogue models nor "
                f"aliases: {listed}{more}")
        if self.m.unknown_model == "error":
            raise TraceError(self.path, f"{what}; map them with aliases: {{name: catalogue model}} (the catalogue: "
                             f"{names}) or set unknown_model: sample", row=int(rows[0]), column=self.src["model"],
                             line=int(rows[0]) + self.ck.header_lines)
        self.counts["unknown_models"] = len(rows)
        warnings.warn(f"{self.path}: {what}; each such job gets a model drawn by the job mapping "
                      "(MappingConfig.model_weights; unknown_model: sample)", TraceWarning, stacklevel=4)

    def add_deadlines(self, out: pd.DataFrame) -> None:
        m, ck, src = self.m, self.ck, self.src
        if "deadline" in src:
            if m.deadline_relative:
                dl = ck.numeric(src["deadline"], min_value=0, strict_min=True, allow_missing=True, what="deadline")
                out["deadline"] = out["submit_time"] + dl * self.scale_d
            else:
                out["deadline"] = self.rel(self.times("deadline", allow_missing=True))
            ck.fail((out["deadline"] <= out["submit_time"]).to_numpy(), src["deadline"],
                    lambda i: "deadline must be after submit time")
        elif "deadline" in m.defaults:
            out["deadline"] = out["submit_time"] + float(m.defaults["deadline"]) * self.scale_d

    def add_optional(self, out: pd.DataFrame) -> None:
        """Urgency, accuracy requirement, model/cluster/user and the source's job id, where mapped or defaulted."""
        m, ck, src, raw = self.m, self.ck, self.src, self.raw
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


