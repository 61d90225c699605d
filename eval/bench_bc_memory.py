"""Memory of a behaviour-cloning dataset: a teacher's states on training windows, as training collects them.

    .venv/bin/python eval/bench_bc_memory.py [--teacher mlfs-h+c-act] [--windows 5] [--id clustergym/GPUCluster-v1]

Prints the number of states, the dataset's bytes as stored (:mod:`clustergym.agents.bc_data`), the bytes the
same states take as one dense array per key, and this process's peak resident memory (``ru_maxrss``), which
includes the interpreter, torch, the trace and the simulator: run it once per code version to compare.
"""
from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np

from clustergym.agents.bc import collect
from clustergym.agents.bc_data import dense, nbytes


def dense_bytes(data: dict) -> int:
    """Bytes of the dataset's states as one dense array per key (one state read back, times the count)."""
    n = len(data["actions"])
    one = sum(dense(v, np.array([0])).nbytes for v in data["obs"].values()) + dense(data["masks"], np.array([0])).nbytes
    return one * n + data["actions"].nbytes + data["returns"].nbytes


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--id", default="clustergym/GPUCluster-v1")
    ap.add_argument("--teacher", default="mlfs-h+c-act")
    ap.add_argument("--windows", type=int, default=5, help="training windows (reset seeds 0..N-1)")
    ap.add_argument("--max-steps", type=int, default=5000, help="steps per window, as train/ppo.py's BC")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    data = collect(a.teacher, a.id, {"split": "train"}, range(a.windows), max_steps=a.max_steps)
    n = len(data["actions"])
    row = {"id": a.id, "teacher": a.teacher, "windows": a.windows, "states": n, "stored_bytes": nbytes(data),
           "dense_bytes": dense_bytes(data), "stored_bytes_per_state": round(nbytes(data) / n),
           "dense_bytes_per_state": round(dense_bytes(data) / n),
           "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
           "seconds": round(time.perf_counter() - t0, 1)}
    print(json.dumps(row))
    return row


if __name__ == "__main__":
    main()
