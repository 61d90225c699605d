"""The named experiments' sweeps: the settings each isolates, and their claims tables on synthetic episodes."""
import math

import pandas as pd
import pytest

from clustergym import baselines
from clustergym.eval import experiments
from clustergym.eval.specs import expand_loads, parse_scenario


def test_arrival_load_mode_sets_the_offered_load():
    sc = expand_loads([parse_scenario("c=clustergym/GPUCluster-v1")], [0.5, 3], "arrival")
    assert [s["kwargs"]["load"] for s in sc] == [0.5, 3.0]
    assert [s["label"] for s in sc] == ["c@x0.5", "c@x3"]
    with pytest.raises(ValueError, match="load mode"):
        expand_loads([parse_scenario("c=clustergym/GPUCluster-v1")], [1], "cores")


def test_mlfs_experiments_run_on_the_contended_default(tmp_path):
    for name in ("mlfs-overall", "mlfs-ablation", "mlfs-causes"):
        runs = experiments.get(name)(tmp_path)["runs"]
        assert {r["env_id"] for r in runs} == {experiments.CONTENDED}
        assert all(r["env_kwargs"]["split"] == "test" for r in runs)


def test_causes_settings_change_one_thing(tmp_path):
    runs = experiments.get("mlfs-causes")(tmp_path)["runs"]
    by = {(r["policy"], r["scenario"], r["seed"]): r for r in runs}
    plain = by[("mlf-h", "contended@x1.5", 0)]["env_kwargs"]
    fixed = by[("mlf-h", "fixed-stop@x1.5", 0)]["env_kwargs"]
    optall = by[("fifo", "all-optstop@x1.5", 0)]["env_kwargs"]
    assert fixed["mapping"] == {"stop_changeable_probability": 0.0}
    assert optall["mapping"] == {"stop_mix": {"opt-stop": 1.0}}
    for kw in (fixed, optall):
        assert {k: v for k, v in kw.items() if k != "mapping"} == {k: v for k, v in plain.items() if k != "mapping"}
    assert by[("fair-pack", "contended@x1.5", 0)]["policy_spec"]["params"] == {"placement": "pack"}


def test_causes_claims_pair_across_settings():
    rows = []
    for seed in range(3):
        for pol, sc, jct in (("fifo", "contended@x1.5", 100.0), ("mlf-h", "contended@x1.5", 50.0),
                             ("mlf-h", "fixed-stop@x1.5", 80.0), ("fair", "contended@x1.5", 150.0),
                             ("fair-pack", "contended@x1.5", 90.0)):
            rows.append({"policy": pol, "scenario": sc, "seed": seed, "mean_jct": jct * (1 + seed)})
    from clustergym.eval.experiments_causes import _claims_causes

    claims = {r["claim"]: r["measured"] for r in _claims_causes({"episodes": pd.DataFrame(rows)})}
    assert "-50.0" in claims["MLF-H vs FIFO, MLF-H on OptStop (default)"].replace("−", "-")
    assert "-20.0" in claims["MLF-H vs FIFO, nobody changes stopping"].replace("−", "-")
    assert "+50.0" in claims["fair vs FIFO"]
    assert "MLFS-H+C vs MLF-H (default)" not in claims  # no mlfs-h+c runs: no row rather than an empty one


def test_placement_ablations_use_best_fit_and_refuse_unknown_values():
    from clustergym.baselines import fair
    from clustergym.baselines.base import pack_order, spread_order

    assert fair.PLACEMENTS == {"spread": spread_order, "pack": pack_order}
    assert baselines.make("fair").placement == "spread" and baselines.make("graphene").placement == "tetris"
    with pytest.raises(ValueError, match="placement"):
        baselines.make("fair", placement="worst")
    with pytest.raises(ValueError, match="placement"):
        baselines.make("graphene", placement="spread")


