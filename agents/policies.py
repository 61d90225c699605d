"""Policies for Stable-Baselines3 on :class:`clustergym.gym_env.ClusterEnv` (see docs/training.md, "Architecture").

Two networks, each usable with ``sb3_contrib.MaskablePPO`` (default, masks from ``env.action_masks()``) and
with plain ``stable_baselines3.PPO``:

``mlp``
    :class:`FlatObsExtractor` concatenates the flattened ``tasks``, ``servers``, ``gpu_loads``, ``global`` and ``affinity``
    arrays (not ``action_mask``) and SB3's MLP heads (``net_arch``) map it to ``W*C+1`` logits and a value.
    Its weights are tied to W, K and the feature widths.

``pairwise``
    :class:`PairwiseMaskablePolicy` / :class:`PairwisePPOPolicy`. A permutation-invariant encoder
    (:class:`PairwiseEncoder`): per-row task MLP, per-column server MLP (server features + summary statistics
    of the per-GPU loads, so the GPU count G does not matter), a global MLP, masked mean pooling over present
    rows/columns (deep sets), one round of context mixing (each task sees the pooled servers and vice versa),
    then, with x(row, col) the weight-free pair features of :func:`pair_features` (MLF-H's ideal-host distance
    and headroom restated from the observation) and the row features of :func:`row_features` appended to the
    task rows before the task MLP,

    - pair(row, col)  = relu(M tanh(A h_row + B h_col + X x(row, col) + c))   (pair embedding, col < K)
    - logit(row, col) = w . pair(row, col) + row(h_row)     (row(.) = MLP: the task's priority)
    - logit(row, K)   = MLP(h_row) + row(h_row)             ("back to the queue": requeue on a migration
      row, preempt on a running-job row, one MLP each)
    - logit(row, K+1+o) = MLP([h_row, s(row, o)]) + row(h_row)   (stop option o of the row's job; s are the
      weight-free option features of :func:`stop_features`, one MLP shared by the options)
    - logit(end)      = MLP([pool_tasks, pool_servers, g, max over valid pairs of pair(row, col)])
    - value           = MLP([pool_tasks, pool_servers, g])

    Invalid actions (``obs["action_mask"] == 0``) get logit -1e8 inside the network, so even plain PPO with
    this policy never picks one. No weight depends on W or K, so a trained network can be loaded into a
    policy for another window size or cluster (``policy.load_state_dict``; tests/test_agents.py checks it).
    The number of columns per row, ``C = K + 1 (+ 3 stop options)``, is read from the mask's length.

    With the env's optional columns (``gpu_actions``, ``sub_batch_actions``: :func:`action_layout` gives the
    policy ``gpu_slots`` G and ``sub_batches`` n, which are then part of its saved constructor arguments):

    - logit(row, (col, g)) = w . pair(row, col) + MLP([pair(row, col), q(col, g)]) + row(h_row)   (GPU slot g of
      server column col; q: the slot's load, idle and exists flags from ``gpu_loads``)
    - logit(row, sub i) = MLP([h_row, i / 11, 1]) + row(h_row)   (2^i sub-batches for the row's waiting job)

    Both heads are shared by every slot and option, so the weights still do not depend on W, K or G.
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch as th
from torch import nn

from sb3_contrib.common.maskable.distributions import MaskableCategoricalDistribution
from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy
from stable_baselines3.common.policies import ActorCriticPolicy, BaseModel
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

from clustergym.agents import feature_kernels as kernels
from clustergym.agents.distributions import SoftmaxCategoricalDistribution, SoftmaxMaskableCategoricalDistribution
from clustergym.core.engine import SimConfig
from clustergym.core.workload import STOP_OPTIONS
from clustergym.observation import FIXED_TASK_COLUMNS, SERVER_COLUMNS

OBS_KEYS = ("tasks", "servers", "gpu_loads", "global", "affinity")
MASKED_LOGIT = -1e8
N_GPU_STATS = 4  # mean, max, min load over real GPUs, idle-GPU fraction


class FlatObsExtractor(BaseFeaturesExtractor):
    """Concatenate the flattened observation arrays (the mask is left out; MaskablePPO applies it)."""

    def __init__(self, observation_space: gym.spaces.Dict):
        dim = int(sum(np.prod(observation_space[k].shape) for k in OBS_KEYS))
        super().__init__(observation_space, features_dim=dim)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        return th.cat([obs[k].flatten(1) for k in OBS_KEYS], dim=1)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


def _mlp_of_concat(mlp: nn.Sequential, *parts: th.Tensor) -> th.Tensor:
    """``mlp(cat(parts, -1))`` for an :func:`_mlp`, each part broadcast to the others' leading shape: the first
    layer is applied part by part (its weight's column blocks), so a part shared by many rows (a pooled
    context, a row's embedding shared by its options) is multiplied once, not once per row it is copied to."""
    first, z, at = mlp[0], mlp[0].bias, 0
    for part in parts:
        width = part.shape[-1]
        z = z + nn.functional.linear(part, first.weight[:, at:at + width])
        at += width
    return mlp[2](mlp[1](z))


def _masked_mean(x: th.Tensor, present: th.Tensor) -> th.Tensor:
    w = present.unsqueeze(-1)
    return (x * w).sum(1) / w.sum(1).clamp_min(1.0)


def _segment_mean(x: th.Tensor, state: th.Tensor, n_states: int, counts: th.Tensor) -> th.Tensor:
    """(n_states, d) mean of packed rows ``x`` (R, d) per state (``state[i]`` of row i), ``counts`` (n_states, 1)
    the rows per state clamped at 1 (a state without rows gives 0): :func:`_masked_mean` of packed rows."""
    total = th.zeros((n_states, x.shape[-1]), dtype=x.dtype, device=x.device)
    return total.index_add(0, state, x) / counts


def _np(x: th.Tensor) -> np.ndarray:
    return x.detach().cpu().numpy()


def _tensor(a: np.ndarray, like: th.Tensor) -> th.Tensor:
    return th.from_numpy(a).to(device=like.device, dtype=like.dtype)


def gpu_stats(gpu_loads: th.Tensor) -> th.Tensor:
    """(B, K, G) per-GPU loads with -1 padding -> (B, K, 4): mean, max, min load over the real GPUs and their
    idle fraction (zeros for a server without GPUs)."""
    return _tensor(kernels.gpu_stats(_np(gpu_loads)), gpu_loads)


# observation columns by name: the task columns at a fixed index in every configuration, the server columns
T = {name: i for i, name in enumerate(FIXED_TASK_COLUMNS)}
S = {name: i for i, name in enumerate(SERVER_COLUMNS)}
S_UTIL = slice(S["util_gpu"], S["util_net"] + 1)  # the utilisation vector (gpu, cpu, mem, net) of MLF-H's ideal host
if SERVER_COLUMNS[S_UTIL] != ("util_gpu", "util_cpu", "util_mem", "util_net"):
    raise ImportError(f"the pair features need util_gpu..util_net adjacent in SERVER_COLUMNS, got {SERVER_COLUMNS}")
U_CPU, U_MEM = S["util_cpu"] - S_UTIL.start, S["util_mem"] - S_UTIL.start  # their positions in the vector
# the simulator's default overload threshold h_r, for policies built without an env's (policy_spec passes it)
DEFAULT_OVERLOAD_THRESHOLD = SimConfig().overload_threshold
N_PAIR_FEATS = 12
N_ROW_FEATS = 8
_OPT = tuple(o.replace("-", "_") for o in STOP_OPTIONS)
N_STOP = len(STOP_OPTIONS)
N_STOP_FEATS = N_STOP + 6
N_SLOT_FEATS = 3  # a GPU slot's load, whether it is idle, whether it exists (gpu_loads >= 0)
N_SUB_FEATS = 2  # a sub-batch option's log2(steps) / 11 and a constant 1


def job_columns(task_dim: int) -> dict[str, int]:
    """Indices of the job-level task columns the row features read (``urgency``, ``job_index``,
    ``deadline_slack``, ``placed_share``). They are in the observation's fixed prefix
    (:data:`clustergym.observation.FIXED_TASK_COLUMNS`), so they do not depend on the model catalogue or the
    env's ``loss_history``."""
    if task_dim < len(T):
        raise ValueError(f"task width {task_dim} is narrower than the observation's fixed columns ({len(T)})")
    return {"urgency": T["urgency"], "job_index": T["job_index"], "slack": T["deadline_slack"],
            "placed": T["placed_share"], "remaining": T["remaining_time"]}


def row_features(tasks: th.Tensor, cols: dict[str, int]) -> th.Tensor:
    """Weight-free per-row features (B, W, 8) for the row score, restating the inputs of MLF-H's priority
    (MLFS Eqs. 2-6) that the squashed observation hides from a small MLP: 1/deadline slack in hours (clamped
    at one minute, sign kept), 1/remaining run time in hours (clamped at one minute), waiting hours, urgency x
    partition share; and the relative ones behind its
    ordering (parameter servers first, then partly placed jobs, ties by arrival): "is a PS", "is the earliest
    PS row", "job partly placed", job index minus the earliest row's. Reductions are masked min over present
    rows, so the features are permutation-equivariant and independent of W; absent rows are zero.
    ``cols``: :func:`job_columns`. Computed by :func:`clustergym.agents.feature_kernels.row_features`."""
    return _tensor(kernels.row_features(_np(tasks), T["present"], cols["slack"], T["task_waiting_time"],
                                        cols["remaining"], cols["urgency"], T["partition_share"], T["is_ps"],
                                        cols["job_index"], T["is_running"], cols["placed"]), tasks)


_STOP_COLS = {kind: np.array([T[f"{kind}_{o}"] for o in _OPT]) for kind in ("stop", "own_stop", "target")}


def stop_features(tasks: th.Tensor, rows_b: th.Tensor, rows_r: th.Tensor) -> th.Tensor:
    """Weight-free (row, stop option) features (R, 3, 9) for the stop-option logits of the task rows
    (``rows_b[i]``, ``rows_r[i]``), from the row's job's columns: the option's one-hot; whether it is the job's
    current and its user's own option; whether the system may change the rule; the option's target minus the
    progress so far (<= 0: the job would finish at once) and minus the current target (< 0: fewer
    iterations); "finishes at once". Per row, so permutation-equivariant and independent of W and K."""
    return _tensor(kernels.stop_features(_np(tasks), _np(rows_b), _np(rows_r), T["progress"], T["target_progress"],
                                         T["stop_changeable"], _STOP_COLS["stop"], _STOP_COLS["own_stop"],
                                         _STOP_COLS["target"]), tasks)


def valid_pairs(obs: dict[str, th.Tensor], gpu_slots: int = 0) -> th.Tensor:
    """The (B, W, K) valid (task row, destination server) pairs: the placement part of the action mask (with
    ``gpu_slots`` G, a server is valid where one of its G slot columns is), or, without a mask of the env's
    layout, every present row with every present server."""
    tasks, servers, mask = obs["tasks"], obs["servers"], obs.get("action_mask")
    B, W, _ = tasks.shape
    K = servers.shape[1]
    D = K * gpu_slots if gpu_slots else K
    C = (mask.shape[-1] - 1) // W if mask is not None else 0
    if mask is not None and mask.shape[-1] == W * C + 1 and C > D:
        dest = mask[:, :-1].reshape(B, W, C)[..., :D] > 0.5
        return dest.reshape(B, W, K, gpu_slots).any(-1) if gpu_slots else dest
    return (tasks[..., T["present"]].unsqueeze(-1) > 0.5) & (servers[..., S["present"]] > 0.5).unsqueeze(1)


# the task and server columns the pair features read, in the order pair_features unpacks them
_PAIR_TASK_COLS = np.array([T[c] for c in ("cpu_demand", "mem_demand", "gpu_util_demand", "is_ps", "gpu_mem_demand")])
_PAIR_SERVER_COLS = np.array([*range(S_UTIL.start, S_UTIL.stop), S["overloaded"], S["free_gpu_mem"]])


def pair_features(obs: dict[str, th.Tensor], h: float, gpu_slots: int = 0) -> tuple[th.Tensor, th.Tensor]:
    """Weight-free features of the valid (task row, destination) pairs, (P, 12), and their indices (P, 3) as
    (batch, row, server) in row-major order (:func:`valid_pairs`). Only valid pairs are computed: an invalid
    pair's logit is masked and it takes no part in the end-round score, so its features would change nothing.
    They restate MLF-H's placement rule (MLFS §3.3.2) in observation terms, with ``h`` the env's overload
    threshold h_r (:func:`overload_threshold`):

    - ``fit`` (1 for every valid pair); ``head``: an estimate of "underloaded and not overloaded by this task"
      (server not overloaded, CPU/memory use + the task's demand <= h, a GPU whose load + the task's GPU use
      <= h or an idle GPU; a parameter server needs no GPU);
    - the squared Euclidean distance of the server's utilisation (gpu, cpu, mem, net) to the row's ideal
      virtual host (element-wise minimum over the row's ``head`` servers, else its valid servers) plus the
      bandwidth term (affinity / its row maximum vs 1), its gap to the row minimum and an "is the nearest"
      flag;
    - affinity, the headroom margins (CPU, memory, best GPU), and the free-capacity margin of GPU memory.

    Every feature is computed per pair or reduced over a row's valid pairs with min/max, so the result is
    permutation-equivariant and independent of W, K and G."""
    valid = valid_pairs(obs, gpu_slots)
    tasks = obs["tasks"]
    aff = _np(obs["affinity"]) if "affinity" in obs else np.zeros((0, 0, 0), dtype=np.float32)
    f, idx = kernels.pair_features(_np(tasks), _np(obs["servers"]), _np(obs["gpu_loads"]), aff, _np(valid),
                                   float(h), _PAIR_TASK_COLS, _PAIR_SERVER_COLS, U_CPU, U_MEM)
    return _tensor(f, tasks), th.from_numpy(idx).to(tasks.device)


class PairwiseEncoder(nn.Module):
    """obs dict -> (logits (B, W*C+1), value embedding (B, 3d)). Weights are independent of W, K, G."""

    def __init__(self, task_dim: int, server_dim: int, global_dim: int, d: int = 64,
                 overload_threshold: float = DEFAULT_OVERLOAD_THRESHOLD, gpu_slots: int = 0, sub_batches: int = 0):
        super().__init__()
        self.d = d
        self.overload_threshold = float(overload_threshold)  # h of the pair features
        self.gpu_slots, self.sub_batches = int(gpu_slots), int(sub_batches)  # the env's optional columns
        self.cols = job_columns(task_dim)
        self.task_in = _mlp(task_dim + N_ROW_FEATS, d, d)
        self.server_in = _mlp(server_dim + N_GPU_STATS, d, d)
        self.glob_in = _mlp(global_dim, d, d)
        self.task_ctx = _mlp(3 * d, d, d)
        self.server_ctx = _mlp(3 * d, d, d)
        dp = max(8, d // 2)  # pair-scorer width: the (B, W, K, dp) tensors dominate the cost
        self.pair_t = nn.Linear(d, dp)
        self.pair_s = nn.Linear(d, dp, bias=False)
        self.pair_x = nn.Linear(N_PAIR_FEATS, dp, bias=False)  # the derived pair features (pair_features)
        self.pair_mid = nn.Linear(dp, dp)
        self.pair_out = nn.Linear(dp, 1)
        self.row = _mlp(d, d, 1)  # per-row score added to every action of the row (the task's priority)
        self.requeue = _mlp(d, d, 1)  # "back to the queue" of a migration row
        self.preempt = _mlp(d, d, 1)  # "back to the queue" of a running-job row: the whole job
        self.stop = _mlp(d + N_STOP_FEATS, d, 1)  # a stop option of the row's job
        self.end = _mlp(3 * d + dp, d, 1)
        if self.gpu_slots:  # only then: the default layout's saved weights keep their names
            self.slot = _mlp(dp + N_SLOT_FEATS, dp, 1)  # a GPU slot of a valid (row, server) pair
        if self.sub_batches:
            self.sub = _mlp(d + N_SUB_FEATS, d, 1)  # a sub-batch option of the row's job

    def forward(self, obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
        """Scores only the rows up to the last one present in the batch (padding rows after it are masked
        anyway and, by the permutation invariance, change no other score: on the contended default a median
        of 11 of the W = 64 rows are present), then pads the logits back to the env's ``W * C + 1`` layout."""
        tasks, mask = obs["tasks"], obs.get("action_mask")
        B, W, _ = tasks.shape
        present = (tasks[..., T["present"]] > 0.5).any(0).nonzero()
        n = int(present.max()) + 1 if len(present) else 1
        if mask is None or n >= W or (mask.shape[-1] - 1) % W:
            return self._scores(obs)
        C = (mask.shape[-1] - 1) // W
        rows = mask[:, :-1].reshape(B, W, C)[:, :n].reshape(B, n * C)
        cut = {**obs, "tasks": tasks[:, :n], "action_mask": th.cat((rows, mask[:, -1:]), -1)}
        if "affinity" in obs:
            cut["affinity"] = obs["affinity"][:, :n]
        logits, pooled = self._scores(cut)
        pad = th.full((B, (W - n) * C), MASKED_LOGIT, dtype=logits.dtype, device=logits.device)
        return th.cat((logits[:, :-1], pad, logits[:, -1:]), -1), pooled

    def _scores(self, obs: dict[str, th.Tensor]) -> tuple[th.Tensor, th.Tensor]:
        """Scores the present task rows only, packed as (R, ...) over the batch (on the contended default a
        state shows a mean of about 4 rows, where the rows up to the batch's last present one are about 18), and
        writes them into the (B, W * C + 1) layout, absent rows masked. An absent row takes no part in any
        present row's score (pooling and the row features' reductions are over present rows), so packing
        changes no score but by float rounding."""
        tasks, servers, glob = obs["tasks"], obs["servers"], obs["global"]
        B, W, _ = tasks.shape
        K = servers.shape[1]
        present = tasks[..., T["present"]] > 0.5
        pb, pr = present.nonzero().unbind(1)  # the packed rows' (state, row)
        packed_row = (present.flatten().cumsum(0) - 1).reshape(B, W)  # (state, row) -> its packed index
        n_rows = present.sum(1, keepdim=True).to(tasks.dtype).clamp_min(1.0)
        sp = (servers[..., S["present"]] > 0.5).to(tasks.dtype)
        ht = self.task_in(th.cat((tasks, row_features(tasks, self.cols)), -1)[pb, pr])  # (R, d)
        hs = self.server_in(th.cat((servers, gpu_stats(obs["gpu_loads"])), -1))
        g = self.glob_in(glob)
        pt, ps = _segment_mean(ht, pb, B, n_rows), _masked_mean(hs, sp)
        ht = ht + _mlp_of_concat(self.task_ctx, ht, ps[pb], g[pb])
        hs = hs + _mlp_of_concat(self.server_ctx, hs, pt.unsqueeze(1), g.unsqueeze(1))
        pt, ps = _segment_mean(ht, pb, B, n_rows), _masked_mean(hs, sp)
        x, idx = pair_features(obs, self.overload_threshold, self.gpu_slots)
        b, r, k = idx.unbind(1)
        if not present[b, r].all():  # a packed index exists for present rows only
            raise ValueError("the action mask marks a destination valid on a task row whose 'present' column is 0")
        rows = packed_row.reshape(-1).index_select(0, b * W + r)  # the pairs' packed rows
        on_server = self.pair_s(hs).reshape(B * K, -1).index_select(0, b * K + k)
        # (P, dp), valid pairs only: pair_t(h_row) + pair_s(h_col) + pair_x(x), the last as the product's addend
        pre = th.addmm(self.pair_t(ht).index_select(0, rows) + on_server, x, self.pair_x.weight.t())
        hp = th.relu(self.pair_mid(th.tanh(pre)))
        cols = [self._destination_scores(obs, hp, rows, b, k, len(pb), K)]  # (R, D), invalid pairs masked
        job_row = tasks[pb, pr, T["job_row"]].unsqueeze(-1) > 0.5
        cols.append(th.where(job_row, self.preempt(ht), self.requeue(ht)))  # (R, 1) "back to the queue"
        mask = obs.get("action_mask")
        if mask is not None and (mask.shape[-1] - 1) // W > cols[0].shape[-1] + 1 + self.sub_batches:
            cols.append(_mlp_of_concat(self.stop, ht.unsqueeze(1), stop_features(tasks, pb, pr)).squeeze(-1))
        if self.sub_batches:
            cols.append(self._sub_batch_scores(ht))
        row_scores = th.cat(cols, -1) + self.row(ht)  # (R, C)
        pooled = th.cat((pt, ps, g), -1)
        # end round sees the best valid pair (max-pooled pair embedding): "is anything worth doing?"
        # (the embedding is a ReLU's, so 0 stands for "no valid pair", as in a max over zeroed invalid pairs)
        hmax = th.zeros((B, hp.shape[-1]), dtype=hp.dtype, device=hp.device)
        hmax = hmax.scatter_reduce(0, b.unsqueeze(-1).expand_as(hp), hp, "amax", include_self=True)
        end = self.end(th.cat((pooled, hmax), -1))  # (B, 1)
        logits = th.full((B, W, row_scores.shape[-1]), MASKED_LOGIT, dtype=hp.dtype, device=hp.device)
        logits = th.cat((logits.index_put((pb, pr), row_scores).reshape(B, -1), end), -1)
        if mask is not None and mask.shape[-1] == logits.shape[-1]:
            logits = th.where(mask > 0.5, logits, th.full_like(logits, MASKED_LOGIT))
        return logits, pooled

    def _destination_scores(self, obs, hp, rows, b, k, R: int, K: int) -> th.Tensor:
        """(R, D) scores of the packed rows' destination columns from the valid pairs' embeddings ``hp`` (P, dp)
        (pair i of packed row ``rows[i]``, state ``b[i]``, server ``k[i]``): one per server, or with GPU slots
        one per (server, slot), the pair's score plus the slot head's."""
        pair = self.pair_out(hp).squeeze(-1)  # (P,)
        if not self.gpu_slots:
            scores = th.full((R, K), MASKED_LOGIT, dtype=hp.dtype, device=hp.device)
            return scores.index_put((rows, k), pair)
        G = self.gpu_slots
        loads = obs["gpu_loads"][b, k]  # (P, G)
        q = th.stack((loads.clamp_min(0.0), (loads.abs() <= 1e-6).to(hp.dtype), (loads >= 0).to(hp.dtype)), -1)
        slot = _mlp_of_concat(self.slot, hp.unsqueeze(1), q).squeeze(-1)  # (P, G)
        scores = th.full((R, K, G), MASKED_LOGIT, dtype=hp.dtype, device=hp.device)
        return scores.index_put((rows, k), pair.unsqueeze(-1) + slot).reshape(R, K * G)

    def _sub_batch_scores(self, ht: th.Tensor) -> th.Tensor:
        """(R, n) scores of the sub-batch options (2^i sub-batches, i < n) of each packed row's job."""
        i = th.arange(self.sub_batches, dtype=ht.dtype, device=ht.device)
        opt = th.stack((i / 11.0, th.ones_like(i)), -1)  # (n, 2)
        return _mlp_of_concat(self.sub, ht.unsqueeze(-2), opt).squeeze(-1)


def check_columns(n_actions: int, W: int, K: int, gpu_slots: int = 0, sub_batches: int = 0) -> int:
    """C of the action space the pairwise scorer writes: ``D + 1 (+ 3 stop options) + sub_batches`` columns per
    row, D = K, or K x ``gpu_slots`` (the env's ``gpu_actions``). ValueError when ``n_actions`` is another layout
    (a policy built for other optional columns than the env's: :func:`action_layout`)."""
    D = K * gpu_slots if gpu_slots else K
    C, extra = divmod(n_actions - 1, W)
    if extra or C - D - 1 - sub_batches not in (0, N_STOP):
        raise ValueError(f"{n_actions} actions over {W} rows is not the layout of a pairwise policy with {K} "
                         f"destinations, gpu_slots={gpu_slots} and sub_batches={sub_batches} (C = {D} + 1 "
                         f"[+ {N_STOP} stop options] + {sub_batches}): build it with the env's action_layout(env)")
    return C


def action_layout(env: Any) -> dict[str, int]:
    """The pairwise policy's ``gpu_slots`` and ``sub_batches`` for ``env``'s optional action columns
    (``gpu_actions``, ``sub_batch_actions``; 0 when off): a ClusterEnv, wrapped or not, or a vector env."""
    window = env_attribute(env, "window")
    return {"gpu_slots": int(window.G), "sub_batches": int(window.n_sub)}


class PairwiseExtractor(BaseFeaturesExtractor):
    """Runs :class:`PairwiseEncoder`; features = [logits, pooled embedding] (split again by the head)."""

    def __init__(self, observation_space: gym.spaces.Dict, d: int = 64,
                 overload_threshold: float = DEFAULT_OVERLOAD_THRESHOLD, gpu_slots: int = 0, sub_batches: int = 0):
        n_actions = int(observation_space["action_mask"].shape[0])
        check_columns(n_actions, observation_space["tasks"].shape[0], observation_space["servers"].shape[0],
                      gpu_slots, sub_batches)
        super().__init__(observation_space, features_dim=n_actions + 3 * d)
        self.n_actions = n_actions
        self.encoder = PairwiseEncoder(observation_space["tasks"].shape[1], observation_space["servers"].shape[1],
                                       observation_space["global"].shape[0], d, overload_threshold, gpu_slots,
                                       sub_batches)

    def forward(self, obs: dict[str, th.Tensor]) -> th.Tensor:
        logits, pooled = self.encoder(obs)
        return th.cat((logits, pooled), -1)


class _SplitHead(nn.Module):
    """Stands in for SB3's MlpExtractor: latent_pi = the logits, latent_vf = MLP(pooled embedding)."""

    def __init__(self, n_actions: int, pooled_dim: int, hidden: int = 64):
        super().__init__()
        self.n = n_actions
        self.latent_dim_pi = n_actions
        self.latent_dim_vf = hidden
        self.vf = nn.Sequential(nn.Linear(pooled_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())

    def forward(self, features: th.Tensor) -> tuple[th.Tensor, th.Tensor]:
        return self.forward_actor(features), self.forward_critic(features)

    def forward_actor(self, features: th.Tensor) -> th.Tensor:
        return features[:, :self.n]

    def forward_critic(self, features: th.Tensor) -> th.Tensor:
        return self.vf(features[:, self.n:])


class _PairwiseMixin:
    def __init__(self, observation_space, action_space, lr_schedule, *args, d: int = 64,
                 overload_threshold: float = DEFAULT_OVERLOAD_THRESHOLD, gpu_slots: int = 0, sub_batches: int = 0,
                 **kwargs: Any):
        kwargs.setdefault("features_extractor_class", PairwiseExtractor)
        kwargs.setdefault("features_extractor_kwargs", {"d": d, "overload_threshold": overload_threshold,
                                                        "gpu_slots": gpu_slots, "sub_batches": sub_batches})
        kwargs.setdefault("ortho_init", False)
        kwargs.setdefault("share_features_extractor", True)
        # SB3's Adam settings (eps 1e-5) with torch's fused CPU kernel: one call for all parameters instead of
        # several small ops per parameter tensor (3.4 ms against 0.6 ms per step for the encoder's 48 tensors)
        kwargs.setdefault("optimizer_kwargs", {"eps": 1e-5, "fused": True})
        self._d = d
        self._overload_threshold = float(overload_threshold)
        self._layout = {"gpu_slots": int(gpu_slots), "sub_batches": int(sub_batches)}
        super().__init__(observation_space, action_space, lr_schedule, *args, **kwargs)

    def _build_mlp_extractor(self) -> None:
        n = int(self.action_space.n)
        self.mlp_extractor = _SplitHead(n, self.features_dim - n).to(self.device)

    def _build(self, lr_schedule) -> None:
        n = int(self.action_space.n)  # the same distribution, normalised with log_softmax (agents/distributions.py)
        masked = isinstance(self.action_dist, MaskableCategoricalDistribution)
        self.action_dist = (SoftmaxMaskableCategoricalDistribution if masked else SoftmaxCategoricalDistribution)(n)
        super()._build(lr_schedule)
        self.action_net = nn.Identity()  # the encoder already outputs the logits
        self.optimizer = self.optimizer_class(self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data["d"] = self._d
        data["overload_threshold"] = self._overload_threshold
        data.update({k: v for k, v in self._layout.items() if v})  # absent for the default layout, as before
        return data


class PairwiseMaskablePolicy(_PairwiseMixin, MaskableActorCriticPolicy):
    """MaskablePPO policy with the pairwise (task, destination) scorer."""


class PairwisePPOPolicy(_PairwiseMixin, ActorCriticPolicy):
    """Plain-PPO policy with the pairwise scorer (masks applied inside the network from obs["action_mask"])."""


def size_invariant(policy_class: Any) -> bool:
    """Whether ``policy_class`` (a policy class, e.g. a saved model's) has no weight that depends on the window
    size W, the destination count K or the GPUs per server, so its weights load onto any scenario's spaces."""
    return isinstance(policy_class, type) and issubclass(policy_class, _PairwiseMixin)


def env_attribute(env: Any, name: str) -> Any:
    """Attribute ``name`` of ``env``'s :class:`~clustergym.gym_env.ClusterEnv`: a ClusterEnv, wrapped or not, or a
    vector env of them (SB3's or Gymnasium's; its first env's)."""
    if not isinstance(env, gym.Env) and hasattr(env, "get_attr"):
        return env.get_attr(name)[0]
    return getattr(env.unwrapped, name)


def overload_threshold(env: Any) -> float:
    """The overload threshold h_r of ``env``'s simulator (``sim={"overload_threshold": ...}``; ``env`` as for
    :func:`env_attribute`)."""
    return float(env_attribute(env, "sim_config").overload_threshold)


def policy_spec(policy: str, algo: str, net_arch: list[int] | None = None, d: int = 64,
                share_encoder: bool = True, overload_threshold: float | None = None, gpu_slots: int = 0,
                sub_batches: int = 0) -> tuple[type, dict]:
    """(policy class, policy_kwargs) for ``--policy`` mlp|pairwise and ``--algo`` maskable|ppo.
    ``share_encoder=False`` gives the critic its own copy of the encoder (SB3's ``share_features_extractor``),
    so value-loss gradients cannot move the actor's features (twice the encoder compute). The pairwise
    policy needs the env's ``overload_threshold`` (:func:`overload_threshold`) for its pair features and its
    optional action columns, ``gpu_slots`` and ``sub_batches`` (:func:`action_layout`)."""
    if policy == "mlp":
        cls = MaskableActorCriticPolicy if algo == "maskable" else ActorCriticPolicy
        arch = list(net_arch or [256, 256])
        return cls, {"features_extractor_class": FlatObsExtractor, "net_arch": {"pi": arch, "vf": arch},
                     "share_features_extractor": bool(share_encoder)}
    if policy == "pairwise":
        if overload_threshold is None:
            raise ValueError("the pairwise policy needs overload_threshold= (overload_threshold(env)): its pair "
                             "features test headroom against the env's h_r")
        layout = {k: int(v) for k, v in (("gpu_slots", gpu_slots), ("sub_batches", sub_batches)) if v}
        return ((PairwiseMaskablePolicy if algo == "maskable" else PairwisePPOPolicy),
                {"d": int(d), "share_features_extractor": bool(share_encoder),
                 "overload_threshold": float(overload_threshold), **layout})
    raise ValueError(f"unknown policy {policy!r}; choose 'mlp' or 'pairwise'")


def actor_features(policy, obs: dict[str, th.Tensor]) -> th.Tensor:
    """The actor's features of an SB3 actor-critic policy, with or without an encoder shared with the critic:
    only the actor's encoder runs (SB3's ``extract_features`` would run the critic's too when it is separate)."""
    return BaseModel.extract_features(policy, obs, policy.pi_features_extractor)


def masked_logits(policy, obs: dict[str, th.Tensor], masks: th.Tensor | None) -> th.Tensor:
    """Action logits of an SB3 actor-critic policy, invalid actions at -inf (for BC and agreement)."""
    features = actor_features(policy, obs)
    logits = policy.action_net(policy.mlp_extractor.forward_actor(features))
    if masks is not None:
        logits = logits.masked_fill(~masks.bool(), float("-inf"))
    return logits
