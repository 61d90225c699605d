"""The share of each objective in the return (beta_i x the episode sum of g_i, MLFS Eq. 7) under the env's
default weights, and how closely the return tracks mean JCT, per policy on training windows.

    .venv/bin/python eval/objective_shares.py [--policies mlfs-h+c-act mlf-h fifo] [--seeds 300007 ...]

For every episode prints beta_i G_i per objective; then the share of the mean |beta_i G_i| of each objective,
and the correlation over all episodes between the return and -mean JCT, with the env's weights and with the
JCT objective alone (training's default weights, ``clustergym.reward.single_objective_weights("jct")``).
"""
from __future__ import annotations

import argparse

import numpy as np


def main(argv: list[str] | None = None) -> None:
    from clustergym.config import OBJECTIVE_NAMES, EnvConfig
    from clustergym.eval.rollout import evaluate
    from clustergym.reward import single_objective_weights

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenario", default="clustergym/GPUCluster-v1")
    p.add_argument("--policies", nargs="+", default=["mlfs-h+c-act", "mlf-h", "fifo"])
    p.add_argument("--seeds", nargs="+", type=int, default=list(range(300007, 300012)))
    p.add_argument("--split", default="train")
    a = p.parse_args(argv)
    beta = np.asarray(EnvConfig().reward_weights)
    sums, jct = [], []
    for policy in a.policies:
        for r in evaluate(policy, a.scenario, {"split": a.split}, a.seeds):
            g = np.array([r[f"objective_{n}"] for n in OBJECTIVE_NAMES])
            sums.append(g)
            t = beta * g
            jct.append(r["mean_jct"] / 3600)
            print(f"{policy} {r['seed']}: mean JCT {jct[-1]:.2f} h, "
                  + ", ".join(f"{n} {v:+.3f}" for n, v in zip(OBJECTIVE_NAMES, t)), flush=True)
    g, jct = np.array(sums), np.array(jct)
    c = beta * g
    share = np.abs(c).mean(0) / np.abs(c).mean(0).sum()
    print("share of mean |beta_i G_i|: " + ", ".join(f"{n} {s:.1%}" for n, s in zip(OBJECTIVE_NAMES, share)))
    jct_only = np.array(single_objective_weights("jct"))
    for label, w in (("env weights", beta), ("JCT only", jct_only)):
        ret = (g * w).sum(1)
        print(f"{label}: corr(return, -mean JCT) = {np.corrcoef(ret, -jct)[0, 1]:.3f} over {len(jct)} episodes")


if __name__ == "__main__":
    main()
