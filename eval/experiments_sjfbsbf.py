"""SJF-BSBF's claims (Luo et al., Tables III-IV and Fig. 6(b)): ``python eval/compare.py --experiment
sjf-bsbf|sjf-bsbf-xi|sjf-bsbf-isolate [--quick] [--seeds ...]``.

The two policies that share GPUs choose a GPU and a sub-batch per job, which the Gymnasium env expresses only
with ``gpu_actions`` and ``sub_batch_actions`` on (and then plays the same runs: tests/test_window_gpu_sub_batch.py):
these experiments' runs are core runs (:func:`clustergym.eval.specs.core_runs`, faster), played by :func:`core_episode` with
:func:`clustergym.baselines.base.run` on the simulator directly, with ``eval/compare.py``'s files, resume rule,
tables and report. Registered in :mod:`clustergym.eval.experiments`.

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

import time
from pathlib import Path

import numpy as np
import pandas as pd

from clustergym import baselines
from clustergym.baselines.base import run
from clustergym.core.config import SimConfig
from clustergym.core.engine import Simulator
from clustergym.core.generator import generate
from clustergym.core.hardware import ClusterSpec, ServerSpec
from clustergym.core.mapping import MODEL_ALIASES, MappingConfig
from clustergym.core.trace_schema import traces_dir

from .experiment_kit import agree_range, experiment, paired_rel, pct_ci
from .specs import core_runs
from .stats import fmt_num, fmt_pct

RUNNER = "clustergym.eval.experiments_sjfbsbf:core_episode"
POLICIES = ("sjf-bsbf", "sjf-ffs", "sjf", "sjf-gpu", "fifo")
LOAD = 1.5
MAX_GPUS = 32
NIC_GBPS = 10.0
XIS = (1.0, 1.25, 1.5, 2.0)


def cluster(nic_gbps: float = NIC_GBPS) -> ClusterSpec:
    """16 servers x 4 V100, ``nic_gbps`` NICs."""
    return ClusterSpec(f"sjfbsbf-64-nic{nic_gbps:g}",
                       tuple(ServerSpec(f"s{i}", "V100", 4, 64, 256, nic_gbps, 100.0) for i in range(16)))


CLUSTER = cluster()
# the paper's claims: (policy, reference, paper's relative difference in mean JCT at 240 and 480 jobs)
CLAIMS = (("sjf-bsbf", "sjf-ffs", (1.01 / 1.23 - 1, 1.57 / 1.89 - 1)),
          ("sjf-ffs", "sjf", (1.23 / 1.25 - 1, 1.89 / 2.55 - 1)),
          ("sjf-bsbf", "sjf", (1.01 / 1.25 - 1, 1.57 / 2.55 - 1)))


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


def core_episode(policy: str, args: dict, seed: int) -> tuple[dict, pd.DataFrame]:
    """The runner of this module's core runs: ``policy`` (a baseline name or a :data:`VARIANTS` label) on
    ``args["n_jobs"]`` jobs of :func:`workload` on :func:`cluster` with ``args["nic_gbps"]`` NICs (the workload
    does not depend on them) and the SimConfig fields ``args["sim"]``: (its summary with the settings and the
    wall time, its per-job records)."""
    name, params = VARIANTS.get(policy, (policy, {}))
    sim_kw = dict(args.get("sim", {}))
    cfg = SimConfig(decide_on="queue", usage_change_mean_s=0.0, **sim_kw)
    t0 = time.perf_counter()
    sim = Simulator(cluster(args["nic_gbps"]), workload(args["n_jobs"], seed), cfg, seed=seed)
    s = run(sim, baselines.make(name, **params))
    rec = {"n_jobs": args["n_jobs"], "nic_gbps": args["nic_gbps"], **sim_kw,
           **{k: v for k, v in s.items() if isinstance(v, (int, float))}, "wall_s": time.perf_counter() - t0}
    return rec, pd.DataFrame(sim.job_records())


def _scenario(label: str, n_jobs: int, nic_gbps: float = NIC_GBPS, **sim: object) -> dict:
    return {"label": label, "args": {"n_jobs": n_jobs, "nic_gbps": nic_gbps, "sim": sim}}


def _size(quick: bool, seeds) -> tuple[int, list[int]]:
    """(jobs per workload, seeds): 60 jobs and seed 0 with ``quick``, else 240 jobs (the paper's smaller
    workload) and seeds 0-9 (a run takes seconds to a minute)."""
    return (60 if quick else 240), list(seeds or ([0] if quick else range(10)))


def _setting(n_jobs: int, seeds: list[int]) -> str:
    return (f"Core runs (the simulator without the env: the sharing policies choose GPUs and sub-batches). 16 x 4 "
            f"V100; {n_jobs} generated jobs at offered load {LOAD:g}, the Pollux applications and GPU counts "
            f"(1-32) in the bundled Pollux workloads' proportions, Philly log-normal durations in [5 min, 8 h], "
            f"data parallel; decisions whenever a job waits; seeds {seeds} (the same workload for every policy "
            f"of a seed). Effects are paired per seed: (policy - reference) / reference, 95 % t-intervals.")


# ------------------------------------------------------------------------------------------------ sjf-bsbf


@experiment
def sjf_bsbf(out: Path, quick: bool = False, seeds=None) -> dict:
    """SJF-BSBF Tables III-IV: SJF-BSBF vs SJF-FFS, SJF, SJF by GPU count and FIFO.

    Mean JCT on the Pollux-like workload, 10 Gbit/s NICs, the default interference."""
    n_jobs, seeds = _size(quick, seeds)
    runs = core_runs(POLICIES, [_scenario(f"pollux{n_jobs}", n_jobs)], seeds, RUNNER)
    notes = (_setting(n_jobs, seeds) + " 10 Gbit/s NICs; the default interference (Gavel's pairs, 1.5 for the "
             "others). `sjf` is the registered clairvoyant SJF (task by task, best fit).")
    return {"runs": runs, "reference": "sjf-bsbf", "title": "sjf-bsbf: SJF-BSBF vs SJF-FFS and SJF (Tables III-IV)",
            "notes": notes, "claims": _claims_order,
            "figures": _paired_figure(_order_pairs, {(pol, ref): paper[0] for pol, ref, paper in CLAIMS})}


def _order_pairs(ep: pd.DataFrame) -> list[tuple[str, str, str]]:
    return [(pol, ref, sc) for sc in dict.fromkeys(ep["scenario"]) for pol, ref, _ in CLAIMS]


def _claims_order(agg) -> list[dict]:
    ep = agg["episodes"]
    rows = []
    for pol, ref, paper in CLAIMS:
        m, lo, hi, n = paired_rel(ep, pol, ref, "mean_jct")
        means = [ep.loc[ep["policy"] == p, "mean_jct"].mean() / 3600 for p in (pol, ref)]
        rows.append({"claim": f"mean JCT: {pol} lower than {ref}",
                     "paper": f"{fmt_pct(paper[0])} (240 jobs) / {fmt_pct(paper[1])} (480 jobs)",
                     "measured": f"{pct_ci(m, lo, hi, n)}; means {fmt_num(means[0])} h vs {fmt_num(means[1])} h",
                     "agrees": agree_range(m, lo, hi, min(paper), max(paper))})
    return rows


# --------------------------------------------------------------------------------------------- sjf-bsbf-xi

EXCLUSIVE = "sjf-bsbf/exclusive"
NO_SUB = "sjf-bsbf/no-sub-batch"
XI_POLICIES = ("sjf-bsbf", NO_SUB, "sjf-ffs", EXCLUSIVE)
# (policy, reference) of sjf-bsbf-xi: the paper's claim, the sub-batch search's share of it, the rest (at xi = 1
# Theorem 1 always shares, so there SJF-BSBF without the search differs from SJF-FFS only in which one-job GPUs
# it takes: its partners' by pair JCT, against first fit by GPU index), and sharing against exclusive GPUs
XI_PAIRS = (("sjf-bsbf", "sjf-ffs"), ("sjf-bsbf", NO_SUB), (NO_SUB, "sjf-ffs"), ("sjf-bsbf", EXCLUSIVE),
            ("sjf-ffs", EXCLUSIVE))


@experiment
def sjf_bsbf_xi(out: Path, quick: bool = False, seeds=None) -> dict:
    """SJF-BSBF Fig. 6(b): SJF-BSBF, SJF-FFS and exclusive SJF against one injected xi.

    Every co-located pair slows by the same interference ratio xi, on 100 Gbit/s NICs; SJF-BSBF without its
    sub-batch search too."""
    n_jobs, seeds = _size(quick, seeds)
    xis = (1.0, 1.5) if quick else XIS
    scen = [_scenario(f"xi{x:g}", n_jobs, 100.0, interference="constant", interference_xi=x) for x in xis]
    notes = (_setting(n_jobs, seeds) + f" 100 Gbit/s NICs (crossing servers costs little, so the injected ratio "
             f"is the cost of sharing); every co-located pair slows by the same xi = {', '.join(map(str, xis))} "
             f"(`SimConfig.interference=\"constant\"`). `{EXCLUSIVE}` is SJF-BSBF's planner with exclusive GPUs "
             f"(the paper's SJF with the same allocator); `{NO_SUB}` is SJF-BSBF without Algorithm 2's sub-batch "
             f"search. Figure `mean_jct_vs_xi`: Fig. 6(b)'s axes.")
    return {"runs": core_runs(XI_POLICIES, scen, seeds, RUNNER), "reference": EXCLUSIVE,
            "title": "sjf-bsbf-xi: mean JCT against the interference ratio (Fig. 6(b))", "notes": notes,
            "claims": _claims_xi, "figures": _xi_figure}


def _agree_equal(m: float, lo: float, hi: float) -> str:
    """The paper's "the same performance": the interval holds 0."""
    if not np.isfinite(m):
        return "no data"
    if not np.isfinite(lo):
        return "one seed: no interval"
    return "yes (no significant difference)" if lo <= 0 <= hi else "no (significant difference)"


