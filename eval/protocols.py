"""Benchmark protocols: fixed scenarios, held-out windows and seeds that any policy is evaluated on.

    python eval/compare.py --list-protocols
    python eval/compare.py --describe-protocol core-v1
    python eval/compare.py --protocol core-v1 --policies mlf-h my_package.policies:make runs/<run>/best_model.zip

A protocol fixes everything but the policies: the scenarios (registered env ids, whose version names the
dynamics, observation, action and reward they were measured with, and their keywords), the split of the trace
(``"test"``: windows no training run draws from), the episode seeds (each seed draws one window of the held-out
part of a trace, or one generated workload) and so the number of episodes. ``eval/compare.py --protocol``
refuses ``--scenarios``, ``--set``, ``--seeds``, ``--loads`` and ``--max-steps`` with it, and writes, beside the
usual sweep files, one results file: ``protocol.json`` (the protocol, each policy's identity, package versions,
git commit, machine, every metric's mean and 95 % t-interval per scenario and policy) and ``protocol.md`` (the
same as a page). A protocol never changes once results are published with it: a changed scenario, split or seed
list is a new name (``-v2``, ...). A scenario may have seeds of its own (fewer episodes on a large cluster). A
protocol with a ``subject`` (``transfer-v1``, ``transfer-v2``: ``"agent"``) needs a policy of that label and
compares it with every other policy window by window: per scenario the paired difference (subject minus other,
same seed) with its 95 % t-interval and the count of windows where the subject is better, equal or worse
(:func:`clustergym.eval.stats.paired_table`), in both results files.

The seeds start at 30,000: training's periodic evaluation, which picks the best checkpoint, draws its windows
from seeds 20,000 + i and its final table from 10,000 + i (``train/config.py``), so a checkpoint is never
selected on a protocol window by the seeds alone.
"""
from __future__ import annotations

import json
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from clustergym.scenarios import CONTENDED_DEFAULT

from .files import atomic_write_text
from .specs import SweepSpecError, check_collisions, code_version, git_state, make_runs

if TYPE_CHECKING:
    import pandas as pd

# The registered scenarios the protocols use, in one place: a protocol label -> the env id it was defined on.
SCENARIO_IDS: dict[str, str] = {
    "mlfs80-philly": "clustergym/MLFS80-Philly-v1",
    "hare160-philly": "clustergym/Hare160-Philly-v1",
    "hetero16-generated": "clustergym/Hetero-v1",
    "mlfs2474-philly": "clustergym/MLFS2474-v1",
    "contended80-philly": "clustergym/GPUCluster-v1",
    "contended80-x0.75": "clustergym/GPUCluster-v1",
    "contended80-x3": "clustergym/GPUCluster-v1",
    "hare160-contended": "clustergym/Hare160-Philly-v1",
    "unisched-mix": "clustergym/UniSched-v1",
    "pai2020-philly": "clustergym/MLFS2474-v1",
    "pollux-w": "clustergym/Pollux-v1",
}
# protocol.md's columns: (metric, heading, factor from the metric's unit); protocol.json has every metric
TABLE_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("mean_jct", "JCT (h)", 1 / 3600), ("mean_jct_censored", "JCT censored (h)", 1 / 3600),
    ("deadline_ratio", "deadline ratio", 1.0), ("accuracy_ratio", "accuracy ratio", 1.0),
    ("bandwidth_mb", "traffic (TB)", 1e-6), ("unfinished", "unfinished", 1.0))
# the packages whose versions a results file records (None where one is not installed)
PACKAGES: tuple[str, ...] = ("clustergym", "gymnasium", "numpy", "torch", "stable-baselines3", "sb3-contrib",
                             "scipy", "pandas", "numba", "ray")


@dataclass(frozen=True)
class ProtocolScenario:
    """One scenario of a protocol: its label, the registered env id and the keywords on top of the id's."""

    label: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] | None = None  # this scenario's own episode seeds; None = the protocol's

    @property
    def env_id(self) -> str:
        return SCENARIO_IDS[self.label]


