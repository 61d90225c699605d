"""The episode timeline figure: a Gantt chart of tasks on GPUs above the queue, the GPU utilisation and the
overloaded servers over time, drawn from a run's :class:`clustergym.core.timeline.Timeline` (recorded with
``SimConfig.record_timeline``; ``ClusterEnv.save_timeline``, ``eval/compare.py --timeline``).

Panels, sharing the time axis (hours from t = 0):

1. Gantt: one row per GPU (GPU 0 at the top; at most ``max_rows``, larger clusters sampled evenly), one bar
   per task stint on it, coloured by its job (:func:`clustergym.render.job_colours`, the colours of the
   ``rgb_array`` render); thin grey lines separate servers (up to 64 servers). A parameter server holds no
   GPU and has no row. White = idle.
2. Waiting tasks in the queue and jobs in the system (submitted, not ended).
3. GPU allocation (fraction of GPUs holding a task) and utilisation (mean GPU load, each capped at 1).
4. Overloaded servers, filled in :data:`OVERLOAD_COLOUR`.

Drawn with matplotlib's object API (no pyplot state), so it is safe in worker processes and tests.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .core.timeline import SAMPLE_FIELDS, Timeline
from .render import job_colours

OVERLOAD_COLOUR = (0.85, 0.1, 0.1)
MAX_ROWS = 256


def gantt_rows(n_gpus: int, max_rows: int = MAX_ROWS) -> np.ndarray:
    """The GPUs shown as Gantt rows: all of them, or ``max_rows`` spread evenly."""
    return np.arange(n_gpus) if n_gpus <= max_rows else np.unique(np.linspace(0, n_gpus - 1, max_rows).astype(np.int64))


def timeline_figure(timeline: Timeline, cluster: Any, end: float, title: str = "", max_rows: int = MAX_ROWS,
                    size: tuple[float, float] = (12.0, 8.0), dpi: int = 100):
    """A matplotlib Figure of ``timeline`` up to ``end`` (s) on ``cluster`` (a ``ClusterState``: its ``n_gpus``
    and ``gpu_server``). Returns (figure, {"gantt", "queue", "util", "overload"}: the axes)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=size, dpi=dpi)
    grid = fig.add_gridspec(4, 1, height_ratios=(4, 1, 1, 1), hspace=0.15)
    gantt = fig.add_subplot(grid[0])
    axes = {"gantt": gantt, **{k: fig.add_subplot(grid[i + 1], sharex=gantt)
                               for i, k in enumerate(("queue", "util", "overload"))}}
    hours = max(float(end), 1e-9) / 3600.0
    _gantt(gantt, timeline, cluster, float(end), gantt_rows(cluster.n_gpus, max_rows))
    _series(axes, timeline.sample_array(), float(end))
    gantt.set_xlim(0.0, hours)
    for k in ("gantt", "queue", "util"):
        axes[k].tick_params(labelbottom=False)
    axes["overload"].set_xlabel("simulated time (h)")
    if title:
        gantt.set_title(title)
    return fig, axes


def _gantt(ax, timeline: Timeline, cluster: Any, end: float, rows: np.ndarray) -> None:
    """One bar per task stint on a shown GPU, in its job's colour."""
    row_of = {int(g): i for i, g in enumerate(rows)}
    bars: dict[int, list[tuple[float, float]]] = {}
    jobs: dict[int, list[int]] = {}
    for s in timeline.closed_spans(end):
        r = row_of.get(s.gpu)
        if r is None or s.end <= s.start:
            continue
        bars.setdefault(r, []).append((s.start / 3600.0, (s.end - s.start) / 3600.0))
        jobs.setdefault(r, []).append(s.job)
    for r, xs in bars.items():
        colours = job_colours(np.array(jobs[r], dtype=np.int64)) / 255.0
        ax.broken_barh(xs, (r - 0.5, 1.0), facecolors=[tuple(c) for c in colours], edgecolor="none")
    servers = cluster.gpu_server[rows]
    if cluster.n_servers <= 64:
        for r in np.flatnonzero(servers[1:] != servers[:-1]):
            ax.axhline(r + 0.5, color="0.8", linewidth=0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_ylabel(f"GPU ({len(rows)} of {cluster.n_gpus})" if len(rows) < cluster.n_gpus else "GPU")


def _series(axes: dict, samples: np.ndarray, end: float) -> None:
    """Queue, utilisation and overload panels: step functions of the samples, the last held to ``end``."""
    col = {name: i for i, name in enumerate(SAMPLE_FIELDS)}
    if len(samples):
        samples = np.vstack([samples, samples[-1:]])
        samples[-1, 0] = max(end, samples[-2, 0])
    t = samples[:, col["time"]] / 3600.0
    q, u, o = axes["queue"], axes["util"], axes["overload"]
    q.step(t, samples[:, col["queue_tasks"]], where="post", color="tab:blue", label="waiting tasks")
    q.step(t, samples[:, col["jobs_in_system"]], where="post", color="tab:gray", label="jobs in system")
    q.legend(loc="upper right", fontsize="small")
    u.step(t, samples[:, col["gpu_alloc"]], where="post", color="tab:green", label="GPUs allocated")
    u.step(t, samples[:, col["gpu_util"]], where="post", color="tab:olive", label="GPU utilisation")
    u.set_ylim(0.0, 1.05)
    u.legend(loc="upper right", fontsize="small")
    o.fill_between(t, samples[:, col["overloaded_servers"]], step="post", color=OVERLOAD_COLOUR, linewidth=0)
    o.set_ylabel("overloaded\nservers")
    o.set_ylim(bottom=0.0)


def save_timeline(timeline: Timeline, cluster: Any, end: float, path: str | os.PathLike, title: str = "",
                  **kw: Any) -> Path:
    """Draw :func:`timeline_figure` and write it as a PNG to ``path`` (folders created); returns the path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig, _ = timeline_figure(timeline, cluster, end, title, **kw)
    FigureCanvasAgg(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path
