"""Simulator benchmark: replay the bundled Philly trace on a cluster preset with a FIFO / first-fit driver.

    python eval/bench.py                      # all 82,247 jobs on mlfs-2474
    python eval/bench.py --jobs 5000 --profile
    python eval/bench.py --jobs 5000 --out bench.json   # also write the result as JSON

Reports wall time (trace loading + mapping, and simulation separately), events and decisions per second,
and peak resident memory. Results go in the README's "Performance" table; this is not a timed test.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import resource
import sys
import time

import numpy as np

from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.mapping import to_job_specs
from clustergym.core.presets import cluster_preset
from clustergym.core.traces import load_philly
from clustergym.eval.files import report_results


def fifo_first_fit(sim: Simulator) -> None:
    """Place ready tasks in queue order on the first server with room, preferring servers that still have
    an idle GPU (GPU-exclusive first fit, as a plain FIFO cluster scheduler does); repeat while anything
    fits (children become ready once their DAG parents are placed)."""
    c = sim.cluster
    progress = True
    while progress:
        progress = False
        for task in sim.ready_tasks():
            ok = sim.feasible_servers(task)
            if not ok.any():
                continue
            idle = np.add.reduceat((c.gpu_n_tasks == 0).astype(np.int64), c.server_first_gpu) > 0
            both = ok & idle
            sim.place(task.tid, int(np.argmax(both) if both.any() else np.argmax(ok)))
            progress = True


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", default="mlfs-2474")
    ap.add_argument("--jobs", type=int, default=None, help="first N jobs of the trace (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--usage-change-mean", type=float, default=SimConfig.usage_change_mean_s,
                    help="mean seconds between a job's resource-use changes (0 = constant use)")
    ap.add_argument("--profile", action="store_true", help="print the 25 most expensive functions")
    ap.add_argument("--json", action="store_true", help="print the result as JSON only")
    ap.add_argument("--out", default=None, help="also write the result to this JSON file")
    ap.add_argument("--no-progress", action="store_true", help="no progress bar (stderr; off with --json too)")
    args = ap.parse_args(argv)

    t0 = time.perf_counter()
    df = load_philly(limit=args.jobs)
    cluster = cluster_preset(args.cluster)
    specs = to_job_specs(df, seed=args.seed, cluster=cluster)
    t1 = time.perf_counter()
    sim = Simulator(cluster, specs,
                    SimConfig(usage_change_mean_s=args.usage_change_mean, record_series=False,
                              decide_on="placement"), seed=args.seed)
    t2 = time.perf_counter()
    prof = cProfile.Profile() if args.profile else None
    if prof:
        prof.enable()
    policy, bar = _with_progress(fifo_first_fit, len(specs), not (args.no_progress or args.json))
    summary = sim.run(policy)
    if prof:
        prof.disable()
    t3 = time.perf_counter()
    if bar is not None:
        bar.update(sim.metrics.jobs_ended - bar.n)
        bar.close()
    result = {
        "cluster": args.cluster, "jobs": len(specs), "tasks": len(sim.tasks),
        "load_and_map_s": round(t1 - t0, 2), "build_s": round(t2 - t1, 2), "simulate_s": round(t3 - t2, 2),
        "events": sim.events_processed, "decisions": sim.decision_count,
        "events_per_s": round(sim.events_processed / (t3 - t2)),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "summary": {k: (round(v, 3) if isinstance(v, float) else v) for k, v in summary.items()},
    }
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            if k != "summary":
                print(f"{k:>16}: {v}")
        print("         summary:", json.dumps(result["summary"]))
    if prof:
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(25)
    report_results([result], args.out, "bench")
    return result


def _with_progress(policy, n_jobs: int, enabled: bool):
    """(``policy`` updating a progress bar of the jobs ended on stderr every 256 decision points, so its cost stays
    out of the measured simulation time; the bar), or (``policy``, None) when disabled."""
    if not enabled:
        return policy, None
    from tqdm import tqdm

    bar = tqdm(total=n_jobs, desc="jobs ended", unit="job", dynamic_ncols=True)

    def step(sim: Simulator) -> None:
        policy(sim)
        if sim.decision_count % 256 == 0:
            bar.update(sim.metrics.jobs_ended - bar.n)
    return step, bar


if __name__ == "__main__":
    main()
