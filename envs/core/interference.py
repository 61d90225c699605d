"""Co-location interference: jobs sharing a GPU slow each other down by a pairwise factor.

SJF-BSBF (Luo et al., Eqs. 5-6): when job A shares its GPUs with job B, A's iteration time becomes
``t_A x xi_A`` (and B's ``t_B x xi_B``), with ``xi`` an interference ratio per model pair, measured as solo
throughput / co-located throughput ("a wide range of up to 6"). Each factor comes from, in this order
(:meth:`Interference.pair` returns it with its ``source``):

1. **Gavel measured** (``envs/data/colocation.csv``, extracted by ``eval/extract_colocation.py``): the pair's
   co-located throughput on this GPU type in Gavel's ``simulation_throughputs.json`` (K80, P100, V100; one
   GPU per job, the catalogue's batch size). MLP and SVM rows are proxies, as their speeds are
   (``source`` starts ``proxy:``).
2. **Gavel transferred**: the pair was measured on another Gavel type but not this one (T4, A100, H100,
   M60): the measurement of the Gavel type closest in release year (ties: the newer one), ``source`` says so.
   An interference ratio is a relative slowdown, so it transfers as the catalogue's speed ratios do.
3. **SJF-BSBF's injected ratio**: a pair Gavel never measured, or recorded with a co-located throughput of 0
   (the two jobs did not run together), gets ``SimConfig.interference_xi`` for both jobs, as SJF-BSBF's
   Fig. 6(b) injects one ratio "for all the jobs sharing the same GPUs". The default 1.5 is the middle of that
   sweep (1.0-2.0) and close to the median of Gavel's measured V100 pairs among the catalogue's models
   (docs/catalogue.md gives the command and value).

A measured ratio below 1 (co-located faster than alone: measurement noise) counts as 1, and its ``source``
records the measured value. With ``SimConfig.interference = "constant"`` every pair gets
``interference_xi`` (SJF-BSBF's injected-ratio experiment); with ``"off"`` sharing a GPU costs nothing
beyond the utilisation rule of :mod:`clustergym.core.resources`.

More than two jobs on one GPU (SJF-BSBF allows at most two; this simulator admits by memory): each other job
adds its pairwise excess, ``xi_j = 1 + sum_k (xi(j, k) - 1)`` over the distinct other jobs ``k``, which is the
pair's ratio for two jobs.

How it combines with the utilisation rule of :mod:`clustergym.core.resources`: a measured ratio is the whole
cost of sharing the GPU (time-slicing included), so while interference is on it replaces the over-commit
slowdown (summed utilisation ``u`` > 1 running each job at ``1/u``, the rule with ``"off"``); a task runs at
the larger of its server's CPU/memory slowdown and its job's ratio on its GPU
(:func:`clustergym.core.progress.refresh_rate`). MLFS's overload judgement of a shared GPU (summed utilisation
above ``h_r``) is unchanged.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from .hardware import GPU_TYPES

COLOCATION_CSV = Path(__file__).resolve().parents[1] / "data" / "colocation.csv"
GAVEL_GPU_TYPES = ("K80", "P100", "V100")
INTERFERENCE_MODES = ("gavel", "constant", "off")  # SimConfig.interference
NO_RATIOS: dict = {}  # the ratios of a GPU without interference (shared, never written)


class InterferenceDataError(ValueError):
    """A bad row of the co-location table (named by file and line)."""


@dataclass(frozen=True)
class Factor:
    """One job's slowdown while it shares a GPU with another: ``xi`` >= 1 and where the number comes from."""

    xi: float
    source: str


@lru_cache(maxsize=4)
def load_colocation(path: Path = COLOCATION_CSV) -> dict[tuple[str, str, str], tuple[float | None, str]]:
    """``{(model, other, gpu type): (xi or None when the pair did not co-run, source)}`` from the table."""
    out: dict[tuple[str, str, str], tuple[float | None, str]] = {}
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            if r["gpu_type"] not in GPU_TYPES:
                raise InterferenceDataError(f"{path.name}: line {i}: unknown gpu_type {r['gpu_type']!r}")
            xi = None
            if r["xi"] != "":
                xi = float(r["xi"])
                if not (xi > 0 and math.isfinite(xi)):
                    raise InterferenceDataError(f"{path.name}: line {i}: xi must be a positive number, got {r['xi']!r}")
            out[(r["model"], r["other"], r["gpu_type"])] = (xi, r["source"])
    return out


