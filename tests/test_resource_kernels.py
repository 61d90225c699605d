"""The compiled resource kernels (envs/core/resource_kernels.py) against the plain-Python rules they replace, bit
for bit, on random traffic."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from clustergym.core.resource_kernels import move_net

S = 6
PAIRS = [(a, b) for a in range(S) for b in range(a + 1, S)]


def reference_move(net: list, old: tuple, new: tuple) -> tuple[list, frozenset]:
    """The NIC-load move written out in Python (``Resources.move_traffic`` before the kernel): the pairs' loads
    moved one in-place update at a time, then the residue cleared on the servers involved. Returns (loads,
    servers involved)."""
    net = list(net)
    changed: frozenset = frozenset()
    old_rate, old_cross, old_servers = old
    if old_rate > 0 and old_cross:
        for (a, b), mb in old_cross.items():
            d = mb * old_rate
            net[a] -= d
            net[b] -= d
        changed = old_servers
    rate, cross, servers = new
    if rate > 0 and cross:
        for (a, b), mb in cross.items():
            d = mb * rate
            net[a] += d
            net[b] += d
        changed = changed | servers
    for s in changed:
        if -1e-9 < net[s] < 1e-9:
            net[s] = 0.0
    return net, changed


def _traffic(draw, rate_st):
    pairs = draw(st.lists(st.sampled_from(PAIRS), unique=True, max_size=8))
    cross = {p: draw(st.floats(0.0, 500.0)) for p in pairs}
    return draw(rate_st), cross, frozenset(s for p in pairs for s in p)


def _arrays(cross: dict, applied: bool) -> tuple[np.ndarray, np.ndarray]:
    if not applied:
        return np.empty((0, 2), dtype=np.int64), np.empty(0)
    return np.array(list(cross), dtype=np.int64).reshape(-1, 2), np.array(list(cross.values()), dtype=np.float64)


@st.composite
def cases(draw):
    rates = st.one_of(st.just(0.0), st.floats(1e-3, 10.0))
    old, new = _traffic(draw, rates), _traffic(draw, rates)
    if draw(st.booleans()):  # a rate-only change: the same pairs
        new = (new[0], old[1], old[2])
    net = [draw(st.one_of(st.floats(0.0, 2000.0), st.just(0.0))) for _ in range(S)]
    # an exact cancellation leaves a residue: start from the old traffic's own load on some servers
    for (a, b), mb in old[1].items():
        if draw(st.booleans()):
            net[a] = net[b] = mb * old[0]
    use = [[draw(st.floats(0.0, 50.0)) for _ in range(S)] for _ in range(2)]
    limits = [[draw(st.floats(1.0, 60.0)) for _ in range(S)] for _ in range(2)] + [[draw(st.floats(0.0, 2500.0))
                                                                                     for _ in range(S)]]
    hot = [draw(st.integers(0, 1)) for _ in range(S)]
    flags = [draw(st.booleans()) for _ in range(S)]
    return net, old, new, use, limits, hot, flags


@settings(max_examples=300, deadline=None)
@given(cases())
def test_move_net_matches_the_python_rule(case):
    net, old, new, use, limits, hot, flags = case
    want, changed = reference_move(net, old, new)
    got = np.array(net, dtype=np.float64)
    old_ab, old_mb = _arrays(old[1], old[0] > 0 and bool(old[1]))
    new_ab, new_mb = _arrays(new[1], new[0] > 0 and bool(new[1]))
    flips = np.empty(S, dtype=np.int64)
    n = move_net(got, old_ab, old_mb, old[0], new_ab, new_mb, new[0], np.array(use[0]), np.array(use[1]),
                 np.array(hot, dtype=np.int64), np.array(limits), np.array(flags), flips)
    assert got.tolist() == want  # bit for bit (== on floats; no NaN here)
    # the servers whose flag disagrees with _judge_overload's rule, each once
    rule = [(use[0][s] > limits[0][s] or use[1][s] > limits[1][s] or want[s] > limits[2][s] or hot[s] > 0)
            for s in range(S)]
    assert sorted(flips[:n].tolist()) == sorted(s for s in changed if rule[s] != flags[s])
