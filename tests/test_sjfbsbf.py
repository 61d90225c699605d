"""SJF-BSBF, SJF-FFS and SJF by GPU count (baselines/sjfbsbf.py): Theorem 1, Algorithm 2's sub-batch search and
the three policies' placements on hand-built clusters."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.baselines.sjfbsbf import delayed_pair_jct, pair_jct
from clustergym.core.commands import execute
from clustergym.core.config import SimConfig
from clustergym.core.engine import Simulator
from clustergym.core.view import ClusterView

from helpers import cluster, job, toy_model

# SJF-BSBF decides whenever a job waits: "actionable" ticks would skip a job that fits only with a sub-batch
STILL = dict(usage_change_mean_s=0.0, decide_on="queue")


# ------------------------------------------------------------------------------------------------ Theorem 1
def test_theorem1_numeric_vectors():
    # equal t: running job 50 iterations left, new job 100; equal xi. Share 97.5 vs sequential 100 at 1.45,
    # 102.5 vs 100 at 1.55 (hand: f_r = 1.45 x 50 = 72.5, N ends 72.5 + (100 - 72.5 / 1.45) = 122.5)
    assert pair_jct(1, 50, 1.45, 1, 100, 1.45) == pytest.approx((97.5, 100.0))
    assert pair_jct(1, 50, 1.55, 1, 100, 1.55) == pytest.approx((102.5, 100.0))
    # a shorter new job makes sharing pay at 1.8: 115 vs 125
    assert pair_jct(1, 100, 1.8, 1, 50, 1.8) == pytest.approx((115.0, 125.0))


def test_theorem1_condition_decides_when_the_running_job_ends_first():
    # Eq. 25: with the running job A finishing first under sharing, sharing now beats waiting exactly when
    # 2 xi_B + xi_A - 2 xi_A xi_B > 0 (B: the new job)
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(3000):
        t_a, t_b = rng.uniform(0.1, 3.0, 2)
        i_a, i_b = rng.uniform(1, 1000, 2)
        xi_a, xi_b = rng.uniform(1.0, 3.0, 2)
        if t_a * xi_a * i_a >= t_b * xi_b * i_b:
            continue
        cond = 2 * xi_b + xi_a - 2 * xi_a * xi_b
        if abs(cond) < 1e-6:
            continue
        share, seq = pair_jct(t_a, i_a, xi_a, t_b, i_b, xi_b)
        assert (share < seq) == (cond > 0)
        checked += 1
    assert checked > 500


def test_theorem1_optimum_over_the_inserting_time_is_an_endpoint():
    rng = np.random.default_rng(1)
    for _ in range(500):
        t_r, t_n = rng.uniform(0.1, 3.0, 2)
        i_r, i_n = rng.uniform(1, 500, 2)
        xi_r, xi_n = rng.uniform(1.0, 4.0, 2)
        kappas = np.linspace(0.0, t_r * i_r, 41)
        values = [delayed_pair_jct(k, t_r, i_r, xi_r, t_n, i_n, xi_n) for k in kappas]
        share, seq = pair_jct(t_r, i_r, xi_r, t_n, i_n, xi_n)
        assert values[0] == pytest.approx(share) and values[-1] == pytest.approx(seq)
        assert min(values) >= min(share, seq) - 1e-9


# --------------------------------------------------------------------------------------------- policies
def _toy(name: str, v100: float, mem: float = 4.0, share: float | None = 0.25):
    return replace(toy_model(name, v100=v100, gpu_memory_gb=mem, gpu_util=0.5), batch_fixed_share=share)


def _sim(specs, models, xi: float, gpus: int = 2) -> Simulator:
    return Simulator(cluster(1, gpus=gpus), specs,
                     SimConfig(**STILL, interference="constant", interference_xi=xi), models=models.__getitem__)


def _round(sim: Simulator, policy) -> None:
    """Execute ``policy``'s commands of the simulator's current decision round."""
    view = ClusterView(sim)
    for _ in range(100):
        cmd = policy.decide(view)
        if cmd is None:
            return
        policy.observe(view, cmd)
        execute(sim, cmd)


def _start(sim: Simulator, policy) -> None:
    """Run the first decision round of ``policy``."""
    policy.attach(sim)
    assert sim.next_decision()
    _round(sim, policy)


def test_registered_names_and_parameters():
    for name in ("sjf-bsbf", "sjf-ffs", "sjf-gpu"):
        assert name in baselines.available()
    assert baselines.make("sjf-ffs").params() == {"gang_guard": True, "stop_option": None, "sharing": "first-fit",
                                                  "order_by_gpus": False, "sub_batches": True}
    with pytest.raises(ValueError, match="sharing must be one of"):
        baselines.make("sjf-bsbf", sharing="always")


def test_sjf_bsbf_shares_when_theorem1_says_so_and_ffs_always():
    # 1 GPU, 1 s per iteration. Job 0 (100 iterations) runs from t = 0; job 1 (1000) arrives at t = 1 and is
    # decided at the next tick, t = 60, when job 0 has 40 left. Waiting: (40 + 40 + 1000) / 2 = 540 s.
    # Sharing at xi = 1.2: job 0 ends at 48, job 1 at 48 + (1000 - 40) = 1008: 528 < 540, share. At xi = 3:
    # 120 and 120 + 960 = 1080: 600 > 540, SJF-BSBF waits; SJF-FFS shares anyway.
    models = {"a": _toy("a", 1.0), "b": _toy("b", 1.0)}
    specs = [job(0, model="a", iters=100), job(1, submit=1.0, model="b", iters=1000)]
    for xi, bsbf_shares in ((1.2, True), (3.0, False)):
        for name, shares in (("sjf-bsbf", bsbf_shares), ("sjf-ffs", True)):
            sim = _sim(specs, models, xi, gpus=1)
            pol = baselines.make(name)
            _start(sim, pol)
            sim.next_decision()
            assert sim.now == 60.0
            _round(sim, pol)
            assert (sim.job(1).n_placed == 1) == shares, (name, xi)


def test_sjf_gpu_never_shares_and_orders_by_gpu_count():
    models = {"a": _toy("a", 1.0)}
    # two GPUs: job 0 (2 GPUs, short) and job 1 (1 GPU, long) arrive together; by GPU count job 1 goes first
    specs = [job(0, model="a", R=2, iters=10), job(1, model="a", iters=1000)]
    sim = _sim(specs, models, 1.5)
    _start(sim, baselines.make("sjf-gpu"))
    assert sim.job(1).n_placed == 1 and sim.job(0).n_placed == 0
    assert max(sim.cluster.gpu_n_jobs) == 1
    # SJF-BSBF's L_k order puts the short 2-GPU job first instead
    sim = _sim(specs, models, 1.5)
    _start(sim, baselines.make("sjf-bsbf"))
    assert sim.job(0).n_placed == 2


def test_algorithm2_takes_a_sub_batch_when_memory_needs_it():
    # a 16 GB GPU holding job 0 (10 GB); job 1 needs 10 GB at its full batch: it cannot share at s = 1, but at
    # s = 4 its activations shrink (25 M params -> 0.28 GB static; 0.3 + 0.28 + 9.72 / 4 = 3.0 GB) and it fits
    models = {"a": _toy("a", 1.0, mem=9.7), "b": _toy("b", 1.0, mem=9.7)}
    specs = [job(0, model="a", iters=1000), job(1, submit=1.0, model="b", iters=10)]
    sim = Simulator(cluster(1, gpus=1), specs, SimConfig(**STILL, interference="constant", interference_xi=1.2),
                    models=models.__getitem__)
    pol = baselines.make("sjf-bsbf")
    _start(sim, pol)
    sim.next_decision()
    _round(sim, pol)
    j1 = sim.job(1)
    assert j1.n_placed == 1 and j1.accum_steps > 1
    assert sim.cluster.gpu_n_jobs[0] == 2
    # without the sub-batch search it cannot share either
    sim = Simulator(cluster(1, gpus=1), specs, SimConfig(**STILL, interference="constant", interference_xi=1.2),
                    models=models.__getitem__)
    pol = baselines.make("sjf-bsbf", sub_batches=False)
    _start(sim, pol)
    sim.next_decision()
    _round(sim, pol)
    assert sim.job(1).n_placed == 0 and sim.job(1).accum_steps == 1
    # SJF-FFS does not search sub-batches: the full-batch task does not fit next to job 0, so it waits
    sim = Simulator(cluster(1, gpus=1), specs, SimConfig(**STILL, interference="constant", interference_xi=1.2),
                    models=models.__getitem__)
    s = run(sim, baselines.make("sjf-ffs"))
    recs = {r["job_id"]: r for r in sim.job_records()}
    assert recs[1]["first_start"] >= recs[0]["end"] - 1e-9 and s["finished"] == 2


def test_whole_runs_are_deterministic_and_finish():
    models = {"a": _toy("a", 1.0), "b": _toy("b", 2.0, mem=9.7)}
    specs = [job(i, submit=5.0 * i, model="ab"[i % 2], R=1 + (i % 3 == 0), iters=50 + 10 * i) for i in range(12)]
    for name in ("sjf-bsbf", "sjf-ffs", "sjf-gpu"):
        out = [run(_sim(specs, models, 1.5, gpus=4), baselines.make(name))["mean_jct"] for _ in range(2)]
        assert out[0] == out[1] and np.isfinite(out[0])
