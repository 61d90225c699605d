"""The compiled weight-free features of the pairwise policy (agents/feature_kernels.py) against the torch
expressions they replaced (kept here as the oracle), on real states of the contended default and on random
arrays that reach the corner cases: servers without GPUs, rows without a head server, ties, no affinity."""
from __future__ import annotations

import numpy as np
import pytest
import torch as th

import clustergym  # noqa: F401
from clustergym.agents import policies as P
from clustergym.agents.policies import (_OPT, _PAIR_SERVER_COLS, _PAIR_TASK_COLS, N_STOP, S_UTIL, T, U_CPU, U_MEM,
                                        job_columns, valid_pairs)
from clustergym.scenarios import make_env

S = P.S


# ---- the oracle: the torch code the kernels replaced ----

def torch_gpu_stats(gpu_loads: th.Tensor) -> th.Tensor:
    """The torch code of gpu_stats that the kernels replaced (its meaning: agents/policies.py)."""
    real = (gpu_loads >= 0).float()
    n = real.sum(-1).clamp_min(1.0)
    load = gpu_loads.clamp_min(0.0)
    mean = (load * real).sum(-1) / n
    mx = (load * real).amax(-1)
    mn = th.where(real > 0, load, th.full_like(load, 1e4)).amin(-1)
    mn = th.where(real.sum(-1) > 0, mn, th.zeros_like(mn))
    idle = ((load <= 1e-6).float() * real).sum(-1) / n
    return th.stack((mean, mx, mn, idle), dim=-1)


def torch_unsq(x: th.Tensor) -> th.Tensor:
    """The torch code of the inverse squashing that the kernels replaced (its meaning: agents/feature_kernels.py)."""
    return (x / (1.0 - x.abs()).clamp_min(1e-3)).clamp(-1e3, 1e3)


def torch_row_features(tasks: th.Tensor, cols: dict[str, int]) -> th.Tensor:
    """The torch code of row_features that the kernels replaced (its meaning: agents/policies.py)."""
    present = tasks[..., T["present"]] > 0.5
    slack = torch_unsq(tasks[..., cols["slack"]])
    inv_slack = th.sign(slack) / slack.abs().clamp_min(1.0 / 60.0)
    wait = torch_unsq(tasks[..., T["task_waiting_time"]])
    remaining = torch_unsq(tasks[..., cols["remaining"]])
    inv_remaining = 1.0 / remaining.clamp_min(1.0 / 60.0)
    lshare = tasks[..., cols["urgency"]] * 10.0 * tasks[..., T["partition_share"]]
    is_ps = (tasks[..., T["is_ps"]] > 0.5) & present
    jidx = tasks[..., cols["job_index"]]
    big = th.full_like(jidx, 1e4)
    ps_first = th.where(is_ps, jidx, big).amin(-1, keepdim=True)
    earliest_ps = (is_ps & (jidx <= ps_first + 1e-7)).float()
    rel = jidx - th.where(present, jidx, big).amin(-1, keepdim=True).clamp(max=1.0)
    waiting = tasks[..., T["is_running"]] < 0.5
    partly = ((tasks[..., cols["placed"]] > 0) & waiting & present).float()  # waiting task, gang begun
    f = th.stack((inv_slack.clamp(-60.0, 60.0) / 10.0, inv_remaining / 10.0, wait.clamp(max=100.0) / 10.0, lshare,
                  is_ps.float(),
                  earliest_ps, partly, rel * 10.0), -1)
    return f * present.unsqueeze(-1).float()


def torch_stop_features(tasks: th.Tensor) -> th.Tensor:
    """The torch code of stop_features that the kernels replaced (its meaning: agents/policies.py)."""
    B, W, _ = tasks.shape
    col = lambda name: tasks[..., T[name]]  # noqa: E731
    progress, target = col("progress"), col("target_progress")
    eye = th.eye(N_STOP, dtype=tasks.dtype, device=tasks.device).expand(B, W, N_STOP, N_STOP)
    per = []
    for o in _OPT:
        t_o = col(f"target_{o}")
        per.append(th.stack((col(f"stop_{o}"), col(f"own_stop_{o}"), col("stop_changeable"), t_o - progress,
                             t_o - target, (t_o <= progress).to(tasks.dtype)), -1))
    return th.cat((eye, th.stack(per, 2)), -1)


