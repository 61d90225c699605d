"""``mlfs-causes``: experiments that isolate the causes of the differences ``mlfs-overall`` measures.

Each question is answered by changing one thing and keeping everything else (windows, seeds, mapping draws):

- **How much of MLF-H's lead over FIFO is OptStop?** MLF-H runs changeable jobs with OptStop (MLFS §4), FIFO
  the users' iterations. ``fixed-stop`` makes no job changeable (``mapping.stop_changeable_probability=0``):
  MLF-H then differs from FIFO only in order, placement and migration. ``all-optstop`` gives every job
  OptStop (``mapping.stop_mix={"opt-stop": 1}``) whatever the scheduler. The mapping makes every draw for every
  job, so the three settings have the same jobs, arrivals and curves.
- **Is MLF-C's effect all in stopping?** Under ``fixed-stop`` MLF-C cannot move a job, so ``mlfs-h+c`` must
  equal ``mlf-h`` there.
- **Why do Graphene and fair trail FIFO?** Each differs from FIFO in its order and in its placement
  (Graphene: Tetris alignment; fair: Borg's worst-fit spreading). ``placement=pack`` gives each the shared best
  fit FIFO uses and keeps its order; Graphene's ``long_s=.inf`` drops its long-jobs-first rule and keeps its
  placement.

``contention-room``: how much of a policy's mean JCT is contention at all. The same windows are played as they
are (offered load 1.5) and with their arrivals spread to offered load 0.02 with no time limit, where every job
runs essentially alone: same jobs, GPU counts, curves and stopping points. The difference bounds what any
order or queueing decision could still gain over that policy's own placement and stopping rule.

``room-by-load``: the same at offered loads 1.5, 3 and 6 for the two best orders with the stopping lever
(``mlf-h-req``, ``sjf-req``): the load at which the best heuristic leaves room for a better scheduler.

``stop-lever``: the heuristics with the lever the agent and ``mlf-h-req`` have. Each runs as published (its
users' iterations; MLF-H: OptStop) and with ``stop_option=requirement`` (every changeable job stopped at its
accuracy requirement): what the lever is worth to each, and which order and placement is best once every
policy has it.
"""
from __future__ import annotations

import math
from pathlib import Path

from .experiment_kit import CONTENDED, contended_runs, experiment, paired_across, paired_rel, pct_ci

FIXED_STOP = {"mapping": {"stop_changeable_probability": 0.0}}
ALL_OPTSTOP = {"mapping": {"stop_mix": {"opt-stop": 1.0}}}
DEFAULT_POLICIES = ("fifo", "mlf-h", "mlfs-h+c", "graphene", "graphene-pack=graphene:placement=pack",
                    "graphene-nolong=graphene:long_s=.inf", "fair", "fair-pack=fair:placement=pack")
STOP_POLICIES = ("fifo", "mlf-h", "mlfs-h+c")
# policies whose stopping point does not depend on load (MLF-C's does: alone, nothing is overloaded, so
# mlfs-h+c runs OptStop where contended it stops at the requirement; its "alone" is no bound)
ROOM_POLICIES = ("mlf-h-req", "mlf-h")
ROOM_LOAD_POLICIES = ("mlf-h-req", "sjf-req=sjf:stop_option=requirement")  # the two best orders (stop-lever)
ROOM_LOADS = (1.5, 3.0, 6.0)  # the default's load, and two and four times its arrival rate
ALONE_LOAD = 0.02  # offered load at which the window's jobs hardly overlap (episode means then differ < 1 %)
FINAL_TABLE_SEEDS = tuple(range(10_000, 10_020))  # train/config.py's eval_seed, final_eval_episodes
JCT = "mean_jct_censored"  # an unfinished job counts to the episode's end, as in train/ppo.py's tables
LEVER_POLICIES = ("fifo", "sjf", "edf", "tiresias", "graphene", "gavel", "mlf-h")


