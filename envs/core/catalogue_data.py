"""The model catalogue: speeds, resource demands and learning curves of the catalogue's models.

Data (read once at import, from ``envs/data`` only; regenerate with ``python eval/extract_speeds.py``):

- ``model_speeds.csv``: measured one-GPU iteration times. Gavel (OSDI '20, MIT) gives K80/P100/V100 as
  1 / solo throughput (``["('<job>', 1)"]["null"]``, steps/s); ElasticFlow (ASPLOS '23, Apache-2.0) gives
  A100 (ElasticFlow's profiles) and T4 (Pollux's profiles), scaled linearly to the catalogue batch size
  where it differs. ``proxy:`` rows (MLP, SVM) are Gavel's fully-connected Recommendation autoencoder at the
  model's batch size: no public per-GPU-type measurement of an MLP or SVM exists in the staged sources.
- ``learning_curves.csv``: Pollux (OSDI '21, Apache-2.0) validation curves, see "Learning curves" below.

Missing speed cells — one rule, implemented by :func:`fill_missing_speeds` (each filled cell's source
reads ``derived: <rule>``):

1. *Ratio transfer* (K80, P100, V100, T4, A100). For a model without a measurement on type ``t``, take
   its measured (or proxy) time on a reference type ``s`` and multiply it by the median of
   ``time[t] / time[s]`` over the models *measured* (not proxy, not derived) on both types. The reference
   ``s`` is the model's measured type sharing the most models with ``t`` (largest support); ties go to
   the type closest in release year. Per-model measurements are never replaced, so heterogeneity stays
   model-dependent wherever a model was measured.
2. *No measurement at all* (AlexNet): VGG-16's filled row times the ratio of published forward
   compute per image (torchvision: AlexNet 0.71 GFLOPS, VGG-16 15.47 GFLOPS) times the batch ratio
   (128 / 64). AlexNet is VGG's chain-structured predecessor on the same input.
3. *M60* (no public per-model measurement; Hare's testbed had M60s but published no table):
   ``time[M60] = time[K80] * 1.0``. One M60 GPU (GM204: 4.8 TFLOPS FP32 peak, 160 GB/s) against one K80
   die (GK210: 4.4 TFLOPS FP32 boost peak, 240 GB/s): ~10 % more compute and ~33 % less memory bandwidth,
   which we take to cancel. The factor keeps K80's per-model profile.
4. *H100* (no measurement in the sources): ``time[H100] = time[A100] / 2.0``. Memory bandwidth
   H100 SXM 3.35 TB/s vs A100-40GB 1.56 TB/s = 2.15x; dense FP16 tensor peak 989 vs 312 TFLOPS = 3.2x.
   The catalogue's jobs are small, FP32 and far from peak, so we take the conservative, bandwidth-bound
   end, rounded down to 2.0.

Learning curves: for ResNet-18 (cifar10), ResNet-50 (imagenet), BERT, DeepSpeech2, Recommendation (ncf)
and YOLOv3 the measured Pollux curve at the batch size closest to the catalogue's, over
``x = iteration / last iteration`` of that file, at most 64 points, with ``x = 0`` prepended at chance
level. Metrics are made accuracy-like in [0, 1]: percent F1 / 100; DeepSpeech2 ``1 - WER/100`` (WER is
lower-is-better); YOLOv3's metric is loss-like, so its loss column is the raw value and its
accuracy-like value is ``1 - loss / first loss``. Without a validation loss, loss = ``1 - accuracy``.
A running max on accuracy and a running min on loss make every curve monotone, so
:meth:`LearningCurve.progress_for_accuracy` inverts :meth:`LearningCurve.accuracy_at`. Other models use
:func:`power_law_curve` with the shape (``k``, ``scale``) fitted (``eval/extract_speeds.py --fit``) to
the nearest measured curve of a related family, see ``CURVE_FAMILIES``.

Resource demands (``gpu_memory_gb``, ``gpu_util``, ``cpu_cores``, ``host_memory_gb``) are estimates for the
stated batch size, FP32, not measurements; ``activation_mb`` is computed as elements-per-sample at a
representative cut x batch x 4 bytes x 2 (forward activations + backward gradients).
"""
from __future__ import annotations

import csv
import math
from functools import lru_cache
from pathlib import Path
from statistics import median
from typing import Mapping

from .catalogue import ModelProfile
from .curves import LearningCurve, power_law_curve
from .hardware import GPU_TYPES

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
SPEEDS_CSV = DATA_DIR / "model_speeds.csv"
CURVES_CSV = DATA_DIR / "learning_curves.csv"
BATCH_CSV = DATA_DIR / "batch_scaling.csv"

