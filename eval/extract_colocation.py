"""Regenerate the interference and batch-scaling data files from Gavel's staged throughput matrix.

Writes, under ``envs/data/``:

- ``colocation.csv`` (``model,other,gpu_type,xi,source``): for every ordered pair of catalogue models that
  Gavel measured co-located on one GPU (scale factor 1, the catalogue's batch size), the interference ratio
  ``xi = solo throughput / co-located throughput`` of ``model`` while it shares the GPU with ``other``
  (SJF-BSBF Eqs. 5-6: ``t_hat = t x xi``). A pair Gavel recorded with a co-located throughput of 0 (the two
  jobs did not run together) is written with an empty ``xi`` and says so in ``source``: the simulator then
  applies its rule for uncovered pairs (:mod:`clustergym.core.interference`).
- ``batch_scaling.csv`` (``model,fixed_share,source``): the share of a one-GPU iteration at the catalogue
  batch that does not scale with the batch (SJF-BSBF Eq. 3, ``t_comp(B) = alpha + beta B``: ``alpha /
  t_comp(B)``), fitted by least squares to Gavel's solo V100 throughputs of the same model at its other batch
  sizes; models without such a series get the median of the fitted shares (``source`` says so). A fit whose
  ``alpha`` is negative (time growing faster than linearly in the batch) records a share of 0 and says so.

Usage::

    python eval/extract_colocation.py [--traces ../shared/traces] [--out envs/data]

What Gavel's numbers mean: ``d[gpu]["('<job>', 1)"]["('<other>', 1)"] = [this job's, other job's
throughput]`` in steps per second while both run on one GPU; ``["null"]`` is the solo throughput.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from statistics import median

from extract_speeds import DEFAULT_OUT, DEFAULT_TRACES, GAVEL_JOBS, GAVEL_TYPES

GAVEL_FILE = "gavel/scheduler/simulation_throughputs.json"
# catalogue model -> Gavel's job-type stem whose batch sizes form its solo-time series (``<stem> (batch size
# N)``); the catalogue batch is one of them. Proxies (MLP, SVM) and single-batch types are not fitted.
BATCH_SERIES: dict[str, str] = {"ResNet-18": "ResNet-18", "ResNet-50": "ResNet-50", "Transformer": "Transformer",
                                "LSTM": "LM", "Recommendation": "Recommendation"}


def _load(traces: Path) -> dict:
    return json.loads((traces / GAVEL_FILE).read_text())


def colocation_rows(d: dict) -> list[tuple[str, str, str, str, str]]:
    """(model, other, gpu type, xi or "", source) for every ordered catalogue pair Gavel measured."""
    rows = []
    for key, gpu in GAVEL_TYPES.items():
        table = d[key]
        for model, (job, kind) in GAVEL_JOBS.items():
            row = table[str((job, 1))]
            solo = float(row["null"])
            for other, (ojob, okind) in GAVEL_JOBS.items():
                pair = row.get(str((ojob, 1)))
                if pair is None:
                    continue
                thr = float(pair[0])
                where = f"gavel simulation_throughputs.json [{key}][('{job}', 1)][('{ojob}', 1)][0]"
                tag = "proxy" if "proxy" in (kind, okind) else "measured"
                if not math.isfinite(thr) or thr < 0:
                    raise ValueError(f"{where}: bad throughput {thr}")
                if thr == 0:
                    rows.append((model, other, gpu, "", f"{tag}: {where} = 0 steps/s (the pair did not co-run)"))
                    continue
                xi = solo / thr
                rows.append((model, other, gpu, f"{xi:.6g}",
                             f"{tag}: {where} = {thr:.6g} steps/s, solo [null] = {solo:.6g} steps/s"))
    return rows


def fit_fixed_share(times: dict[int, float], batch: int) -> float:
    """Least-squares ``t(b) = alpha + beta b`` over ``times`` ({batch: seconds}); ``alpha / t(batch)``."""
    bs = sorted(times)
    n = len(bs)
    mb = sum(bs) / n
    mt = sum(times[b] for b in bs) / n
    beta = sum((b - mb) * (times[b] - mt) for b in bs) / sum((b - mb) ** 2 for b in bs)
    alpha = mt - beta * mb
    return alpha / (alpha + beta * batch)


def batch_rows(d: dict, catalogue_batches: dict[str, int]) -> list[tuple[str, str, str]]:
    """(model, fixed share, source) for every catalogue model (fitted ones, then the median rule)."""
    v100 = d["v100"]
    fitted: dict[str, tuple[float, str]] = {}
    negative: dict[str, str] = {}
    for model, stem in BATCH_SERIES.items():
        prefix = f"('{stem} (batch size "
        times = {int(k[len(prefix):].split(")")[0]): 1.0 / float(r["null"])
                 for k, r in v100.items() if k.startswith(prefix) and k.endswith(", 1)")}
        share = fit_fixed_share(times, catalogue_batches[model])
        if not share < 1.0:
            raise ValueError(f"{model}: fitted fixed share {share} is not below 1")
        src = (f"fitted: gavel [v100] solo times of '{stem}' at batch sizes {sorted(times)}, t = alpha + beta b "
               f"(SJF-BSBF Eq. 3), alpha / t({catalogue_batches[model]})")
        if share < 0:  # time grows faster than linearly in the batch: no fixed part to measure
            negative[model] = f"{src} = {share:.4g} < 0: time grows faster than linearly, no fixed part (0)"
        else:
            fitted[model] = (share, src)
    med = median(s for s, _ in fitted.values())
    rows = []
    for model in catalogue_batches:
        if model in negative:
            share, src = 0.0, negative[model]
        elif model in fitted:
            share, src = fitted[model]
        else:
            share, src = med, f"derived: median of the {len(fitted)} fitted shares ({', '.join(sorted(fitted))})"
        rows.append((model, f"{share:.6g}", src))
    return rows


def _write(path: Path, header: list[str], rows: list[tuple]) -> Path:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args(argv)
    from clustergym.core.catalogue_data import CATALOGUE, model_names

    d = _load(a.traces)
    batches = {m: CATALOGUE[m].batch_size for m in model_names()}
    for p in (_write(a.out / "colocation.csv", ["model", "other", "gpu_type", "xi", "source"], colocation_rows(d)),
              _write(a.out / "batch_scaling.csv", ["model", "fixed_share", "source"], batch_rows(d, batches))):
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
