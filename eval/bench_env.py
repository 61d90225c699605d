"""Environment throughput: steps/s with random valid actions (and a greedy place-first policy), one core.

    .venv/bin/python eval/bench_env.py [--steps 20000] [--ids clustergym/GPUCluster-v1 clustergym/MLFS2474-v1]
                                       [--breakdown] [--cpu-repeat R] [--out rows.json] [--no-progress]

Observation building, masks and the simulator are all included; the first reset (trace loading) is not timed.
``--breakdown`` runs each case a second time with timers around the parts of a step (CPU time of this
thread, so other processes on the machine do not inflate it): the simulator's commands and its advance to
the next decision point, the window/destination/mask build, and the observation arrays. ``--cpu-repeat R``
replays each case's first ``--steps`` steps R times and reports the min and median thread CPU per step: the
measure for an A/B of two versions of the code on a loaded machine.
"""
from __future__ import annotations

import argparse
import time
from collections import Counter
from statistics import median
from contextlib import contextmanager

import gymnasium as gym
import numpy as np

import clustergym  # noqa: F401


def greedy(u, rng):
    """The first valid placement (lowest row, then column), else end the round. Waiting rows come last and
    together in the window, so only their part of the mask is searched."""
    w = u.window
    try:
        first = w.kinds.index("place")
    except ValueError:
        return u.end_round_action
    valid = np.flatnonzero(w.mask[:-1].reshape(w.W, w.C)[first:, :u.K])
    if not len(valid):
        return u.end_round_action
    r, c = divmod(int(valid[0]), u.K)
    return (first + r) * w.C + c


def random_valid(u, rng):
    # uniform over the valid actions; indexing with one integer draw costs the harness ~3 us a step where
    # rng.choice costs ~7 (the benchmark measures the env, not numpy's sampler)
    valid = np.flatnonzero(u.action_masks())
    return int(valid[rng.integers(len(valid))])


def play(env, steps: int, policy, rng) -> tuple[int, float]:
    """``steps`` steps of ``policy`` on ``env``, resetting whenever an episode ends; returns (episodes ended,
    seconds spent in those resets)."""
    u = env.unwrapped
    eps, t_reset = 0, 0.0
    for _ in range(steps):
        _, _, te, tr, _ = env.step(policy(u, rng))
        if te or tr:
            eps += 1
            t1 = time.perf_counter()
            env.reset()
            t_reset += time.perf_counter() - t1
    return eps, t_reset


def bench(env_id: str, steps: int, policy, seed: int = 0, **kw) -> dict:
    env = gym.make(env_id, **kw)
    env.reset(seed=seed)
    t0 = time.perf_counter()
    eps, t_reset = play(env, steps, policy, np.random.default_rng(seed))
    dt = time.perf_counter() - t0
    return {"id": env_id, "policy": policy.__name__, "steps": steps, "seconds": round(dt, 2),
            "steps_per_s": round(steps / dt), "steps_per_s_excl_reset": round(steps / max(1e-9, dt - t_reset)),
            "episodes_ended": eps, "sim_time_h": round(env.unwrapped.sim.now / 3600, 2)}


# (owner, method, part of a step): the simulator's work, then the env's two layers on top of it
_PARTS = (("sim", "place", "simulator"), ("sim", "migrate", "simulator"), ("sim", "requeue", "simulator"),
          ("sim", "preempt", "simulator"), ("sim", "set_stop_option", "simulator"),
          ("sim", "next_decision", "simulator"),
          ("window", "build", "window + mask"), ("env", "_make_obs", "observation"))


@contextmanager
def _timed_parts(acc: Counter):
    """Wrap the methods of _PARTS (on their classes) to add their thread CPU time to ``acc``."""
    from clustergym.core.engine import Simulator
    from clustergym.gym_env import ClusterEnv
    from clustergym.window import Window

    owners = {"sim": Simulator, "env": ClusterEnv, "window": Window}
    saved = []
    for owner, name, part in _PARTS:
        cls = owners[owner]
        f = cls.__dict__[name]

        def timed(*a, _f=f, _part=part, **k):
            t = time.thread_time()
            try:
                return _f(*a, **k)
            finally:
                acc[_part] += time.thread_time() - t
        saved.append((cls, name, f))
        setattr(cls, name, timed)
    try:
        yield acc
    finally:
        for cls, name, f in saved:
            setattr(cls, name, f)


def breakdown(env_id: str, steps: int, policy, seed: int = 0) -> dict:
    """Microseconds of thread CPU time per step in each part (nested calls are not double counted: the
    simulator calls inside _build/_make_obs are none, and _build inside a command is not a command)."""
    acc: Counter = Counter()
    t0 = time.thread_time()
    with _timed_parts(acc):
        r = bench(env_id, steps, policy, seed)
    total = time.thread_time() - t0
    n = r["steps"]
    out = {part: round(v * 1e6 / n, 1) for part, v in acc.items()}
    out["other (step, reward, info, policy)"] = round((total - sum(acc.values())) * 1e6 / n, 1)
    out["total"] = round(total * 1e6 / n, 1)
    return {"id": env_id, "policy": policy.__name__, "us_per_step": out}


def cpu_replay(env_id: str, steps: int, policy, repeats: int = 3) -> dict:
    """Thread CPU time per step of the same seeded episode's first ``steps`` steps, replayed ``repeats`` times
    in one env after a warm-up replay: min and median over the replays. CPU time of one thread, and the same
    work each time, so two versions of the code can be compared on a machine whose load drifts (alternate
    them, and compare minima)."""
    env = gym.make(env_id)
    times = []
    for rep in range(repeats + 1):
        env.reset(seed=0)
        t0 = time.thread_time()
        play(env, steps, policy, np.random.default_rng(0))
        if rep:  # the first replay warms caches and compiled code
            times.append((time.thread_time() - t0) * 1e6 / steps)
    return {"id": env_id, "policy": policy.__name__, "replays": repeats, "cpu_us_per_step_min": round(min(times), 1),
            "cpu_us_per_step_median": round(median(times), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--ids", nargs="+", default=["clustergym/GPUCluster-v1", "clustergym/MLFS2474-v1"])
    ap.add_argument("--breakdown", action="store_true", help="also time the parts of a step (second run)")
    ap.add_argument("--cpu-repeat", type=int, default=0, metavar="R",
                    help="also replay each case's first --steps steps R times and report min/median thread CPU per step")
    ap.add_argument("--out", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (stderr)")
    args = ap.parse_args()
    from tqdm import tqdm

    from clustergym.eval.files import report_results

    rows = []
    cases = [(env_id, pol) for env_id in args.ids for pol in (random_valid, greedy)]
    for env_id, pol in tqdm(cases, desc="cases", unit="case", disable=args.no_progress, dynamic_ncols=True):
        rows.append(bench(env_id, args.steps, pol))
        tqdm.write(str(rows[-1]))
        if args.breakdown:
            rows.append(breakdown(env_id, args.steps, pol))
            tqdm.write(str(rows[-1]))
        if args.cpu_repeat:
            rows.append(cpu_replay(env_id, args.steps, pol, repeats=args.cpu_repeat))
            tqdm.write(str(rows[-1]))
    report_results(rows, args.out, "bench_env")


if __name__ == "__main__":
    main()