MEASURED_TYPES = ("K80", "P100", "V100", "T4", "A100")
M60_OVER_K80_TIME = 1.0
H100_SPEEDUP_OVER_A100 = 2.0
# model -> (anchor model, time multiplier): rule 2
FLOPS_ANCHORS: dict[str, tuple[str, float, str]] = {
    "AlexNet": ("VGG-16", (0.71 / 15.47) * (128 / 64),
                "VGG-16 row x GFLOPS ratio 0.71/15.47 (torchvision) x batch ratio 128/64"),
}


# ------------------------------------------------------------------------------------------ static table
# name: family, parallelism, max_partitions, params_m, batch, gpu_mem_gb, gpu_util, cpu, host_gb,
#       activation elements per sample at a representative cut, notes
_SPECS: dict[str, tuple] = {
    "ResNet-18": ("cnn", "layer", 16, 11.2, 128, 2.5, 0.85, 4, 8, 16 * 16 * 128,
                  "CIFAR-10 variant (ImageNet ResNet-18: 11.7M)"),
    "ResNet-50": ("cnn", "layer", 32, 25.6, 64, 10.0, 0.95, 6, 16, 28 * 28 * 512, "ImageNet, 224x224"),
    "VGG-16": ("cnn", "chain", 16, 138.4, 64, 11.0, 0.95, 6, 16, 56 * 56 * 256, "ImageNet, 224x224"),
    "AlexNet": ("cnn", "chain", 8, 61.1, 128, 3.5, 0.7, 6, 16, 13 * 13 * 192, "ImageNet, 224x224"),
    "Inception-v3": ("cnn", "layer", 32, 27.2, 64, 11.0, 0.9, 6, 16, 35 * 35 * 288,
                     "ImageNet 299x299; 27.2M incl. auxiliary classifier (torchvision)"),
    "LSTM": ("rnn", "layer", 8, 14.0, 20, 1.5, 0.6, 2, 4, 35 * 200,
             "Gavel 'LM': 2-layer LSTM word LM on WikiText-2; params from PyTorch word_language_model "
             "defaults (vocab 33,278, 200 units)"),
    "Transformer": ("transformer", "layer", 16, 65.0, 64, 5.0, 0.8, 2, 8, 30 * 512,
                    "Gavel: translation on Multi30k; params = Transformer-base (Vaswani et al.)"),
    "BERT": ("transformer", "layer", 24, 110.0, 12, 11.0, 0.95, 2, 8, 384 * 768,
             "BERT-base fine-tuning on SQuAD, sequence 384 (Pollux)"),
    "MLP": ("mlp", "chain", 4, 0.67, 512, 0.6, 0.3, 2, 4, 512, "3-layer MLP (784-512-512-10); speed: proxy"),
    "SVM": ("linear", "none", 1, 0.05, 1024, 0.4, 0.2, 2, 4, 0, "linear SVM; data parallel only; speed: proxy"),
    "Recommendation": ("recommendation", "layer", 8, 31.8, 2048, 2.5, 0.4, 4, 16, 256,
                       "speed: Gavel autoencoder recommender (ML-20M); curve and params: NCF/NeuMF on "
                       "ML-20M (Pollux ncf)"),
    "DeepSpeech2": ("speech", "layer", 16, 38.0, 32, 10.0, 0.85, 4, 16, 300 * 1024,
                    "DeepSpeech2 (deepspeech.pytorch-style, Pollux); params approximate"),
    "YOLOv3": ("detection", "layer", 32, 61.9, 16, 9.0, 0.9, 6, 16, 52 * 52 * 256, "416x416 input"),
    "CycleGAN": ("gan", "chain", 8, 28.3, 1, 4.0, 0.8, 4, 8, 64 * 64 * 256,
                 "2 ResNet generators (11.4M) + 2 PatchGAN discriminators (2.8M); monet2photo (Gavel)"),
    "A3C": ("rl", "none", 1, 0.59, 20, 1.0, 0.2, 8, 8, 0,
            "Atari PongDeterministic-v4 (Gavel); small conv+LSTM(256) policy"),
}

