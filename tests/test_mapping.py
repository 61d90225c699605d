"""Trace rows -> JobSpecs (MLFS §4.1 mapping).

Unit tests run against a small stand-in catalogue (monkeypatched) and the real DAG cost model, so they
do not depend on the catalogue's figures; ``test_real_catalogue_*`` runs on the shipped catalogue.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from clustergym.core import mapping as M
from clustergym.core import traces as T
from clustergym.core.catalogue import ModelProfile
from clustergym.core.curves import power_law_curve
from clustergym.core.workload import JobSpec

FAKE = {  # name: (parallelism, max_partitions, V100 s/iteration)
    "ResNet-18": ("layer", 8, 0.05), "ResNet-50": ("layer", 8, 0.2), "AlexNet": ("chain", 8, 0.03),
    "MLP": ("chain", 4, 0.01), "LSTM": ("layer", 8, 0.1), "SVM": ("none", 1, 0.005), "BERT": ("layer", 16, 0.4),
    "Recommendation": ("chain", 4, 0.02), "DeepSpeech2": ("layer", 8, 0.3), "YOLOv3": ("layer", 8, 0.25),
}


def _profile(name: str) -> ModelProfile:
    par, cap, t = FAKE[name]
    return ModelProfile(name=name, family="test", parallelism=par, params_m=20.0, batch_size=64,
                        iteration_time={"V100": t, "K80": 4 * t}, gpu_memory_gb=4.0, gpu_util=0.8, cpu_cores=2.0,
                        host_memory_gb=8.0, activation_mb=10.0, curve=power_law_curve(0.1, 0.8, 3.0, 0.5),
                        max_partitions=cap)


@pytest.fixture
def fake_catalogue(monkeypatch):
    profiles = {n: _profile(n) for n in FAKE}
    monkeypatch.setattr(M, "_catalogue", lambda: (list(profiles), profiles.__getitem__))
    return profiles


def trace(n: int = 300, seed: int = 0, **extra) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"job_id": np.arange(n), "submit_time": np.sort(rng.uniform(0, 1e5, n)),
                       "n_gpus": rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 32, 64], n),
                       "duration": rng.lognormal(7, 2, n)})
    for k, v in extra.items():
        df[k] = v
    return df


def test_deterministic_per_seed_and_different_across_seeds(fake_catalogue):
    df = trace()
    a, b, c = M.to_job_specs(df, 1), M.to_job_specs(df, 1), M.to_job_specs(df, 2)
    assert a == b
    assert a != c
    assert [s.model for s in a] != [s.model for s in c]
    assert all(isinstance(s, JobSpec) for s in a)


def test_invariants(fake_catalogue):
    df = trace(500)
    specs = M.to_job_specs(df, 7)
    from clustergym.core.dag import reference_iteration_time

    for s, row in zip(specs, df.itertuples()):
        prof = fake_catalogue[s.model]
        assert s.n_partitions * s.n_replicas == row.n_gpus
        assert s.n_partitions <= prof.max_partitions
        if prof.parallelism == "none":
            assert s.n_partitions == 1
        t_it = reference_iteration_time(prof, s.n_partitions, s.n_replicas, s.sync, "V100", s.comm_ps_mb, s.comm_worker_mb)
        assert s.max_iterations == max(1, round(row.duration / t_it))
        t_e = s.max_iterations * t_it
        assert s.deadline - s.submit_time >= 1.1 * t_e - 1e-6
        assert s.deadline - s.submit_time >= 0.5 * 3600 - 1e-6
        assert s.submit_time == row.submit_time and s.reference_runtime == row.duration
        assert 1 <= s.urgency <= 10
        assert 100 <= s.data_size_mb <= 1000 and 50 <= s.comm_ps_mb <= 100 and 50 <= s.comm_worker_mb <= 100
        fa = prof.curve.final_accuracy
        assert 0.6 * fa - 1e-9 <= s.accuracy_requirement <= 0.95 * fa + 1e-9
        assert s.stop_option == "run-all" and s.slo_class == "strict" and s.stop_changeable  # users ask for their iterations
    # the MLFS rule: as many partitions as GPUs when the model allows it
    for s in specs:
        if s.model == "BERT" and s.n_gpus <= 16:
            assert s.n_partitions == s.n_gpus
    assert {s.sync for s in specs} == {"ps", "allreduce"}
    assert len({s.model for s in specs}) == len(FAKE)


def test_deadline_rule_tight_for_long_jobs(fake_catalogue):
    df = pd.DataFrame({"job_id": [0, 1], "submit_time": [0.0, 10.0], "n_gpus": [1, 1], "duration": [1e6, 1.0]})
    s = M.to_job_specs(df, 0, M.MappingConfig(model_weights={"SVM": 1}, ps_probability=0.0))
    t_it = fake_catalogue["SVM"].iteration_time["V100"]
    assert s[0].deadline == pytest.approx(1.1 * s[0].max_iterations * t_it)   # 1.1 t_e > 24 h
    assert 0.5 * 3600 <= s[1].deadline - 10.0 <= 24 * 3600                       # t_r dominates


def test_split_gpus_rule():
    assert M.split_gpus(8, "layer", 32) == (8, 1)
    assert M.split_gpus(64, "layer", 32) == (32, 2)
    assert M.split_gpus(12, "chain", 8) == (6, 2)
    assert M.split_gpus(7, "chain", 4) == (1, 7)
    assert M.split_gpus(8, "none", 32) == (1, 8)
    assert M.split_gpus(8, "layer", 32, mode="data") == (1, 8)
    seen = {M.split_gpus(16, "layer", 8, mode="random", u=u) for u in np.linspace(0, 0.999, 50)}
    assert seen == {(1, 16), (2, 8), (4, 4), (8, 2)}


def test_trace_model_aliases_and_fields(fake_catalogue):
    df = trace(6, model=["cifar10", "imagenet", "ncf", "bert", "deepspeech2", "yolov3"])
    specs = M.to_job_specs(df, 0)
    assert [s.model for s in specs] == ["ResNet-18", "ResNet-50", "Recommendation", "BERT", "DeepSpeech2", "YOLOv3"]
    df = trace(3, model=["resnet-18", "Svm", "MLP"], deadline=[1e9, 1e9, 1e9], urgency=[1, 2, 3],
               accuracy_requirement=[0.5, 0.6, 0.7])
    specs = M.to_job_specs(df, 0)
    assert [s.model for s in specs] == ["ResNet-18", "SVM", "MLP"]
    assert [s.deadline for s in specs] == [1e9] * 3
    assert [s.urgency for s in specs] == [1, 2, 3]
    assert [s.accuracy_requirement for s in specs] == [0.5, 0.6, 0.7]
    with pytest.raises(ValueError, match="'gpt-5' is not in the catalogue"):
        M.to_job_specs(trace(2, model=["gpt-5", "bert"]), 0)
    assert M.to_job_specs(trace(2, model=["gpt-5", "bert"]), 0, M.MappingConfig(unknown_model="sample"))[1].model == "BERT"


def test_missing_duration_is_an_error(fake_catalogue):
    w = T.load_pollux_workload("workload-1")
    with pytest.raises(ValueError, match="duration .* missing"):
        M.to_job_specs(w, 0)
    specs = M.to_job_specs(T.fill_pollux_durations(w, 0), 0)
    assert len(specs) == 160 and all(s.n_gpus == g for s, g in zip(specs, w["n_gpus"]))


def test_mixes_and_weights(fake_catalogue):
    df = trace(3000)
    cfg = M.MappingConfig(model_weights=M.MLFS_MODEL_WEIGHTS, slo_mix=M.UNISCHED_MIX2,
                          stop_mix={"run-all": 1, "opt-stop": 1, "requirement": 2}, stop_changeable_probability=0.25,
                          ps_probability=0.8, partitioning="random")
    specs = M.to_job_specs(df, 5, cfg)
    assert {s.model for s in specs} == {"AlexNet", "ResNet-50", "MLP", "LSTM", "SVM"}
    frac = lambda pred: np.mean([pred(s) for s in specs])
    assert frac(lambda s: s.slo_class == "soft") == pytest.approx(1 / 3, abs=0.04)
    assert frac(lambda s: s.stop_option == "requirement") == pytest.approx(0.5, abs=0.04)
    assert frac(lambda s: s.stop_changeable) == pytest.approx(0.25, abs=0.04)
    assert frac(lambda s: s.sync == "ps") == pytest.approx(0.8, abs=0.04)
    with pytest.raises(ValueError):
        M.MappingConfig(slo_mix={"gold": 1.0})
    with pytest.raises(ValueError, match="not in the catalogue"):
        M.to_job_specs(df, 0, M.MappingConfig(model_weights={"Nope": 1}))


def test_reference_gpu_changes_iterations(fake_catalogue):
    df = trace(50)
    v = M.to_job_specs(df, 3)
    k = M.to_job_specs(df, 3, M.MappingConfig(reference_gpu="K80"))
    assert [a.model for a in v] == [b.model for b in k]
    assert sum(a.max_iterations for a in v) > sum(b.max_iterations for b in k)


def test_same_seed_same_specs_in_another_process(fake_catalogue, tmp_path):
    df = trace(40)
    df.to_csv(tmp_path / "t.csv", index=False)
    mine = M.to_job_specs(df, 11)
    code = textwrap.dedent(f"""
        import pandas as pd, sys
        import tests.test_mapping as tm
        from clustergym.core import mapping as M
        profiles = {{n: tm._profile(n) for n in tm.FAKE}}
        M._catalogue = lambda: (list(profiles), profiles.__getitem__)
        df = pd.read_csv({str(tmp_path / 't.csv')!r})
        print(repr(M.to_job_specs(df, 11)))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}, cwd=str(__import__("pathlib").Path(__file__).parents[1]))
    assert out.stdout.strip() == repr(mine)


