"""The warm start's teacher: a named heuristic, or ``best``, the best of the candidates on training windows.

Why. Behaviour cloning copies its teacher, so the clone starts where the teacher is; on the contended default
``clustergym/GPUCluster-v1`` MLFS-H+C's mean JCT is about half of MLF-H's (docs/training.md), so cloning
MLF-H starts PPO far behind the best heuristic.

How ``expert: best`` picks. Every candidate of ``expert_candidates`` plays ``expert_episodes`` training windows
(``split="train"``, the training step cap, seeds of their own: ``seed x 100,003 + 300,007 + i``, none of the
warm start's or PPO's), and the one with the best :func:`selection_score` (fewest unfinished jobs, then the
best mean ``select_metric``, the checkpoint selection's rule) is cloned. Held-out windows are never used: the
validation and final-table windows stay unseen by the warm start. Ties keep the earlier candidate.

Only a heuristic that acts through the env's actions alone can be cloned: MLFS-H+C attaches the MLF-C
controller to the simulator, which changes stopping rules between the agent's actions, so its clone would
learn the placements without the load control that makes MLFS-H+C fast. ``mlfs-h+c-act`` is MLFS-H+C with
MLF-C's changes as stop-option actions (``clustergym.baselines.mlfs.MLFSHCActions``), the form an agent can
copy; ``clustergym.agents.bc.imitation_error`` refuses a teacher with controllers by name.

With ``search_proposer`` the warm start's labels (its rollouts' actions and DAgger's) are decision-time search's
(:func:`clustergym.agents.search.search_teacher`): the chosen teacher, checked by a lookahead of
``search_horizon_s`` in copies of the env wherever the proposer heuristic disagrees with it.
"""
from __future__ import annotations

import time
from functools import partial
from typing import Any

from .callbacks import progress, say
from .config import TrainConfig

BEST = "best"


def teacher_seeds(cfg: TrainConfig) -> list[int]:
    """The training windows the candidates are compared on (disjoint from the warm start's and DAgger's)."""
    return [cfg.seed * 100_003 + 300_007 + i for i in range(cfg.expert_episodes)]


def choose_teacher(cfg: TrainConfig) -> tuple[str, dict[str, Any]]:
    """(the teacher's name, the comparison: per candidate its means on the training windows). A named
    ``expert`` is taken as it is (comparison empty)."""
    if cfg.expert != BEST:
        return cfg.expert, {}
    from clustergym.eval.rollout import evaluate
    from clustergym.eval.stats import episode_means, selection_score

    seeds, m = teacher_seeds(cfg), cfg.select_metric
    say(f"Teacher: comparing {', '.join(cfg.expert_candidates)} on {len(seeds)} training windows by {m}")
    table: dict[str, Any] = {}
    best, best_score = None, None
    for name in cfg.expert_candidates:
        t0 = time.time()
        recs = evaluate(name, cfg.scenario, cfg.train_env_config(), progress(seeds, name, cfg.progress_bar))
        means = episode_means(recs, m)
        score = selection_score(means, m)
        table[name] = {"unfinished": means.get("unfinished", 0.0), m: means.get(m, float("nan")),
                       "mean_jct": means.get("mean_jct", float("nan")), "seconds": time.time() - t0}
        say(f"  {name}: {m} {table[name][m]:.0f}, unfinished {table[name]['unfinished']:.1f}")
        if best_score is None or score < best_score:
            best, best_score = name, score
    assert best is not None
    say(f"  teacher: {best}")
    return best, {"seeds": seeds, "metric": m, "candidates": table, "chosen": best}


def search_settings(cfg: TrainConfig) -> dict | None:
    """The decision-time search that labels the warm start's states, if any (``bc.json``)."""
    if cfg.search_proposer is None:
        return None
    return {"proposer": cfg.search_proposer, "horizon_s": cfg.search_horizon_s, "proposal": cfg.search_proposal,
            "terminal": cfg.search_terminal, "foresight": cfg.search_foresight}


def searched(cfg: TrainConfig) -> str:
    """How the run's log names the search after the teacher ("" without one)."""
    s = search_settings(cfg)
    return "" if s is None else f" checked by search ({s['proposer']} proposing, {s['horizon_s']:g} s lookahead)"


def labelling_teacher(cfg: TrainConfig, expert: str) -> str | partial:
    """What labels the warm start's states: heuristic ``expert``, or the search with it as base."""
    if cfg.search_proposer is None:
        return expert
    from clustergym.agents.search import search_teacher

    return partial(search_teacher, base=expert, proposer=cfg.search_proposer, horizon_s=cfg.search_horizon_s,
                   proposal=cfg.search_proposal, terminal=cfg.search_terminal, foresight=cfg.search_foresight)
