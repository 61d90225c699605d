"""Behaviour fingerprint of the environment: one sha256 per case (seeded episodes) over everything a step returns.

    .venv/bin/python eval/trajectory_hash.py [--max-steps 3000] [--out hashes.json] [--check hashes.json]

Each case runs seeded episodes (one ``reset(seed=...)``, then plain ``reset()`` after each end, until
the step budget is spent), with several policies and scenarios (including preemption and stop-option
actions off, a large cluster whose destinations are a nearest-K subset, and ``-v2`` ids) and hashes, per
step, every observation key (dtype, shape and bytes), the reward, terminated/truncated, ``info["objectives"]``,
``info["action_mask"]``, the other scalar info fields, the window's candidate task ids and kinds and the
destination columns; then the final ``info["summary"]``. A performance change that claims to keep behaviour
must leave every hash unchanged: record them before (``--out``), compare after (``--check``). The script runs
itself under :data:`PORTABLE_FLOAT` (numpy's and OpenBLAS's AVX2 kernels), so the recorded hashes check on any
x86-64 machine with the same library versions.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

# numpy's and OpenBLAS's kernels are chosen by CPU at run time, and their float results differ between them (an
# AVX-512 machine and an AVX2 one give different hashes for the same code and libraries): the hashes are taken on
# their AVX2 paths, so that hashes recorded on one x86-64 machine check on another. numba's kernels need no
# setting (compiled without fast-math, they give the same results on both). ``--native`` skips this.
PORTABLE_FLOAT = {
    "OPENBLAS_CORETYPE": "Haswell",
    # numpy >= 2.3 names the AVX-512 groups X86_V4, AVX512_ICL, AVX512_SPR; earlier releases one by one
    "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR AVX512F AVX512CD AVX512_SKX AVX512_CLX AVX512_CNL",
}


def _reexec_portable() -> None:
    """Run this script again under :data:`PORTABLE_FLOAT` unless it already is (or ``--native``): the variables
    must be set before numpy and OpenBLAS load."""
    if "--native" in sys.argv or all(os.environ.get(k) == v for k, v in PORTABLE_FLOAT.items()):
        return
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **PORTABLE_FLOAT})


if __name__ == "__main__":
    _reexec_portable()

import gymnasium as gym
import numpy as np

from clustergym import baselines
import clustergym  # noqa: F401
from clustergym.eval.bench_env import greedy

DEFAULT = "clustergym/GPUCluster-v1"
HETERO = "clustergym/Hetero-v1"
BIG = "clustergym/MLFS2474-v1"
DEFAULT_V2, HETERO_V2, UNISCHED_V2 = "clustergym/GPUCluster-v2", "clustergym/Hetero-v2", "clustergym/UniSched-v2"

# (name, env id, make kwargs, policy, seed)
CASES: tuple[tuple[str, str, dict, str, int], ...] = (
    ("default-random-0", DEFAULT, {}, "random", 0),
    ("default-random-1", DEFAULT, {}, "random", 1),
    ("default-greedy-2", DEFAULT, {}, "greedy", 2),
    ("default-mlfh-3", DEFAULT, {"window_jobs": 30}, "mlf-h", 3),
    ("default-fifo-4", DEFAULT, {"window_jobs": 30}, "fifo", 4),
    ("hetero-random-5", HETERO, {}, "random", 5),
    ("hetero-mlfh-6", HETERO, {"window_jobs": 20}, "mlf-h", 6),
    ("hetero-nopreempt-random-7", HETERO, {"preemption": False}, "random", 7),
    ("default-nostop-random-8", DEFAULT, {"stop_option_actions": False, "window_jobs": 30}, "random", 8),
    ("mlfs2474-random-9", BIG, {"window_jobs": 60, "window_size": 8, "n_destinations": 8}, "random", 9),
    ("mlfs2474-greedy-10", BIG, {"window_jobs": 60}, "greedy", 10),
    ("mlfs2474-mlfh-11", BIG, {"window_jobs": 40, "window_size": 8, "n_destinations": 8}, "mlf-h", 11),
    # -v2's row rules (a migrating job's running row, preemption with nothing waiting): random and MLF-H on the
    # default, UniSched, which preempts
    ("v2-default-random-0", DEFAULT_V2, {}, "random", 0),
    ("v2-default-mlfh-3", DEFAULT_V2, {"window_jobs": 30}, "mlf-h", 3),
    ("v2-hetero-random-5", HETERO_V2, {}, "random", 5),
    ("v2-unisched-unisched-12", UNISCHED_V2, {"window_jobs": 30}, "unisched", 12),
    # HLAS: EFT placement over GPU groups, priority preemption and round-level rescheduling through -v2's rows
    ("v2-hetero-hlas-13", HETERO_V2, {"window_jobs": 20}, "hlas", 13),
)


def _update_step(h, obs: dict, reward, te: bool, tr: bool, info: dict, u) -> None:
    for k in sorted(obs):
        v = np.ascontiguousarray(obs[k])
        h.update(f"{k}|{v.dtype.str}|{v.shape}".encode())
        h.update(v.tobytes())
    h.update(np.asarray(reward, dtype=np.float64).tobytes())
    h.update(bytes((bool(te), bool(tr))))
    h.update(np.asarray(info["objectives"], dtype=np.float64).tobytes())
    h.update(np.asarray(info["action_mask"], dtype=bool).tobytes())
    h.update(repr((float(info["sim_time"]), int(info["steps"]), int(info["round_actions"]),
                   info.get("invalid_action"))).encode())
    w = u.window
    h.update(repr([(t.tid if t is not None else None, k) for t, k in zip(w.tasks, w.kinds)]).encode())
    h.update(repr([int(d) for d in w.destinations]).encode())


def run_case(env_id: str, kw: dict, policy: str, seed: int, max_steps: int) -> tuple[str, int]:
    env = gym.make(env_id, **kw)
    u = env.unwrapped
    obs, info = env.reset(seed=seed)
    h = hashlib.sha256()
    _update_step(h, obs, 0.0, False, False, info, u)
    h.update(json.dumps(info["episode"], sort_keys=True, default=str).encode())
    rng = np.random.default_rng(seed)
    agent = baselines.make(policy, env=env) if policy not in ("random", "greedy") else None
    n = 0
    te = tr = False
    while n < max_steps:
        if policy == "random":
            # rng.choice, not bench_env.random_valid (which draws differently): the recorded hashes depend on it
            a = int(rng.choice(np.flatnonzero(u.action_masks())))
        elif policy == "greedy":
            a = greedy(u, rng)
        else:
            a = int(agent.predict(obs, action_masks=u.action_masks())[0])
        obs, r, te, tr, info = env.step(a)
        n += 1
        _update_step(h, obs, r, te, tr, info, u)
        if te or tr:  # next episode of the same seeded stream, until the step budget is spent
            h.update(json.dumps(info["summary"], sort_keys=True, default=float).encode())
            obs, info = env.reset()
            _update_step(h, obs, 0.0, False, False, info, u)
            h.update(json.dumps(info["episode"], sort_keys=True, default=str).encode())
    h.update(json.dumps(u.sim.summary(), sort_keys=True, default=float).encode())  # the state at the cut
    env.close()
    return h.hexdigest(), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-steps", type=int, default=3000, help="steps per case")
    ap.add_argument("--out", help="write the hashes (JSON) here")
    ap.add_argument("--check", help="compare against hashes (JSON) written by --out; exit 1 on any difference")
    ap.add_argument("--only", nargs="*", help="case names to run (default: all)")
    ap.add_argument("--native", action="store_true",
                    help="use this CPU's fastest numpy/OpenBLAS kernels (hashes then hold for this CPU only)")
    args = ap.parse_args()
    ref = json.load(open(args.check)) if args.check else None
    out, bad = {}, []
    for name, env_id, kw, policy, seed in CASES:
        if args.only and name not in args.only:
            continue
        t = time.perf_counter()
        digest, n = run_case(env_id, kw, policy, seed, args.max_steps)
        out[name] = digest
        status = ""
        if ref is not None:
            status = "ok" if ref.get(name) == digest else "DIFFERENT"
            if status != "ok":
                bad.append(name)
        print(f"{name:28s} {n:5d} steps {time.perf_counter() - t:6.1f} s  {digest}  {status}", flush=True)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"max_steps": args.max_steps, **out}, f, indent=1)
    if ref is not None:
        print("all hashes match" if not bad else f"{len(bad)} case(s) differ: {bad}")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