def test_real_catalogue_philly_window():
    pytest.importorskip("clustergym.core.catalogue_data")
    names = M._catalogue()[0]
    df = T.window(T.load_philly(), 86400.0 * 30, n_jobs=400)
    specs = M.to_job_specs(df, 0)
    assert len(specs) == 400 and {s.model for s in specs} <= set(names)
    assert all(s.n_gpus == g for s, g in zip(specs, df["n_gpus"]))
    pollux = M.to_job_specs(T.fill_pollux_durations(T.load_pollux_workload(3), 0), 0)
    assert {s.model for s in pollux} <= set(names)


def test_reference_server_follows_the_target_cluster(fake_catalogue):
    from clustergym.core.presets import cluster_preset

    assert M.reference_server(cluster_preset("mlfs-80"))[:2] == (4, 10.0)
    assert M.reference_server(cluster_preset("mlfs-2474"))[0] == 4  # 1,908 of its 2,474 GPUs sit in 4-GPU servers
    df = trace(200)
    wide = M.to_job_specs(df, 3)  # no cluster: 8 GPUs per server, 100 Gbit/s inside
    small = M.to_job_specs(df, 3, cluster=cluster_preset("mlfs-80"))
    assert [a.model for a in wide] == [b.model for b in small]
    # the cluster's server is what the config would spell out by hand
    by_hand = M.to_job_specs(df, 3, M.MappingConfig(gpus_per_server=4, nic_gbps=10.0,
                                                     intra_gbps=cluster_preset("mlfs-80").servers[0].intra_gbps))
    assert by_hand == small
    # with the intra-server link held fixed, 4-GPU servers make a job spanning servers slower per
    # iteration, so it gets fewer iterations for the same trace duration; a 1-GPU job is unaffected
    four = M.to_job_specs(df, 3, M.MappingConfig(gpus_per_server=4))
    multi = [(a, b) for a, b in zip(wide, four) if a.n_gpus > 4 and a.max_iterations > 100]
    assert multi and all(b.max_iterations <= a.max_iterations for a, b in multi)
    assert any(b.max_iterations < a.max_iterations for a, b in multi)
    assert all(a.max_iterations == b.max_iterations for a, b in zip(wide, four) if a.n_gpus <= 4)
    # an explicit config field wins over the cluster
    explicit = M.to_job_specs(df, 3, M.MappingConfig(gpus_per_server=8, intra_gbps=100.0),
                              cluster=cluster_preset("mlfs-80"))
    assert [a.max_iterations for a in explicit] == [a.max_iterations for a in wide]
    with pytest.raises(ValueError, match="gpus_per_server"):
        M.MappingConfig(gpus_per_server=0)


