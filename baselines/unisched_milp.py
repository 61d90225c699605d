"""UniSched's Estimator and Selector (Gao et al., IEEE TC 2024, §III-B/C), apart from any simulator: the
duration estimate (Eqs. 1-3), the reward generator, the policy generator's cell allocations and the
job-selection/allocation MILP (Eqs. 4-14), solved with pulp + HiGHS under a time limit.

The printed MILP is incomplete (``/work/shared/research/seed_unisched_sjfbsbf.md``, "Gaps"): its products s x
and y s x are non-linear, it has no per-lease capacity constraint, BE jobs have no deadline in it, and (7) is
printed with "<=" where its text asks for ">=". We solve this linear reconstruction on a grid of K slots of one
BE lease each (slot 0 = the coming cycle):

    maximise   sum_{i,p,f} V_{f,i} z_{i,p,f}  +  eps sum_i N_i x_{0,i}            (Eq. 4, + a work-conserving tie-break)
    s.t.       sum_{p,f} z_{i,p,f} <= 1                                           (Eqs. 6, 13: one deadline, one allocation)
               sum_{k < min(Q_f, K)} x_{k,i} >= sum_p need_{i,p,f} z_{i,p,f}       (Eqs. 7, 12 with ">=")
               x_{k,i} <= sum_{p,f} z_{i,p,f}                                     (a job runs only if planned)
               sum_i G_i x_{k,i} <= M                                             (the missing capacity constraint)
               sum_p w_{i,p} = x_{0,i},  w_{i,p} <= sum_f z_{i,p,f}                (slot 0's allocation, Eq. 11)
               sum_{g >= l} 2^(g-l) N_g^con <= sum_{g >= l} 2^(g-l) N_g^cell       (Eq. 14, every level l)
               x_{0,i} = 1 for a job whose lease still runs                        (leases: it cannot be suspended;
                                                                                   such an SLO job also has a
                                                                                   zero-value target "run now")

A best-effort job's value is scaled by phi_{i,p} (its reward is the reciprocal of its remaining time, which
the allocation's speed divides). ``G_i`` = the GPUs of the job's smallest allocation (a round-up's cell counts whole).
``need_{i,p,f} = ceil(L_i / phi_{i,p}) - max(0, Q_f - K)``: the leases the job needs at allocation p (Eq. 12's
phi-bar, Eq. 8), less the slots after the horizon that could still serve it; ``Q_f`` = whole slots before the
deadline. A best-effort job has one pseudo-deadline at the end of slot 0 with ``need = 1`` (it earns its value
by running now); it has no later slots. ``N_g^con`` counts the cells of the jobs started in slot 0;
``N_g^cell`` the free cells plus the cells of running jobs the plan suspends (``1 - x_{0,i}``), each counted in
its own level (conservative: freed cells do not merge). ``eps`` is small enough never to outweigh a value.
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

# UniSched §III-C: profiler and BE jobs' rewards are below 1 (a profiler job's is 1); an SLO job's are 100, 80 ...
BE_VALUE_SCALE = 0.99
TIE_BREAK = 1e-5  # eps: at most this much objective in total, below any value difference that matters


class InfeasibleMILP(ValueError):
    """The selection MILP has no solution: no plan keeps running every job whose lease still runs (pinned to
    run now), e.g. they need more GPUs than the cluster has. A consistent cluster state always has one (every
    pinned job may be kept at no value); the message names the pinned jobs and their GPUs."""


# ----------------------------------------------------------------------------------------------- estimator


def iteration_time(t_comp: float, t_intra: float, t_inter: float, n_gpus: int, n_nodes: int) -> float:
    """UniSched Eq. 2: T^comp on one GPU; plus (N - 1) T^1 on one node; plus (N - 1) T^2 across nodes."""
    if n_gpus < 1 or n_nodes < 1:
        raise ValueError(f"iteration_time needs n_gpus >= 1 and n_nodes >= 1 (got {n_gpus}, {n_nodes})")
    if n_gpus == 1:
        return t_comp
    return t_comp + (n_gpus - 1) * (t_intra if n_nodes == 1 else t_inter)


def suspension_probabilities(n: int, m: int) -> list[float]:
    """Eq. 3's P(k suspensions), k = 0..min(n-1, m-n): ``C(n-1, k) C(m-n+1, k+1) / C(m, n)``, for ``n`` run
    leases placed uniformly among ``m`` (the deadline's) leases."""
    if not 1 <= n <= m:
        raise ValueError(f"suspension_probabilities needs 1 <= n <= m (got n={n}, m={m})")
    total = math.comb(m, n)
    return [math.comb(n - 1, k) * math.comb(m - n + 1, k + 1) / total for k in range(min(n - 1, m - n) + 1)]


def expected_suspensions(n: int, m: int) -> float:
    """Eq. 3 divided by t^sr: the expected number of suspend/resume events, sum_k k P(k)."""
    return sum(k * p for k, p in enumerate(suspension_probabilities(n, m)))


def sr_overhead(n: int, m: int | None, t_sr: float) -> float:
    """T^sr (Eq. 3): for an SLO job running ``n`` of ``m`` leases, E[k] t^sr; for a best-effort job (``m`` None)
    "the probability that suspension and resumption occurs is 1/2" per lease, n/2 t^sr. With ``n > m`` (the
    deadline cannot be met) the job runs ``m`` leases back to back: no suspension is expected."""
    if n <= 0:
        return 0.0
    if m is None:
        return n / 2.0 * t_sr
    return 0.0 if n >= m else expected_suspensions(n, m) * t_sr


def duration(t_sr: float, n_iter: float, t_iter: float) -> float:
    """UniSched Eq. 1: T^dur = T^sr + N^iter T^iter."""
    return t_sr + n_iter * t_iter


# ------------------------------------------------------------------------------ cells and allocations


def cells_of(n: int, top: int) -> tuple[int, ...]:
    """``n`` GPUs as buddy cells of levels 0..top: whole top-level cells, then the remainder in binary (the
    fewest cells). Free GPUs of a server, and the exact allocation of a job."""
    size = 1 << top
    out = [0] * (top + 1)
    out[top], rest = divmod(n, size)
    for g in range(top - 1, -1, -1):
        if rest >> g & 1:
            out[g] += 1
    return tuple(out)


def cells_free(idle: Iterable[int], cells: Sequence[int]) -> bool:
    """Can an allocation of ``cells`` (the count of level-g cells, 2^g GPUs of one server each) be taken now
    from servers with ``idle`` free GPUs each? A cell never spans servers. Largest cells first, each from the
    server with the fewest free GPUs that holds it; since every cell size divides the larger ones, which server
    gives a cell does not change how many smaller cells are left, so the answer is exact."""
    free = sorted(i for i in idle if i > 0)
    for g in range(len(cells) - 1, -1, -1):
        size = 1 << g
        for _ in range(cells[g]):
            k = bisect.bisect_left(free, size)  # the fewest free GPUs that hold the cell
            if k == len(free):
                return False
            rest = free.pop(k) - size
            if rest:
                bisect.insort(free, rest)
    return True


def allocation_options(n: int, top: int) -> list[tuple[tuple[int, ...], int]]:
    """The policy generator's allocations of an ``n``-GPU job, each (cells by level, nodes it spans):
    round-up (one cell of the next size, or whole top cells: consolidated, UniSched's A*), the exact fewest
    cells, and n single GPUs, without repeats. UniSched enumerates every quadruple; these three are its
    example's (0,0,0,1), (0,1,1,0), (6,0,0,0) for 6 GPUs on 8-GPU nodes, and keep the MILP small."""
    size = 1 << top
    if n <= size:
        g = max(0, math.ceil(math.log2(n)))
        round_up = tuple(int(i == g) for i in range(top + 1))
    else:
        round_up = tuple(0 if i < top else math.ceil(n / size) for i in range(top + 1))
    exact = cells_of(n, top)
    single = tuple(n if i == 0 else 0 for i in range(top + 1))
    out: list[tuple[tuple[int, ...], int]] = []
    nodes = math.ceil(n / size)  # the exact cells are taken from as few nodes as the round-up's (best fit)
    for cells, nodes in ((round_up, nodes), (exact, nodes), (single, n)):
        if all(c != cells for c, _ in out):
            out.append((cells, nodes))
    return out


# ----------------------------------------------------------------------------------------------- the MILP


@dataclass
class MilpJob:
    """One job as the selector sees it. ``options``: (cells by level, phi-bar) per allocation; ``deadlines``:
    (Q_f whole slots before D_f, V_f), earliest first, or None for a best-effort job with ``be_value``;
    ``leases``: L_i, the slots it still needs at its consolidated speed; ``running``: it holds GPUs now
    (``held``: its cells), ``pinned``: its lease still runs."""

    jid: int
    n_gpus: int
    options: list[tuple[tuple[int, ...], float]]
    leases: int
    deadlines: list[tuple[int, float]] | None = None
    be_value: float = 0.0
    running: bool = False
    pinned: bool = False
    held: tuple[int, ...] = ()


@dataclass
class Plan:
    """The selector's answer: ``run`` maps each job to run in slot 0 to its option index (-1: keep its current
    allocation); ``status``: "optimal", "time-limit" (HiGHS's incumbent), "cached" or "greedy" (the fallbacks);
    ``objective``: the planned value."""

    run: dict[int, int] = field(default_factory=dict)
    status: str = ""
    objective: float = 0.0
    seconds: float = 0.0


def solve_plan(jobs: Sequence[MilpJob], free_cells: Sequence[int], total_gpus: int, n_slots: int,
               time_limit_s: float) -> tuple[Plan | None, str]:
    """Solve the MILP of the module docstring. Returns (the plan, HiGHS's outcome): (plan, "optimal"); (plan,
    "time-limit") when the limit was hit with a feasible incumbent; (None, "time-limit") when it was hit
    without one (the caller's fallback). Raises :class:`InfeasibleMILP` for an infeasible model."""
    import time

    import pulp

    from .gavel import _solver_output

    t0 = time.perf_counter()
    model = _Model(free_cells, max(1, n_slots))
    for i, job in enumerate(jobs):
        model.add_job(i, job)
    prob = model.finish(total_gpus)
    with _solver_output(False):
        prob.solve(pulp.HiGHS(msg=False, timeLimit=time_limit_s, threads=1))
    outcome = _outcome(prob, jobs, total_gpus)
    if outcome is None:
        return None, "time-limit"
    run = {}
    for i, job in enumerate(jobs):
        if (model.x0[job.jid].value() or 0.0) > 0.5:
            run[job.jid] = -1 if job.running else next(
                (p for p in range(len(job.options)) if (model.w[i, p].value() or 0.0) > 0.5), 0)
    value = float(pulp.value(prob.objective) or 0.0)
    return Plan(run, outcome, value, time.perf_counter() - t0), outcome


class _Model:
    """The MILP under construction: one :meth:`add_job` per job, then :meth:`finish` adds the objective, the
    per-slot capacity and Eq. 14."""

    def __init__(self, free_cells: Sequence[int], K: int) -> None:
        import pulp

        self.prob = pulp.LpProblem("unisched", pulp.LpMaximize)
        self.K, self.levels = K, len(free_cells)
        self.objective: list = []
        self.use0: list = []  # N_i x_{0,i}: the work-conserving tie-break
        self.con: list[list] = [[] for _ in range(K)]  # G_i x_{k,i} per slot
        self.cell: list[list] = [[float(c)] for c in free_cells]  # N_g^cell terms
        self.new_cells: list[list] = [[] for _ in range(self.levels)]  # N_g^con terms
        self.x0: dict = {}
        self.w: dict = {}

    def add_job(self, i: int, job: MilpJob) -> None:
        import pulp

        prob, K = self.prob, self.K
        slots = K if job.deadlines is not None else 1
        x = [prob.add_variable(f"x_{i}_{k}", cat="Binary") for k in range(slots)]
        self.x0[job.jid] = x[0]
        options = [(job.held, 1.0)] if job.running else job.options
        gpus = min(sum(c << g for g, c in enumerate(cells)) for cells, _ in options)  # its smallest footprint
        for k in range(slots):
            self.con[k].append(gpus * x[k])
        self.use0.append(job.n_gpus * x[0])
        if job.pinned:
            prob += x[0] == 1
        targets = job.deadlines if job.deadlines is not None else [(1, job.be_value)]
        if job.pinned and job.deadlines is not None:  # it runs now whatever its deadlines allow: kept at no value
            targets = targets + [(1, 0.0)]
        z = {(p, f): prob.add_variable(f"z_{i}_{p}_{f}", cat="Binary")
             for p in range(len(options)) for f in range(len(targets))}
        planned = pulp.lpSum(z.values())
        prob += planned <= 1
        for k in range(slots):
            prob += x[k] <= planned
        # a best-effort job's reward is the reciprocal of its remaining time: faster allocations earn more
        scale = [1.0 if job.deadlines is not None else phi for _, phi in options]
        for f, (q, value) in enumerate(targets):
            self.objective.append(pulp.lpSum(value * scale[p] * z[p, f] for p in range(len(options))))
            need = {p: 1.0 if value == 0.0 else _need(job, phi, q, K, slots) for p, (_, phi) in enumerate(options)}
            prob += pulp.lpSum(x[: min(q, slots)]) >= pulp.lpSum(need[p] * z[p, f] for p in need)
        if job.running:  # suspending it frees its cells for slot 0
            for g in range(self.levels):
                if job.held[g]:
                    self.cell[g].append(job.held[g] * (1 - x[0]))
            return
        for p, (cells, _) in enumerate(options):
            self.w[i, p] = v = prob.add_variable(f"w_{i}_{p}", cat="Binary")
            prob += v <= pulp.lpSum(z[p, f] for f in range(len(targets)))
            for g in range(self.levels):
                if cells[g]:
                    self.new_cells[g].append(cells[g] * v)
        prob += pulp.lpSum(self.w[i, p] for p in range(len(options))) == x[0]

    def finish(self, total_gpus: int):
        import pulp

        prob, levels = self.prob, self.levels
        prob += pulp.lpSum(self.objective) + TIE_BREAK / max(1, total_gpus) * pulp.lpSum(self.use0)
        for terms in self.con:
            if terms:
                prob += pulp.lpSum(terms) <= total_gpus
        for lo in range(levels):  # Eq. 14
            prob += (pulp.lpSum((1 << (g - lo)) * e for g in range(lo, levels) for e in self.new_cells[g])
                     <= pulp.lpSum((1 << (g - lo)) * e for g in range(lo, levels) for e in self.cell[g]))
        return prob


def _need(job: MilpJob, phi: float, q: int, K: int, slots: int) -> float:
    """Slots the job must run among the first min(q, slots) to meet deadline slot ``q`` at speed ``phi``."""
    if job.deadlines is None:
        return 1.0
    full = math.ceil(job.leases / max(phi, 1e-9) - 1e-9)
    return float(max(0, full - max(0, q - K)))


def _outcome(prob, jobs: Sequence[MilpJob], total_gpus: int) -> str | None:
    """HiGHS's model status: "optimal"; "time-limit" with a feasible incumbent; None when the limit left no
    incumbent. Raises :class:`InfeasibleMILP` when the model is infeasible."""
    import pulp

    model = getattr(prob, "solverModel", None)
    status = model.getModelStatus() if model is not None else None
    name = model.modelStatusToString(status) if model is not None else pulp.LpStatus[prob.status]
    if prob.status == pulp.LpStatusInfeasible or name.lower() == "infeasible":
        pinned = [j.jid for j in jobs if j.pinned]
        need = sum(j.n_gpus for j in jobs if j.pinned)
        raise InfeasibleMILP(f"UniSched's selection MILP is infeasible: no plan keeps running every job whose "
                             f"lease still runs (jobs {pinned}, {need} GPUs together, cluster {total_gpus} GPUs)")
    if name.lower() == "optimal":
        return "optimal"
    valid = model is not None and model.getInfo().primal_solution_status == 2  # kSolutionStatusFeasible
    return "time-limit" if valid else None
