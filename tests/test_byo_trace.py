"""Bring your own trace: any CSV through a column-mapping YAML, in one line of ``gym.make`` (and ``--set`` of sweeps,
``env`` of training); the mapping's rules for unknown model names, fractional GPUs and GPU types; named errors
before any work for a mapping naming a missing column and for jobs that never fit the cluster."""
import warnings

import numpy as np
import pandas as pd
import pytest

from clustergym.config import ConfigError
from clustergym.core import traces as T
from clustergym.core.trace_schema import TraceError, TraceWarning, traces_dir
from clustergym.eval import compare, specs
from clustergym.scenarios import make_env

LIGHT = "clustergym/GPUClusterLight-v1"
ELASTICFLOW = traces_dir() / "elasticflow"
# a PAI-like job table: GPUs as percent of one GPU, a GPU-type column, internal model names
PAI_LIKE = ("job,submit,runtime,plan_gpu,gpu_type,model\n"
            "j1,0,600,100,,bert\n"
            "j2,60,600,50,,resnet50\n"
            "j3,120,600,200,V100,inception3\n"
            "j4,180,600,25,T4,my-ctr-model\n")
PAI_MAP = {"columns": {"job_id": "job", "submit_time": "submit", "duration": "runtime", "n_gpus": "plan_gpu",
                       "model": "model"}, "gpu_scale": 0.01}


def write(path, text):
    path.write_text(text)
    return path


def mapping_yaml(tmp_path, text):
    return write(tmp_path / "map.yaml", text)


# ------------------------------------------------------------------------ the worked example: ElasticFlow's trace

def test_elasticflow_trace_in_one_line_maps_its_models_and_keeps_its_rows():
    path, mapping = ELASTICFLOW / "philly_103959.csv", ELASTICFLOW / "map.yaml"
    # ElasticFlow drew ddl = submit + U(0.5, 1.5) x run time
    with pytest.warns(TraceWarning, match="466 of 876 rows: unattainable deadlines"):
        env = make_env(LIGHT, trace_path=str(path), trace_mapping=str(mapping), window_jobs=20, split="train",
                       window_start=0.0)
    env.reset(seed=0)
    sim = env.unwrapped.sim
    raw = pd.read_csv(path)
    # the first 20 jobs of the file (sorted by submit time in the file), with their run times and deadlines
    assert [j.spec.job_id for j in sim.jobs] == list(range(20))
    assert [j.spec.reference_runtime for j in sim.jobs] == raw["duration"].iloc[:20].astype(float).tolist()
    assert [j.spec.deadline for j in sim.jobs] == raw["ddl"].iloc[:20].astype(float).tolist()
    expect = {"resnet50": "ResNet-50", "vgg16": "VGG-16", "gpt2": "Transformer", "bert": "BERT",
              "deepspeech2": "DeepSpeech2", "inception3": "Inception-v3"}
    assert [j.spec.model for j in sim.jobs] == [expect[m] for m in raw["model_name"].iloc[:20]]
    assert [j.spec.n_gpus for j in sim.jobs] == raw["num_gpu"].iloc[:20].tolist()


# ----------------------------------------------------------------------------------------- model names

def test_unknown_model_names_are_sampled_by_default_with_one_warning_naming_them(tmp_path):
    p = write(tmp_path / "jobs.csv", "t,g,d,m\n0,1,100,bert\n10,1,100,ctr-v7\n20,1,100,ctr-v7\n30,1,100,bert\n")
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d", "model": "m"}}
    with pytest.warns(TraceWarning, match=r"1 model names in 2 rows \(data rows 2, 3\).*'ctr-v7' \(2 rows\)") as rec:
        df = T.load_csv(p, m)
    assert len([w for w in rec if issubclass(w.category, TraceWarning)]) == 1
    assert df.attrs["report"]["unknown_models"] == 2 and df.attrs["mapping"]["unknown_model"] == "sample"
    from clustergym.core.mapping import MappingConfig, to_job_specs

    models = [s.model for s in to_job_specs(df, 0)]  # the file's rule applies: drawn, not an error
    drawn = [s.model for s in to_job_specs(df.drop(columns="model"), 0, MappingConfig())]  # the same seed's draws
    assert models == ["BERT", drawn[1], drawn[2], "BERT"]