def _claims_xi(agg) -> list[dict]:
    ep = agg["episodes"]
    rows = []
    for x in sorted(set(ep["interference_xi"])):
        def where(d, x=x):
            return d["interference_xi"] == x

        for pol, ref in XI_PAIRS:
            m, lo, hi, n = paired_rel(ep, pol, ref, "mean_jct", where=where)
            if (pol, ref) != XI_PAIRS[0]:
                paper, agrees = "–", "n/a (isolates a cause)"
            elif x <= 1.25:
                paper, agrees = "equal (xi <= 1.25)", _agree_equal(m, lo, hi)
            else:
                paper, agrees = "−8 % to −13 % (xi 1.5-2.0)", agree_range(m, lo, hi, -0.13, -0.08)
            rows.append({"claim": f"xi = {x:g}: mean JCT of {pol} vs {ref}", "paper": paper,
                         "measured": pct_ci(m, lo, hi, n), "agrees": agrees})
    return rows


def _xi_figure(ep: pd.DataFrame, fig_dir: Path, order) -> list[Path]:
    """``mean_jct_vs_xi``: mean JCT against xi per policy, and the sharing policies' paired difference to the
    exclusive SJF, with 95 % t-intervals."""
    from . import plots
    from .stats import summarize

    # one xi is one scenario, so summarize pairs each run with the exclusive run of the same xi and seed
    jct = summarize(ep, metrics=["mean_jct"], group=("interference_xi", "policy"), reference=EXCLUSIVE).rename(
        columns={"interference_xi": "x"})
    rel = jct[jct["policy"] != EXCLUSIVE][["policy", "x", "rel_paired_mean", "rel_paired_lo", "rel_paired_hi"]]
    rel = rel.rename(columns={"rel_paired_mean": "mean", "rel_paired_lo": "ci_lo", "rel_paired_hi": "ci_hi"})
    panels = [("mean_jct", "mean JCT", "h", jct), ("rel_mean_jct", f"mean JCT vs {EXCLUSIVE} (paired)", "%", rel)]
    p = plots.x_curves(panels, "interference ratio xi (every pair)", "sjf-bsbf-xi: mean ± 95% t-interval over "
                       "seeds", Path(fig_dir) / "mean_jct_vs_xi.png", order)
    return [p] if p else []


