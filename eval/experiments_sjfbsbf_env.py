"""SJF-BSBF and SJF-FFS through the Gymnasium env: ``python eval/compare.py --experiment sjf-bsbf-env [--quick]
[--seeds ...]``.

The sharing policies choose a GPU and a sub-batch per job. The env offers both only with ``gpu_actions`` and
``sub_batch_actions`` (docs/env.md, "GPU slots and sub-batches"). This experiment plays each policy as a core run
(:func:`clustergym.eval.experiments_sjfbsbf.core_episode`, the reference) and through the env's ``predict`` with
each set of columns (:data:`COLUMN_SETS`), on the ``sjf-bsbf`` experiment's workloads: with both column sets the
env must give the core run's numbers; each run without one shows what that choice is worth to the policy.
Registered in :mod:`clustergym.eval.experiments`.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from clustergym.gym_env import ClusterEnv

from .experiment_kit import experiment, paired_rel, pct_ci
from .experiments_sjfbsbf import RUNNER, _paired_figure, _scenario, _setting, _size, cluster, workload
from .rollout import predictor, rollout
from .specs import core_runs

ENV_RUNNER = "clustergym.eval.experiments_sjfbsbf_env:env_episode"
SHARING = ("sjf-bsbf", "sjf-ffs")
# the env's optional columns per variant (9 sub-batch columns: 1 ... 256 sub-batches, past every batch size
# the Pollux applications use)
COLUMN_SETS: dict[str, dict] = {"both": {"gpu_actions": True, "sub_batch_actions": 9},
                                "gpu-slots": {"gpu_actions": True}, "sub-batches": {"sub_batch_actions": 9},
                                "neither": {}}


def env_label(policy: str, columns: str) -> str:
    return f"{policy}/env-{columns}"


def _parse(label: str) -> tuple[str, dict]:
    policy, _, columns = label.partition("/env-")
    if columns not in COLUMN_SETS:
        raise ValueError(f"{label!r} is not <policy>/env-<columns> with columns one of {sorted(COLUMN_SETS)}")
    return policy, COLUMN_SETS[columns]


def env_episode(label: str, args: dict, seed: int) -> tuple[dict, pd.DataFrame]:
    """The runner of this module's env runs: the policy of ``label`` (:func:`env_label`) through the env's
    ``predict`` with that label's columns, on the same jobs, cluster and simulator settings as
    :func:`~clustergym.eval.experiments_sjfbsbf.core_episode`; the window holds every job, so the whole queue is
    always a candidate. Returns (summary with the settings, the agent steps and the wall time; per-job records)."""
    policy, columns = _parse(label)
    sim_kw = {"decide_on": "queue", "usage_change_mean_s": 0.0, **args.get("sim", {})}
    env = ClusterEnv(cluster_spec=cluster(args["nic_gbps"]), job_specs=workload(args["n_jobs"], seed), sim=sim_kw,
                     window_size=max(64, args["n_jobs"]), invalid_action="raise", max_steps=None, **columns)
    played = rollout(env, predictor(policy, env), seed)
    keep = ("agent_steps", "wall_s", *(k for k, v in env.sim.summary().items() if isinstance(v, (int, float))))
    rec = {"n_jobs": args["n_jobs"], "nic_gbps": args["nic_gbps"], **args.get("sim", {}),
           **{k: played[k] for k in keep}}
    return rec, pd.DataFrame(env.sim.job_records())


@experiment
def sjf_bsbf_env(out: Path, quick: bool = False, seeds=None) -> dict:
    """SJF-BSBF and SJF-FFS through the env, with and without its GPU-slot and sub-batch columns.

    Each env run against the same policy's core run, paired per seed."""
    n_jobs, seeds = _size(quick, seeds)
    scen = [_scenario(f"pollux{n_jobs}", n_jobs)]
    labels = tuple(env_label(p, c) for p in SHARING for c in COLUMN_SETS)
    runs = core_runs(SHARING, scen, seeds, RUNNER) + core_runs(labels, scen, seeds, ENV_RUNNER)
    notes = (_setting(n_jobs, seeds) + " 10 Gbit/s NICs. `<policy>` is the core run; `<policy>/env-<columns>` the "
             "same policy through the env's `predict` with both optional column sets (`gpu_actions` and 9 "
             "`sub_batch_actions`), GPU slots only, sub-batches only, or neither (docs/env.md, \"GPU slots and "
             "sub-batches\"); the window holds every job.")
    return {"runs": runs, "reference": "sjf-bsbf", "title": "sjf-bsbf-env: the sharing policies through the env",
            "notes": notes, "claims": _claims, "figures": _paired_figure(_pairs)}


def _pairs(ep: pd.DataFrame) -> list[tuple[str, str, str]]:
    have = set(ep["policy"])
    return [(env_label(p, c), p, sc) for sc in dict.fromkeys(ep["scenario"]) for p in SHARING for c in COLUMN_SETS
            if env_label(p, c) in have and p in have]


def _claims(agg) -> list[dict]:
    ep = agg["episodes"]
    rows = []
    for label, ref, sc in _pairs(ep):
        m, lo, hi, n = paired_rel(ep, label, ref, "mean_jct", where=lambda d, s=sc: d["scenario"] == s)
        if label.endswith("/env-both"):
            paper = "identical (the env expresses every command)"
            agrees = "yes (identical on every seed)" if _identical(ep, label, ref, sc) else "no"
        else:
            paper, agrees = "–", "n/a (isolates a cause)"
        rows.append({"claim": f"{sc}: mean JCT of {label} vs the core run", "paper": paper,
                     "measured": pct_ci(m, lo, hi, n), "agrees": agrees})
    return rows


def _identical(ep: pd.DataFrame, label: str, ref: str, scenario: str) -> bool:
    """Whether ``label`` and ``ref`` have the same mean JCT and finished jobs on every seed of ``scenario``."""
    d = ep[ep["scenario"] == scenario]
    a, b = (d[d["policy"] == p].set_index("seed")[["mean_jct", "finished"]].sort_index() for p in (label, ref))
    return len(a) > 0 and a.index.equals(b.index) and bool((a == b).all().all())