def test_experiment_runs_restricted_to_some_of_its_policies(tmp_path):
    from clustergym.eval import compare
    from clustergym.eval.specs import SweepSpecError

    a = compare.build_parser().parse_args(["--experiment", "hare-hetero", "--seeds", "0", "--out", str(tmp_path),
                                           "--policies", "hlas", "hlas-l"])
    runs = compare.plan(a)["runs"]
    assert sorted({r["policy"] for r in runs}) == ["hlas", "hlas-l"] and len(runs) == 2 * 3
    a.policies = ["hlas", "mlf-h"]
    with pytest.raises(SweepSpecError, match="mlf-h"):
        compare.plan(a)


def test_hare_and_unisched_experiments_run_their_variants_and_pair_them(tmp_path):
    hare = {(r["policy"], r["policy_spec"]["name"]) for r in experiments.get("hare-hetero")(tmp_path / "h")["runs"]}
    assert {("hlas-p", "hlas-p"), ("hlas-l", "hlas-l"), ("hlas-p-standin", "hlas-p-standin"),
            ("hlas-p-oracle", "hlas-p-standin")} <= hare
    uni = experiments.get("unisched-mix")(tmp_path / "u")["runs"]
    params = {r["policy"]: r["policy_spec"]["params"] for r in uni}
    assert params["unisched-noprof"] == {"profile_s": 0} and params["unisched-refest"] == {"profiled_estimates": False}
    assert params["unisched-worstfit"] == {"place_as_planned": False, "single_gpu_placement": "worst-fit"}
    assert {(r["scenario"], r["env_id"]) for r in uni} == {("testbed", "clustergym/UniSched64-v2"),
                                                            ("mlfs80", "clustergym/UniSched-v2")}
    from clustergym.eval.experiments_hare import _claims_hare
    from clustergym.eval.experiments_unisched import _claims_mix

    rows = [{"policy": p, "scenario": "4types", "seed": s, "mean_jct": v * (1 + s)} for s in range(3)
            for p, v in (("hlas", 100.0), ("hlas-p", 70.0), ("hlas-p-oracle", 50.0), ("fifo", 140.0),
                         ("hlas-l", 98.0))]
    claims = {r["claim"]: r for r in _claims_hare({"episodes": pd.DataFrame(rows)})}
    assert "-30.0" in claims["4types: mean JCT HLAS-P vs hlas"]["measured"].replace("−", "-")
    assert claims["4types: mean JCT HLAS-P vs hlas"]["agrees"] == "yes (direction and size)"
    assert "+40.0" in claims["4types: mean JCT HLAS-P vs hlas-p-oracle (exact sizes: no prediction error)"]["measured"]
    assert "-2.0" in claims["4types: mean JCT HLAS-L vs hlas"]["measured"].replace("−", "-")
    assert "-28.6" in claims["4types: mean JCT HLAS-P vs hlas-l"]["measured"].replace("−", "-")
    assert not any("tiresias" in c or "standin" in c for c in claims)  # no tiresias or stand-in runs: no row
    # two clusters: each pairs within itself (the mlfs80 rows are the testbed's with UniSched 10 % worse)
    rows = [{"policy": p, "scenario": c, "seed": s, "slo_miss_rate": m * (1 + s) * (1.1 if c == "mlfs80" and
             p == "unisched" else 1.0), "mean_be_jct": j}
            for c in ("mlfs80", "testbed") for s in range(3)
            for p, m, j in (("unisched", 0.6, 900.0), ("unisched-noprof", 0.4, 1000.0),
                            ("unisched-refest", 0.5, 1200.0), ("edf", 0.3, 900.0))]
    listed = [r["claim"] for r in _claims_mix({"episodes": pd.DataFrame(rows)})]
    assert listed[0].startswith("testbed: ") and listed[-1].startswith("mlfs80: ")  # the paper's cluster first
    claims = {r["claim"]: r["measured"] for r in _claims_mix({"episodes": pd.DataFrame(rows)})}
    assert "+50.0" in claims["testbed: slo_miss_rate: unisched vs unisched-noprof (the whole profiling phase)"]
    assert "+65.0" in claims["mlfs80: slo_miss_rate: unisched vs unisched-noprof (the whole profiling phase)"]
    assert "-25.0" in claims["testbed: mean_be_jct: unisched vs unisched-refest (the profiled estimates (same time "
                             "and GPUs))"].replace("−", "-")
    assert "-100.0" in claims["testbed: slo_miss_rate: UniSched lower than edf (deadline-aware)"].replace("−", "-")