def torch_row_reduce(values: th.Tensor, row: th.Tensor, n_rows: int, how: str, init: float) -> th.Tensor:
    """The torch code of the per-row reduction that the kernels replaced (its meaning: agents/policies.py)."""
    idx = row if values.dim() == 1 else row.unsqueeze(-1).expand_as(values)
    out = th.full((n_rows, *values.shape[1:]), init, dtype=values.dtype, device=values.device)
    return out.scatter_reduce(0, idx, values, how, include_self=True)[row]


def torch_pair_features(obs: dict[str, th.Tensor], h: float, gpu_slots: int = 0) -> tuple[th.Tensor, th.Tensor]:
    """The torch code of pair_features that the kernels replaced (its meaning: agents/policies.py)."""
    tasks, servers, loads = obs["tasks"], obs["servers"], obs["gpu_loads"]
    B, W, _ = tasks.shape
    K = servers.shape[1]
    idx = valid_pairs(obs, gpu_slots).nonzero()
    b, r, k = idx.unbind(1)
    row = b * W + r  # the pair's row in the flattened (B * W) rows
    # only the columns read below are gathered per pair, by one index_select on the flattened rows/servers
    tc = tasks[..., list(_PAIR_TASK_COLS)].reshape(B * W, -1).index_select(0, row)  # (P, 5)
    server = b * K + k  # the pair's server in the flattened (B * K) servers
    sv = servers[..., list(_PAIR_SERVER_COLS)].reshape(B * K, -1).index_select(0, server)  # (P, 6)
    util, overloaded, free_gpu_mem = sv[:, :4], sv[:, 4], sv[:, 5]  # (P, 4): the utilisation vector; (P,), (P,)
    t_cpu, t_mem, t_gpu, is_ps, t_gpu_mem = tc.unbind(1)
    is_ps = is_ps > 0.5
    cpu_after, mem_after = util[:, U_CPU] + t_cpu, util[:, U_MEM] + t_mem
    real = loads >= 0  # (B, K, G)
    l = loads.clamp_min(0.0)
    pair_loads = loads.reshape(B * K, -1).index_select(0, server)  # (P, G), -1 for an absent GPU slot
    lp, realp = pair_loads.clamp_min(0.0), pair_loads >= 0
    gpu_ok = (realp & ((lp + t_gpu.unsqueeze(-1) <= h + 1e-6) | (lp <= 1e-6))).any(-1) | is_ps
    min_load = th.where(real, l, th.full_like(l, 1e4)).amin(-1)  # (B, K)
    min_load = th.where(real.any(-1), min_load, th.zeros_like(min_load))
    gpu_after = min_load.reshape(-1).index_select(0, server) + t_gpu * (~is_ps).to(t_gpu.dtype)
    head = (overloaded <= 0.5) & (cpu_after <= h + 1e-6) & (mem_after <= h + 1e-6) & gpu_ok
    n_rows = B * W
    cand = head | (torch_row_reduce(head.to(util.dtype), row, n_rows, "amax", 0.0) < 0.5)  # the ideal host's set
    big = th.full_like(util, 1e4)
    ideal = torch_row_reduce(th.where(cand.unsqueeze(-1), util, big), row, n_rows, "amin", 1e4)  # (P, 4)
    aff = obs["affinity"].reshape(-1).index_select(0, row * K + k) if "affinity" in obs else th.zeros_like(cpu_after)
    amax = torch_row_reduce(th.where(cand, aff, th.zeros_like(aff)), row, n_rows, "amax", 0.0)
    bwn = th.where(amax > 0, aff / amax.clamp_min(1e-9), th.zeros_like(aff))
    dist = ((util - ideal) ** 2).sum(-1) + (bwn - (amax > 0).to(aff.dtype)) ** 2
    dmin = torch_row_reduce(th.where(cand, dist, th.full_like(dist, 1e4)), row, n_rows, "amin", 1e4)
    gap = th.where(cand, dist - dmin, th.ones_like(dist))
    nearest = (cand & (gap <= 1e-6)).to(dist.dtype)
    f = th.stack((th.ones_like(dist), head.to(dist.dtype), cand.to(dist.dtype), dist.clamp(max=4.0),
                  gap.clamp(max=4.0), nearest, aff, bwn, h - cpu_after, h - mem_after, h - gpu_after,
                  free_gpu_mem - t_gpu_mem), -1)
    return f, idx


# ---- the comparisons ----