# ---------------------------------------------------------------------------------------- sjf-bsbf-isolate

# labelled policy variants of the isolation experiment: label -> (baseline name, parameters)
VARIANTS: dict[str, tuple[str, dict]] = {
    "sjf-bsbf": ("sjf-bsbf", {}),
    NO_SUB: ("sjf-bsbf", {"sub_batches": False}),
    "sjf-ffs": ("sjf-ffs", {}),
    EXCLUSIVE: ("sjf-bsbf", {"sharing": "none"}),
    "sjf": ("sjf", {}),
    "sjf-gpu": ("sjf-gpu", {}),
}
# (policy, reference): each pair differs in one mechanism, or is one of the paper's claims
ISOLATE_PAIRS = (("sjf-bsbf", NO_SUB), (NO_SUB, "sjf-ffs"), (EXCLUSIVE, "sjf"),
                 ("sjf-gpu", EXCLUSIVE), ("sjf-bsbf", EXCLUSIVE), ("sjf-ffs", EXCLUSIVE), ("sjf-bsbf", "sjf-ffs"))


@experiment
def sjf_bsbf_isolate(out: Path, quick: bool = False, seeds=None) -> dict:
    """What separates the sjf-bsbf policies: one mechanism at a time, at 10 and 100 Gbit/s.

    The sub-batch search, sharing at all, the allocator and the priority order."""
    n_jobs, seeds = _size(quick, seeds)
    fast = ("sjf-bsbf", "sjf-ffs", EXCLUSIVE, "sjf")
    runs = (core_runs(tuple(VARIANTS), [_scenario("nic10", n_jobs)], seeds, RUNNER)
            + core_runs(fast, [_scenario("nic100", n_jobs, 100.0)], seeds, RUNNER))
    notes = (_setting(n_jobs, seeds) + " Scenario `nic10`: 10 Gbit/s NICs (the `sjf-bsbf` setting), every variant; "
             "`nic100`: 100 Gbit/s NICs. Variants: `sjf-bsbf/no-sub-batch` (Algorithm 2's search off), "
             f"`{EXCLUSIVE}` (SJF-BSBF's planner with exclusive GPUs: the paper's SJF with SJF-BSBF's allocator); "
             "`sjf` is the same rule with another allocator (task by task, best fit), `sjf-gpu` the same "
             "allocator ordered by GPU count. Figure `paired_mean_jct`: each pair's paired difference.")
    return {"runs": runs, "reference": EXCLUSIVE, "title": "sjf-bsbf-isolate: what separates the SJF-BSBF policies",
            "notes": notes, "claims": _claims_isolate, "figures": _paired_figure(_isolate_pairs)}