def test_hare_queue_and_sizes_change_only_the_load_or_the_tail(tmp_path):
    from clustergym.eval.experiments_hare import PHILLY_MEAN_S, SIZE_SIGMAS

    queue = experiments.get("hare-queue")(tmp_path / "q")["runs"]
    by_scenario = {r["scenario"]: r["env_kwargs"] for r in queue if r["policy"] == "hlas" and r["seed"] == 0}
    assert by_scenario["v100@x2"]["load"] == 2.0 and by_scenario["v100@x8"]["load"] == 8.0
    assert {k: v for k, v in by_scenario["v100@x2"].items() if k != "load"} == \
        {k: v for k, v in by_scenario["v100@x8"].items() if k != "load"}
    sizes = experiments.get("hare-sizes")(tmp_path / "s")["runs"]
    gens = {r["scenario"]: r["env_kwargs"]["generator"] for r in sizes if r["policy"] == "hlas" and r["seed"] == 0}
    assert len(gens) == 2 * len(SIZE_SIGMAS)
    for g in gens.values():  # every tail has the Philly fit's mean, so load 2 is the same arrival rate
        mu, sigma = g["lognormal"]
        assert math.exp(mu + sigma ** 2 / 2) == pytest.approx(PHILLY_MEAN_S)
        assert g["load"] == 2.0
    assert {r["policy"] for r in sizes} == {"hlas", "hlas-p", "hlas-p-oracle", "fifo"}
    pred = experiments.get("hare-predictor")(tmp_path / "p")["runs"]
    params = {r["policy"]: r["policy_spec"]["params"] for r in pred}
    assert params["hlas-p"] == {} and params["hlas-p-h900"] == {"horizon_s": 900}
    assert params["hlas-p-eps0.2"] == {"eps": 0.2}
    hetero = experiments.get("hare-hetero")(tmp_path / "h")["runs"]

    def settings(runs):  # the scenarios, with the cluster files' directory left out
        return {(r["scenario"], r["seed"], str(sorted((k, str(v).split("/")[-1]) for k, v in r["env_kwargs"].items())))
                for r in runs}
    assert settings(pred) == settings(hetero)
    rsched = experiments.get("hare-rsched")(tmp_path / "r")["runs"]
    sims = {r["scenario"]: r["env_kwargs"].get("sim") for r in rsched}
    assert sims == {"v100": None, "v100-free-switch": {"suspend_s": 0.0, "resume_base_s": 0.0, "resume_per_gpu_s": 0.0}}


def test_queue_claims_report_the_waiting_share_and_need_two_pairs_for_significance():
    from clustergym.eval.experiment_kit import agree_range
    from clustergym.eval.experiments_hare import _claims_queue

    ep = pd.DataFrame([{"policy": p, "scenario": "v100@x8", "seed": s, "mean_jct": v * (1 + s)} for s in range(3)
                       for p, v in (("hlas", 100.0), ("hlas-p-oracle", 60.0))])
    jobs = pd.DataFrame([{"policy": p, "scenario": "v100@x8", "seed": 0, "waiting_time": w, "running_time": 3.0}
                         for p, w in (("hlas", 1.0), ("hlas-p-oracle", 3.0))])
    (row,) = _claims_queue({"episodes": ep, "jobs": jobs})
    assert "-40.0" in row["measured"].replace("−", "-")
    assert "hlas 25%" in row["measured"] and "hlas-p-oracle 50%" in row["measured"]
    assert row["agrees"] == "direction yes, size no"
    assert agree_range(-0.3, float("nan"), float("nan"), -0.4, -0.2).startswith("no interval")