# parametric curves: model -> (a0 at x=0, accuracy reached at x=1, k, scale, justification);
# loss = 1 - accuracy. The shape (k, scale) is the grid fit of the named measured curve.
CURVE_FAMILIES: dict[str, tuple[float, float, float, float, str]] = {
    "AlexNet": (0.001, 0.565, 1.0, 0.05, "a(1) = torchvision top-1 56.5%; shape fitted to ResNet-50/ImageNet"),
    "VGG-16": (0.001, 0.716, 1.0, 0.05, "a(1) = torchvision top-1 71.6%; shape fitted to ResNet-50/ImageNet"),
    "Inception-v3": (0.001, 0.773, 1.0, 0.05,
                     "a(1) = torchvision top-1 77.3%; shape fitted to ResNet-50/ImageNet"),
    "LSTM": (0.0, 0.9, 3.0, 0.2, "normalised quality (no accuracy metric); shape fitted to DeepSpeech2 (RNN)"),
    "Transformer": (0.0, 0.9, 3.0, 0.2, "normalised quality (BLEU-like); shape fitted to BERT"),
    "MLP": (0.1, 0.9, 3.0, 0.1, "normalised; shape fitted to NCF (fully connected)"),
    "SVM": (0.1, 0.9, 3.0, 0.1, "normalised; shape fitted to NCF (fully connected)"),
    "CycleGAN": (0.0, 0.9, 2.0, 0.05, "normalised; no related measured curve, CIFAR-10 CNN shape"),
    "A3C": (0.0, 0.9, 2.0, 0.05, "normalised (reward); no related measured curve, CIFAR-10 CNN shape"),
}

MODEL_ORDER = ("ResNet-18", "ResNet-50", "VGG-16", "AlexNet", "Inception-v3", "LSTM", "Transformer", "BERT",
               "MLP", "SVM", "Recommendation", "DeepSpeech2", "YOLOv3", "CycleGAN", "A3C")


# ------------------------------------------------------------------------------------------ loaders
def load_measured_speeds(path: Path = SPEEDS_CSV) -> dict[str, dict[str, tuple[float, str]]]:
    """``{model: {gpu_type: (seconds per iteration, source)}}`` from the bundled CSV."""
    out: dict[str, dict[str, tuple[float, str]]] = {}
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            t = float(r["iteration_time_s"])
            if r["gpu_type"] not in GPU_TYPES or not (t > 0 and math.isfinite(t)):
                raise ValueError(f"{path.name}: line {i}: bad row {r}")
            out.setdefault(r["model"], {})[r["gpu_type"]] = (t, r["source"])
    return out


def load_batch_shares(path: Path = BATCH_CSV) -> dict[str, tuple[float, str]]:
    """``{model: (fixed share of one iteration at the catalogue batch, source)}`` (``eval/extract_colocation.py``)."""
    out: dict[str, tuple[float, str]] = {}
    with open(path, newline="") as f:
        for i, r in enumerate(csv.DictReader(f), start=2):
            a = float(r["fixed_share"])
            if not 0.0 <= a < 1.0:
                raise ValueError(f"{path.name}: line {i}: fixed_share must be in [0, 1), got {r['fixed_share']!r}")
            out[r["model"]] = (a, r["source"])
    return out


def load_curves(path: Path = CURVES_CSV) -> dict[str, LearningCurve]:
    pts: dict[str, list[tuple[float, float, float]]] = {}
    src: dict[str, str] = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            pts.setdefault(r["model"], []).append((float(r["x"]), float(r["accuracy"]), float(r["loss"])))
            src[r["model"]] = r["source"]
    return {m: LearningCurve(tuple(p[0] for p in v), tuple(p[1] for p in v), tuple(p[2] for p in v), src[m])
            for m, v in pts.items()}


# ------------------------------------------------------------------------------------------ missing cells
def _ratio_table(cells: Mapping[str, Mapping[str, tuple[float, str]]]) -> dict[tuple[str, str], list[float]]:
    """time[t]/time[s] for every ordered pair of types, over models *measured* (not proxy) on both."""
    ratios: dict[tuple[str, str], list[float]] = {}
    for per in cells.values():
        meas = {g: t for g, (t, s) in per.items() if s.startswith("measured")}
        for t in meas:
            for s in meas:
                if t != s:
                    ratios.setdefault((t, s), []).append(meas[t] / meas[s])
    return ratios


