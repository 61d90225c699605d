"""Rendering for :class:`clustergym.gym_env.ClusterEnv`: "ansi" (text snapshot) and "rgb_array" (numpy-only image),
and the :class:`EpisodeRecord` the image is drawn from.

The rgb image shows GPU occupancy over the last ``render_history`` snapshots of the episode record: one column
per snapshot (oldest left), one row per GPU (at most 512 rows; larger clusters are sampled evenly), coloured by
the id of the job holding the GPU (black = idle). A 4-pixel strip on the right shows the current overload
state of each row's server (red = overloaded, green = not); a 2-pixel gap separates it. Pixels are scaled x2.
"""
from __future__ import annotations

from collections import deque
from typing import Iterator, NamedTuple

import numpy as np

MAX_ROWS = 512


class Snapshot(NamedTuple):
    time: float  # simulated seconds
    gpu_job: np.ndarray  # (n_gpus,) int64: id of a job holding the GPU, -1 if idle
    overloaded: np.ndarray  # (n_servers,) bool


class EpisodeRecord:
    """The last ``maxlen`` snapshots of the episode's GPU occupancy (``env.unwrapped.episode_record``). The
    env appends one at every decision point and after every command when its render mode is "rgb_array" (the
    only reader), and clears it on reset."""

    def __init__(self, maxlen: int):
        self.snapshots: deque[Snapshot] = deque(maxlen=max(1, int(maxlen)))

    def append(self, sim) -> None:
        c = sim.cluster
        occ = np.array([g[0].job.jid if g else -1 for g in c.gpu_tasks], dtype=np.int64)
        self.snapshots.append(Snapshot(sim.now, occ, c.overloaded.copy()))

    def clear(self) -> None:
        self.snapshots.clear()

    def __len__(self) -> int:
        return len(self.snapshots)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self.snapshots)


def job_colours(jid: np.ndarray) -> np.ndarray:
    """A stable colour per job id (hash of the id), black for -1: uint8 RGB, shape ``jid.shape + (3,)`` (the
    timeline figure uses the same colours)."""
    j = jid.astype(np.uint64)
    h = (j * np.uint64(2654435761)) & np.uint64(0xFFFFFF)
    rgb = np.stack([(h >> np.uint64(16)) & np.uint64(255), (h >> np.uint64(8)) & np.uint64(255),
                    h & np.uint64(255)], axis=-1).astype(np.uint8)
    rgb = (rgb // 2 + 96).astype(np.uint8)  # keep colours away from black
    rgb[jid < 0] = 0
    return rgb


def render_rgb(env) -> np.ndarray:
    c = env.sim.cluster
    n = c.n_gpus
    rows = np.arange(n) if n <= MAX_ROWS else np.linspace(0, n - 1, MAX_ROWS).astype(np.int64)
    hist = list(env.episode_record)
    T = max(1, len(hist))
    occ = np.full((len(rows), T), -1, np.int64)
    for i, snap in enumerate(hist):
        occ[:, i] = snap.gpu_job[rows]
    img = job_colours(occ)  # (rows, T, 3)
    over = c.overloaded[c.gpu_server[rows]]
    strip = np.zeros((len(rows), 6, 3), np.uint8)
    strip[:, 2:, 1] = 160
    strip[over, 2:, 0] = 220
    strip[over, 2:, 1] = 0
    img = np.concatenate([img, strip], axis=1)
    return np.repeat(np.repeat(img, 2, axis=0), 2, axis=1)


def render_ansi(env) -> str:
    sim = env.sim
    c = sim.cluster
    lines = [f"t={sim.now:.0f}s ({sim.now / 3600:.2f} h)  queue={len(sim.queue)} tasks  active jobs={len(sim.active_jobs)}"
             f"  ended={sim.metrics.jobs_ended}/{sim.n_jobs}  overloaded servers={int(c.overloaded.sum())}"
             f"  overload degree={sim.cluster_overload_degree():.2f}"]
    util = c.utilisation()
    S = c.n_servers
    show = range(S) if S <= 64 else list(range(32)) + list(range(S - 8, S))
    for s in show:
        g = c.server_gpus(s)
        cells = "".join("." if c.gpu_n_tasks[i] == 0 else ("#" if c.gpu_load[i] > 1.0 else str(min(9, c.gpu_n_tasks[i])))
                        for i in g)
        flag = " OVERLOADED" if c.overloaded[s] else ""
        lines.append(f"  s{s:<4d} {c.server_gpu_type[s]:<5s} [{cells}] gpu={util['gpu'][s]:.2f} cpu={util['cpu'][s]:.2f}"
                     f" mem={util['mem'][s]:.2f} net={util['net'][s]:.2f}{flag}")
    if S > len(show):
        lines.insert(1 + 32, f"  ... {S - len(show)} servers not shown ...")
    lines.append("  legend: '.' idle GPU, digit = tasks on the GPU, '#' GPU over-committed (load > 1)")
    w = env.window
    rows = [(r, t, k) for r, (t, k) in enumerate(zip(w.tasks, w.kinds)) if t is not None]
    dests = [d for d in w.destinations if d >= 0]
    lines.append(f"  window: {len(rows)} candidate rows, destinations {dests[:16]}{' ...' if len(dests) > 16 else ''}")
    for r, t, k in rows[:10]:
        lines.append(f"    row {r}: {k:<7s} task {t.tid} job {t.job.jid} ({t.job.spec.model}) "
                     f"gpu_mem={t.t.gpu_memory_gb:.1f}GB cpu={t.t.cpu_cores:.1f}")
    return "\n".join(lines) + "\n"
