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
"""
from __future__ import annotations

from pathlib import Path

from .experiment_kit import CONTENDED, contended_runs, experiment, paired_rel, pct_ci

FIXED_STOP = {"mapping": {"stop_changeable_probability": 0.0}}
ALL_OPTSTOP = {"mapping": {"stop_mix": {"opt-stop": 1.0}}}
DEFAULT_POLICIES = ("fifo", "mlf-h", "mlfs-h+c", "graphene", "graphene-pack=graphene:placement=pack",
                    "graphene-nolong=graphene:long_s=.inf", "fair", "fair-pack=fair:placement=pack")
STOP_POLICIES = ("fifo", "mlf-h", "mlfs-h+c")


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
    import pandas as pd

    ep = agg["episodes"]
    labels = list(dict.fromkeys(ep["scenario"]))
    base, fixed, optall = (next((s for s in labels if s.startswith(p + "@")), p)
                           for p in ("contended", "fixed-stop", "all-optstop"))
    rows = []

    def add(question: str, policy: str, ref: str, ps: str, rs: str, reading: str) -> None:
        y = ep[(ep["policy"] == policy) & (ep["scenario"] == ps)].assign(policy="y", scenario="pair")
        z = ep[(ep["policy"] == ref) & (ep["scenario"] == rs)].assign(policy="z", scenario="pair")
        if len(y) and len(z):
            m, lo, hi, n = paired_rel(pd.concat([y, z]), "y", "z", "mean_jct")
            rows.append({"claim": question, "paper": reading,
                         "measured": f"mean JCT of {policy} ({ps}) vs {ref} ({rs}): {pct_ci(m, lo, hi, n)}",
                         "agrees": "n/a (isolation)"})

    add("MLF-H vs FIFO, MLF-H on OptStop (default)", "mlf-h", "fifo", base, base, "MLFS's setting")
    add("MLF-H vs FIFO, nobody changes stopping", "mlf-h", "fifo", fixed, base, "order + placement + migration")
    add("MLF-H vs FIFO, everyone on OptStop", "mlf-h", "fifo", optall, optall, "order + placement + migration")
    add("MLF-H with OptStop vs without", "mlf-h", "mlf-h", base, fixed, "OptStop's part of MLF-H's lead")
    add("MLFS-H+C vs MLF-H, nobody changes stopping", "mlfs-h+c", "mlf-h", fixed, fixed, "MLF-C without stopping")
    add("MLFS-H+C vs MLF-H (default)", "mlfs-h+c", "mlf-h", base, base, "MLF-C's effect")
    for pol, var, what in (("graphene", "graphene-pack", "Tetris alignment -> best fit"),
                           ("graphene", "graphene-nolong", "long jobs first -> off"),
                           ("fair", "fair-pack", "worst-fit spreading -> best fit")):
        add(f"{pol} vs FIFO", pol, "fifo", base, base, "the deficit to explain")
        add(f"{var} vs FIFO", var, "fifo", base, base, f"{what}, order kept")
    return rows