@dataclass(frozen=True)
class Protocol:
    name: str
    summary: str
    scenarios: tuple[ProtocolScenario, ...]
    seeds: tuple[int, ...]
    split: str = "test"
    reference: str | None = "mlf-h"  # relative differences against this policy when it is evaluated
    subject: str | None = None  # the policy label compared window by window with every other one (paired)

    def seeds_of(self, s: ProtocolScenario) -> tuple[int, ...]:
        """The episode seeds of scenario ``s``: its own, else the protocol's."""
        return s.seeds if s.seeds is not None else self.seeds

    def scenario_specs(self) -> list[dict]:
        """The scenarios as :func:`clustergym.eval.specs.make_runs` takes them, the split in every one."""
        return [{"label": s.label, "env_id": s.env_id, "kwargs": {**s.kwargs, "split": self.split},
                 "base": s.label, "load": 1.0} for s in self.scenarios]

    def runs(self, policies: Sequence[dict]) -> list[dict]:
        """Every (scenario, policy, seed) run of ``policies`` (parsed policy specs) under this protocol;
        :class:`SweepSpecError` if the protocol has a subject and no policy carries its label."""
        labels = [p["label"] for p in policies]
        if self.subject is not None and self.subject not in labels:
            raise SweepSpecError(f"protocol {self.name} compares the policy labelled {self.subject!r} with the "
                                 f"others, and none is (got {', '.join(labels)}): give it as "
                                 f"{self.subject}=<run folder or model .zip>")
        by_seeds: dict[tuple[int, ...], list[dict]] = {}  # one make_runs per seed list: identities once each
        for s, spec in zip(self.scenarios, self.scenario_specs()):
            by_seeds.setdefault(self.seeds_of(s), []).append(spec)
        runs = [r for seeds, specs in by_seeds.items() for r in make_runs(list(policies), specs, seeds)]
        check_collisions(runs)
        return runs

    def definition(self) -> dict:
        return {"name": self.name, "summary": self.summary, "split": self.split, "seeds": list(self.seeds),
                "episodes_per_scenario_and_policy": len(self.seeds), "reference": self.reference,
                "subject": self.subject,
                "scenarios": [{"label": s.label, "env_id": s.env_id, "kwargs": s.kwargs,
                               **({"seeds": list(s.seeds)} if s.seeds is not None else {})}
                              for s in self.scenarios]}


CORE_LABELS: tuple[str, ...] = ("mlfs80-philly", "hare160-philly", "hetero16-generated", "mlfs2474-philly")
# MLFS's GPU counts {1, ..., 32}, the contended default's job mapping
MLFS_GPU_MAPPING: dict[str, Any] = {"mapping": CONTENDED_DEFAULT["mapping"]}


# Step caps of the transfer protocols, so that a policy that loops without placing jobs ends with them
# unfinished (counted) instead of running for hours: training's final table caps its 100-job windows at
# 10,000 agent steps (train/config.py, final_eval_max_steps); the 1,000-job windows get ten times that.
SMALL_CAP: dict[str, Any] = {"max_steps": 10_000}
LARGE_CAP: dict[str, Any] = {"max_steps": 100_000}
POLLUX_CAP: dict[str, Any] = {"max_steps": 16_000}  # the same 100 steps per job for a 160-job Pollux workload

