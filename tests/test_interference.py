"""Co-location interference (clustergym.core.interference) and gradient accumulation
(clustergym.core.accumulation): the pair table, the fallback rule and its sources, and their effect on
simulated time, computed by hand."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from clustergym.core.accumulation import compute_factor, fixed_share, replica_memory_gb, steps_error
from clustergym.core.catalogue_data import get_model
from clustergym.core.commands import Command, command_error, execute
from clustergym.core.config import SimConfig, SimConfigError
from clustergym.core.engine import InvalidCommand, Simulator
from clustergym.core.interference import Interference, load_colocation, transfer_order

from helpers import cluster, job, models

STILL = dict(usage_change_mean_s=0.0)
GAVEL = next((p / "shared/traces/gavel/scheduler/simulation_throughputs.json" for p in Path(__file__).resolve().parents
              if (p / "shared/traces/gavel").is_dir()), Path("/nonexistent"))


def test_measured_pair_is_gavels_ratio_with_its_source():
    f = Interference().pair("ResNet-50", "ResNet-18", "V100")
    xi, source = load_colocation()[("ResNet-50", "ResNet-18", "V100")]
    assert f.xi == xi > 1.0
    assert source.startswith("measured: gavel") and f.source == source


@pytest.mark.skipif(not GAVEL.exists(), reason="staged Gavel matrix not present")
def test_table_matches_the_staged_gavel_matrix():
    d = json.loads(GAVEL.read_text())["v100"]
    row = d["('ResNet-50 (batch size 64)', 1)"]
    want = row["null"] / row["('ResNet-18 (batch size 128)', 1)"][0]
    assert load_colocation()[("ResNet-50", "ResNet-18", "V100")][0] == pytest.approx(want, rel=1e-5)


def test_uncovered_pair_gets_the_injected_ratio_and_says_so():
    f = Interference(xi=1.7).pair("BERT", "YOLOv3", "V100")
    assert f.xi == 1.7
    assert "SJF-BSBF" in f.source and "not in Gavel" in f.source


def test_pair_gavel_did_not_corun_falls_back_and_names_the_record():
    zero = [k for k, (xi, _) in load_colocation().items() if xi is None]
    assert zero, "Gavel records some pairs that did not co-run"
    f = Interference(xi=1.5).pair(*zero[0])
    assert f.xi == 1.5 and "no co-run" in f.source


def test_types_gavel_did_not_measure_transfer_from_the_closest_year():
    assert transfer_order("V100") == ("V100",)
    assert transfer_order("A100")[0] == "V100"
    f = Interference().pair("ResNet-50", "ResNet-18", "A100")
    assert f.xi == Interference().pair("ResNet-50", "ResNet-18", "V100").xi
    assert "transferred from V100" in f.source


def test_constant_and_off_modes():
    assert Interference("constant", 2.0).pair("ResNet-50", "ResNet-18", "V100").xi == 2.0
    assert Interference("off").pair("BERT", "BERT", "V100").xi == 1.0
    with pytest.raises(ValueError, match="unknown interference mode"):
        Interference("bogus")
    with pytest.raises(SimConfigError, match="interference"):
        SimConfig(interference="bogus")
    with pytest.raises(SimConfigError, match="interference_xi"):
        SimConfig(interference_xi=0.5)


def test_three_jobs_add_their_excess():
    i = Interference("constant", 1.5)
    assert i.factors(("a", "b"), "V100") == (1.5, 1.5)
    assert i.factors(("a", "b", "c"), "V100") == (2.0, 2.0, 2.0)
    assert i.factors(("a",), "V100") == (1.0,)


def _shared_pair(cfg: dict) -> Simulator:
    # two 1-GPU toy jobs (0.5 s per iteration on V100 alone... toy V100 time 1.0 s) on one GPU: utilisation
    # 0.5 + 0.5 = 1 is no over-commit, so only interference slows them
    return Simulator(cluster(1, gpus=1), [job(0, iters=100), job(1, iters=50)], SimConfig(**{**STILL, **cfg}),
                     models=models)


def test_sharing_slows_both_jobs_by_the_ratio():
    # toy model: 1 s per iteration alone. xi = 1.5 while shared: job 1 (50 iterations) ends at 75 s; job 0 did
    # 50 of its 100 iterations by then and runs its last 50 alone: 75 + 50 = 125 s
    sim = _shared_pair({"interference": "constant", "interference_xi": 1.5})
    sim.next_decision()
    execute(sim, Command("place", 0, 0))
    execute(sim, Command("place", 1, 0))
    assert sim.resources.gpu_xi[0] == {sim.job(0): 1.5, sim.job(1): 1.5}
    while sim.next_decision():
        pass
    ends = {r["job_id"]: r["end"] for r in sim.job_records()}
    assert ends[1] == pytest.approx(75.0) and ends[0] == pytest.approx(125.0)


def test_interference_off_keeps_sharing_free_below_full_utilisation():
    sim = _shared_pair({"interference": "off"})
    sim.next_decision()
    execute(sim, Command("place", 0, 0))
    execute(sim, Command("place", 1, 0))
    assert sim.resources.gpu_xi[0] == {}
    while sim.next_decision():
        pass
    ends = {r["job_id"]: r["end"] for r in sim.job_records()}
    assert ends[1] == pytest.approx(50.0) and ends[0] == pytest.approx(100.0)


# ------------------------------------------------------------------------------------------- accumulation
def test_accumulation_time_and_memory_rules():
    m = get_model("ResNet-18")
    a = fixed_share(m)
    assert 0 < a < 1
    assert compute_factor(m, 1) == 1.0
    assert compute_factor(m, 4) == pytest.approx(4 * a + 1 - a)
    static = 12.0 * m.params_m * 1e6 / 2**30
    assert replica_memory_gb(m, 1) == m.gpu_memory_gb
    assert replica_memory_gb(m, 2) == pytest.approx(static + (m.gpu_memory_gb - static) / 2)
    assert steps_error(m, 3) and steps_error(m, 256) and steps_error(m, 0) and steps_error(m, 2.0)
    assert steps_error(m, 128) is None


def test_sub_batch_command_changes_memory_and_time():
    # toy model (1 s per iteration on V100, 4 GB at batch 32, 25 M parameters) with a fixed share of 0.25: four
    # sub-batches cost 4 x 0.25 + 0.75 = 1.75 x the compute, so 10 iterations take 17.5 s
    toy = replace(models("toy"), batch_fixed_share=0.25)
    sim = Simulator(cluster(1, gpus=1), [job(0, iters=10)], SimConfig(**STILL), models=lambda name: toy)
    sim.next_decision()
    static = 12.0 * 25e6 / 2**30
    assert command_error(sim, Command("sub-batch", jid=0, steps=3)) is not None
    execute(sim, Command("sub-batch", jid=0, steps=4))
    assert sim.task(0).t.gpu_memory_gb == pytest.approx(0.3 + static + (4.0 - static) / 4)
    execute(sim, Command("place", 0, 0))
    again = Command("sub-batch", jid=0, steps=2)
    assert "no placed task" in command_error(sim, again)  # the simulator's reason first, then the round rule's
    with pytest.raises(InvalidCommand, match="already changed in this round"):
        execute(sim, again)
    while sim.next_decision():
        pass
    assert sim.job_records()[0]["end"] == pytest.approx(17.5)


def test_a_model_without_a_fixed_share_cannot_accumulate():
    sim = Simulator(cluster(1, gpus=1), [job(0, iters=10)], SimConfig(**STILL), models=models)
    sim.next_decision()
    assert "batch_fixed_share" in command_error(sim, Command("sub-batch", jid=0, steps=2))
