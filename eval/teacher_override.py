"""Which of an agent's disagreements with a heuristic cost it: the agent plays held-out windows, the heuristic
(its teacher) is asked at every decision too, and where the two disagree by one kind the teacher's action is
played instead.

    .venv/bin/python eval/teacher_override.py --agent runs/<run>[/checkpoints/step-000000000.zip] \\
        [--teacher mlf-h-req] [--set load=6.0] [--seeds 10000 10019] [--fix none end row destination all] \\
        [--decode joint] [--out DIR]

- **Kinds** (:func:`clustergym.agents.bc.disagreement_kinds`, the rule behind the warm start's held-out
  disagreement split): ``end`` (one of the two ends the round and the other does not), ``row`` (both act, on
  different rows), ``destination`` (same row, another column: server, "back to the queue" or a stop option).
- **Variants** (``--fix``): ``none`` plays the agent as it is; ``end``, ``row`` and ``destination`` play the
  teacher's action at that kind of disagreement and the agent's everywhere else; ``all`` plays the teacher
  throughout, which checks the override: it must give the teacher's own records.
- **The teacher follows the played action** (``record_taken``, as in DAgger): its next choice in the round
  builds on what was played, not on what it would have played.

Writes ``episodes.csv`` (one record per variant and window, with ``n_<kind>`` disagreements counted,
``agent_ends`` and ``teacher_ends`` splitting the ``end`` ones by which side ended the round, and
``overrides``; rewritten after each variant, so an interrupted run keeps what it played), ``paired.csv``
(``none`` − each variant on the same windows: what that kind of disagreement costs the agent, positive where
overriding it lowers the JCT) and ``override.md``; prints the tables.
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from clustergym.agents.bc import DISAGREEMENTS, disagreement_kinds
from clustergym.agents.decode import DECODINGS, with_decode
from clustergym.eval.experiment_kit import CONTENDED
from clustergym.eval.files import atomic_write_csv, write_paired_report
from clustergym.eval.rollout import EVAL_DEFAULTS, Predictor, predictor, rollout
from clustergym.eval.specs import deep_merge, parse_kv
from clustergym.eval.stats import paired_table, to_markdown
from clustergym.scenarios import make_env

VARIANTS: tuple[str, ...] = ("none", "end", "row", "destination", "all")
METRICS = ("mean_jct_censored", "deadline_ratio", "unfinished", "mean_waiting", "agent_steps")
# the per-episode counts of overriding(): disagreements by kind, which side ended the round, overrides played
_COUNTED = tuple(f"n_{k}" for k in DISAGREEMENTS) + ("agent_ends", "teacher_ends", "overrides")


def overriding(agent: Predictor, teacher: Any, fix: str, counts: Counter, end: int, columns: int) -> Predictor:
    """``agent`` with ``teacher``'s action played at disagreements of kind ``fix`` (every state for ``all``,
    none for ``none``), on an env whose actions are ``row * columns + column`` and ``end`` ("end round");
    ``counts`` gathers the disagreements by kind, which side ended the round, and the overrides."""
    if fix not in VARIANTS:
        raise ValueError(f"unknown variant {fix!r}; choose from {', '.join(VARIANTS)}")

    def act(obs, mask: np.ndarray) -> int:
        t = int(np.asarray(teacher.predict(obs, action_masks=mask)[0]).reshape(-1)[0])
        p = agent.act(obs, mask)
        kind = DISAGREEMENTS[int(disagreement_kinds(p, t, end, columns))]
        counts[f"n_{kind}"] += 1
        if kind == "end":
            counts["agent_ends" if p == end else "teacher_ends"] += 1
        played = t if fix == "all" or fix == kind else p
        counts["overrides"] += played != p
        teacher.record_taken(played)
        return played

    return Predictor(f"{agent.name}+{fix}", act)


def play(agent, teacher: str, fix: str, seeds: Sequence[int], config: dict) -> list[dict]:
    """Records of ``agent`` (an SB3 model or a decoded one) overridden by ``teacher`` where ``fix`` says, on the
    windows ``seeds`` of :data:`CONTENDED` with EnvConfig ``config``."""
    from clustergym import baselines

    env = make_env(CONTENDED, {**EVAL_DEFAULTS, **config})
    try:
        pred, t = predictor(agent, env, "agent"), baselines.make(teacher, env=env)
        end, columns = int(env.unwrapped.end_round_action), int(env.unwrapped.window.C)
        recs = []
        for seed in seeds:
            counts: Counter = Counter()
            rec = rollout(env, overriding(pred, t, fix, counts, end, columns), seed)
            recs.append({**rec, "variant": fix, **{k: counts.get(k, 0) for k in _COUNTED}})
        return recs
    finally:
        env.close()


def tables(episodes: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """(paired rows, Markdown): per variant the means of :data:`METRICS` and the counts per window; every
    variant paired with ``none`` (the agent as it is) on the same windows, as ``none`` − variant."""
    means = episodes.groupby("variant", sort=False)[list(METRICS) + list(_COUNTED)].mean().round(3)
    by_variant = {v: g.to_dict("records") for v, g in episodes.groupby("variant", sort=False)}
    md = ["Means per window:", "", to_markdown(means.reset_index()), ""]
    if "none" not in by_variant:
        return pd.DataFrame(), "\n".join(md)
    ordered = {"none": by_variant["none"], **{k: v for k, v in by_variant.items() if k != "none"}}
    rows, paired_md = paired_table(ordered, "none", ("mean_jct_censored", "deadline_ratio", "unfinished"))
    md += ["Paired on the same windows, `none` (the agent as it is) − variant: what each kind of disagreement "
           "costs the agent (JCT: positive where overriding it helps):", "", paired_md, ""]
    return pd.DataFrame(rows), "\n".join(md)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--agent", required=True, help="a run folder (its best_model.zip) or an SB3 zip")
    ap.add_argument("--teacher", default="mlf-h-req", help="the heuristic asked at every decision")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="EnvConfig overrides of the windows, e.g. load=6.0 (eval/compare.py's syntax)")
    ap.add_argument("--seeds", type=int, nargs=2, default=(10_000, 10_019), metavar=("FIRST", "LAST"),
                    help="held-out windows reset(seed) FIRST..LAST (default: training's final-table windows)")
    ap.add_argument("--fix", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--max-steps", type=int, default=10_000, help="agent-step cap per episode (training's)")
    ap.add_argument("--decode", choices=DECODINGS, default="joint",
                    help="how the agent's deterministic action is read (clustergym.agents.decode; default joint)")
    ap.add_argument("--out", type=Path, default=Path("runs/teacher-override"))
    a = ap.parse_args(argv)
    import torch

    from clustergym.agents.io import load_agent

    torch.set_num_threads(1)  # the small network runs fastest on one thread
    config: dict = {"max_steps": a.max_steps}
    for kv in a.set:
        config = deep_merge(config, parse_kv(kv))
    columns_env = make_env(CONTENDED, {**EVAL_DEFAULTS, **config})  # the decodings' destination columns
    agent = with_decode(load_agent(a.agent), a.decode, columns_env)
    columns_env.close()
    seeds = range(a.seeds[0], a.seeds[1] + 1)
    a.out.mkdir(parents=True, exist_ok=True)
    recs: list[dict] = []
    for fix in a.fix:
        recs += play(agent, a.teacher, fix, seeds, config)
        atomic_write_csv(pd.DataFrame(recs), a.out / "episodes.csv")  # what is played so far is kept
        print(f"{fix}: {len(seeds)} windows", flush=True)
    paired, md = tables(pd.DataFrame(recs))
    head = (f"# {a.agent} ({a.decode} decoding), overridden by {a.teacher} on {CONTENDED} {config}\n\n"
            f"Held-out windows reset(seed) {a.seeds[0]}..{a.seeds[1]}.\n\n")
    write_paired_report(a.out, paired, "override.md", head + md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
