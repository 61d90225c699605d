"""Catalogue data: speeds (measured, proxy, derived), heterogeneity, curves."""
from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from clustergym.core import catalogue_data as cd
from clustergym.core.catalogue import ModelProfile
from clustergym.core.catalogue_data import CATALOGUE, SPEED_SOURCES, get_model, model_names
from clustergym.core.hardware import GPU_TYPES

ROOT = Path(__file__).resolve().parents[1]
GAVEL_JSON = ROOT.parent / "shared/traces/gavel/scheduler/simulation_throughputs.json"  # ../shared beside the repo
REQUIRED = ["ResNet-18", "ResNet-50", "VGG-16", "AlexNet", "Inception-v3", "LSTM", "Transformer", "BERT", "MLP",
            "SVM", "Recommendation", "DeepSpeech2", "YOLOv3"]


def _csv_rows():
    with open(ROOT / "envs/data/model_speeds.csv", newline="") as f:
        return list(csv.DictReader(f))


def test_required_models_and_stable_order():
    names = model_names()
    assert set(REQUIRED) <= set(names)
    assert names == model_names() == list(CATALOGUE)
    assert len(set(names)) == len(names)


def test_get_model_unknown_lists_names():
    assert isinstance(get_model("ResNet-50"), ModelProfile)
    with pytest.raises(KeyError) as e:
        get_model("ResNet-5000")
    assert "ResNet-5000" in str(e.value) and "ResNet-50" in str(e.value) and "BERT" in str(e.value)


@pytest.mark.parametrize("name", cd.MODEL_ORDER)
def test_profile_fields(name):
    p = get_model(name)
    assert set(p.iteration_time) == set(GPU_TYPES)
    for g, t in p.iteration_time.items():
        assert math.isfinite(t) and t > 0, (name, g, t)
        assert p.iter_time(g) == t
    assert p.parallelism in ("chain", "layer", "none")
    if p.parallelism == "none":
        assert p.max_partitions == 1
    else:
        assert p.max_partitions >= 2
    assert 0 < p.gpu_util <= 1
    assert p.params_m > 0 and p.batch_size >= 1 and p.cpu_cores > 0 and p.host_memory_gb > 0
    assert 0 < p.gpu_memory_gb <= max(g.memory_gb for g in GPU_TYPES.values())
    assert p.activation_mb >= 0
    assert p.sources and p.family
    assert set(SPEED_SOURCES[name]) == set(GPU_TYPES)


def test_parallelism_classes():
    assert get_model("SVM").parallelism == "none"
    for m in ("MLP", "AlexNet", "VGG-16"):
        assert get_model(m).parallelism == "chain"
    for m in ("ResNet-18", "ResNet-50", "LSTM", "Transformer", "BERT"):
        assert get_model(m).parallelism == "layer"


def test_measured_cells_match_csv_and_sources():
    rows = _csv_rows()
    assert rows
    seen = set()
    for r in rows:
        m, g = r["model"], r["gpu_type"]
        seen.add((m, g))
        assert CATALOGUE[m].iteration_time[g] == pytest.approx(float(r["iteration_time_s"]), rel=1e-12)
        assert SPEED_SOURCES[m][g] == r["source"]
        assert r["source"].split(":")[0] in ("measured", "proxy")
    for m in model_names():
        for g in GPU_TYPES:
            if (m, g) not in seen:
                assert SPEED_SOURCES[m][g].startswith("derived: "), (m, g)
    # nothing measured for M60/H100 in the sources: always derived
    assert all(SPEED_SOURCES[m]["M60"].startswith("derived") for m in model_names())
    assert all(SPEED_SOURCES[m]["H100"].startswith("derived") for m in model_names())


@pytest.mark.skipif(not GAVEL_JSON.exists(), reason="staged Gavel data not available")
def test_values_against_raw_gavel_json():
    d = json.loads(GAVEL_JSON.read_text())
    for model, job in [("ResNet-18", "ResNet-18 (batch size 128)"), ("Recommendation", "Recommendation (batch size 2048)"),
                       ("LSTM", "LM (batch size 20)")]:
        for key, g in (("k80", "K80"), ("p100", "P100"), ("v100", "V100")):
            thr = d[key][str((job, 1))]["null"]
            assert get_model(model).iteration_time[g] == pytest.approx(1.0 / thr, rel=1e-5)


def test_values_against_known_gavel_numbers():
    # solo 1-GPU throughputs (steps/s) from Gavel's simulation_throughputs.json
    assert get_model("ResNet-50").iteration_time["V100"] == pytest.approx(1 / 4.394774823323071, rel=1e-5)
    assert get_model("ResNet-50").iteration_time["K80"] == pytest.approx(1 / 0.6190282202246573, rel=1e-5)
    # ElasticFlow A100 resnet50, batch 64, 1 GPU: 6.8429775823889685 it/s
    assert get_model("ResNet-50").iteration_time["A100"] == pytest.approx(1 / 6.8429775823889685, rel=1e-5)


def test_heterogeneity_is_model_dependent():
    def speedup(m, fast="V100", slow="K80"):
        p = get_model(m)
        return p.iteration_time[slow] / p.iteration_time[fast]

    # Gavel: V100 is slower than K80 for the recommendation autoencoder, ~10x faster for ResNet-18
    assert speedup("Recommendation") < 1.0
    assert speedup("ResNet-18") > 9.0
    assert 6.0 < speedup("ResNet-50") < 8.0  # Gavel bs 64: 7.1x; Hare §1 reports "7x" on V100 over K80
    ratios = {m: speedup(m) for m in ("ResNet-18", "ResNet-50", "Transformer", "LSTM", "Recommendation", "CycleGAN")}
    assert max(ratios.values()) / min(ratios.values()) > 10
    # other types: measured cells keep model-dependent ratios too
    t4 = {m: get_model(m).iteration_time["T4"] / get_model(m).iteration_time["V100"] for m in ("ResNet-18", "ResNet-50")}
    assert t4["ResNet-18"] != pytest.approx(t4["ResNet-50"], rel=0.05)


