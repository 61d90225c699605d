"""Compiled (numba) kernels of the resources layer's per-command bookkeeping (:mod:`clustergym.core.resources`
states the rules; these are its arithmetic).

The kernels do the float operations of the plain-Python loops they replace, on the same values in the same
order, so the results are those floats bit for bit; ``tests/test_resource_kernels.py`` checks each against the
Python rule. With ``NUMBA_DISABLE_JIT=1`` they run as plain Python; ``cache=True`` keeps the compiled code in
``__pycache__``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

NET_RESIDUE = 1e-9  # |NIC load| below this (MB/s) is the float residue of cancelled terms: 0
NO_PAIRS = (np.empty((0, 2), dtype=np.int64), np.empty(0))  # no cross-server pairs: (servers, MB) arrays


@njit(cache=True)
def move_net(net, old_ab, old_mb, old_rate, new_ab, new_mb, new_rate, cpu_use, mem_use, hot_gpus, limits, flags,
             flips):
    """Move a job's NIC loads (``net``: MB/s per server, updated in place) from its old traffic to its new one:
    pair by pair (``ab[i]`` = servers a, b; ``mb[i]`` MB per iteration), subtract ``mb x old_rate`` from both
    servers' loads, then add ``mb x new_rate``; then a load left within :data:`NET_RESIDUE` of 0 on a server of
    either side becomes 0. A side that moves nothing is passed as empty arrays. Returns how many of those
    servers' overload flags (``flags``) now disagree with the overload rule (``Resources._judge_overload``:
    CPU, memory or NIC use above its limit, ``limits`` rows 0-2, or a hot GPU), written first into ``flips``,
    each once."""
    for i in range(len(old_mb)):
        d = old_mb[i] * old_rate
        net[old_ab[i, 0]] -= d
        net[old_ab[i, 1]] -= d
    for i in range(len(new_mb)):
        d = new_mb[i] * new_rate
        net[new_ab[i, 0]] += d
        net[new_ab[i, 1]] += d
    _clear_residue(net, old_ab)
    _clear_residue(net, new_ab)
    n = _find_flips(net, old_ab, cpu_use, mem_use, hot_gpus, limits, flags, flips, 0)
    return _find_flips(net, new_ab, cpu_use, mem_use, hot_gpus, limits, flags, flips, n)


@njit(cache=True, inline="always")
def _clear_residue(net, ab):
    for i in range(len(ab)):
        for j in range(2):
            s = ab[i, j]
            if -NET_RESIDUE < net[s] < NET_RESIDUE:
                net[s] = 0.0


@njit(cache=True, inline="always")
def _find_flips(net, ab, cpu_use, mem_use, hot_gpus, limits, flags, flips, n):
    for i in range(len(ab)):
        for j in range(2):
            s = ab[i, j]
            over = (cpu_use[s] > limits[0, s] or mem_use[s] > limits[1, s] or net[s] > limits[2, s]
                    or hot_gpus[s] > 0)
            if over != flags[s]:
                seen = False
                for k in range(n):
                    if flips[k] == s:
                        seen = True
                if not seen:
                    flips[n] = s
                    n += 1
    return n