def fill_missing_speeds(cells: Mapping[str, Mapping[str, tuple[float, str]]],
                        models: tuple[str, ...] | None = None) -> dict[str, dict[str, tuple[float, str]]]:
    """Complete every model's row over all of :data:`GPU_TYPES` by the rule in the module docstring.

    ``cells``: ``{model: {gpu_type: (time, source)}}`` with sources starting ``measured:`` or ``proxy:``.
    Returns a new mapping; original cells are kept verbatim, filled ones get ``derived: ...`` sources.
    """
    models = tuple(models or cells)
    ratios = _ratio_table(cells)
    out: dict[str, dict[str, tuple[float, str]]] = {m: dict(cells.get(m, {})) for m in models}

    def transfer(row: dict[str, tuple[float, str]]) -> None:
        known = [g for g in MEASURED_TYPES if g in row]
        for t in MEASURED_TYPES:
            if t in row:
                continue
            cands = [s for s in known if ratios.get((t, s))]
            if not cands:
                raise ValueError(f"no ratio basis to derive {t} from {known}")
            s = max(cands, key=lambda g: (len(ratios[(t, g)]), -abs(GPU_TYPES[g].year - GPU_TYPES[t].year)))
            r = median(ratios[(t, s)])
            row[t] = (row[s][0] * r, f"derived: {s} time x median {t}/{s} time ratio {r:.4g} "
                                     f"over {len(ratios[(t, s)])} models measured on both")

    for m in models:
        if out[m]:
            transfer(out[m])
    for m in models:
        if not out[m]:
            if m not in FLOPS_ANCHORS:
                raise ValueError(f"model {m!r} has no speed measurement and no anchor rule")
            anchor, factor, why = FLOPS_ANCHORS[m]
            out[m] = {g: (out[anchor][g][0] * factor, f"derived: {why}") for g in MEASURED_TYPES}
    for m in models:
        row = out[m]
        if "M60" not in row:
            row["M60"] = (row["K80"][0] * M60_OVER_K80_TIME,
                          f"derived: K80 time x {M60_OVER_K80_TIME} (M60 ~ one K80 die, see module docs)")
        if "H100" not in row:
            row["H100"] = (row["A100"][0] / H100_SPEEDUP_OVER_A100,
                           f"derived: A100 time / {H100_SPEEDUP_OVER_A100} (bandwidth-bound H100/A100, module docs)")
        missing = set(GPU_TYPES) - set(row)
        if missing:  # a GPU type added to hardware.py without a rule here
            raise ValueError(f"model {m!r}: no rule for GPU types {sorted(missing)}")
    return out


# ------------------------------------------------------------------------------------------ build
def _curve(name: str, measured: Mapping[str, LearningCurve]) -> LearningCurve:
    if name in measured:
        return measured[name]
    a0, final, k, scale, why = CURVE_FAMILIES[name]
    # choose the asymptote so that the curve reaches ``final`` exactly at x = 1 (the end of the budget)
    d = (1.0 + 1.0 / scale) ** (-k)
    am = (final - a0 * d) / (1.0 - d)
    return power_law_curve(a0, am, 1.0 - a0, 1.0 - am, k=k, scale=scale,
                           source=f"parametric power law a0={a0}, a(1)={final}, k={k}, scale={scale}: {why}")


@lru_cache(maxsize=1)
def _build() -> tuple[dict[str, ModelProfile], dict[str, dict[str, str]]]:
    speeds = fill_missing_speeds(load_measured_speeds(), MODEL_ORDER)
    curves = load_curves()
    shares = load_batch_shares()
    cat: dict[str, ModelProfile] = {}
    sources: dict[str, dict[str, str]] = {}
    for name in MODEL_ORDER:
        fam, par, maxp, params, bs, mem, util, cpu, host, act_elems, notes = _SPECS[name]
        row = speeds[name]
        sources[name] = {g: row[g][1] for g in GPU_TYPES}
        curve = _curve(name, curves)
        by_kind: dict[str, list[str]] = {}
        for g, s in sources[name].items():
            kind = s.split(":")[0]
            who = "" if kind == "derived" else (" gavel" if "gavel" in s else " elasticflow")
            by_kind.setdefault(f"{kind}{who}", []).append(g)
        srcs = ", ".join(f"{k} {'/'.join(v)}" for k, v in by_kind.items())
        cat[name] = ModelProfile(
            name=name, family=fam, parallelism=par, params_m=params, batch_size=bs,
            iteration_time={g: row[g][0] for g in GPU_TYPES}, gpu_memory_gb=mem, gpu_util=util,
            cpu_cores=cpu, host_memory_gb=host, activation_mb=act_elems * bs * 4 * 2 / 1e6, curve=curve,
            max_partitions=1 if par == "none" else maxp, batch_fixed_share=shares[name][0],
            sources=f"speed: {srcs} (see SPEED_SOURCES); curve: {curve.source}; batch scaling: {shares[name][1]}",
            notes=notes)
    return cat, sources


CATALOGUE: dict[str, ModelProfile]
SPEED_SOURCES: dict[str, dict[str, str]]
CATALOGUE, SPEED_SOURCES = _build()


def model_names() -> list[str]:
    """Catalogue model names in a stable order."""
    return list(MODEL_ORDER)


def get_model(name: str) -> ModelProfile:
    try:
        return CATALOGUE[name]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known models: {', '.join(MODEL_ORDER)}") from None

