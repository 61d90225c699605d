"""MLFS §3.3.2, the ideal virtual host: the placement rule shared by MLF-H, the env's choice of destination
columns (``clustergym.kernels.destinations``, a compiled kernel tested equal to this) and the agents' pair
features.

Each server is a utilisation vector U_s = (GPU, CPU, memory, network). Among the candidate servers, the ideal
host takes per resource the lowest utilisation of any candidate; a server's distance to it is the Euclidean
distance of U_s to that vector. With a task's communication volumes per server (MB per iteration with its
already placed DAG neighbours), bandwidth is a fifth coordinate: the volumes divided by their maximum, whose
ideal is 1 when any neighbour is placed and 0 otherwise. MLFS's degradation term q has no model here and is
dropped. Nearest first, ties by the lower server index.
"""
from __future__ import annotations

import numpy as np


def ideal_host(util: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    """The ideal host's utilisation vector: the column minimum of ``util`` (S, 4) over the ``candidates``
    (server indices)."""
    return util[candidates].min(axis=0)


def host_distances(util: np.ndarray, ideal: np.ndarray, comm: np.ndarray | None = None) -> np.ndarray:
    """Squared distance of each row of ``util`` to ``ideal``, plus the bandwidth coordinate's when ``comm``
    (the task's communication volume with each of those servers) is given."""
    d = np.sum((util - ideal) ** 2, axis=1)
    if comm is None:
        return d
    m = comm.max()
    bwn = comm / m if m > 0 else comm
    return d + (bwn - (1.0 if m > 0 else 0.0)) ** 2


def ideal_host_order(util: np.ndarray, candidates: np.ndarray, comm: np.ndarray | None = None) -> list[int]:
    """The candidate servers (a boolean mask over servers) nearest to the ideal host first, ties by index.
    ``comm``: the task's communication volume with every server (MB per iteration), or None."""
    idx = np.flatnonzero(candidates)
    if len(idx) == 0:
        return []
    X = util[idx]
    d = host_distances(X, ideal_host(util, idx), None if comm is None else comm[idx])
    return [int(idx[i]) for i in np.lexsort((idx, d))]
