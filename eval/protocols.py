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
list is a new name (``-v2``, ...).

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
from typing import Any, Sequence

from .files import atomic_write_text
from .specs import SweepSpecError, code_version, git_state, make_runs

# The registered scenarios the protocols use, in one place: a protocol label -> the env id it was defined on.
SCENARIO_IDS: dict[str, str] = {
    "mlfs80-philly": "clustergym/MLFS80-Philly-v1",
    "hare160-philly": "clustergym/Hare160-Philly-v1",
    "hetero16-generated": "clustergym/Hetero-v1",
    "mlfs2474-philly": "clustergym/MLFS2474-v1",
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

    def scenario_specs(self) -> list[dict]:
        """The scenarios as :func:`clustergym.eval.specs.make_runs` takes them, the split in every one."""
        return [{"label": s.label, "env_id": s.env_id, "kwargs": {**s.kwargs, "split": self.split},
                 "base": s.label, "load": 1.0} for s in self.scenarios]

    def runs(self, policies: Sequence[dict]) -> list[dict]:
        """Every (scenario, policy, seed) run of ``policies`` (parsed policy specs) under this protocol."""
        return make_runs(list(policies), self.scenario_specs(), self.seeds)

    def definition(self) -> dict:
        return {"name": self.name, "summary": self.summary, "split": self.split, "seeds": list(self.seeds),
                "episodes_per_scenario_and_policy": len(self.seeds), "reference": self.reference,
                "scenarios": [{"label": s.label, "env_id": s.env_id, "kwargs": s.kwargs} for s in self.scenarios]}


PROTOCOLS: dict[str, Protocol] = {p.name: p for p in (
    Protocol("core-v1", "four clusters from 80 to 2,474 GPUs: held-out Philly windows on three, generated "
             "workloads on the heterogeneous one; ten episodes each",
             tuple(ProtocolScenario(label) for label in SCENARIO_IDS), tuple(range(30_000, 30_010))),
    Protocol("smoke-v1", "a seconds-long check that a policy runs under the protocol machinery (10-job held-out "
             "windows of the 80-GPU cluster, two episodes); not for reporting results",
             (ProtocolScenario("mlfs80-philly", {"window_jobs": 10}),), (30_000, 30_001)),
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
        workload = "generated per seed" if {**base, **s.kwargs}.get("workload") == "generator" else \
            f"{p.split!r} windows of the trace"
        lines.append(f"    {s.label:20s} {s.env_id}  {json.dumps({**base, **s.kwargs}, sort_keys=True)}"
                     f"  ({workload})")
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
                  failed: Sequence[str] = ()) -> tuple[Path, Path]:
    """``protocol.json`` and ``protocol.md`` in ``out_dir`` from the sweep's long summary (one row per
    scenario, policy and metric, :func:`clustergym.eval.stats.summarize`); returns their paths."""
    env_ids = {s.label: s.env_id for s in p.scenarios}
    policies = {r["policy"]: r["identity"]["policy"] for r in runs}  # the identity each run was played with
    rows = [{"env_id": env_ids.get(r["scenario"]), **{k: _plain(v) for k, v in r.items()}}
            for r in long.to_dict("records")]
    doc = {"protocol": p.definition(), "policies": policies, "provenance": provenance(), "command": command,
           "complete": not failed, "failed_runs": sorted(failed), "results": rows}
    json_path = atomic_write_text(Path(out_dir) / "protocol.json", json.dumps(doc, indent=1) + "\n")
    md_path = atomic_write_text(Path(out_dir) / "protocol.md", results_page(doc, long))
    return json_path, md_path


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
    lines = [f"# Protocol {proto['name']}", "", proto["summary"], "",
             f"- split: `{proto['split']}`; seeds {proto['seeds'][0]}–{proto['seeds'][-1]} "
             f"({proto['episodes_per_scenario_and_policy']} episodes per scenario and policy)",
             "- env ids: " + ", ".join(f"`{s['env_id']}`" + (f" {json.dumps(s['kwargs'])}" if s["kwargs"] else "")
                                       for s in proto["scenarios"]),
             f"- code: {prov['code_version']}; Python {prov['python']}; {pk}",
             f"- machine: {m['platform']}, {m['processor']}, {m['cpu_count']} CPUs",
             f"- command: `{doc['command']}`"]
    if not doc["complete"]:
        lines.append(f"- **incomplete**: {len(doc['failed_runs'])} runs failed ({', '.join(doc['failed_runs'][:3])}"
                     f"{', ...' if len(doc['failed_runs']) > 3 else ''})")
    lines += ["", "Mean ± half width of the 95 % Student-t interval over the episodes (`protocol.json` has every "
              "metric in its own unit: seconds, MB).", "", results_table(long, proto)]
    return "\n".join(lines)


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