def test_fill_rule_is_median_ratio_from_reference():
    cells = cd.load_measured_speeds()
    filled = cd.fill_missing_speeds(cells, cd.MODEL_ORDER)
    # LSTM has only Gavel types; its T4 is derived from V100 (largest support, closest year)
    r = [cells[m]["T4"][0] / cells[m]["V100"][0] for m in cells
         if "T4" in cells[m] and "V100" in cells[m] and cells[m]["T4"][1].startswith("measured")
         and cells[m]["V100"][1].startswith("measured")]
    assert len(r) >= 2
    import statistics
    assert filled["LSTM"]["T4"][0] == pytest.approx(cells["LSTM"]["V100"][0] * statistics.median(r))
    assert "V100" in filled["LSTM"]["T4"][1] and filled["LSTM"]["T4"][1].startswith("derived")
    # H100 and M60 fixed factors
    for m in cd.MODEL_ORDER:
        assert filled[m]["H100"][0] == pytest.approx(filled[m]["A100"][0] / cd.H100_SPEEDUP_OVER_A100)
        assert filled[m]["M60"][0] == pytest.approx(filled[m]["K80"][0] * cd.M60_OVER_K80_TIME)
    # measured cells untouched
    for m, row in cells.items():
        for g, v in row.items():
            assert filled[m][g] == v


def test_fill_handles_synthetic_input_and_reports_missing_rule():
    cells = {"A": {"K80": (2.0, "measured: x"), "V100": (1.0, "measured: x")},
             "B": {"K80": (4.0, "measured: x"), "V100": (1.0, "measured: x"), "T4": (2.0, "measured: x"),
                   "P100": (2.0, "measured: x"), "A100": (0.5, "measured: x")},
             "C": {"K80": (9.0, "measured: x")}}
    out = cd.fill_missing_speeds(cells)
    assert out["C"]["V100"][0] == pytest.approx(9.0 * 0.375)  # median(1/2, 1/4)
    assert out["A"]["T4"][0] == pytest.approx(1.0 * 2.0)
    with pytest.raises(ValueError, match="no speed measurement"):
        cd.fill_missing_speeds({"Z": {}}, ("Z",))


def test_alexnet_anchor():
    a, v = get_model("AlexNet"), get_model("VGG-16")
    f = cd.FLOPS_ANCHORS["AlexNet"][1]
    for g in GPU_TYPES:
        assert a.iteration_time[g] == pytest.approx(v.iteration_time[g] * f)


@pytest.mark.parametrize("name", cd.MODEL_ORDER)
def test_curves_monotone_and_invertible(name):
    c = get_model(name).curve
    assert c.x[0] == 0.0 and c.x[-1] <= 1.0 + 1e-12 and len(c.x) <= 64
    assert all(0.0 <= a <= 1.0 for a in c.accuracy)
    assert all(b >= a for a, b in zip(c.accuracy, c.accuracy[1:]))
    assert all(b <= a for a, b in zip(c.loss, c.loss[1:]))
    assert c.final_accuracy > c.accuracy[0]
    for x in (0.05, 0.1, 0.3, 0.5, 0.8, 1.0):
        a = c.accuracy_at(x)
        x2 = c.progress_for_accuracy(a)
        assert x2 <= x + 1e-9
        assert c.accuracy_at(x2) == pytest.approx(a, abs=1e-9)
    assert c.progress_for_accuracy(1.01) == math.inf
    assert 0 < c.optimum_progress() <= 1.0


def test_measured_curves_from_pollux():
    measured = {"ResNet-18", "ResNet-50", "BERT", "DeepSpeech2", "Recommendation", "YOLOv3"}
    for m in measured:
        assert get_model(m).curve.source.startswith("pollux"), m
    assert get_model("ResNet-18").curve.final_accuracy == pytest.approx(0.9463, abs=1e-4)  # cifar10 bs128 last row
    assert get_model("ResNet-50").curve.final_accuracy > 0.7
    assert 0.7 < get_model("DeepSpeech2").curve.final_accuracy < 0.8  # 1 - WER ~24%
    for m in set(model_names()) - measured:
        assert get_model(m).curve.source.startswith("parametric"), m


def test_import_does_not_read_shared(tmp_path):
    code = ("import builtins, io; real = io.open\n"
            "def guard(f, *a, **k):\n"
            "    assert '/shared/' not in str(f), f\n"
            "    return real(f, *a, **k)\n"
            "builtins.open = guard; io.open = guard\n"
            "import clustergym.core.catalogue_data as c; assert len(c.CATALOGUE) >= 13\n")
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)


def test_extract_script_reproduces_bundled_csvs(tmp_path):
    if not GAVEL_JSON.exists():
        pytest.skip("staged sources not available")
    subprocess.run([sys.executable, str(ROOT / "eval/extract_speeds.py"), "--out", str(tmp_path)], check=True,
                   capture_output=True)
    for f in ("model_speeds.csv", "learning_curves.csv", "pai_2020_machine_groups.csv"):
        assert (tmp_path / f).read_text() == (ROOT / "envs/data" / f).read_text(), f