# transfer-v1: the clusters and workloads a trained agent meets beside the contended default it is trained on
# (docs/training.md, "The same agent on other clusters and workloads"); the two large clusters get two
# windows each, for the 2-core budget (an agent's episode there takes minutes)
TRANSFER_SCENARIOS: tuple[ProtocolScenario, ...] = (
    ProtocolScenario("contended80-philly", SMALL_CAP),
    ProtocolScenario("contended80-x0.75", {**SMALL_CAP, "load": 0.75}),
    ProtocolScenario("contended80-x3", {**SMALL_CAP, "load": 3.0}),
    ProtocolScenario("mlfs80-philly", SMALL_CAP),
    ProtocolScenario("hetero16-generated", SMALL_CAP),
    ProtocolScenario("hare160-philly", SMALL_CAP),
    ProtocolScenario("hare160-contended", {**SMALL_CAP, "load": 1.5, **MLFS_GPU_MAPPING}),
    ProtocolScenario("unisched-mix", SMALL_CAP),
    ProtocolScenario("mlfs2474-philly", LARGE_CAP, seeds=(30_000, 30_001)),
    ProtocolScenario("pai2020-philly", {**LARGE_CAP, "cluster": "pai-2020"}, seeds=(30_000, 30_001)),
)

# transfer-v2: transfer-v1's scenarios and a workload from another source, Pollux's (held-out workloads 5-8
# on its 64-GPU testbed)
TRANSFER_V2_SCENARIOS: tuple[ProtocolScenario, ...] = TRANSFER_SCENARIOS + (ProtocolScenario("pollux-w", POLLUX_CAP),)

PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("core-v1", "four clusters from 80 to 2,474 GPUs: held-out Philly windows on three, generated "
             "workloads on the heterogeneous one; ten episodes each",
             tuple(ProtocolScenario(label) for label in CORE_LABELS), tuple(range(30_000, 30_010))),
    Protocol("smoke-v1", "a seconds-long check that a policy runs under the protocol machinery (10-job held-out "
             "windows of the 80-GPU cluster, two episodes); not for reporting results",
             (ProtocolScenario("mlfs80-philly", {"window_jobs": 10}),), (30_000, 30_001)),
    Protocol("transfer-v1", "one trained agent, not retrained (give it as agent=<run folder or .zip>), against "
             "the other policies window by window on ten clusters and workloads: the contended 80-GPU default "
             "at offered loads 0.75, 1.5 and 3, the light 80-GPU windows, the heterogeneous 16- and 160-GPU "
             "clusters, UniSched's SLO mix, 2,474 GPUs and the PAI 2020 machine mix (4,502 GPUs)",
             TRANSFER_SCENARIOS, tuple(range(30_000, 30_004)), subject="agent"),
    Protocol("transfer-v2", "transfer-v1 and Pollux's workloads: one trained agent, not retrained (give it as "
             "agent=<run folder or .zip>), against the other policies window by window on transfer-v1's ten "
             "scenarios and on whole held-out Pollux workloads (5-8, 160 jobs each) on Pollux's 64-T4 testbed",
             TRANSFER_V2_SCENARIOS, tuple(range(30_000, 30_004)), subject="agent"),
    Protocol("transfer-smoke-v1", "a check that an agent runs on a cluster of other sizes than the one it was "
             "trained on (10-job windows of the 80- and 160-GPU clusters, two episodes); not for results",
             (ProtocolScenario("contended80-philly", {"window_jobs": 10, "max_steps": 1_000}),
              ProtocolScenario("hare160-contended", {"window_jobs": 10, "max_steps": 1_000, **MLFS_GPU_MAPPING})),
             (30_000, 30_001), subject="agent"),
)}


def get(name: str) -> Protocol:
    try:
        return PROTOCOLS[name]
    except KeyError:
        raise SweepSpecError(f"unknown protocol {name!r}; known: {', '.join(PROTOCOLS)}") from None


