"""Hare's HLAS-P ordering (baselines/hlas_p.py) with the seeded stand-in predictor and a hand-made one; the paper's
conservative predictor is tested in tests/test_size_predict.py."""
from __future__ import annotations

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.baselines.hlas import HLAS
from clustergym.baselines.hlas_p import HLASP, HLASPStandin
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.view import ClusterView

import helpers

FREE = dict(usage_change_mean_s=0.0, suspend_s=0.0, resume_base_s=0.0, resume_per_gpu_s=0.0)


class _KnowsJ3(HLASP):
    """Fig. 12(c)'s predictor: "J3 will run at least 3 rounds", nothing about J1 and J2."""

    def predict_rounds(self, view, job):
        return 3.0 if job.jid == 2 else 0.0


def _toy_run(policy):
    helpers.MODELS["toy-60"] = helpers.toy_model("toy-60", v100=60.0)
    try:
        specs = [helpers.job(j, model="toy-60", iters=n) for j, n in enumerate((2, 3, 4))]
        sim = Simulator(helpers.cluster(1, gpus=1), specs, SimConfig(**FREE), 0, models=helpers.models)
        run(sim, policy)
        return sorted(j.record.end_time / 60.0 for j in sim.jobs)
    finally:
        del helpers.MODELS["toy-60"]


def test_hare_fig12c_hlas_p_through_the_simulator():
    # one GPU, jobs of 2, 3 and 4 one-minute rounds at t = 0, one queue per round (as the HLAS toy test): knowing
    # that J3 runs at least 3 rounds puts it in the queue of size 3 until J1 and J2 have caught up, so J1 and J2
    # round-robin first: ends at 3, 5 and 9 rounds, average JCT 17/3 = 5.67 (HLAS: 20/3 = 6.67)
    thresholds = (30.0, 90.0, 150.0, 210.0)
    ends = _toy_run(_KnowsJ3(thresholds=thresholds))
    assert ends == pytest.approx([3.0, 5.0, 9.0]) and np.mean(ends) == pytest.approx(17 / 3)
    assert np.mean(_toy_run(HLAS(thresholds=thresholds))) == pytest.approx(20 / 3)


def test_expected_size_sub_queues_and_the_prediction_stream():
    sim = Simulator(helpers.cluster(1), [helpers.job(j, iters=1000 * (j + 1)) for j in range(3)], SimConfig(**FREE), 0,
                    models=helpers.models)
    assert sim.next_decision()
    view = ClusterView(sim)
    pol = HLASPStandin(fraction=0.5, error=0.0, thresholds=(600.0, 3600.0))
    pol.begin(view)
    jobs = [sim.job(j) for j in range(3)]
    # no error: R^p_0 = floor(0.5 x N); H = max(R^r, R^p_0) x T̄ with T̄ = 1 s here
    assert [pol.predicted(view, j) for j in jobs] == [500.0, 1000.0, 1500.0]
    assert [pol.service(view, j) for j in jobs] == pytest.approx([500.0, 1000.0, 1500.0])
    # job 0 in Q_1, jobs 1-2 in Q_2 (sub-queue q^1, larger R^p first): order 0, 2, 1
    assert sorted(range(3), key=lambda j: pol.rank(view, jobs[j])) == [0, 2, 1]
    # the error is a seeded log-normal factor per job, independent of the order jobs are seen
    a, b = HLASPStandin(seed=3), HLASPStandin(seed=3)
    a.begin(view)
    b.begin(view)
    assert [a.predicted(view, j) for j in jobs] == [b.predicted(view, j) for j in reversed(jobs)][::-1]
    assert [a.predicted(view, j) for j in jobs] != [500.0, 1000.0, 1500.0]
    with pytest.raises(ValueError, match="fraction"):
        HLASPStandin(fraction=-0.1)
    with pytest.raises(ValueError, match="error"):
        HLASPStandin(error=float("nan"))


def test_hlas_p_without_a_prediction_is_hlas():
    specs = [helpers.job(i, submit=30.0 * i, R=1 + i % 3, iters=200 + 150 * i) for i in range(8)]

    def ends(pol):
        sim = Simulator(helpers.cluster(2), specs, SimConfig(**FREE), 0, models=helpers.models)
        run(sim, pol)
        return [j.record.end_time for j in sim.jobs]

    assert ends(HLASPStandin(fraction=0.0)) == ends(HLAS())
    assert ends(HLASPStandin(fraction=1.0, error=0.0)) != ends(HLAS())
    assert isinstance(baselines.make("hlas-p"), HLASP) and not isinstance(baselines.make("hlas-p"), HLASPStandin)
    assert isinstance(baselines.make("hlas-p-standin"), HLASPStandin)
