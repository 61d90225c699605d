"""The fit rule, and whether a job can ever run on a cluster.

:func:`fits` is the admission rule for one resource, which every layer uses (the simulator, the policies' view
and the env's mask; :mod:`clustergym.core.resources` re-exports it). The other functions are the rules the
simulator and the scenarios use to refuse or leave out a job that would wait forever: a gang larger than the
cluster's GPUs, CPU or memory, or tasks that cannot be packed onto the idle cluster's servers. So an episode
never hangs on such a job."""
from __future__ import annotations

import warnings

from .hardware import ClusterSpec

FIT_EPS = 1e-9  # float residue allowed when a demand meets what is free


def fits(free, need):
    """The admission rule for one resource: ``need`` fits in ``free`` (up to :data:`FIT_EPS`). Elementwise
    on numpy arrays, so the scalar check of a command and the vectorised masks are the same rule."""
    return free + FIT_EPS >= need


def cluster_totals(cluster: ClusterSpec) -> tuple[float, float, float]:
    """(CPU cores, GB host memory, GB GPU memory) of the whole cluster."""
    return (sum(s.cpu_cores for s in cluster.servers), sum(s.memory_gb for s in cluster.servers),
            sum(s.n_gpus * s.gpu_memory_gb for s in cluster.servers))


def gang_shortfall(tasks: list, cluster: ClusterSpec, totals: tuple[float, float, float] | None = None) -> str | None:
    """Why a job with these task templates can never run on ``cluster``, or None. A job runs only with
    every task holding its slot at once, so its summed CPU cores, host memory and GPU memory must fit the
    cluster's totals (the GPU count is not checked: tasks may share GPUs). ``totals``: cluster_totals(cluster),
    when already computed."""
    have = totals or cluster_totals(cluster)
    want = (sum(t.cpu_cores for t in tasks), sum(t.memory_gb for t in tasks),
            sum(t.gpu_memory_gb for t in tasks if t.kind != "ps"))
    for what, w, h in zip(("CPU cores", "GB host memory", "GB GPU memory"), want, have):
        if not fits(h, w):
            return f"its {len(tasks)} tasks need {w:.1f} {what} at once; cluster {cluster.name!r} has {h:.1f}"
    return None


def never_runs(tasks: list, cluster: ClusterSpec, totals: tuple[float, float, float] | None = None) -> str | None:
    """Why a job with these task templates could never run on ``cluster`` (its tasks together exceed the
    cluster, or no packing of them onto the idle cluster exists: :func:`idle_packing`), or None."""
    short = gang_shortfall(tasks, cluster, totals)
    if short is None and packs_on_idle(tasks, cluster) is False:
        return no_packing_reason(len(tasks), cluster)
    return short


_PACKS: dict[tuple, bool | None] = {}  # (job shape, cluster) -> idle_packing's answer
_PACKS_MAX = 100_000


def packs_on_idle(tasks: list, cluster: ClusterSpec) -> bool | None:
    """:func:`idle_packing`, answered once per job shape (its tasks' demands) and cluster in a process: the env
    filters an episode's jobs with it and the simulator checks them again when built. An undecided search is
    warned about once."""
    key = (tuple(sorted((t.kind, t.gpu_memory_gb, t.cpu_cores, t.memory_gb) for t in tasks)), cluster)
    if key not in _PACKS:
        if len(_PACKS) >= _PACKS_MAX:
            _PACKS.clear()
        _PACKS[key] = idle_packing(tasks, cluster)
        if _PACKS[key] is None:
            warnings.warn(f"could not decide within {PACK_BUDGET} search steps whether a job's {len(tasks)} "
                          f"tasks fit the idle cluster {cluster.name!r} together", RuntimeWarning, stacklevel=3)
    return _PACKS[key]


def no_packing_reason(n_tasks: int, cluster: ClusterSpec) -> str:
    return (f"its {n_tasks} tasks can never hold slots at once: no placement of them on the idle cluster "
            f"{cluster.name!r} fits every server's CPU cores and memory and every GPU's memory")


PACK_BUDGET = 20_000  # search steps beyond one per task before idle_packing gives up (undecided)


def idle_packing(tasks: list, cluster: ClusterSpec, budget: int = PACK_BUDGET) -> bool | None:
    """Whether the tasks (templates) of one job can all hold slots at once on the idle ``cluster`` under the
    fit rule (CPU cores and host memory per server, GPU memory per GPU; GPUs may be shared; a PS takes no GPU):
    True (a packing exists), False (proved impossible: no policy could ever run the job), None (undecided
    within ``budget`` extra search steps).

    A depth-first search, biggest tasks first, whose first path is best-fit decreasing. Servers in the same
    state (free CPU, memory and GPU memories) and GPUs with the same free memory are interchangeable, so the
    cluster is a multiset of server states and each step tries every distinct (state, GPU) the task fits."""
    counts: dict[tuple, int] = {}
    for s in cluster.servers:  # a state: (free CPU, free memory, sorted free GPU memories)
        key = (float(s.cpu_cores), float(s.memory_gb), (float(s.gpu_memory_gb),) * s.n_gpus)
        counts[key] = counts.get(key, 0) + 1
    need = sorted(((-1.0 if t.kind == "ps" else t.gpu_memory_gb, t.cpu_cores, t.memory_gb) for t in tasks), reverse=True)
    steps, limit = 0, len(need) + budget
    stack = [_pack_moves(counts, need[0])] if need else []
    done: list[tuple] = []  # (old state, new state) of each placed task
    while stack:
        move = next(stack[-1], None)
        if move is None:  # no (other) slot for this task: undo the previous task's and try its next one
            stack.pop()
            if done:
                _pack_apply(counts, *reversed(done.pop()))
            continue
        _pack_apply(counts, *move)
        done.append(move)
        steps += 1
        if len(done) == len(need):
            return True
        if steps > limit:
            return None
        stack.append(_pack_moves(counts, need[len(done)]))
    return False


def _pack_moves(counts: dict, need: tuple):
    """The distinct (state, new state) moves of a task needing ``need`` = (GPU memory, -1 for a PS; CPU; memory),
    tightest fit first (a generator: it reads the states as they are when it resumes, which the search restores
    before resuming it)."""
    gmem, cpu, mem = need
    for st in sorted(counts, key=lambda k: (k[0], k[1], sum(k[2]))):
        if not (fits(st[0], cpu) and fits(st[1], mem)):
            continue
        if gmem < 0:
            yield st, (st[0] - cpu, st[1] - mem, st[2])
            continue
        seen = set()
        for i, free in enumerate(st[2]):
            if free in seen or not fits(free, gmem):
                continue
            seen.add(free)
            gpus = tuple(sorted(st[2][:i] + (free - gmem,) + st[2][i + 1:]))
            yield st, (st[0] - cpu, st[1] - mem, gpus)


def _pack_apply(counts: dict, old: tuple, new: tuple) -> None:
    """One server moves from state ``old`` to ``new``."""
    counts[old] -= 1
    if not counts[old]:
        del counts[old]
    counts[new] = counts.get(new, 0) + 1


def some_ready_task_fits(ready, resources) -> bool:
    """Whether any of the ``ready`` tasks (waiting, DAG parents placed: ``Simulator.ready``) fits some
    server now by nominal demand; tasks of the same shape are tried once."""
    seen = set()
    for t in ready:
        key = (t.t.gpu_memory_gb, t.t.cpu_cores, t.t.memory_gb, t.is_ps)
        if key in seen:
            continue
        seen.add(key)
        if resources.feasible_servers(t).any():
            return True
    return False