def describe(p: Protocol) -> str:
    """The protocol as text: what ``--describe-protocol`` prints."""
    from clustergym.scenarios import SCENARIOS

    lines = [f"{p.name}: {p.summary}", f"  split: {p.split!r} (held-out part of each trace)",
             f"  seeds: {', '.join(map(str, p.seeds))} ({len(p.seeds)} episodes per scenario and policy)",
             f"  reference for relative differences: {p.reference or 'none'} (when evaluated)", "  scenarios:"]
    for s in p.scenarios:
        base = SCENARIOS.get(s.env_id, {})
        workload = {"generator": "generated per seed", "pollux": f"one whole {p.split!r} Pollux workload per seed"}.get(
            {**base, **s.kwargs}.get("workload"), f"{p.split!r} windows of the trace")
        own = f"; seeds {', '.join(map(str, s.seeds))}" if s.seeds is not None else ""
        lines.append(f"    {s.label:20s} {s.env_id}  {json.dumps({**base, **s.kwargs}, sort_keys=True)}"
                     f"  ({workload}{own})")
    if p.subject is not None:
        lines.append(f"  paired: the policy labelled {p.subject!r} minus each other policy, window by window")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------- results


def provenance() -> dict:
    """Where a result comes from: code version and git commit, Python and package versions, the machine."""
    from importlib.metadata import PackageNotFoundError, version

    packages: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    state = git_state()
    return {"code_version": code_version(), "git_commit": state[0] if state else None,
            "git_dirty": state[1] if state else None, "python": platform.python_version(), "packages": packages,
            "machine": {"platform": platform.platform(), "processor": _cpu_model(), "cpu_count": os.cpu_count()}}


def _cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_results(out_dir: str | os.PathLike, p: Protocol, runs: Sequence[dict], long, command: str,
                  failed: Sequence[str] = (), *, episodes: pd.DataFrame) -> tuple[Path, Path]:
    """``protocol.json`` and ``protocol.md`` in ``out_dir`` from the sweep's long summary (one row per
    scenario, policy and metric, :func:`clustergym.eval.stats.summarize`) and, for a protocol with a subject,
    the paired comparison of its ``episodes`` (one row per run, :func:`paired_results`); returns their paths."""
    env_ids = {s.label: s.env_id for s in p.scenarios}
    policies = {r["policy"]: r["identity"]["policy"] for r in runs}  # the identity each run was played with
    rows = [{"env_id": env_ids.get(r["scenario"]), **{k: _plain(v) for k, v in r.items()}}
            for r in long.to_dict("records")]
    paired = paired_results(episodes, p.subject) if p.subject is not None else {"rows": [], "unpaired": []}
    doc = {"protocol": p.definition(), "policies": policies, "provenance": provenance(), "command": command,
           "complete": not failed, "failed_runs": sorted(failed), "results": rows,
           "paired": [{k: _plain(v) for k, v in r.items()} for r in paired["rows"]],
           "unpaired_scenarios": paired["unpaired"]}
    json_path = atomic_write_text(Path(out_dir) / "protocol.json", json.dumps(doc, indent=1) + "\n")
    md_path = atomic_write_text(Path(out_dir) / "protocol.md", results_page(doc, long))
    return json_path, md_path


def paired_results(episodes, subject: str) -> dict[str, list]:
    """{"rows": per scenario, :func:`clustergym.eval.stats.paired_table` of ``subject`` against every other
    policy on the same seeds, each row with its scenario; "unpaired": the scenarios left out, with why (the
    subject has no run there, or a policy lacks one of the subject's seeds: a failed run)}."""
    from .stats import paired_table

    rows: list[dict] = []
    unpaired: list[str] = []
    for scenario, g in episodes.groupby("scenario", sort=False):
        by_policy = {policy: h.to_dict("records") for policy, h in g.groupby("policy", sort=False)}
        if subject not in by_policy:
            unpaired.append(f"{scenario}: no run of {subject!r}")
            continue
        try:
            rows += [{"scenario": scenario, **r} for r in paired_table(by_policy, reference=subject)[0]]
        except ValueError as e:
            unpaired.append(f"{scenario}: {e}")
    return {"rows": rows, "unpaired": unpaired}


def _plain(v: Any) -> Any:
    """A JSON value: numpy scalars as Python numbers, NaN as None."""
    if hasattr(v, "item"):
        v = v.item()
    return None if isinstance(v, float) and v != v else v


