"""Stopping as MLFS defines it (§3.5, §4): users pick run-all / OptStop / requirement; OptStop stops at a
*predicted* optimum (a seeded learning-curve predictor about 90 % accurate); MLFS's own schedulers put every
changeable job on OptStop, the comparison methods run their users' iterations; MLF-C moves changeable jobs to
the requirement under overload and back to the scheduler's option after it."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.baselines.mlfs import job_draw
from clustergym.core.catalogue import ModelProfile
from clustergym.core.config import SimConfig
from clustergym.core.curves import LearningCurve
from clustergym.core.engine import Simulator
from clustergym.core.job import optstop_prediction_errors
from clustergym.core.generator import generate
from clustergym.core.loadcontrol import LoadControl
from clustergym.core.presets import cluster_preset

import helpers

# accuracy reaches its best at half the budget: the predictor's cap (the budget) binds only when it is off by
# a factor of 2 or more (eps > ln 2 = 5.5 sigma at the default sigma)
HALF = LearningCurve(x=(0.0, 0.5, 1.0), accuracy=(0.0, 0.8, 0.8), loss=(1.0, 0.2, 0.2), source="test")
EARLY = ModelProfile(name="early", family="test", parallelism="chain", params_m=25.0, batch_size=32,
                     iteration_time={g: 1.0 for g in ("V100", "K80", "P100", "T4", "A100", "H100", "M60")},
                     gpu_memory_gb=4.0, gpu_util=0.5, cpu_cores=2.0, host_memory_gb=8.0, activation_mb=10.0,
                     curve=HALF, max_partitions=32)
BUDGET = 1_000_000  # iterations: rounding the target up to a whole iteration is negligible


def early_sim(n_jobs: int, seed: int, **cfg) -> Simulator:
    specs = [helpers.job(i, model="early", iters=BUDGET, stop="opt-stop") for i in range(n_jobs)]
    return Simulator(helpers.cluster(), specs, SimConfig(**cfg), seed=seed, models=lambda name: EARLY)


def relative_errors(sim: Simulator) -> np.ndarray:
    recs = sim.job_records()
    return np.array([r["optstop_predicted_iters"] / r["optstop_true_iters"] - 1.0 for r in recs])


def test_default_sigma_gives_the_documented_ten_percent_error():
    sigma = SimConfig().optstop_error_sigma
    # E|exp(eps) - 1| for eps ~ N(0, sigma): exp(sigma^2 / 2) (2 Phi(sigma) - 1)
    assert math.exp(sigma ** 2 / 2) * (2 * norm.cdf(sigma) - 1) == pytest.approx(0.100, abs=0.001)
    errs = relative_errors(early_sim(4000, seed=7))
    # 4000 jobs: the standard error of the mean |error| is about 0.0012
    assert np.mean(np.abs(errs)) == pytest.approx(0.100, abs=0.006)
    assert np.mean(np.log1p(errs)) == pytest.approx(0.0, abs=0.006)  # unbiased in log
    assert np.std(np.log1p(errs)) == pytest.approx(sigma, rel=0.05)


def test_predictions_are_deterministic_per_seed_and_capped_to_the_budget():
    a, b, c = early_sim(50, seed=3), early_sim(50, seed=3), early_sim(50, seed=4)
    assert [j.optimum_predicted for j in a.jobs] == [j.optimum_predicted for j in b.jobs]
    assert [j.optimum_predicted for j in a.jobs] != [j.optimum_predicted for j in c.jobs]
    # an error large enough to pass the end of the budget stops at the budget
    big = early_sim(200, seed=3, optstop_error_sigma=1.0)
    assert max(j.optimum_predicted for j in big.jobs) == 1.0
    assert all(j.target_iters <= BUDGET for j in big.jobs)
    # sigma 0: the true optimum (the predictor is exact)
    exact = early_sim(5, seed=3, optstop_error_sigma=0.0)
    # (accuracy within 0.002 of its best 0.8 from 0.798 / 0.8 x 0.5 = 0.49875 of the budget)
    for r in exact.job_records():
        assert r["optstop_predicted_iters"] == r["optstop_true_iters"] == pytest.approx(498_750, abs=1)
    # the target of an OptStop job is the predicted optimum
    assert [j.target_iters for j in a.jobs] == [r["optstop_predicted_iters"] for r in a.job_records()]


def test_the_predictor_has_its_own_stream():
    # the simulator's own Generator is untouched by the prediction draws ...
    sim = early_sim(30, seed=11)
    assert sim.rng.bit_generator.state == np.random.default_rng(11).bit_generator.state
    assert optstop_prediction_errors(11, 30, 0.125) == [j.optimum_predicted / j.optimum_true for j in sim.jobs]
    # ... so a run whose jobs never use OptStop is identical whatever the predictor's error
    def summary(sigma):
        specs = [helpers.job(i, submit=30.0 * i, P=2, iters=400) for i in range(6)]
        s = Simulator(helpers.cluster(), specs, SimConfig(optstop_error_sigma=sigma), seed=5, models=helpers.models)
        return run(s, baselines.make("fifo"))
    assert repr(summary(0.0)) == repr(summary(0.5))  # (repr: the SLO rates of a workload without SLO jobs are NaN)


def generator_sim(seed: int, n_jobs: int = 40, load: float = 1.0) -> Simulator:
    cl = cluster_preset("mlfs-80")
    return Simulator(cl, generate(n_jobs, seed, cl.n_gpus, load=load, cluster=cl), SimConfig(), seed=seed)


def test_mlfh_runs_every_job_with_optstop_and_fifo_runs_the_users_iterations():
    fifo, mlfh = generator_sim(2), generator_sim(2)
    assert all(j.spec.stop_option == "run-all" and j.spec.stop_changeable for j in fifo.jobs)  # the default
    run(fifo, baselines.make("fifo"))
    run(mlfh, baselines.make("mlf-h"))
    for r in fifo.job_records():
        assert r["state"] == "FINISHED" and r["final_stop_option"] == "run-all"
        assert r["iterations"] == r["max_iterations"]
    stopped_early = 0
    for r in mlfh.job_records():
        assert r["state"] == "FINISHED" and r["final_stop_option"] == "opt-stop"
        assert r["iterations"] == pytest.approx(r["optstop_predicted_iters"])
        stopped_early += r["iterations"] < r["max_iterations"]
    assert stopped_early >= 0.8 * len(mlfh.jobs)


def test_a_job_the_user_kept_is_not_changed_and_a_cheaper_choice_stands():
    specs = [helpers.job(0, iters=200, stop="run-all", stop_changeable=False),
             helpers.job(1, iters=200, stop="requirement", acc_req=0.3),
             helpers.job(2, iters=200, stop="run-all")]
    sim = Simulator(helpers.cluster(), specs, SimConfig(usage_change_mean_s=0.0), seed=0, models=helpers.models)
    run(sim, baselines.make("mlf-h"))
    final = {r["job_id"]: (r["final_stop_option"], r["iterations"]) for r in sim.job_records()}
    assert final[0] == ("run-all", 200)
    assert final[1] == ("requirement", 60)  # linear curve: accuracy 0.3 at 30 % of 200
    assert final[2][0] == "opt-stop"


def first_fit(sim):
    for t in sim.ready_tasks():
        ok = np.flatnonzero(sim.feasible_servers(t))
        if len(ok):
            sim.place(t.tid, int(ok[0]))


def overload_then_relief(restore_option):
    """One GPU, CPU for two toy jobs (1 s per iteration): jobs 0 and 1 start at t = 0, job 2 waits, so after
    the first round the cluster is overloaded (MLF-C's rule: tasks queued) and every job moves to its
    requirement (accuracy 0.5 on the linear curve: half the budget). Job 0 ends at t = 50, job 2 starts at
    t = 60 and the overload is over: MLF-C gives jobs 1 and 2 their normal option back."""
    specs = [helpers.job(0, iters=100, acc_req=0.5), helpers.job(1, iters=1000, acc_req=0.5),
             helpers.job(2, iters=100, acc_req=0.5, stop="opt-stop")]
    ctl = LoadControl(restore_option=restore_option)
    sim = Simulator(helpers.cluster(1, gpus=1, cpu=4.1), specs, SimConfig(usage_change_mean_s=0.0,
                    optstop_error_sigma=0.0), seed=0, models=helpers.models, controllers=[ctl])
    sim.run(first_fit)
    return {r["job_id"]: (r["final_stop_option"], r["iterations"]) for r in sim.job_records()}, ctl


def test_mlfc_restores_the_schedulers_option_not_the_users():
    # the linear curve's optimum is 0.998 of the budget (within 0.002 of its best accuracy): 998 of 1000
    final, ctl = overload_then_relief("opt-stop")
    assert (ctl.switched, ctl.restored) == (3, 2)
    assert final == {0: ("requirement", 50), 1: ("opt-stop", 998), 2: ("opt-stop", 100)}
    # without a scheduler's option, MLF-C gives the users theirs back
    final, ctl = overload_then_relief(None)
    assert (ctl.switched, ctl.restored) == (3, 2)
    assert final == {0: ("requirement", 50), 1: ("run-all", 1000), 2: ("opt-stop", 100)}


def test_mlfs_h_c_attaches_mlfc_restoring_optstop():
    sim = generator_sim(0, n_jobs=5)
    pol = baselines.make("mlfs-h+c")
    pol.attach(sim)
    assert pol.controller.restore_option == "opt-stop" == pol.system_stop_option
    assert baselines.make("fifo").system_stop_option is None
    with pytest.raises(ValueError, match="LoadControl.restore_option"):
        LoadControl(restore_option="sometimes")


def test_mlf_h_stop_option_parameter_sets_every_changeable_jobs_rule():
    records = {}
    for option in ("opt-stop", "requirement"):
        sim = generator_sim(0, n_jobs=20)
        pol = baselines.make("mlfs-h+c", stop_option=option)
        run(sim, pol)
        assert pol.controller.restore_option == option == pol.system_stop_option
        records[option] = [(j.spec.stop_changeable, j.stop_option) for j in sim.jobs]
    moved = [(a, b) for (changeable, a), (_, b) in zip(*records.values()) if changeable]
    assert moved and all(b == "requirement" for _, b in moved)
    assert any(a == "opt-stop" for a, _ in moved)
    with pytest.raises(ValueError, match="stop_option must be None or one of"):
        baselines.make("mlf-h", stop_option="sometimes")


CORE_HEURISTICS = [n for n in baselines.available() if n not in ("random", "mlfs-h+c", "mlfs-h+c-act")]


@pytest.mark.parametrize("name", CORE_HEURISTICS)
def test_every_heuristic_takes_the_stopping_lever(name):
    # stop_option puts every changeable job on the system's option before the policy's own commands, so the
    # same order and placement run requirement-stopped jobs: fewer iterations each, never more
    plain, req = generator_sim(1, n_jobs=12), generator_sim(1, n_jobs=12)
    run(plain, baselines.make(name, stop_option=None))
    run(req, baselines.make(name, stop_option="requirement"))
    both = 0
    for a, b in zip(plain.job_records(), req.job_records()):
        assert b["final_stop_option"] == "requirement" and a["final_stop_option"] in ("run-all", "opt-stop")
        if a["state"] == b["state"] == "FINISHED":  # (sjf-bsbf leaves a 9-task job unplaced here either way)
            both += 1
            assert b["iterations"] <= a["iterations"] and b["accuracy_met"]
    assert both >= 10


def test_the_stopping_lever_acts_through_the_env_and_is_refused_where_it_cannot_act():
    import gymnasium as gym

    from clustergym.eval.rollout import predictor, rollout

    env = gym.make("clustergym/GPUCluster-v1", window_jobs=20, max_steps=3000)
    records = {}
    for option in (None, "requirement"):
        rollout(env, predictor(baselines.make("sjf", env, stop_option=option), env), seed=3)
        records[option] = env.unwrapped.sim.job_records()
    finished = [r for r in records["requirement"] if r["state"] == "FINISHED"]
    assert finished and all(r["final_stop_option"] == "requirement" for r in finished)
    assert all(r["final_stop_option"] == "run-all" for r in records[None])
    with pytest.raises(ValueError, match="cannot apply stop_option"):
        baselines.make("random", stop_option="requirement")
    with pytest.raises(ValueError, match="stop_option must be None or one of"):
        baselines.make("fifo", stop_option="early")


def test_mlf_h_req_fraction_is_a_dose_of_the_stopping_lever():
    def finals(**params):
        sim = generator_sim(0, n_jobs=20)
        out = run(sim, baselines.make("mlf-h-req", **params))
        return [j.stop_option for j in sim.jobs], out["mean_jct"]

    plain, jct = finals()
    assert set(plain) == {"requirement"}
    none, jct0 = finals(fraction=0.0)
    sim = generator_sim(0, n_jobs=20)
    assert jct0 == run(sim, baselines.make("mlf-h"))["mean_jct"]  # no job chosen: MLF-H itself
    assert [j.stop_option for j in sim.jobs] == none
    half, _ = finals(fraction=0.5)
    chosen = [job_draw(j) < 0.5 for j in range(20)]
    assert [o == "requirement" for o in half] == chosen and 0 < sum(chosen) < 20
    with pytest.raises(ValueError, match="fraction must be in"):
        baselines.make("mlf-h-req", fraction=1.5)


@pytest.mark.parametrize("seed", [0])
def test_mlfc_changes_the_outcome_on_a_contended_window(seed):
    # a load-2 generator window: MLF-C switches jobs to their requirement and the mean JCT falls
    runs = {}
    for name in ("mlf-h", "mlfs-h+c"):
        sim = generator_sim(seed, n_jobs=60, load=2.0)
        pol = baselines.make(name)
        runs[name] = (run(sim, pol), getattr(pol, "controller", None))
    (h, _), (hc, ctl) = runs["mlf-h"], runs["mlfs-h+c"]
    assert ctl.switched > 0 and ctl.activations > 0
    assert hc["mean_jct"] < h["mean_jct"]
