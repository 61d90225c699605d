"""How deep the queue gets, and how often the env's window has to leave waiting jobs out (docs/env.md,
"Choosing W").

    .venv/bin/python eval/queue_depth.py [--policy fifo] [--load 1.5] [--seeds 1000 1001 1002]
        [--window-jobs 120] [--env clustergym/GPUCluster-v1]

Plays one episode per seed with a heuristic through the env (``workload="generator"`` at the given offered
load) and, at the first step of every decision round, counts the jobs with a waiting task, those with a ready
task that fits some server now (the window's candidates), the fully placed running jobs, and whether the
window left a candidate job out (its waiting rows fewer than the candidates). Prints the mean, the 50th,
90th and 99th percentiles, the maximum and the share of rounds above 16, 32, 48 and 64.
"""
from __future__ import annotations

import argparse

import numpy as np

from clustergym import baselines
from clustergym.scenarios import make_env


def depths(env_id: str, policy: str, load: float, seeds: list[int], window_jobs: int) -> dict[str, np.ndarray]:
    # load=None: the generator's load is the offered load (a scenario's trace-window load does not apply)
    env = make_env(env_id, {"workload": "generator", "load": None, "window_jobs": window_jobs,
                            "generator": {"load": load}})
    u = env.unwrapped
    out: dict[str, list] = {"waiting jobs": [], "candidate jobs": [], "running jobs": [], "cut": []}
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        agent = baselines.make(policy, env=env)
        done = "summary" in info
        while not done:
            if u._round_actions == 0:  # the round's first step: the state the round starts from
                sim = u.sim
                cand = {t.job.jid for t in sim.queue.values() if t.is_ready() and sim.feasible_servers(t).any()}
                shown = {t.job.jid for t, k in zip(u.window.tasks, u.window.kinds) if k == "place"}
                out["waiting jobs"].append(len({t.job.jid for t in sim.queue.values()}))
                out["candidate jobs"].append(len(cand))
                out["running jobs"].append(sum(j.fully_placed for j in sim.active_jobs.values()))
                out["cut"].append(len(shown) < len(cand))
            obs, _, term, trunc, _ = env.step(agent.predict(obs, action_masks=u.action_masks())[0])
            done = term or trunc
    env.close()
    return {k: np.asarray(v) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="clustergym/GPUCluster-v1")
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--load", type=float, default=1.5)
    ap.add_argument("--seeds", type=int, nargs="+", default=[1000, 1001, 1002])
    ap.add_argument("--window-jobs", type=int, default=120)
    a = ap.parse_args()
    d = depths(a.env, a.policy, a.load, a.seeds, a.window_jobs)
    print(f"{a.policy}, load {a.load}, seeds {a.seeds}: {len(d['cut'])} decision rounds; "
          f"window left a candidate job out in {d['cut'].mean():.1%} of them")
    for name in ("waiting jobs", "candidate jobs", "running jobs"):
        x = d[name]
        p50, p90, p99 = np.percentile(x, [50, 90, 99])
        above = "  ".join(f">{k}: {np.mean(x > k):.1%}" for k in (16, 32, 48, 64))
        print(f"  {name:15s} mean {x.mean():5.1f}  p50 {p50:3.0f}  p90 {p90:3.0f}  p99 {p99:3.0f}  "
              f"max {x.max():3d}  {above}")


if __name__ == "__main__":
    main()