def _isolate_pairs(ep: pd.DataFrame) -> list[tuple[str, str, str]]:
    out = []
    for sc in dict.fromkeys(ep["scenario"]):
        have = set(ep.loc[ep["scenario"] == sc, "policy"])
        out += [(pol, ref, sc) for pol, ref in ISOLATE_PAIRS if pol in have and ref in have]
    return out


def _claims_isolate(agg) -> list[dict]:
    ep = agg["episodes"]
    rows = []
    for pol, ref, sc in _isolate_pairs(ep):
        for metric in ("mean_jct", "mean_waiting"):
            m, lo, hi, n = paired_rel(ep, pol, ref, metric, where=lambda d, s=sc: d["scenario"] == s)
            rows.append({"claim": f"{sc}: {metric} of {pol} vs {ref}", "paper": "–",
                         "measured": pct_ci(m, lo, hi, n), "agrees": "n/a (isolates a cause)"})
    return rows


def _paired_figure(pairs, paper: dict | None = None):
    """An experiment's figure ``paired_mean_jct``: the paired mean-JCT difference of each (policy, reference,
    scenario) of ``pairs(episodes)`` with its 95 % t-interval, and the paper's value of a (policy, reference)
    of ``paper`` where it has one."""
    def draw(ep: pd.DataFrame, fig_dir: Path, order) -> list[Path]:
        from . import plots

        rows, marks = [], []
        for pol, ref, sc in pairs(ep):
            m, lo, hi, n = paired_rel(ep, pol, ref, "mean_jct", where=lambda d, s=sc: d["scenario"] == s)
            if n:
                rows.append((f"{pol} vs {ref} ({sc})", m, lo, hi))
                marks.append((paper or {}).get((pol, ref), np.nan))
        p = plots.interval_bars(rows, "mean JCT: (policy − reference) / reference, paired per seed (%)",
                                "paired mean-JCT differences, mean ± 95% t-interval over seeds",
                                Path(fig_dir) / "paired_mean_jct.png", marks if paper else None,
                                "paper (240 jobs, Table III)")
        return [p] if p else []

    return draw
