"""Size prediction from the loss so far (baselines/size_predict.py: Optimus's fit) and the policies that use it:
HLAS-L (baselines/hlas_l.py) and HLAS-P's conservative predictor (baselines/hlas_p.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clustergym import baselines
from clustergym.baselines.hlas_l import HLASL
from clustergym.baselines.hlas_p import HLASP
from clustergym.baselines.simple import FIFO
from clustergym.baselines.size_predict import (History, LossFitError, OptimusFit, TooFewPoints, fit_optimus,
                                               observed_losses, predict_remaining)
from clustergym.core.commands import execute
from clustergym.core.curves import LearningCurve, power_law_curve
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.view import ClusterView

import helpers

FREE = dict(usage_change_mean_s=0.0, suspend_s=0.0, resume_base_s=0.0, resume_per_gpu_s=0.0, decide_on="always")
# the catalogue's k = 1 power law (AlexNet's shape): exactly Optimus's form in iterations
OPT = power_law_curve(0.0, 0.9, 1.0, 0.1, k=1.0, scale=0.05, points=400, source="test")


def optimus(k, b0=0.002, b1=0.5, b2=0.3):
    return 1.0 / (b0 * np.asarray(k, dtype=float) + b1) + b2


# ------------------------------------------------------------------------------------------------ the fit
def test_fit_recovers_a_synthetic_optimus_curve():
    k = np.arange(1.0, 2001.0, 50.0)
    fit = fit_optimus(k, optimus(k))
    assert (fit.b0, fit.b1, fit.b2) == pytest.approx((0.002, 0.5, 0.3), rel=5e-3)
    assert fit.n_points == k.size and fit.rmse < 1e-3
    # convergence rule: the excess over b2 falls to eps of its initial value at k* = (b1 / b0)(1 / eps - 1)
    assert fit.converged_at(0.05) == pytest.approx(0.5 / 0.002 * 19, rel=1e-2)
    assert predict_remaining(k, optimus(k)) == pytest.approx(4750 - 1951, rel=2e-2)
    # with 1 % multiplicative noise the parameters are still within a few per cent
    noisy = optimus(k) * (1 + 0.01 * np.random.default_rng(0).standard_normal(k.size))
    assert fit_optimus(k, noisy).b2 == pytest.approx(0.3, rel=0.05)


def test_few_points_follow_the_stated_rule():
    for n in range(3):
        k = np.arange(1.0, n + 1.0)
        with pytest.raises(TooFewPoints):
            fit_optimus(k, optimus(k))
        assert predict_remaining(k, optimus(k)) == 0.0  # no prediction
    # three points fit (exact data: the model is determined) ...
    k = np.array([1.0, 2.0, 3.0])
    assert fit_optimus(k, optimus(k)).n_points == 3
    # ... and on a curve of Optimus's form (OPT: the k = 1 power law) a 5-point prefix already predicts its end,
    # 0.95 of the 10,000-iteration budget by the convergence rule
    early = np.arange(1.0, 6.0)
    far = predict_remaining(early, [OPT.loss_at(i / 10_000) for i in early])
    assert early[-1] + far == pytest.approx(9_500, rel=0.01)


def test_flat_loss_predicts_convergence_now():
    k = np.arange(1.0, 11.0)
    fit = fit_optimus(k, np.full(10, 0.7))
    assert fit.b0 == 0.0 and fit.converged_at() == 0.0 and predict_remaining(k, np.full(10, 0.7)) == 0.0
    with pytest.raises(ValueError, match="eps"):
        OptimusFit(1.0, 1.0, 0.0, 3, 0.0).converged_at(1.0)


@pytest.mark.parametrize("iters, losses, match", [
    ([1, 2, 3], [0.9, float("nan"), 0.5], "finite"),
    ([1, 2, float("inf")], [0.9, 0.7, 0.5], "finite"),
    ([1, 2], [0.9, 0.7, 0.5], "iterations but"),
    ([1, 3, 2], [0.9, 0.7, 0.5], "strictly increasing"),
    ([1, 2, 3], [0.9, -0.1, 0.5], ">= 0"),
    ([1, 2, 3], [0.9, 0.5, 0.0], "loss of 0"),
])
def test_bad_points_raise_a_named_error(iters, losses, match):
    with pytest.raises(LossFitError, match=match):
        fit_optimus(iters, losses)
    with pytest.raises(LossFitError):  # predict_remaining passes bad points on (only too few is a rule)
        predict_remaining(iters, losses)


# ------------------------------------------------------------------------------- what a policy observes
def _sim_at(t_stop: float, curve: LearningCurve = OPT, iters: int = 1000, n_jobs: int = 1):
    """A one-GPU cluster (1 s per iteration) after FIFO ran ``n_jobs`` jobs of ``iters`` iterations to ``t_stop``."""
    helpers.MODELS["toy-opt"] = dataclasses.replace(helpers.toy_model("toy-opt"), curve=curve)
    try:
        specs = [helpers.job(j, model="toy-opt", iters=iters) for j in range(n_jobs)]
        sim = Simulator(helpers.cluster(1, gpus=1), specs, SimConfig(**FREE), 0, models=helpers.models)
    finally:
        del helpers.MODELS["toy-opt"]
    view, pol = ClusterView(sim), FIFO()
    while sim.now < t_stop and sim.next_decision():
        while (cmd := pol.decide(view)) is not None:
            pol.observe(view, cmd)
            execute(sim, cmd)
    return sim, view


def test_the_predictors_read_only_the_observed_prefix():
    sim, view = _sim_at(300.0)
    job = sim.job(0)
    done = view.iters(job)
    assert 200 < done < 400
    ks, ls = observed_losses(view, job, max_points=32)
    assert len(ks) == 32 and ks[-1] == np.floor(done) and np.all(np.diff(ls) < 0)
    with pytest.raises(ValueError, match="not observed yet"):
        view.observed_loss(job, done + 1)
    # the curve is Optimus's form: k* = 0.95 x the budget (size_predict docstring), predicted from the prefix
    hl, hp = HLASL(), HLASP()
    for p in (hl, hp):
        p.begin(view)
    assert hl.fitted_end(view, job) == pytest.approx(950, rel=0.02)
    before = (hl.predicted_remaining(view, job), hp.predict_rounds(view, job))
    # a different stopping point (the true total size) and a different curve beyond the prefix change nothing
    job.target_iters = 5000.0
    view.remaining_iters = lambda j: pytest.fail("a predictor read the remaining (true) size")
    tail = [i for i, x in enumerate(OPT.x) if x > 0.35]
    other = dataclasses.replace(OPT, loss=tuple(v * 0.5 if i in tail else v for i, v in enumerate(OPT.loss)))
    sim2, view2 = _sim_at(300.0, curve=other)
    for p in (hl, hp):
        p.new_episode(view)
    hl2, hp2 = HLASL(), HLASP()
    for p in (hl2, hp2):
        p.begin(view2)
    assert (hl.predicted_remaining(view, job), hp.predict_rounds(view, job)) == before
    assert (hl2.predicted_remaining(view2, sim2.job(0)), hp2.predict_rounds(view2, sim2.job(0))) == before


def test_hlas_l_virtual_size_and_too_few_points():
    sim, view = _sim_at(300.0)
    job = sim.job(0)
    pol = HLASL()
    pol.begin(view)
    tbar = pol.tbar(view, job)
    assert pol.service(view, job) == pytest.approx((view.iters(job) + pol.predicted_remaining(view, job)) * tbar)
    assert pol.service(view, job) == pytest.approx(pol.fitted_end(view, job) * tbar)
    # a job that has not run (no loss points): no prediction, H = R^r T̄ as in HLAS (the second job waits)
    sim, view = _sim_at(120.0, n_jobs=2)
    pol = HLASL()
    pol.begin(view)
    assert view.iters(sim.job(1)) == 0 and pol.predicted_remaining(view, sim.job(1)) == 0.0
    with pytest.raises(ValueError, match="eps"):
        HLASL(eps=0.0)
    with pytest.raises(ValueError, match="max_points"):
        HLASL(max_points=2)


def test_hlas_p_caps_the_fit_and_averages_with_history():
    sim, view = _sim_at(300.0)
    job = sim.job(0)
    pol = HLASP(horizon_s=3600.0)
    pol.begin(view)
    tbar = pol.tbar(view, job)
    fit = HLASL().fitted_end(view, job) - np.floor(view.iters(job))
    assert pol.predict_rounds(view, job) == pytest.approx(min(fit, 3600.0 / tbar))
    small = HLASP(horizon_s=60.0 * tbar)  # a cap of 60 rounds: the partial prediction
    small.begin(view)
    assert small.predict_rounds(view, job) == pytest.approx(60.0)
    # a finished job of the same model ran 1000 rounds: the mean of the fit part and the historical remaining
    small.history.rounds["toy-opt"] = [1000.0]
    assert small.predict_rounds(view, job) == pytest.approx(60.0)  # both capped at 60
    small.history.rounds["toy-opt"] = [view.iters(job) + 20.0]
    assert small.predict_rounds(view, job) == pytest.approx((60.0 + 20.0) / 2)
    # no loss points and no history: no prediction (q^2, as HLAS)
    sim, view = _sim_at(120.0, n_jobs=2)
    pol = HLASP()
    pol.begin(view)
    assert pol.predict_rounds(view, sim.job(1)) == 0.0
    with pytest.raises(ValueError, match="horizon_s"):
        HLASP(horizon_s=0.0)


def test_history_records_finished_jobs_only():
    sim, view = _sim_at(0.0, iters=100, n_jobs=3)
    assert sim.next_decision()  # (t = 0: the jobs are submitted)
    hist = History()
    hist.update(view)
    assert hist.mean_rounds("toy-opt") is None
    sim.stop(2)  # a job stopped by a command is not a record
    pol = FIFO()
    while sim.now < 150 and sim.next_decision():
        while (cmd := pol.decide(view)) is not None:
            pol.observe(view, cmd)
            execute(sim, cmd)
        hist.update(view)
    assert hist.rounds == {"toy-opt": [100.0]}


def test_hlas_p_and_hlas_l_through_the_simulator_use_the_history():
    specs = [helpers.job(i, submit=30.0 * i, R=1 + i % 3, iters=200 + 150 * i) for i in range(8)]
    ends = {}
    for pol in (HLASL(), HLASP()):
        sim = Simulator(helpers.cluster(2), specs, SimConfig(**FREE), 0, models=helpers.models)
        baselines.run(sim, pol)
        ends[pol.name] = [j.record.end_time for j in sim.jobs]
        assert all(e > 0 for e in ends[pol.name])
    # HLAS-P recorded every job that finished before its last decision (the last job ends after it)
    rec = pol.history.rounds["toy"]
    assert len(rec) == 7 and set(rec) <= {float(s.max_iterations) for s in specs}


def test_hlas_l_runs_on_hetero_through_the_common_evaluation_path():
    from clustergym.eval.rollout import evaluate

    (rec,) = evaluate("hlas-l", "clustergym/Hetero-v1", {"window_jobs": 10}, [1])
    assert rec["policy"] == "hlas-l" and rec["terminated"] and rec["unfinished"] == 0 and rec["mean_jct"] > 0


def test_loss_fit_table_is_exact_on_the_optimus_form_curves():
    from clustergym.eval.experiments_hare import loss_fit_table

    t = loss_fit_table(fractions=(0.1, 0.5))
    assert t.loc["AlexNet"].tolist() == pytest.approx([0.95, 0.95], rel=0.02)  # k = 1 power law: k* = 0.95 budget
    assert t.loc["MLP", "0.5"] == pytest.approx(0.5, abs=1e-3)  # a flat tail: predicted converged now
