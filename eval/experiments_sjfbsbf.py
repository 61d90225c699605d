"""SJF-BSBF's claims (Luo et al., Tables III-IV and Fig. 6(b)), at core level:
``python -m clustergym.eval.experiments_sjfbsbf [--experiment sjf-bsbf|sjf-bsbf-xi] [--quick] [--seeds ...]``.

The two policies that share GPUs choose a GPU and a sub-batch per job, which the Gymnasium env's window cannot
express (it offers a task and a server): these experiments drive the simulator directly with
:func:`clustergym.baselines.base.run`, not through ``eval/compare.py``'s env sweep. The names are registered in
:data:`EXPERIMENTS` here (``eval/compare.py --experiment`` runs env sweeps and does not list them).

Setting (the paper's simulation, as close as the catalogue allows):

- **Cluster**: 16 servers x 4 V100 (64 GPUs; the paper's 2080 Ti is not in the catalogue, V100 is the Gavel
  type with measured co-location pairs), 10 Gbit/s NICs ("10 Gbps connected to a 100-Gbps switch").
- **Workload**: the paper follows Pollux's workloads. Jobs are drawn by :func:`clustergym.core.generator.generate`
  with the six Pollux applications in the bundled Pollux workloads' proportions (``traces/pollux-workloads``,
  all eight files) and their GPU counts in those files' ``num_replicas`` proportions (counts above 32 left out:
  a 48-GPU job would hold most of the 64 GPUs); durations from the Philly log-normal truncated to [5 min, 8 h]
  (the paper gives none); data parallel, all-reduce; Poisson arrivals at offered load ``LOAD``.
- **Simulator**: the default interference (Gavel pairs, SJF-BSBF's ratio 1.5 elsewhere); decisions whenever a job
  waits (``decide_on="queue"``: a job that fits only with a sub-batch must be seen); constant resource use.

``sjf-bsbf`` compares SJF-BSBF, SJF-FFS, the exclusive clairvoyant SJF (``sjf``: the paper's SJF baseline),
SJF by GPU count and FIFO. ``sjf-bsbf-xi`` isolates the interference ratio (Fig. 6(b)): every pair gets the
same injected ratio (``SimConfig.interference = "constant"``) for xi in 1.0, 1.25, 1.5, 2.0, on 100 Gbit/s NICs.
``sjf-bsbf-isolate`` separates the mechanisms (:data:`VARIANTS`: the sub-batch search, sharing at all, the
priority order).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

import pandas as pd

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.core.config import SimConfig
from clustergym.core.engine import Simulator
from clustergym.core.generator import generate
from clustergym.core.hardware import ClusterSpec, ServerSpec
from clustergym.core.mapping import MODEL_ALIASES, MappingConfig
from clustergym.core.trace_schema import traces_dir

from .experiment_kit import paired_rel

EXPERIMENTS: dict[str, Callable] = {}
POLICIES = ("sjf-bsbf", "sjf-ffs", "sjf", "sjf-gpu", "fifo")
LOAD = 1.5
MAX_GPUS = 32
NIC_GBPS = 10.0


def cluster(nic_gbps: float = NIC_GBPS) -> ClusterSpec:
    """16 servers x 4 V100, ``nic_gbps`` NICs."""
    return ClusterSpec(f"sjfbsbf-64-nic{nic_gbps:g}",
                       tuple(ServerSpec(f"s{i}", "V100", 4, 64, 256, nic_gbps, 100.0) for i in range(16)))


CLUSTER = cluster()
# the paper's claims: (policy, reference, paper's relative difference in mean JCT at 240 and 480 jobs)
CLAIMS = (("sjf-bsbf", "sjf-ffs", (1.01 / 1.23 - 1, 1.57 / 1.89 - 1)),
          ("sjf-ffs", "sjf", (1.23 / 1.25 - 1, 1.89 / 2.55 - 1)),
          ("sjf-bsbf", "sjf", (1.01 / 1.25 - 1, 1.57 / 2.55 - 1)))


def register(fn: Callable) -> Callable:
    EXPERIMENTS[fn.__name__.replace("_", "-")] = fn
    return fn


def pollux_mix(max_gpus: int = MAX_GPUS) -> tuple[dict[str, float], dict[int, float]]:
    """(catalogue model -> share of jobs, GPU count -> share of jobs) over the bundled Pollux workloads."""
    files = sorted((traces_dir() / "pollux-workloads").glob("workload-*.csv"))
    df = pd.concat([pd.read_csv(f) for f in files])
    models = {MODEL_ALIASES[a]: float(n) for a, n in df["application"].value_counts().sort_index().items()}
    gpus = {int(g): float(n) for g, n in df["num_replicas"].value_counts().sort_index().items() if g <= max_gpus}
    return models, gpus


def workload(n_jobs: int, seed: int, load: float = LOAD) -> list:
    models, gpus = pollux_mix()
    mapping = MappingConfig(model_weights=models, keep_trace_model=False, partitioning="data", ps_probability=0.0,
                            reference_gpu="V100", gpus_per_server=4)
    return generate(n_jobs, seed, 64, load, mapping=mapping, cluster=CLUSTER, gpu_choices=tuple(gpus),
                    gpu_weights=gpus, min_duration=300.0, max_duration=8 * 3600.0)


# labelled policy variants of the isolation experiment: label -> (baseline name, parameters)
VARIANTS: dict[str, tuple[str, dict]] = {
    "sjf-bsbf": ("sjf-bsbf", {}),
    "sjf-bsbf/no-sub-batch": ("sjf-bsbf", {"sub_batches": False}),
    "sjf-ffs": ("sjf-ffs", {}),
    "sjf-bsbf/exclusive": ("sjf-bsbf", {"sharing": "none"}),
    "sjf": ("sjf", {}),
    "sjf-gpu": ("sjf-gpu", {}),
}


def one_run(label: str, n_jobs: int, seed: int, nic_gbps: float = NIC_GBPS, **sim: object) -> dict:
    """One core-level episode of the policy ``label`` (a baseline name or a :data:`VARIANTS` label) on the
    cluster with ``nic_gbps`` NICs (the workload does not depend on it): its summary with the label, seed and
    settings."""
    name, params = VARIANTS.get(label, (label, {}))
    cfg = SimConfig(decide_on="queue", usage_change_mean_s=0.0, **sim)
    s = run(Simulator(cluster(nic_gbps), workload(n_jobs, seed), cfg, seed=seed), baselines.make(name, **params))
    return {"policy": label, "seed": seed, "n_jobs": n_jobs, "nic_gbps": nic_gbps, **sim,
            **{k: v for k, v in s.items() if isinstance(v, (int, float))}}


def paired(df: pd.DataFrame, policy: str, ref: str, metric: str = "mean_jct") -> tuple[float, float, float, int]:
    """Mean and 95 % t-interval over seeds of (policy - ref) / ref (one run per seed:
    :func:`~clustergym.eval.experiment_kit.paired_rel` with a single scenario)."""
    return paired_rel(df.assign(scenario=""), policy, ref, metric)


@register
def sjf_bsbf(quick: bool = False, seeds=None) -> dict:
    """Mean JCT of the five policies on the Pollux-like workload (Tables III-IV's ordering)."""
    n_jobs = 60 if quick else 240
    seeds = seeds or ([0] if quick else [0, 1, 2, 3, 4])
    rows = [one_run(p, n_jobs, s) for s in seeds for p in POLICIES]
    df = pd.DataFrame(rows)
    claims = []
    for pol, ref, paper in CLAIMS:
        m, lo, hi, n = paired(df, pol, ref)
        claims.append({"claim": f"{pol} vs {ref} mean JCT", "paper_240": paper[0], "paper_480": paper[1],
                       "ours": m, "lo": lo, "hi": hi, "n": n})
    return {"episodes": df, "claims": pd.DataFrame(claims)}


@register
def sjf_bsbf_xi(quick: bool = False, seeds=None) -> dict:
    """SJF-BSBF against SJF-FFS and the exclusive SJF with one injected ratio for every pair (Fig. 6(b)), on
    100 Gbit/s NICs: the injected ratio is then the only cost of sharing (``sjf-bsbf-isolate`` measures what
    10 Gbit/s NICs add)."""
    n_jobs = 60 if quick else 240
    seeds = seeds or ([0] if quick else [0, 1, 2, 3, 4])
    xis = (1.0, 1.5) if quick else (1.0, 1.25, 1.5, 2.0)
    rows = [one_run(p, n_jobs, s, nic_gbps=100.0, interference="constant", interference_xi=x)
            for x in xis for s in seeds for p in ("sjf-bsbf", "sjf-ffs", "sjf-bsbf/exclusive")]
    df = pd.DataFrame(rows)
    claims = []
    for x in xis:
        d = df[df["interference_xi"] == x]
        paper = "0 (equal)" if x <= 1.25 else "-8 % to -13 %"
        for pol, ref, said in (("sjf-bsbf", "sjf-ffs", paper), ("sjf-bsbf", "sjf-bsbf/exclusive", ""),
                               ("sjf-ffs", "sjf-bsbf/exclusive", "")):
            m, lo, hi, n = paired(d, pol, ref)
            claims.append({"claim": f"{pol} vs {ref} mean JCT, xi = {x:g}", "paper": said, "ours": m, "lo": lo,
                           "hi": hi, "n": n})
    return {"episodes": df, "claims": pd.DataFrame(claims)}


@register
def sjf_bsbf_isolate(quick: bool = False, seeds=None) -> dict:
    """What separates the policies of ``sjf-bsbf``: the sub-batch search (SJF-BSBF without it), sharing at all
    (SJF-BSBF's planner with exclusive GPUs against ``sjf``, the same rule in another implementation), and
    the priority (SJF-BSBF's exclusive planner ordered by L_k against ``sjf-gpu``, ordered by GPU count)."""
    n_jobs = 60 if quick else 240
    seeds = seeds or ([0] if quick else [0, 1, 2, 3, 4])
    fast = ("sjf-bsbf", "sjf-ffs", "sjf-bsbf/exclusive", "sjf")
    df = pd.DataFrame([one_run(v, n_jobs, s) for s in seeds for v in VARIANTS]
                      + [one_run(v, n_jobs, s, nic_gbps=100.0) for s in seeds for v in fast])
    pairs = (("sjf-bsbf", "sjf-bsbf/no-sub-batch"), ("sjf-bsbf/no-sub-batch", "sjf-ffs"),
             ("sjf-bsbf/exclusive", "sjf"), ("sjf-gpu", "sjf-bsbf/exclusive"), ("sjf-bsbf", "sjf-bsbf/exclusive"),
             ("sjf-ffs", "sjf-bsbf/exclusive"), ("sjf-bsbf", "sjf-ffs"))
    claims = []
    for nic in sorted(set(df["nic_gbps"])):
        d = df[df["nic_gbps"] == nic]
        for pol, ref in pairs:
            for metric in ("mean_jct", "mean_waiting"):
                m, lo, hi, n = paired(d, pol, ref, metric)
                if n:
                    claims.append({"claim": f"{pol} vs {ref} {metric}, NIC {nic:g} Gbit/s", "ours": m, "lo": lo,
                                   "hi": hi, "n": n})
    return {"episodes": df, "claims": pd.DataFrame(claims)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--experiment", default="sjf-bsbf", choices=sorted(EXPERIMENTS))
    ap.add_argument("--quick", action="store_true", help="60 jobs, one seed")
    ap.add_argument("--seeds", type=int, nargs="*")
    ap.add_argument("--out", type=Path, help="folder for episodes.csv and claims.csv (default results/<name>)")
    a = ap.parse_args(argv)
    res = EXPERIMENTS[a.experiment](quick=a.quick, seeds=a.seeds)
    out = a.out or Path("results") / (a.experiment + ("-quick" if a.quick else ""))
    out.mkdir(parents=True, exist_ok=True)
    res["episodes"].to_csv(out / "episodes.csv", index=False)
    res["claims"].to_csv(out / "claims.csv", index=False)
    means = res["episodes"].groupby([c for c in ("nic_gbps", "interference_xi", "policy") if c in res["episodes"]])[
        ["mean_jct", "mean_waiting"]].mean()
    print(means.to_string(), file=sys.stdout)
    print(res["claims"].to_string(index=False), file=sys.stdout)
    (out / "command.json").write_text(json.dumps({"argv": sys.argv[1:] if argv is None else argv}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

