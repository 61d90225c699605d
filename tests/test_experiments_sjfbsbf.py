"""The SJF-BSBF experiments' setting (eval/experiments_sjfbsbf.py): the Pollux-like workload and one small run."""
from __future__ import annotations

from clustergym.eval.experiments_sjfbsbf import EXPERIMENTS, VARIANTS, cluster, one_run, pollux_mix, workload


def test_workload_follows_the_bundled_pollux_mix_and_is_seeded():
    models, gpus = pollux_mix()
    assert set(models) == {"BERT", "ResNet-18", "DeepSpeech2", "ResNet-50", "Recommendation", "YOLOv3"}
    assert max(gpus) == 32 and 48 not in gpus and gpus[1] == 503.0  # 503 of the 1,280 Pollux jobs use 1 GPU
    a, b = workload(30, 3), workload(30, 3)
    assert a == b and a != workload(30, 4)
    assert {j.model for j in a} <= set(models) and {j.n_gpus for j in a} <= set(gpus)
    assert all(j.n_partitions == 1 and j.sync == "allreduce" for j in a)


def test_one_small_run_per_named_experiment_policy():
    assert set(EXPERIMENTS) == {"sjf-bsbf", "sjf-bsbf-xi", "sjf-bsbf-isolate"}
    assert cluster(100.0).servers[0].nic_gbps == 100.0 and sum(s.n_gpus for s in cluster().servers) == 64
    rec = one_run("sjf-bsbf/no-sub-batch", 12, 0, interference="constant", interference_xi=1.5)
    assert rec["finished"] == 12 and rec["policy"] == "sjf-bsbf/no-sub-batch" and rec["interference_xi"] == 1.5
    assert VARIANTS["sjf-bsbf/exclusive"] == ("sjf-bsbf", {"sharing": "none"})