def test_unisched_deadlines_and_slo_fraction():
    from clustergym.core.mapping import MappingConfig, reference_run_time, to_job_specs
    from clustergym.core.workload import slo_mix_with_fraction

    df = _unisched_trace(400)
    cfg = MappingConfig(slo_mix=slo_mix_with_fraction(0.3), deadline_span=(1.1, 2.0))
    specs = to_job_specs(df, 5, cfg)
    spans = np.array([(s.deadline - s.submit_time) / reference_run_time(s, cfg) for s in specs])
    assert spans.min() >= 1.1 - 1e-9 and spans.max() <= 2.0 + 1e-9 and spans.std() > 0.2  # U[1.1, 2] x t_e
    assert np.mean([s.slo_class == "strict" for s in specs]) == pytest.approx(0.3, abs=0.06)
    assert {s.slo_class for s in specs} == {"strict", "best-effort"}
    assert to_job_specs(df, 5, cfg) == specs  # seeded
    # the MLFS rule's draws are unchanged by the option: the same seed maps the same models and classes
    mlfs = to_job_specs(df, 5, MappingConfig(slo_mix=slo_mix_with_fraction(0.3)))
    assert [(s.model, s.slo_class) for s in mlfs] == [(s.model, s.slo_class) for s in specs]
    with pytest.raises(ValueError, match="deadline_span must be None or"):
        MappingConfig(deadline_span=(2.0, 1.1))
    with pytest.raises(ValueError, match=r"slo_fraction must be a number in \[0, 1\]"):
        slo_mix_with_fraction(1.5)


def _unisched_trace(n: int):
    import pandas as pd

    return pd.DataFrame({"job_id": np.arange(n), "submit_time": np.arange(n) * 60.0,
                         "n_gpus": np.ones(n, dtype=int), "duration": np.full(n, 3600.0)})