def _real_states(seed: int, n: int, window_jobs: int = 30) -> dict[str, th.Tensor]:
    env = make_env("clustergym/GPUCluster-v1", {"window_jobs": window_jobs})
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    states = []
    for _ in range(n):
        states.append(obs)
        obs, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(env.unwrapped.action_masks()))))
        if term or trunc:
            obs, _ = env.reset()
    return {k: th.as_tensor(np.stack([s[k] for s in states]), dtype=th.float32) for k in states[0]}


def _random_states(seed: int, B: int = 24, W: int = 12, K: int = 7, G: int = 4) -> dict[str, th.Tensor]:
    """Random observations in the observation's ranges, with the corner cases made frequent."""
    g = th.Generator().manual_seed(seed)
    F = len(T) + 4
    tasks = th.rand(B, W, F, generator=g) * 2 - 1
    for col in ("present", "is_ps", "is_running"):
        tasks[..., T[col]] = (th.rand(B, W, generator=g) < 0.5).float()
    tasks[0, :, T["present"]] = 0.0  # a state without rows
    tasks[..., T["job_index"]] = th.randint(0, 4, (B, W), generator=g).float() / 4  # ties
    tasks[B // 2:, :, T["job_index"]] += 1.5  # the earliest row's index above the cap of 1
    servers = th.rand(B, K, len(S), generator=g)
    servers[..., S["present"]] = (th.rand(B, K, generator=g) < 0.9).float()
    servers[..., S["overloaded"]] = (th.rand(B, K, generator=g) < 0.3).float()
    servers[1, :, S["overloaded"]] = 1.0  # no head server for any row
    servers[2, :, S_UTIL] = 0.5  # every candidate at the same distance
    loads = th.rand(B, K, G, generator=g) * 1.2
    loads[th.rand(B, K, G, generator=g) < 0.25] = -1.0  # absent GPU slots
    loads[:, 0] = -1.0  # a server without GPUs
    loads[3] = 0.0  # every GPU idle
    affinity = th.rand(B, W, K, generator=g) * (th.rand(B, W, 1, generator=g) < 0.6)
    C = K + 1
    dest = (th.rand(B, W, K, generator=g) < 0.6) & (tasks[..., T["present"]] > 0.5).unsqueeze(-1)
    mask = th.cat((dest.float(), th.zeros(B, W, C - K)), -1).reshape(B, W * C)
    mask = th.cat((mask, th.ones(B, 1)), -1)
    return {"tasks": tasks, "servers": servers, "gpu_loads": loads, "affinity": affinity,
            "global": th.zeros(B, 3), "action_mask": mask}


def _close(a: th.Tensor, b: th.Tensor) -> None:
    th.testing.assert_close(a, b, rtol=2e-6, atol=2e-6)


STATES = {"real-0": lambda: _real_states(0, 160), "real-1": lambda: _real_states(1, 160, window_jobs=64),
          **{f"random-{s}": (lambda s=s: _random_states(s)) for s in range(4)}}


@pytest.fixture(scope="module", params=sorted(STATES))
def states(request) -> dict[str, th.Tensor]:
    return STATES[request.param]()


def test_row_features_equal_the_torch_expressions(states):
    tasks = states["tasks"]
    cols = job_columns(tasks.shape[-1])
    ours, oracle = P.row_features(tasks, cols), torch_row_features(tasks, cols)
    present = tasks[..., T["present"]] > 0.5
    _close(ours[present], oracle[present])
    assert (ours[~present] == 0).all()


def test_stop_features_equal_the_torch_expressions(states):
    tasks = states["tasks"]
    b, r = (tasks[..., T["present"]] > -1).nonzero().unbind(1)  # every row, present or not
    th.testing.assert_close(P.stop_features(tasks, b, r), torch_stop_features(tasks)[b, r], rtol=0, atol=0)


def test_gpu_stats_equal_the_torch_expressions(states):
    _close(P.gpu_stats(states["gpu_loads"]), torch_gpu_stats(states["gpu_loads"]))


@pytest.mark.parametrize("with_affinity", [True, False])
@pytest.mark.parametrize("h", [0.9, 0.6])
def test_pair_features_equal_the_torch_expressions(states, with_affinity, h):
    obs = dict(states) if with_affinity else {k: v for k, v in states.items() if k != "affinity"}
    (f, idx), (f0, idx0) = P.pair_features(obs, h), torch_pair_features(obs, h)
    assert th.equal(idx, idx0) and th.equal(idx, valid_pairs(obs).nonzero())
    flags = [0, 1, 2, 5]  # fit, head, candidate, nearest
    assert th.equal(f[:, flags], f0[:, flags])
    _close(f, f0)
    assert len(f) > 0