def test_profiling_loss_counts_pair_strict_jobs_by_seed_and_job():
    from clustergym.eval.experiments_unisched import beyond_span, deadlines_lost

    def rec(policy, jid, met, end, run=100.0, cls="strict"):
        return {"policy": policy, "seed": 0, "job_id": jid, "slo_class": cls, "deadline_met": met, "submit": 0.0,
                "deadline": 1000.0, "end": end, "running_time": run}

    jobs = pd.DataFrame([rec("unisched", 1, False, 1100.0), rec("unisched-noprof", 1, True, 800.0),
                         rec("unisched", 2, True, 900.0), rec("unisched-noprof", 2, False, 1200.0, run=1100.0),
                         rec("unisched", 3, True, 500.0), rec("unisched-noprof", 3, True, 600.0),
                         rec("unisched", 4, False, 2000.0, cls="best-effort")])
    d = deadlines_lost(jobs)
    assert (d["n"], d["lost"], d["won"], d["lost_margin_median"]) == (3, 1, 1, 200.0)
    assert d["lost_slack_quartiles"] == (900.0, 900.0)  # job 1: 1000 - 0 - 100
    assert beyond_span(jobs) == {"unisched": 0.0, "unisched-noprof": pytest.approx(1 / 3)}


def test_contention_room_spreads_only_the_arrivals(tmp_path):
    runs = experiments.get("contention-room")(tmp_path)["runs"]
    by = {(r["policy"], r["scenario"], r["seed"]): r["env_kwargs"] for r in runs}
    busy, alone = by[("mlf-h-req", "contended@x1.5", 10000)], by[("mlf-h-req", "alone@x0.02", 10000)]
    assert busy["load"] == 1.5 and alone["load"] == 0.02 and alone["max_sim_time"] == math.inf
    assert {k: v for k, v in alone.items() if k not in ("load", "max_sim_time")} == \
        {k: v for k, v in busy.items() if k != "load"}
    assert {r["seed"] for r in runs} == set(range(10000, 10020))  # the final table's windows


def test_contention_room_claims_pair_each_policy_with_itself():
    from clustergym.eval.experiments_causes import _claims_room

    rows = [{"policy": p, "scenario": sc, "seed": s, "mean_jct_censored": jct * (1 + s), "unfinished": 0,
             "not_submitted": u}
            for s in range(3) for p, sc, jct, u in (("mlf-h-req", "contended@x1.5", 100.0, 0),
                                                      ("mlf-h-req", "alone@x0.02", 90.0, 1),
                                                      ("mlf-h", "contended@x1.5", 400.0, 0))]
    claims = {r["claim"]: r["measured"] for r in _claims_room({"episodes": pd.DataFrame(rows)})}
    assert list(claims) == ["mlf-h-req: jobs alone vs contended"]  # mlf-h has no alone runs: no row
    assert "-10.0" in claims["mlf-h-req: jobs alone vs contended"].replace("−", "-")
    assert "(3 jobs unfinished alone)" in claims["mlf-h-req: jobs alone vs contended"]