def test_unknown_model_error_rule_lists_the_rows_and_aliases_map_names(tmp_path):
    p = write(tmp_path / "jobs.csv", "t,g,d,m\n0,1,100,bert\n10,1,100,ctr-v7\n20,1,100,ctr-v7\n")
    m = {"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d", "model": "m"}, "unknown_model": "error"}
    with pytest.raises(TraceError, match=r"jobs\.csv: data row 2 \(line 3\): column 'm': .*data rows 2, 3.*'ctr-v7'"):
        T.load_csv(p, m)
    df = T.load_csv(p, {**m, "aliases": {"ctr-v7": "Recommendation"}})
    from clustergym.core.mapping import to_job_specs

    assert [s.model for s in to_job_specs(df, 0)] == ["BERT", "Recommendation", "Recommendation"]
    with pytest.raises(ValueError, match=r"aliases \{'x': 'GPT-9'\} name no catalogue model"):
        T.ColumnMapping(columns=m["columns"], aliases={"x": "GPT-9"})


def test_the_trace_files_aliases_reach_the_env_and_its_mapping_keyword_extends_them(tmp_path):
    p = write(tmp_path / "jobs.csv", "t,g,d,m\n0,1,600,ctr-v7\n60,1,600,ctr-v7\n")
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: g, duration: d, model: m}\n"
                               "aliases: {ctr-v7: Recommendation}\nunknown_model: error\n")
    env = make_env(LIGHT, trace_path=str(p), trace_mapping=str(y), window_jobs=2, train_fraction=0.99)
    env.reset(seed=0)
    assert [j.spec.model for j in env.unwrapped.sim.jobs] == ["Recommendation"] * 2
    env = make_env(LIGHT, trace_path=str(p), trace_mapping=str(y), window_jobs=2, train_fraction=0.99,
                   mapping={"aliases": {"ctr-v7": "MLP"}})  # the env's mapping wins over the file's
    env.reset(seed=0)
    assert [j.spec.model for j in env.unwrapped.sim.jobs] == ["MLP"] * 2


# ------------------------------------------------------------------------- fractional GPUs and GPU types (PAI)

def test_fractional_gpus_are_refused_naming_the_rows_or_rounded_up_when_asked(tmp_path):
    p = write(tmp_path / "pai.csv", PAI_LIKE)
    with pytest.raises(TraceError, match=r"pai\.csv: data row 2 \(line 3\): column 'plan_gpu': 2 rows ask for a "
                                         r"fraction of a GPU \(data rows 2, 4; e\.g\. 0\.5 GPUs\)"):
        T.load_csv(p, PAI_MAP)
    with pytest.warns(TraceWarning, match="rounded up to whole GPUs"):
        df = T.load_csv(p, {**PAI_MAP, "fractional_gpus": "round_up", "unknown_model": "sample"})
    assert df["n_gpus"].tolist() == [1, 1, 2, 1]  # 1, ceil(0.5), 2, ceil(0.25)
    assert df.attrs["report"]["rounded_up_gpus"] == 2


def test_gpu_type_constraints_are_refused_naming_the_rows_or_ignored_when_asked(tmp_path):
    p = write(tmp_path / "pai.csv", PAI_LIKE)
    m = {**PAI_MAP, "columns": {**PAI_MAP["columns"], "gpu_type": "gpu_type"}, "fractional_gpus": "round_up"}
    with pytest.raises(TraceError, match=r"data row 3 \(line 4\): column 'gpu_type': 2 rows ask for a GPU type "
                                         r"\(data rows 3, 4; e\.g\. 'V100'\)"):
        T.load_csv(p, m)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        df = T.load_csv(p, {**m, "gpu_type_constraints": "ignore"})
    assert any("loaded without the constraint" in str(w.message) for w in rec)
    assert df["gpu_type"].fillna("").tolist() == ["", "", "V100", "T4"]
    assert df.attrs["report"]["ignored_gpu_types"] == 2
    assert df.attrs["report"]["unknown_models"] == 2  # inception3 (no alias here) and my-ctr-model


# ------------------------------------------------------------------------------ named errors before any work

def test_a_mapping_naming_a_missing_column_fails_when_the_env_is_made(tmp_path):
    p = write(tmp_path / "jobs.csv", "t,g,d\n0,1,10\n5,1,10\n")
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: g, duration: RunMinutes}\n")
    with pytest.raises(TraceError, match=r"jobs\.csv: column 'RunMinutes': missing column: .*map\.yaml maps "
                                         r"duration to it \(the file's columns: \['t', 'g', 'd'\]\)"):
        make_env(LIGHT, trace_path=str(p), trace_mapping=str(y))