@experiment
def mlfs_causes(out: Path, quick: bool = False, seeds=None) -> dict:
    """Isolate the causes of mlfs-overall's differences: OptStop's share of MLF-H's lead, MLF-C without
    stopping, and Graphene's and fair's order against their placement."""
    loads = (1.5,)
    seeds = seeds or ([0] if quick else [0, 1, 2, 3, 4])
    runs = (contended_runs(DEFAULT_POLICIES, loads, seeds)
            + contended_runs(STOP_POLICIES[1:], loads, seeds, label="fixed-stop", **FIXED_STOP)
            + contended_runs(STOP_POLICIES, loads, seeds, label="all-optstop", **ALL_OPTSTOP))
    notes = (f"Held-out windows of `{CONTENDED}` at offered load 1.5, seeds {seeds}. Settings: default (users "
             f"submit run-all, changeable; MLF-H and MLFS-H+C apply OptStop); `fixed-stop` (no job changeable: "
             f"every policy runs the users' iterations); `all-optstop` (every job on OptStop). Variants: "
             f"`graphene-pack` and `fair-pack` keep the order and use the shared best fit; `graphene-nolong` "
             f"drops the long-jobs-first rule.")
    return {"runs": runs, "reference": "fifo", "title": "mlfs-causes: what MLF-H's lead and Graphene's and "
            "fair's deficits come from", "notes": notes, "claims": _claims_causes}


def _claims_causes(agg) -> list[dict]:
    ep = agg["episodes"]
    labels = list(dict.fromkeys(ep["scenario"]))
    base, fixed, optall = (next((s for s in labels if s.startswith(p + "@")), p)
                           for p in ("contended", "fixed-stop", "all-optstop"))
    rows = []

    def add(question: str, policy: str, ref: str, ps: str, rs: str, reading: str) -> None:
        pair = paired_across(ep, policy, ps, ref, rs, "mean_jct")
        if pair is not None:
            rows.append({"claim": question, "paper": reading,
                         "measured": f"mean JCT of {policy} ({ps}) vs {ref} ({rs}): {pct_ci(*pair)}",
                         "agrees": "n/a (isolation)"})

    add("MLF-H vs FIFO, MLF-H on OptStop (default)", "mlf-h", "fifo", base, base, "MLFS's setting")
    add("MLF-H vs FIFO, nobody changes stopping", "mlf-h", "fifo", fixed, base, "order + placement + migration")
    add("MLF-H vs FIFO, everyone on OptStop", "mlf-h", "fifo", optall, optall, "order + placement + migration")
    add("MLF-H with OptStop vs without", "mlf-h", "mlf-h", base, fixed, "OptStop's part of MLF-H's lead")
    add("MLFS-H+C vs MLF-H, nobody changes stopping", "mlfs-h+c", "mlf-h", fixed, fixed, "MLF-C without stopping")
    add("MLFS-H+C vs MLF-H (default)", "mlfs-h+c", "mlf-h", base, base, "MLF-C's effect")
    for pol in ("graphene", "fair"):
        add(f"{pol} vs FIFO", pol, "fifo", base, base, "the deficit to explain")
    for var, what in (("graphene-pack", "Graphene with best fit instead of Tetris alignment, order kept"),
                      ("graphene-nolong", "Graphene without long-jobs-first, Tetris placement kept"),
                      ("fair-pack", "fair with best fit instead of worst-fit spreading, order kept")):
        add(f"{var} vs FIFO", var, "fifo", base, base, what)
    return rows


@experiment
def contention_room(out: Path, quick: bool = False, seeds=None) -> dict:
    """Each policy's mean JCT on the contended windows against the same jobs run one at a time (arrivals spread
    to offered load 0.02, no time limit): the share of its JCT that contention costs."""
    seeds = seeds or ([FINAL_TABLE_SEEDS[0]] if quick else list(FINAL_TABLE_SEEDS))
    runs = (contended_runs(ROOM_POLICIES, (1.5,), seeds)
            + contended_runs(ROOM_POLICIES, (ALONE_LOAD,), seeds, label="alone", max_sim_time=math.inf))
    notes = (f"Held-out windows of `{CONTENDED}`, seeds {seeds[0]}-{seeds[-1]} (the final table of "
             f"`train/ppo.py`). `contended@x1.5`: the windows as trained on; `alone@x{ALONE_LOAD}`: the same "
             f"windows with inter-arrival times stretched to offered load {ALONE_LOAD} and `max_sim_time=inf`, so "
             f"every job finishes and hardly meets another. Both policies stop a job at a point of its curve "
             f"(its requirement, OptStop), not of the load, so every job runs the same iterations in both.")
    return {"runs": runs, "reference": "mlf-h-req", "title": "contention-room: what contention costs each "
            "policy", "notes": notes, "claims": _claims_room}


