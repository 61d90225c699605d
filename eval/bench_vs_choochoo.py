"""clustergym against the gpu-choochoo environment (PyPI), side by side on one core: random valid steps/s.

    .venv/bin/python eval/bench_vs_choochoo.py [--id clustergym/GPUCluster-v1] [--steps 20000] [--rounds 3]
                                               [--core 0] [--venv .venv-choochoo]

gpu-choochoo is never a dependency of clustergym: this script installs it into a scratch venv of its own
(``--venv``; created with ``pip install gpu-choochoo`` on first use) and drives it there in a subprocess.
Both environments run as child processes pinned to the same core (``os.sched_setaffinity``), alternately for
``--rounds`` rounds, so drift of the machine's speed hits both alike. Each child builds its env, resets it
(not timed), then times ``--steps`` steps of uniformly random *valid* actions, resetting whenever an episode
ends (resets timed, as in a training loop).

The gpu-choochoo side is an 80-GPU cluster like ``mlfs-80``: 20 nodes of 4 V100s (32 GB each, its
catalogue's V100 entry), a 24 h trace from its ``RealisticWorkloadGenerator`` (seeded), queue observation of
16 jobs. Its valid actions are "no-op" and the indices of the jobs actually in its queue (the env ignores the
rest); it places a chosen job by its own best fit. The clustergym side is ``eval/bench_env.py``'s ``bench``
with ``random_valid`` on ``--id``. The two do different amounts of modelling per step (clustergym: task DAGs,
per-resource use, overload, contention, a fixed-size observation of W rows x K servers; gpu-choochoo:
whole-job placement on free GPU counts): the ratio says how fast each is to train on, not that they simulate
the same thing.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parents[1]

# the child that drives gpu-choochoo (runs in the scratch venv: only gpu_choochoo, gymnasium and numpy there)
CHOOCHOO_CHILD = textwrap.dedent("""
    import json, os, sys, time
    import numpy as np
    from gpu_choochoo.envs.scheduler_env import GPUSchedulerEnv
    from gpu_choochoo.simulation.workload import RealisticWorkloadGenerator
    core, steps, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    os.sched_setaffinity(0, {core})
    nodes = [dict(node_id=f"n{i:02d}", gpu_type="V100", total_gpus=4, total_vram_gb=4 * 32.0) for i in range(20)]
    gen = RealisticWorkloadGenerator(seed=seed)
    trace = gen.generate_job_trace(duration_sec=86400, max_gpus=16)
    for j in trace:  # every job may run on the V100 nodes
        j.update(gpu_type_required="ANY", preferred_gpu_types=["V100"], acceptable_gpu_types=["V100"],
                 min_vram_per_gpu=None)
    env = GPUSchedulerEnv(nodes, trace, max_queue_obs=16, max_nodes=20, max_steps=10**9)
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    n = eps = 0
    t0 = time.perf_counter()
    while n < steps:
        valid = 1 + min(len(env.cluster.pending_queue), env.max_queue_obs)
        _, _, te, tr, _ = env.step(int(rng.integers(valid)))
        n += 1
        if te or tr:
            eps += 1
            env.reset()
    dt = time.perf_counter() - t0
    print(json.dumps({"env": "gpu-choochoo", "jobs": len(trace), "steps": n, "seconds": dt,
                      "steps_per_s": n / dt, "episodes_ended": eps}))
""")

CLUSTERGYM_CHILD = textwrap.dedent("""
    import json, os, sys
    import clustergym  # noqa: F401
    from clustergym.eval.bench_env import bench, random_valid
    core, steps, seed, env_id = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    os.sched_setaffinity(0, {core})
    r = bench(env_id, steps, random_valid, seed)
    print(json.dumps({"env": env_id, "steps": r["steps"], "seconds": r["seconds"], "steps_per_s": r["steps_per_s"],
                      "episodes_ended": r["episodes_ended"]}))
""")



def scratch_venv(path: Path) -> Path:
    """The scratch venv's python, with gpu-choochoo installed (created on first use)."""
    py = path / "bin" / "python"
    if not py.exists():
        print(f"creating the scratch venv {path} with gpu-choochoo (not a clustergym dependency)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
    probe = subprocess.run([str(py), "-c", "import gpu_choochoo"], capture_output=True)
    if probe.returncode != 0:
        subprocess.run([str(py), "-m", "pip", "install", "--quiet", "gpu-choochoo"], check=True)
    return py


def run_child(python: str, code: str, *args: object) -> dict:
    out = subprocess.run([python, "-c", code, *map(str, args)], capture_output=True, text=True, cwd=ROOT)
    if out.returncode != 0:
        raise RuntimeError(f"benchmark child failed ({python}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--id", default="clustergym/GPUCluster-v1", help="clustergym env id")
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=3, help="alternating runs of each env")
    ap.add_argument("--core", type=int, default=0, help="the one core both children are pinned to")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--venv", default=str(ROOT / ".venv-choochoo"), help="scratch venv for gpu-choochoo")
    a = ap.parse_args(argv)
    choo_py = scratch_venv(Path(a.venv))
    ours, theirs = [], []
    for r in range(a.rounds):
        ours.append(run_child(sys.executable, CLUSTERGYM_CHILD, a.core, a.steps, a.seed, a.id))
        theirs.append(run_child(str(choo_py), CHOOCHOO_CHILD, a.core, a.steps, a.seed))
        print(f"round {r + 1}: {a.id} {ours[-1]['steps_per_s']:,.0f} steps/s, "
              f"gpu-choochoo {theirs[-1]['steps_per_s']:,.0f} steps/s", flush=True)
    m_ours = median(x["steps_per_s"] for x in ours)
    m_theirs = median(x["steps_per_s"] for x in theirs)
    print(f"median over {a.rounds} rounds on core {a.core}: {a.id} {m_ours:,.0f} steps/s, gpu-choochoo "
          f"{m_theirs:,.0f} steps/s, ratio {m_ours / m_theirs:.2f}")


if __name__ == "__main__":
    main()