def test_jobs_that_never_fit_the_cluster_fail_when_the_env_is_made_unless_left_out_explicitly(tmp_path):
    p = write(tmp_path / "jobs.csv", "t,g,d\n0,1,600\n60,16,600\n120,2,600\n180,9,600\n")
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: g, duration: d}\n")
    with pytest.raises(TraceError, match=r"jobs\.csv: data row 2: column 'n_gpus': 2 of 4 jobs ask for more "
                                         r"GPUs than cluster 'tiny-8' holds \(8; data rows 2, 4, e\.g\. 16 GPUs\)"):
        make_env(LIGHT, cluster="tiny-8", trace_path=str(p), trace_mapping=str(y))
    env = make_env(LIGHT, cluster="tiny-8", trace_path=str(p), trace_mapping=str(y), max_job_gpus=8,
                   window_jobs=4, train_fraction=0.99)
    env.reset(seed=0)
    assert [j.spec.n_gpus for j in env.unwrapped.sim.jobs] == [1, 2]


def test_trace_mapping_needs_a_trace_path_and_a_valid_mapping(tmp_path):
    with pytest.raises(ConfigError, match="give trace_path") as e:
        make_env(LIGHT, trace_mapping={"columns": {"submit_time": "t", "n_gpus": "g", "duration": "d"}})
    assert e.value.field == "trace_mapping"
    with pytest.raises(ConfigError, match=r"trace_mapping: ColumnMapping: unknown keys \['tz'\]") as e:
        make_env(LIGHT, trace_path="x.csv", trace_mapping={"columns": {"submit_time": "t", "duration": "d",
                                                                      "n_gpus": "g"}, "tz": 1})
    assert e.value.field == "trace_mapping"


def test_a_sweep_checks_the_trace_of_each_scenario_before_any_run(tmp_path, capsys):
    p = write(tmp_path / "jobs.csv", "t,g,d\n0,1,10\n5,1,10\n")
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: g, duration: minutes}\n")
    out = tmp_path / "sweep"
    code = compare.main(["--policies", "fifo", "--scenarios", LIGHT, "--seeds", "0", "--workers", "0", "--no-progress",
                         "--set", f"trace_path={p}", f"trace_mapping={y}", "--out", str(out)])
    assert code == 2
    assert "column 'minutes': missing column" in capsys.readouterr().err
    assert not (out / "runs").exists()  # stopped before the sweep made its folder
    runs = specs.make_runs([specs.parse_policy("fifo")], [specs.parse_scenario(LIGHT)], [0],
                           {"trace_path": str(p), "trace_mapping": str(y)})
    with pytest.raises(specs.SweepSpecError, match="scenario .*missing column"):
        specs.check_scenarios(runs)


def test_training_checks_its_envs_trace_when_the_config_loads(tmp_path):
    from clustergym.train.config import load_config

    p = write(tmp_path / "jobs.csv", "t,g,d\n0,1,10\n5,1,10\n")
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: gpus, duration: d}\n")
    with pytest.raises(ConfigError, match=r"env: .*jobs\.csv: column 'gpus': missing column"):
        load_config(None, {"env": {"trace_path": str(p), "trace_mapping": str(y)}})


def test_a_sweep_plays_a_user_trace(tmp_path):
    p = write(tmp_path / "jobs.csv", "".join(["t,g,d,m\n"] + [f"{60 * i},{1 + i % 2},{600 + 30 * i},bert\n"
                                                            for i in range(8)]))
    y = mapping_yaml(tmp_path, "columns: {submit_time: t, n_gpus: g, duration: d, model: m}\n")
    runs = specs.make_runs([specs.parse_policy("fifo")], [specs.parse_scenario(LIGHT)], [0],
                           {"trace_path": str(p), "trace_mapping": str(y), "window_jobs": 4})
    specs.check_scenarios(runs)
    res = compare.sweep(runs, tmp_path / "out", workers=0, progress=False)
    assert res["failed"] == {} and len(res["executed"]) == 1
    ep, jobs = compare.collect(tmp_path / "out", runs)
    assert int(ep["jobs"].iloc[0]) == 4 and set(jobs["model"]) == {"BERT"}
    assert np.isfinite(ep["mean_jct"].iloc[0])
