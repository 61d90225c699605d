"""Which levers a trained agent's lead comes from: the same agent and heuristics on the same held-out windows
with and without changeable stopping rules, and what the agent's actions do.

    .venv/bin/python eval/agent_levers.py --agent runs/<run> [--seeds 10000 10019] [--decode row-kind] [--out DIR]

- **Settings.** ``default``: the scenario as trained (users submit run-all jobs the system may change; the
  agent and ``mlfs-h+c`` can set stop options). ``fixed-stop``: no job is changeable
  (``mapping.stop_changeable_probability=0``), so no policy can stop a job early; the mapping makes every draw
  for every job in both settings, so the windows, jobs, arrivals and curves are the same. What the agent keeps
  of its lead under ``fixed-stop`` comes from order, placement, migration and preemption alone.
- **Actions.** Every action of the agent (and of ``mlfs-h+c-act``, the teacher, which acts through the same
  actions) is counted by the command it stands for: place, migrate, requeue, preempt, each stop option, end
  round.

Writes ``episodes.csv`` (one record per policy, setting and window, with the action counts; rewritten after
each policy and setting, so an interrupted run keeps what it played), ``paired.csv``
(agent − other per setting, :func:`clustergym.eval.stats.paired_table`) and ``levers.md``; prints the tables.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Sequence

import pandas as pd

from clustergym.agents.decode import DECODINGS, with_decode
from clustergym.eval.experiment_kit import CONTENDED
from clustergym.eval.files import atomic_write_csv, write_paired_report
from clustergym.eval.rollout import EVAL_DEFAULTS, Predictor, predictor, rollout
from clustergym.eval.stats import paired_table, to_markdown
from clustergym.scenarios import make_env

SETTINGS: dict[str, dict] = {"default": {}, "fixed-stop": {"mapping": {"stop_changeable_probability": 0.0}}}
COUNTED = ("agent", "mlfs-h+c-act")  # the policies whose actions are counted (they act through the env alone)
METRICS = ("mean_jct_censored", "mean_accuracy", "deadline_ratio", "accuracy_ratio", "unfinished")


def counting(pred: Predictor, env, counts: Counter) -> Predictor:
    """``pred`` that also counts, in ``counts``, the command each of its actions stands for."""
    u = env.unwrapped

    def act(obs, mask):
        a = pred.act(obs, mask)
        cmd = u.window.command(a)
        kind = "end-round" if cmd is None else cmd.kind
        counts[f"{kind}:{cmd.option}" if kind == "stop-option" else kind] += 1
        return a

    return Predictor(pred.name, act)


def play(policy, name: str, setting: str, seeds: Sequence[int], max_steps: int,
         overrides: dict | None = None) -> list[dict]:
    """Records of ``policy`` on the held-out windows ``seeds`` under ``setting`` (and EnvConfig ``overrides``),
    with action counts for the policies of :data:`COUNTED`."""
    env = make_env(CONTENDED,
                   {**EVAL_DEFAULTS, **SETTINGS[setting], "max_steps": max_steps, **(overrides or {})})
    try:
        pred = predictor(policy, env, name)
        recs = []
        for seed in seeds:
            counts: Counter = Counter()
            rec = rollout(env, counting(pred, env, counts) if name in COUNTED else pred, seed)
            recs.append({**rec, "setting": setting, **{f"actions_{k}": v for k, v in counts.items()}})
        return recs
    finally:
        env.close()


def tables(episodes: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(paired rows, Markdown): per setting, the means of :data:`METRICS`, the agent's paired differences and
    the counted policies' actions per window."""
    md, paired_rows = [], []
    for setting, ep in episodes.groupby("setting", sort=False):
        by_policy = {p: g.to_dict("records") for p, g in ep.groupby("policy", sort=False)}
        rows, paired_md = paired_table(by_policy, "agent", ("mean_jct_censored", "mean_accuracy", "deadline_ratio"))
        paired_rows += [{"setting": setting, **r} for r in rows]
        means = ep.groupby("policy", sort=False)[list(METRICS)].mean().reset_index()
        acts = [c for c in ep.columns if c.startswith("actions_")]
        counted = ep[ep["policy"].isin(COUNTED)].groupby("policy", sort=False)[acts].mean().fillna(0).round(1)
        md += [f"## {setting}", "", to_markdown(means.round(4)), "", "Paired (agent − other):", "", paired_md, "",
               "Actions per window:", "", to_markdown(counted.reset_index()), ""]
    return pd.DataFrame(paired_rows), "\n".join(md)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", required=True, help="a run folder (its best_model.zip) or an SB3 zip")
    ap.add_argument("--seeds", type=int, nargs=2, default=(10_000, 10_019), metavar=("FIRST", "LAST"),
                    help="held-out windows reset(seed) FIRST..LAST (default: training's final-table windows)")
    ap.add_argument("--policies", nargs="+", default=["mlf-h", "mlfs-h+c", "mlfs-h+c-act"])
    ap.add_argument("--max-steps", type=int, default=10_000, help="agent-step cap per episode (training's)")
    ap.add_argument("--decode", choices=DECODINGS, default="joint",
                    help="how the agent's deterministic action is read (clustergym.agents.decode; default joint)")
    ap.add_argument("--out", type=Path, default=Path("runs/agent-levers"))
    a = ap.parse_args(argv)
    import torch

    from clustergym.agents.io import load_agent

    torch.set_num_threads(1)  # the small network runs fastest on one thread, and the machine's other core stays free
    agent = with_decode(load_agent(a.agent), a.decode)  # a run folder: its best_model.zip (agents.io)
    seeds = range(a.seeds[0], a.seeds[1] + 1)
    a.out.mkdir(parents=True, exist_ok=True)
    recs: list[dict] = []
    for setting in SETTINGS:
        for name in ["agent", *a.policies]:
            recs += play(agent if name == "agent" else name, name, setting, seeds, a.max_steps)
            atomic_write_csv(pd.DataFrame(recs), a.out / "episodes.csv")  # what is played so far is kept
            print(f"{setting} {name}: {len(seeds)} windows", flush=True)
    episodes = pd.DataFrame(recs)
    paired, md = tables(episodes)
    head = (f"# Levers of {a.agent} ({a.decode} decoding) on {CONTENDED}\n\n"
            f"Held-out windows reset(seed) {a.seeds[0]}..{a.seeds[1]}; settings: "
            f"{', '.join(f'{k} {v}' for k, v in SETTINGS.items())}.\n\n")
    write_paired_report(a.out, paired, "levers.md", head + md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
