"""Regenerate the catalogue's bundled data files from the staged public sources.

Writes, under ``envs/data/``:

- ``model_speeds.csv`` (``model,gpu_type,iteration_time_s,source``): the *measured* one-GPU iteration times
  of the catalogue models (the run time fills the missing cells, see
  :func:`clustergym.core.catalogue_data.fill_missing_speeds`).
- ``learning_curves.csv`` (``model,x,accuracy,loss,source``): Pollux validation curves resampled to
  <= 64 points over progress ``x = iteration / last iteration``.
- ``pai_2020_machine_groups.csv``: the Alibaba PAI 2020 machine spec aggregated into identical-server groups.

Usage::

    python eval/extract_speeds.py [--traces ../shared/traces] [--out envs/data]
    python eval/extract_speeds.py --table     # print the docs/catalogue.md speed table (from envs/data)

Only this script reads the staged sources; the package reads ``envs/data`` alone.

What the numbers mean (see the SOURCE.md next to each source):

- Gavel ``simulation_throughputs.json``: ``d[gpu]["('<job type>', 1)"]["null"]`` is the solo (not
  co-located) throughput of a 1-GPU job in training steps per second; the other keys of that dict are
  co-location pairs ``[this job's, other job's throughput]`` and are not used here.
  iteration time = 1 / throughput.
- ElasticFlow ``throughputs_{A100,T4}/<m>.csv``: rows = global batch size, column ``1`` = iterations per
  second on one GPU. Where the catalogue batch size differs from the measured one, the time is scaled
  linearly in the batch size (constant samples/s; the GPU is saturated at these batch sizes), and the
  source string says so.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import math
import tarfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"  # ../shared beside the repository
DEFAULT_OUT = ROOT / "envs" / "data"

# catalogue model -> (Gavel job type, batch size). Recommendation/MLP/SVM all read Gavel's fully-connected
# recommendation autoencoder; MLP and SVM have no public measurement and use it as a proxy at their own
# batch size (documented in catalogue_data).
GAVEL_JOBS: dict[str, tuple[str, str]] = {
    "ResNet-18": ("ResNet-18 (batch size 128)", "measured"),
    "ResNet-50": ("ResNet-50 (batch size 64)", "measured"),
    "Transformer": ("Transformer (batch size 64)", "measured"),
    "LSTM": ("LM (batch size 20)", "measured"),
    "Recommendation": ("Recommendation (batch size 2048)", "measured"),
    "CycleGAN": ("CycleGAN", "measured"),
    "A3C": ("A3C", "measured"),
    "MLP": ("Recommendation (batch size 512)", "proxy"),
    "SVM": ("Recommendation (batch size 1024)", "proxy"),
}
GAVEL_TYPES = {"k80": "K80", "p100": "P100", "v100": "V100"}

# catalogue model -> {GPU type: (ElasticFlow file stem, measured global batch, catalogue batch)}
ELASTICFLOW_JOBS: dict[str, dict[str, tuple[str, int, int]]] = {
    "ResNet-50": {"A100": ("resnet50", 64, 64), "T4": ("imagenet", 3200, 64)},
    "ResNet-18": {"T4": ("cifar10", 2048, 128)},
    "VGG-16": {"A100": ("vgg16", 64, 64)},
    "Inception-v3": {"A100": ("inception3", 64, 64)},
    "BERT": {"T4": ("bert", 384, 12)},  # A100 bert.csv deliberately not used, see below
    "DeepSpeech2": {"A100": ("deepspeech2", 32, 32), "T4": ("deepspeech2", 320, 32)},
    "YOLOv3": {"T4": ("yolov3", 64, 16)},
}
# Not used, on purpose:
# - A100 ``bert`` (64 -> 6.03 it/s = 386 samples/s) is 29x the T4 ``bert`` profile per sample (13.2 samples/s,
#   which Pollux's own placements.csv confirms: 1 T4, local batch 12, 0.92 s/step), while ResNet-50 and
#   DeepSpeech2 differ by only 2.0x and 3.1x between the same two tables: the two BERT profiles evidently use
#   different configurations (ElasticFlow states neither sequence length nor precision). The catalogue's BERT
#   is Pollux's (SQuAD fine-tuning, whose curve we use), so its A100 cell is derived instead.
# - T4 ``ncf`` (Pollux's NCF, ~1.5 M samples/s) is a different network from Gavel's
# Recommendation autoencoder (~15 k samples/s on V100); mixing them would make T4 16x faster than V100 for
# the same catalogue model. A100 ``resnet50_cifar10`` and ``gpt2`` have no catalogue model.

# catalogue model -> (Pollux trace folder, metric kind, catalogue batch size, chance-level accuracy at x=0)
# kind: "acc" (fraction), "pct" (percent, higher better), "wer" (percent, lower better), "loss" (raw loss)
POLLUX_CURVES: dict[str, tuple[str, str, int, float]] = {
    "ResNet-18": ("cifar10", "acc", 128, 0.1),        # top-1, 10 classes -> chance 0.1
    "ResNet-50": ("imagenet", "acc", 64, 0.001),      # top-1, 1000 classes
    "BERT": ("bert", "pct", 12, 0.0),                 # SQuAD F1 %
    "DeepSpeech2": ("deepspeech2", "wer", 32, 0.0),   # WER %: accuracy-like = 1 - WER/100, WER 100% at start
    "Recommendation": ("ncf", "acc", 2048, 0.1),      # hit rate (HR@10 of 100 candidates -> random 0.1)
    "YOLOv3": ("yolov3", "loss", 16, 0.0),            # loss-like: accuracy-like = 1 - loss / first loss
}
MAX_CURVE_POINTS = 64

PAI_TYPE_MAP = {"P100": "P100", "T4": "T4", "V100": "V100", "V100M32": "V100"}  # MISC, CPU: excluded


# ----------------------------------------------------------------------------------------------- speeds
def gavel_rows(traces: Path) -> list[tuple[str, str, float, str]]:
    d = json.loads((traces / "gavel/scheduler/simulation_throughputs.json").read_text())
    rows = []
    for model, (job, kind) in GAVEL_JOBS.items():
        for key, gpu in GAVEL_TYPES.items():
            thr = float(d[key][str((job, 1))]["null"])
            if not (thr > 0 and math.isfinite(thr)):
                raise ValueError(f"gavel {key} {job}: bad throughput {thr}")
            src = f"gavel simulation_throughputs.json [{key}][('{job}', 1)][null] = {thr:.6g} steps/s"
            if kind == "proxy":
                src = f"proxy: {src} (no public measurement of {model}; fully-connected stand-in)"
            else:
                src = f"measured: {src}"
            rows.append((model, gpu, 1.0 / thr, src))
    return rows


def elasticflow_rows(traces: Path) -> list[tuple[str, str, float, str]]:
    base = traces / "elasticflow/ElasticFlow/scheduler"
    rows = []
    for model, per_type in ELASTICFLOW_JOBS.items():
        for gpu, (stem, bs, cat_bs) in per_type.items():
            path = base / f"throughputs_{gpu}" / f"{stem}.csv"
            with path.open(newline="") as f:
                table = {int(r["global_batch_size"]): float(r["1"]) for r in csv.DictReader(f)}
            thr = table[bs]
            if not (thr > 0 and math.isfinite(thr)):
                raise ValueError(f"{path}: bad 1-GPU throughput {thr} at batch {bs}")
            t = (1.0 / thr) * (cat_bs / bs)
            src = f"measured: elasticflow throughputs_{gpu}/{stem}.csv batch {bs}, 1 GPU = {thr:.6g} it/s"
            if cat_bs != bs:
                src += f"; scaled linearly to batch {cat_bs}"
            rows.append((model, gpu, t, src))
    return rows


def write_speeds(traces: Path, out: Path) -> Path:
    rows = gavel_rows(traces) + elasticflow_rows(traces)
    rows.sort(key=lambda r: (r[0], r[1]))
    path = out / "model_speeds.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "gpu_type", "iteration_time_s", "source"])
        for m, g, t, s in rows:
            w.writerow([m, g, f"{t:.6g}", s])
    return path


# ----------------------------------------------------------------------------------------------- curves
def _closest_batch_file(folder: Path, batch: int) -> tuple[Path, int]:
    files = {int(p.stem.split("-")[1]): p for p in folder.glob("validation-*.csv")}
    b = min(files, key=lambda k: (abs(math.log(k / batch)), k))
    return files[b], b


def _resample(xs: list[float], ys: list[float], n: int) -> tuple[list[float], list[int]]:
    """Keep x=0, the last point and evenly spaced indices in between (at most n points)."""
    if len(xs) <= n:
        return xs, list(range(len(xs)))
    idx = sorted({round(i * (len(xs) - 1) / (n - 1)) for i in range(n)})
    return [xs[i] for i in idx], idx


def curve_rows(traces: Path) -> list[tuple[str, float, float, float, str]]:
    out = []
    for model, (folder, kind, batch, chance) in POLLUX_CURVES.items():
        path, b = _closest_batch_file(traces / "pollux/simulator/traces" / folder, batch)
        with path.open(newline="") as f:
            recs = [(float(r["iteration"]), float(r["metric"])) for r in csv.DictReader(f)]
        last = recs[-1][0]
        xs = [0.0] + [it / last for it, _ in recs]
        if kind == "acc":
            acc = [chance] + [m for _, m in recs]
            loss = None
        elif kind == "pct":
            acc = [chance] + [m / 100.0 for _, m in recs]
            loss = None
        elif kind == "wer":
            acc = [chance] + [1.0 - m / 100.0 for _, m in recs]
            loss = None
        elif kind == "loss":
            l0 = recs[0][1]
            loss = [l0] + [m for _, m in recs]
            acc = [1.0 - v / l0 for v in loss]
        else:  # pragma: no cover
            raise ValueError(kind)
        acc = [min(1.0, max(0.0, a)) for a in acc]
        # running max / min: monotone accuracy and non-increasing loss, so the curve can be inverted
        run = []
        for a in acc:
            run.append(max(a, run[-1]) if run else a)
        acc = run
        if loss is None:
            loss = [1.0 - a for a in acc]
        else:
            run = []
            for v in loss:
                run.append(min(v, run[-1]) if run else v)
            loss = run
        xs_r, idx = _resample(xs, acc, MAX_CURVE_POINTS)
        metric = {"acc": "accuracy", "pct": "SQuAD F1 %/100", "wer": "1 - WER%/100",
                  "loss": "1 - loss/first loss (metric is loss-like)"}[kind]
        src = (f"pollux traces/{folder}/validation-{b}.csv (Apache-2.0): {metric}; x = iteration/{int(last)}; "
               f"x=0 prepended at chance {chance}; running max (acc) / min (loss)")
        for i, x in zip(idx, xs_r):
            out.append((model, x, acc[i], loss[i], src))
    return out


def write_curves(traces: Path, out: Path) -> Path:
    path = out / "learning_curves.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "x", "accuracy", "loss", "source"])
        for m, x, a, l, s in curve_rows(traces):
            w.writerow([m, f"{x:.6g}", f"{a:.6g}", f"{l:.6g}", s])
    return path


# ----------------------------------------------------------------------------------------------- PAI
def write_pai(traces: Path, out: Path) -> Path:
    src = traces / "alibaba-gpu-v2020/pai_machine_spec.tar.gz"
    with tarfile.open(src) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("pai_machine_spec.csv"))
        text = tar.extractfile(member).read().decode()
    groups: Counter = Counter()
    for r in csv.reader(io.StringIO(text)):
        if not r or r[0] == "machine":
            continue
        _, gtype, cpu, mem, gpu = r
        groups[(gtype, int(gpu), int(float(cpu)), int(float(mem)))] += 1
    path = out / "pai_2020_machine_groups.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["pai_gpu_type", "gpu_type", "n_gpus", "cpu_cores", "memory_gb", "count"])
        for (gtype, gpu, cpu, mem), n in sorted(groups.items(), key=lambda kv: (-kv[1], kv[0])):
            w.writerow([gtype, PAI_TYPE_MAP.get(gtype, ""), gpu, cpu, mem, n])
    return path


# ----------------------------------------------------------------------------------------------- docs
def speed_table() -> str:
    from clustergym.core.catalogue_data import CATALOGUE, SPEED_SOURCES, model_names
    from clustergym.core.hardware import GPU_TYPES

    types = list(GPU_TYPES)
    lines = ["| model | batch | " + " | ".join(types) + " |", "|---|---:|" + "---:|" * len(types)]
    for m in model_names():
        p = CATALOGUE[m]
        cells = []
        for g in types:
            s = SPEED_SOURCES[m][g]
            mark = "" if s.startswith("measured") else ("†" if s.startswith("proxy") else "*")
            cells.append(f"{p.iteration_time[g]:.4g}{mark}")
        lines.append(f"| {m} | {p.batch_size} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def fit_curve_shapes(path: Path = DEFAULT_OUT / "learning_curves.csv") -> dict[str, tuple[float, float]]:
    """Grid-fit ``k`` and ``scale`` of :func:`clustergym.core.curves.power_law_curve` to each bundled measured curve
    (a0 and a_max pinned to the curve's first and last accuracy). catalogue_data's parametric families use
    the fitted shape of their nearest measured model."""
    pts: dict[str, list[tuple[float, float]]] = {}
    with path.open(newline="") as f:
        for r in csv.DictReader(f):
            pts.setdefault(r["model"], []).append((float(r["x"]), float(r["accuracy"])))
    out = {}
    for m, p in pts.items():
        a0, am = p[0][1], p[-1][1]
        best = None
        for k in (0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0):
            for sc in (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
                err = sum((am - (am - a0) * (1 + x / sc) ** (-k) - a) ** 2 for x, a in p) / len(p)
                if best is None or err < best[0]:
                    best = (err, k, sc)
        out[m] = (best[1], best[2])
        print(f"{m}: k={best[1]} scale={best[2]} (mse {best[0]:.2g})")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    ap.add_argument("--table", action="store_true", help="print the speed table from envs/data and exit")
    ap.add_argument("--fit", action="store_true", help="fit power-law shapes to the bundled curves and exit")
    a = ap.parse_args(argv)
    if a.fit:
        fit_curve_shapes(a.out / "learning_curves.csv")
        return
    if a.table:
        print(speed_table())
        return
    a.out.mkdir(parents=True, exist_ok=True)
    for p in (write_speeds(a.traces, a.out), write_curves(a.traces, a.out), write_pai(a.traces, a.out)):
        print(f"wrote {p}")


if __name__ == "__main__":
    main()