def test_room_by_load_pairs_every_load_with_the_same_windows_alone(tmp_path):
    runs = experiments.get("room-by-load")(tmp_path)["runs"]
    assert {r["scenario"] for r in runs} == {"contended@x1.5", "contended@x3", "contended@x6", "alone@x0.02"}
    assert {r["policy"] for r in runs} == {"mlf-h-req", "sjf-req"}
    sjf = next(r for r in runs if r["policy"] == "sjf-req")["policy_spec"]
    assert sjf["name"] == "sjf" and sjf["params"] == {"stop_option": "requirement"}
    from clustergym.eval.experiments_causes import _claims_room

    rows = [{"policy": "mlf-h-req", "scenario": sc, "seed": s, "mean_jct_censored": jct * (1 + s), "unfinished": 0,
             "not_submitted": 0}
            for s in range(3) for sc, jct in (("contended@x1.5", 100.0), ("contended@x6", 200.0),
                                              ("alone@x0.02", 80.0))]
    claims = {r["claim"]: r["measured"].replace("−", "-") for r in _claims_room({"episodes": pd.DataFrame(rows)})}
    assert list(claims) == ["mlf-h-req: jobs alone vs contended@x1.5", "mlf-h-req: jobs alone vs contended@x6"]
    assert "-20.0" in claims["mlf-h-req: jobs alone vs contended@x1.5"]
    assert "-60.0" in claims["mlf-h-req: jobs alone vs contended@x6"]


def test_stop_lever_pairs_each_heuristic_with_its_requirement_twin(tmp_path):
    runs = experiments.get("stop-lever")(tmp_path, quick=True)["runs"]
    specs = {r["policy"]: r["policy_spec"] for r in runs}
    assert specs["sjf-req"]["name"] == "sjf" and specs["sjf-req"]["params"] == {"stop_option": "requirement"}
    assert specs["sjf"]["params"] == {} and len(specs) == 14
    from clustergym.eval.experiments_causes import _claims_lever

    rows = [{"policy": p, "scenario": "contended@x1.5", "seed": s, "mean_jct_censored": jct * (1 + s)}
            for s in range(3) for p, jct in (("sjf", 200.0), ("sjf-req", 50.0), ("mlf-h", 300.0), ("mlf-h-req", 40.0))]
    claims = {r["claim"]: r["measured"] for r in _claims_lever({"episodes": pd.DataFrame(rows)})}
    assert "-75.0" in claims["sjf-req vs sjf"].replace("−", "-")
    assert "+25.0" in claims["sjf-req vs mlf-h-req"]
    assert "mlf-h-req vs mlf-h-req" not in claims and "fifo-req vs fifo" not in claims


def test_hare_nas_runs_hlas_p_with_and_without_its_shrink_on_nas_groups(tmp_path):
    from clustergym.eval.experiments_hare import NAS_GENERATOR, _claims_nas

    runs = experiments.get("hare-nas")(tmp_path / "n")["runs"]
    params = {r["policy"]: (r["policy_spec"]["name"], r["policy_spec"]["params"]) for r in runs}
    assert params == {"hlas": ("hlas", {}), "hlas-p": ("hlas-p", {}), "hlas-p-noshrink": ("hlas-p", {"nas_shrink": 1}),
                      "hlas-p-oracle": ("hlas-p-standin", {"fraction": 1, "error": 0})}
    gens = {str(r["env_kwargs"]["generator"]) for r in runs}
    assert gens == {str(NAS_GENERATOR)} and NAS_GENERATOR["nas_fraction"] > 0
    assert {r["env_kwargs"]["workload"] for r in runs} == {"generator"} and len({r["seed"] for r in runs}) == 8
    rows = [{"policy": p, "scenario": "v100-k80-nas", "seed": s, "mean_jct": v * (1 + s), "stopped": 6.0}
            for s in range(3) for p, v in (("hlas", 100.0), ("hlas-p", 80.0), ("hlas-p-noshrink", 90.0),
                                           ("hlas-p-oracle", 50.0))]
    claims = {r["claim"]: r for r in _claims_nas({"episodes": pd.DataFrame(rows)})}
    assert "-20.0" in claims["v100-k80-nas: mean JCT hlas-p vs hlas"]["measured"].replace("−", "-")
    assert "hlas-p 6.0" in claims["v100-k80-nas: mean JCT hlas-p vs hlas"]["measured"]
    shrink = claims["v100-k80-nas: mean JCT HLAS-P vs hlas-p-noshrink (step 3 off: isolates the shrink)"]
    assert "-11.1" in shrink["measured"].replace("−", "-")