def results_page(doc: dict, long) -> str:
    """The Markdown page of a protocol's results."""
    proto, prov = doc["protocol"], doc["provenance"]
    pk = ", ".join(f"{k} {v}" for k, v in prov["packages"].items() if v is not None)
    m = prov["machine"]
    own = "".join(f"; {s['label']}: seeds {s['seeds'][0]}–{s['seeds'][-1]} ({len(s['seeds'])} episodes)"
                  for s in proto["scenarios"] if "seeds" in s)
    lines = [f"# Protocol {proto['name']}", "", proto["summary"], "",
             f"- split: `{proto['split']}`; seeds {proto['seeds'][0]}–{proto['seeds'][-1]} "
             f"({proto['episodes_per_scenario_and_policy']} episodes per scenario and policy){own}",
             "- env ids: " + ", ".join(f"`{s['env_id']}`" + (f" {json.dumps(s['kwargs'])}" if s["kwargs"] else "")
                                       for s in proto["scenarios"]),
             f"- code: {prov['code_version']}; Python {prov['python']}; {pk}",
             f"- machine: {m['platform']}, {m['processor']}, {m['cpu_count']} CPUs",
             f"- command: `{doc['command']}`"]
    if not doc["complete"]:
        failed = doc["failed_runs"]
        lines.append(f"- **incomplete**: {len(failed)} runs failed or missing ({', '.join(failed[:3])}"
                     f"{', ...' if len(failed) > 3 else ''})")
    lines += ["", "Mean ± half width of the 95 % Student-t interval over the episodes (`protocol.json` has every "
              "metric in its own unit: seconds, MB).", "", results_table(long, proto)]
    if proto.get("subject") is not None:
        lines += ["", f"## Paired: {proto['subject']} minus each other policy, window by window", "",
                  f"Per scenario the mean over its windows of ({proto['subject']} − other) on the same window, "
                  f"the 95 % t-interval of that mean, and on how many windows {proto['subject']} is better / "
                  "equal / worse (JCT in hours: lower is better; deadline ratio: higher is better).", "",
                  paired_page_table(doc["paired"])]
        lines += [f"- not paired: {why}" for why in doc.get("unpaired_scenarios", [])]
    return "\n".join(lines)


def paired_page_table(rows: Sequence[dict]) -> str:
    """The paired rows of :func:`paired_results` as a Markdown table, each metric in the unit of
    :data:`TABLE_COLUMNS`, its cells as :func:`clustergym.eval.stats.paired_cells` formats them."""
    import pandas as pd

    from .stats import PAIRED_COLUMNS, paired_cells, to_markdown

    units = {m: (h, k) for m, h, k in TABLE_COLUMNS}
    table = []
    for r in rows:
        heading, k = units.get(r["metric"], (r["metric"], 1.0))
        table.append({"scenario": r["scenario"], "vs": r["vs"], "metric": heading, **paired_cells(r, k), "n": r["n"]})
    return to_markdown(pd.DataFrame(table, columns=["scenario", "vs", "metric", *PAIRED_COLUMNS, "n"]))


def results_table(long, proto: dict) -> str:
    """One row per scenario and policy, the :data:`TABLE_COLUMNS` as "mean ± half width"."""
    import pandas as pd

    from .stats import fmt_ci, to_markdown

    ids = {s["label"]: s["env_id"] for s in proto["scenarios"]}
    rows = []
    for (scenario, policy), g in long.groupby(["scenario", "policy"], sort=False):
        g = g.set_index("metric")
        rows.append({"scenario": scenario, "env_id": ids.get(scenario), "policy": policy,
                     **{h: fmt_ci(g.at[m, "mean"] * k, g.at[m, "ci_half"] * k) if m in g.index else "–"
                        for m, h, k in TABLE_COLUMNS}})
    return to_markdown(pd.DataFrame(rows))