@experiment
def room_by_load(out: Path, quick: bool = False, seeds=None) -> dict:
    """contention-room at several offered loads: how the room the best heuristics leave grows with load."""
    seeds = seeds or ([FINAL_TABLE_SEEDS[0]] if quick else list(FINAL_TABLE_SEEDS))
    runs = (contended_runs(ROOM_LOAD_POLICIES, ROOM_LOADS, seeds)
            + contended_runs(ROOM_LOAD_POLICIES, (ALONE_LOAD,), seeds, label="alone", max_sim_time=math.inf))
    notes = (f"Held-out windows of `{CONTENDED}`, seeds {seeds[0]}-{seeds[-1]}, with arrivals compressed to "
             f"offered loads {', '.join(f'{x:g}' for x in ROOM_LOADS)} and spread to {ALONE_LOAD} "
             f"(`max_sim_time=inf`, every job alone). Both policies stop every changeable job at its "
             f"requirement, so each job runs the same iterations at every load.")
    return {"runs": runs, "reference": "mlf-h-req", "title": "room-by-load: what contention costs the best "
            "heuristics at each offered load", "notes": notes, "claims": _claims_room}


def _claims_room(agg) -> list[dict]:
    """Per policy and contended load: the same windows alone against contended, paired by seed."""
    ep = agg["episodes"]
    labels = list(dict.fromkeys(ep["scenario"]))
    busy_labels = [s for s in labels if s.startswith("contended@")]
    alone = next((s for s in labels if s.startswith("alone@")), None)
    rows = []
    for policy in dict.fromkeys(ep["policy"]):
        for busy in busy_labels:
            pair = paired_across(ep, policy, alone, policy, busy, JCT)
            if pair is None:
                continue
            y, z = (ep[(ep["policy"] == policy) & (ep["scenario"] == sc)] for sc in (alone, busy))
            unfinished = int(y[["unfinished", "not_submitted"]].to_numpy().sum())
            versus = "contended" if len(busy_labels) == 1 else busy
            rows.append({"claim": f"{policy}: jobs alone vs {versus}", "paper": "the room left by contention",
                         "measured": f"mean JCT {pct_ci(*pair)}; {z[JCT].mean():,.0f} s contended, "
                                     f"{y[JCT].mean():,.0f} s alone ({unfinished} jobs unfinished alone)",
                         "agrees": "n/a (isolation)"})
    return rows


@experiment
def stop_lever(out: Path, quick: bool = False, seeds=None) -> dict:
    """Every order-and-placement heuristic with and without the stopping lever (stop_option=requirement)."""
    seeds = seeds or ([FINAL_TABLE_SEEDS[0]] if quick else list(FINAL_TABLE_SEEDS))
    policies = [*LEVER_POLICIES, *(f"{p}-req={p}:stop_option=requirement" for p in LEVER_POLICIES)]
    notes = (f"Held-out windows of `{CONTENDED}` at offered load 1.5, seeds {seeds[0]}-{seeds[-1]} (the final "
             f"table of `train/ppo.py`). `<name>-req` is the heuristic with `stop_option=requirement` "
             f"(`mlf-h-req` is then `mlf-h:stop_option=requirement`, the registered `mlf-h-req`'s rule).")
    return {"runs": contended_runs(policies, (1.5,), seeds), "reference": "mlf-h-req",
            "title": "stop-lever: every heuristic with the stopping lever", "notes": notes,
            "claims": _claims_lever}


def _claims_lever(agg) -> list[dict]:
    ep = agg["episodes"]
    present = set(ep["policy"])
    rows = []
    for p in LEVER_POLICIES:
        req = f"{p}-req"
        for y, z, what in ((req, p, "the lever's effect"), (req, "mlf-h-req", "against mlf-h-req, same lever")):
            if y in present and z in present and y != z:
                m, lo, hi, n = paired_rel(ep, y, z, JCT)
                rows.append({"claim": f"{y} vs {z}", "paper": what, "measured": f"mean JCT {pct_ci(m, lo, hi, n)}",
                             "agrees": "n/a (isolation)"})
    return rows