def transfer_order(gpu_type: str) -> tuple[str, ...]:
    """The Gavel types to read a pair from for ``gpu_type``: itself if Gavel measured it, else the Gavel types
    by closeness in release year (ties: the newer one)."""
    if gpu_type in GAVEL_GPU_TYPES:
        return (gpu_type,)
    year = GPU_TYPES[gpu_type].year
    return tuple(sorted(GAVEL_GPU_TYPES, key=lambda g: (abs(GPU_TYPES[g].year - year), -GPU_TYPES[g].year)))


class Interference:
    """The pairwise interference rule of one simulation (``mode`` and ``xi`` from :class:`SimConfig`)."""

    def __init__(self, mode: str = "gavel", xi: float = 1.5, path: Path = COLOCATION_CSV) -> None:
        if mode not in INTERFERENCE_MODES:
            raise ValueError(f"unknown interference mode {mode!r}; known: {INTERFERENCE_MODES}")
        self.mode = mode
        self.xi = xi
        self.table = load_colocation(path) if mode == "gavel" else {}
        self._pairs: dict[tuple[str, str, str], Factor] = {}
        self._jobs: dict[tuple, tuple[float, ...]] = {}

    @property
    def on(self) -> bool:
        return self.mode != "off"

    def pair(self, model: str, other: str, gpu_type: str) -> Factor:
        """``model``'s slowdown while sharing a GPU of ``gpu_type`` with ``other`` (the module's rule)."""
        key = (model, other, gpu_type)
        f = self._pairs.get(key)
        if f is None:
            f = self._pairs[key] = self._pair(model, other, gpu_type)
        return f

    def _pair(self, model: str, other: str, gpu_type: str) -> Factor:
        if self.mode == "off":
            return Factor(1.0, "interference off (SimConfig.interference = 'off')")
        injected = f"SJF-BSBF Eqs. 5-6 with the injected ratio SimConfig.interference_xi = {self.xi:g}"
        if self.mode == "constant":
            return Factor(self.xi, f"{injected} (SimConfig.interference = 'constant')")
        why = f"pair ({model}, {other}) not in Gavel's co-location table"
        for g in transfer_order(gpu_type):
            hit = self.table.get((model, other, g))
            if hit is None:
                continue
            xi, source = hit
            if xi is None:
                why = f"Gavel recorded no co-run of ({model}, {other}) on {g}: {source}"
                break
            moved = "" if g == gpu_type else f"transferred from {g} (no Gavel measurement on {gpu_type}): "
            if xi < 1.0:
                return Factor(1.0, f"{moved}{source}; measured xi {xi:.4g} < 1 counted as 1")
            return Factor(xi, f"{moved}{source}")
        return Factor(self.xi, f"{injected}: {why}")

    def factors(self, models: tuple[str, ...], gpu_type: str) -> tuple[float, ...]:
        """Per job on one GPU (``models``: each distinct job's model, in the GPU's job order), its slowdown:
        ``1 + sum (xi(job, other) - 1)`` over the other jobs (1 for a job alone)."""
        key = (models, gpu_type)
        out = self._jobs.get(key)
        if out is None:
            out = tuple(1.0 + sum(self.pair(m, o, gpu_type).xi - 1.0 for k, o in enumerate(models) if k != j)
                        for j, m in enumerate(models))
            self._jobs[key] = out
        return out

    def ratios(self, jobs: list, gpu_type: str) -> dict:
        """``{job: ratio}`` for the distinct ``jobs`` on one GPU (in the GPU's order) whose ratio exceeds 1
        (:data:`NO_RATIOS` for fewer than two jobs or none above 1)."""
        if len(jobs) < 2:
            return NO_RATIOS
        factors = self.factors(tuple(job.model.name for job in jobs), gpu_type)
        return {job: x for job, x in zip(jobs, factors) if x != 1.0} or NO_RATIOS
