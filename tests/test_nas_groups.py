"""NAS groups (envs/core/nas.py): the controller's successive-halving rule in the simulator, the generator's
option, bad parameters, and HLAS-P's conservative shrink for a trial behind its group (baselines/hlas_p.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from clustergym.baselines.hlas_p import HLASP
from clustergym.core.engine import SimConfig, SimConfigError, Simulator
from clustergym.core.generator import generate, generate_trace
from clustergym.core.mapping import to_job_specs
from clustergym.core.nas import make_nas_groups, rung_progress
from clustergym.core.presets import cluster_preset
from clustergym.core.view import ClusterView
from clustergym.core.workload import JobSpec
from clustergym.config import ConfigError, EnvConfig

import helpers
from test_engine import first_fit

STILL = dict(usage_change_mean_s=0.0)


def _group_sim(paces, iters=90, submits=None, **cfg):
    """One 4-GPU server, the trials of NAS group 0 with the LINEAR curve (loss 1 - pace x progress) at ``paces``."""
    submits = submits or [0.0] * len(paces)
    specs = [helpers.job(j, submit=s, iters=iters, nas_group=0, curve_pace=p)
             for j, (p, s) in enumerate(zip(paces, submits))]
    return Simulator(helpers.cluster(1), specs, SimConfig(**{**STILL, **cfg}), 0, models=helpers.models)


def test_the_controller_stops_the_trials_behind_at_each_rung():
    assert rung_progress(1 / 9, 3.0) == pytest.approx((1 / 9, 1 / 3))
    sim = _group_sim((1.0, 0.5, 2.0, 0.8))
    s = sim.run(first_fit)
    recs = {r["job_id"]: r for r in sim.job_records()}
    # rung 1 (iteration 10), trials judged in job order: 0 first (kept), 1 behind 0 (best 1 of 2 kept: stopped),
    # 2 ahead of both (kept), 3 third of 4 (best ceil(4/3) = 2 kept: stopped); rung 2 (iteration 30): 0 then 2,
    # which is ahead (best 1 of 2): both kept and both finish their 90 iterations
    assert [recs[j]["state"] for j in range(4)] == ["FINISHED", "STOPPED", "FINISHED", "STOPPED"]
    assert [recs[j]["stopped_by"] for j in range(4)] == ["", "nas", "", "nas"]
    assert recs[1]["iterations"] == pytest.approx(10.0) and recs[1]["jct"] == pytest.approx(10.0)
    assert s["stopped"] == 2 and s["finished"] == 2 and s["jobs"] == 4


def test_a_late_trial_competes_with_the_records_of_earlier_ones():
    # trial 1 arrives after trial 0 has run to its end; at rung 1 (iteration 10) its loss 1 - 0.9 / 9 is above
    # trial 0's record 1 - 1 / 9: second of 2, stopped
    sim = _group_sim((1.0, 0.9), submits=(0.0, 120.0))
    sim.run(first_fit)
    assert [j.state.name for j in sim.jobs] == ["FINISHED", "STOPPED"]
    assert sim.jobs[1].iters == pytest.approx(10.0)
    # ahead of the earlier trial: kept at every rung
    sim = _group_sim((1.0, 1.5), submits=(0.0, 120.0))
    sim.run(first_fit)
    assert [j.state.name for j in sim.jobs] == ["FINISHED", "FINISHED"]


def test_a_stop_command_is_recorded_as_the_scheduler_s_and_ungrouped_jobs_are_never_judged():
    specs = [helpers.job(0, iters=90), helpers.job(1, iters=90, curve_pace=0.2)]
    sim = Simulator(helpers.cluster(1), specs, SimConfig(**STILL), 0, models=helpers.models)
    assert sim.next_decision()
    sim.stop(0)
    sim.run(first_fit)
    assert [(r["state"], r["stopped_by"]) for r in sim.job_records()] == [("STOPPED", "command"), ("FINISHED", "")]


def test_same_seed_same_kills():
    cl = cluster_preset("hetero-16")

    def run(seed):
        specs = generate(24, seed, cl.n_gpus, load=2.0, nas_fraction=0.6, nas_group_size=4, gpu_choices=(1, 2),
                         max_duration=4 * 3600.0)
        sim = Simulator(cl, specs, SimConfig(), seed)
        sim.run(first_fit)
        return [(r["job_id"], r["state"], r["iterations"], r["end"]) for r in sim.job_records()]

    a = run(3)
    assert a == run(3)
    assert any(state == "STOPPED" for _, state, _, _ in a)


def test_generator_off_is_today_s_workload_and_on_makes_groups():
    kw = dict(load=1.5, gpu_choices=(1, 2, 4))
    today = to_job_specs(generate_trace(30, 7, 16, 1.5, gpu_choices=(1, 2, 4)),
                         int(np.random.SeedSequence([7, 1]).generate_state(1)[0]))
    off = generate(30, 7, 16, **kw)
    assert off == today == generate(30, 7, 16, nas_fraction=0.0, **kw)
    assert all(s.nas_group is None and s.curve_pace == 1.0 for s in off)
    on = generate(30, 7, 16, nas_fraction=0.5, nas_group_size=3, **kw)
    assert on == generate(30, 7, 16, nas_fraction=0.5, nas_group_size=3, **kw)
    assert [s.job_id for s in on] == [s.job_id for s in off]
    groups: dict[int, list[JobSpec]] = {}
    for s in on:
        if s.nas_group is not None:
            groups.setdefault(s.nas_group, []).append(s)
    assert groups and all(len(g) == 3 for g in groups.values())
    for lead, trials in groups.items():
        same = {(t.model, t.n_gpus, t.max_iterations, t.submit_time, t.deadline) for t in trials}
        assert len(same) == 1 and trials[0].job_id == lead
        assert len({t.curve_pace for t in trials}) == 3
    # the jobs outside groups are today's
    assert [s for s in on if s.nas_group is None] == [o for o, s in zip(off, on) if s.nas_group is None]


def test_bad_parameters_name_their_field():
    for field, value in (("nas_eta", 1.0), ("nas_eta", math.inf), ("nas_first_rung", 1.0), ("nas_first_rung", 0.0)):
        with pytest.raises(SimConfigError, match=field) as e:
            SimConfig(**{field: value})
        assert e.value.field == field
    with pytest.raises(ValueError, match="nas_group"):
        helpers.job(0, nas_group=-1)
    with pytest.raises(ValueError, match="curve_pace"):
        helpers.job(0, curve_pace=0.0)
    for kw, name in (({"nas_fraction": 1.5}, "nas_fraction"), ({"nas_fraction": 0.5, "nas_group_size": 1}, "nas_group_size"),
                     ({"nas_fraction": 0.5, "nas_pace_sigma": -1.0}, "nas_pace_sigma")):
        with pytest.raises(ValueError, match=name):
            generate(10, 0, 16, **kw)
    with pytest.raises(ConfigError, match="nas_group_size") as e:
        EnvConfig(workload="generator", load=None, generator={"nas_fraction": 0.3, "nas_group_size": 2.5})
    assert e.value.field == "generator.nas_group_size"
    with pytest.raises(ValueError, match="nas_lag"):
        HLASP(nas_lag=0.9)
    with pytest.raises(ValueError, match="nas_shrink"):
        HLASP(nas_shrink=1.5)


# ------------------------------------------------------------------------------------ HLAS-P's step 3

def _hlas_p_situation():
    """Trials 0-2 of one group (paces 1, 1, 0.4) and an ungrouped job 3 (pace 0.4), each on its own GPU, after 180
    of their 1000 iterations (the first rung at 0.99 of the budget: nothing is stopped yet): trial 2 lags, job 3
    has no group."""
    specs = [helpers.job(j, iters=1000, nas_group=0 if j < 3 else None, curve_pace=p)
             for j, p in enumerate((1.0, 1.0, 0.4, 0.4))]
    sim = Simulator(helpers.cluster(1), specs, SimConfig(**STILL, nas_first_rung=0.99, decide_on="always"), 0, models=helpers.models)
    assert sim.next_decision()
    first_fit(sim)
    while sim.now < 180.0 and sim.next_decision():
        pass
    return sim, ClusterView(sim)


def test_hlas_p_shrinks_the_prediction_of_a_lagging_trial_only():
    sim, view = _hlas_p_situation()
    assert [view.iters(j) for j in sim.jobs] == pytest.approx([180.0] * 4)
    on, off = HLASP(), HLASP(nas_shrink=1.0)
    for pol in (on, off):
        pol.begin(view)
        pol.history.rounds["toy"] = [600.0]  # a finished job of the model: R^p = remaining rounds by history
    lags = [on.lags_group(view, j) for j in sim.jobs]
    assert lags == [False, False, True, False]
    # at 180 iterations trial 2's loss is 1 - 0.4 x 0.18 = 0.928, its competitors' 0.82: behind by 1.13 > 1.1
    assert [view.observed_loss(j, 180) for j in sim.jobs[1:3]] == pytest.approx([0.82, 0.928])
    full = [off.predict_rounds(view, j) for j in sim.jobs]
    shrunk = [on.predict_rounds(view, j) for j in sim.jobs]
    assert all(r > 0 for r in full)
    assert shrunk == pytest.approx([full[0], full[1], 0.5 * full[2], full[3]])
    # a looser lag factor: trial 2 is not "far" behind
    loose = HLASP(nas_lag=1.15)
    loose.begin(view)
    assert not loose.lags_group(view, sim.job(2))


def test_hlas_p_reads_only_the_group_s_observed_losses():
    sim, view = _hlas_p_situation()
    pol = HLASP()
    pol.begin(view)
    job = sim.job(2)
    # a competitor's future (its loss beyond the iterations it has done) is never read
    real = view.observed_loss
    calls = []

    def watch(j, k):
        calls.append((j.jid, k))
        return real(j, k)

    view.observed_loss = watch
    assert pol.lags_group(view, job)
    assert all(k <= view.iters(sim.job(jid)) + 1e-9 for jid, k in calls)
    assert {jid for jid, _ in calls} <= {0, 1, 2}
    # the trials of the group the view shows: the submitted ones, by id
    assert [j.jid for j in view.nas_trials(job)] == [0, 1, 2] and view.nas_trials(sim.job(3)) == []
