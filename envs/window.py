"""The candidate set of a decision state: window rows, destination columns, the action mask, and the one
translation between action indices and :class:`~clustergym.core.commands.Command`.

:class:`Window` is what the env shows and what every policy chooses from. The env builds it after each
command and decision point (:meth:`Window.build`), executes ``window.command(a)`` for an action ``a``, and
reports ``window.why_invalid(a)`` for a masked-out one; the heuristic adapter maps its preferred commands to
actions with ``window.action(cmd)``; behaviour cloning maps actions back with ``window.command(a)``.

Action layout: ``a = row * (K + 1) + col`` for ``row < W``, ``col <= K``; ``a = W * (K + 1)`` ends the round.

==============  ======================================  ======================================
row kind        ``col < K`` (destination ``col``)       ``col == K``
==============  ======================================  ======================================
``"place"``     ``Command("place", tid, server)``       not allowed
``"migrate"``   ``Command("migrate", tid, server)``     ``Command("requeue", tid)``
``"preempt"``   not allowed                             ``Command("preempt", tid, None, jid)``
==============  ======================================  ======================================

(``tid`` is the row's task; a preemption row shows its job's first task and preempts the whole job.)
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import kernels
from .core.commands import Command
from .core.resources import FIT_EPS  # the admission rule's float allowance: the mask's fit test uses the same

if TYPE_CHECKING:
    from .core.engine import Simulator
    from .core.job import Task

class InvalidAction(ValueError):
    """An action the env cannot take: not an integer index, out of range, or masked out (the message names the
    action, its row/column and task where it has them, and why)."""


def action_index(action: Any) -> int:
    """``action`` as a Python int: a Python int, a numpy integer, or a numpy integer array of one element (what
    SB3 and vector envs pass). Anything else (None, floats, booleans, strings, longer arrays) raises
    :class:`InvalidAction` naming the value: truncating -0.5 to action 0 would act on a bug silently."""
    if type(action) is int:
        return action
    if isinstance(action, np.integer) or isinstance(action, int) and not isinstance(action, bool):
        return int(action)
    if isinstance(action, np.ndarray):
        if action.dtype.kind in "iu" and action.size == 1:
            return int(action.reshape(-1)[0])
        why = f"a {action.dtype} array of shape {action.shape}, not one integer"
    else:
        why = f"a {type(action).__name__}, not an integer"
    raise InvalidAction(f"action {action!r} is {why}: step() takes an action index (int, numpy integer or a "
                        f"one-element integer array)")




class Window:
    """W task rows by K destination columns, the action mask over them, and encode/decode of actions.

    Rows, in order (the env docstring and docs/env.md give the full rule): migration candidates (running
    tasks on overloaded servers not moved in this round, by server index then task id; at most
    ``migrate_rows``); with ``preemption``, up to ``preempt_rows`` preemption candidates (a fully placed
    running job's first task, most attained GPU service first); then ready waiting tasks that fit some
    destination, in queue order, at most ``rows_per_job`` per job. Columns: all servers in index order when
    there are at most K, else the K closest to MLF-H's ideal virtual host.

    State after :meth:`build` (read-only for callers):

    - ``tasks``: the Task of each row, None for padding; ``kinds``: ``"place"``/``"migrate"``/``"preempt"``
      or None per row; ``destinations``: the server id of each column, -1 for padding (``dest`` is the same
      as an int64 array, ``k`` the number of real columns);
    - ``mask`` (bool, ``n_actions``): the valid actions (see :meth:`why_invalid` for the rule);
      ``can_act``: some action other than "end round" is valid;
    - for the observation: ``utilisation`` (S, 4) per server (GPU, CPU, memory, network; clipped at 2),
      ``ideal_distance`` (S,) to the ideal host, ``free`` (3, K) largest free GPU memory, free CPU and free
      memory per column, ``overload_degree`` of the cluster, ``queue_beyond`` (ready tasks not shown).
    """

    def __init__(self, W: int, K: int, *, rows_per_job: int | None = None, migrate_rows: int | None = None,
                 preemption: bool = False, preempt_rows: int | None = None):
        self.W, self.K = int(W), int(K)
        self.rows_per_job, self.preemption, self.preempt_rows = rows_per_job, bool(preemption), preempt_rows
        self.migrate_cap = self.W if migrate_rows is None else min(self.W, int(migrate_rows))
        self.n_actions = self.W * (self.K + 1) + 1
        self.end_round_action = self.n_actions - 1
        self.mask = np.zeros(self.n_actions, bool)
        self.mask[-1] = True  # "end round" is always valid; build() rewrites only the (row, col) part
        self._mask2 = self.mask[:-1].reshape(self.W, self.K + 1)
        self.tasks: list = [None] * self.W
        self.kinds: list = [None] * self.W
        self.dest = np.full(self.K, -1, np.int64)
        self._destinations: list[int] | None = None
        self.k = 0
        self.can_act = False
        self.queue_beyond = 0
        self.overload_degree = 0.0
        self.utilisation = np.empty((0, 4))  # per-server arrays, sized by reset()
        self.ideal_distance = np.empty(0)
        self.free = np.empty((3, self.K))
        self.touched: set[int] = set()  # tasks placed, moved or requeued in this round: no second move
        self._round = 0  # rounds so far (keys the per-round cache of movable tasks)

    @classmethod
    def from_config(cls, cfg) -> "Window":
        """The window of an :class:`~clustergym.config.EnvConfig`."""
        return cls(cfg.window_size, cfg.n_destinations, rows_per_job=cfg.rows_per_job,
                   migrate_rows=cfg.migrate_rows, preemption=cfg.preemption, preempt_rows=cfg.preempt_rows)

    # ------------------------------------------------------------------ episode and round
    def reset(self, sim: "Simulator") -> None:
        """Per-episode buffers for ``sim``'s cluster and tasks; an empty round."""
        S = sim.cluster.n_servers
        self.utilisation = np.empty((S, 4))
        self.ideal_distance = np.empty(S)
        self.free = np.empty((3, self.K))
        self._gpu_scratch = np.empty(sim.cluster.n_gpus)
        self._ok = np.empty((self.W, self.K + 1), bool)
        # (GPU memory, CPU, memory) demand per task for the fit test; -inf GPU memory for a PS (takes no GPU)
        self._demand = np.array([(-np.inf if t.is_ps else t.t.gpu_memory_gb, t.t.cpu_cores, t.t.memory_gb)
                                 for t in sim.tasks], dtype=np.float64).reshape(-1, 3)
        self._movable: list[tuple[int, int, list]] = [(-1, -1, [])] * S
        self.touched.clear()
        self._round = 0

    def new_round(self) -> None:
        """A new decision round: every task may be moved again."""
        self.touched.clear()
        self._round += 1

    def touch(self, sim: "Simulator", cmd: Command) -> None:
        """Record an executed command: its task (for a preemption, every task of the job) is not offered
        for another move in this round."""
        if cmd.kind == "preempt":
            self.touched.update(t.tid for t in sim.job_by_id[cmd.jid].tasks)
        self.touched.add(cmd.tid)

    @property
    def destinations(self) -> list[int]:
        """The server id of each destination column, -1 for padding (``dest`` as a list)."""
        d = self._destinations
        if d is None:
            d = self._destinations = self.dest.tolist()
        return d

    # ------------------------------------------------------------------ encode / decode
    def encode(self, row: int, col: int) -> int:
        """The action index of (row, col); ``col == K`` is "back to the queue"."""
        if not (0 <= row < self.W and 0 <= col <= self.K):
            raise ValueError(f"row must be in 0..{self.W - 1} and col in 0..{self.K}, got ({row}, {col})")
        return row * (self.K + 1) + col

    def decode(self, action: int) -> tuple[int, int] | None:
        """(row, col) of an action index, None for "end round"."""
        a = action if type(action) is int else action_index(action)
        if a == self.end_round_action:
            return None
        if not 0 <= a < self.end_round_action:
            raise InvalidAction(f"action {a} out of range 0..{self.n_actions - 1}")
        return divmod(a, self.K + 1)

    def command(self, action: int) -> Command | None:
        """The command an action stands for in the current window (None for "end round"), by the table in
        the module docstring. Raises :class:`InvalidAction` for a padding row or column or a combination the table
        leaves out; it does not check the mask (validity is :attr:`mask`'s business)."""
        rc = self.decode(action)
        if rc is None:
            return None
        row, col = rc
        task, kind = self.tasks[row], self.kinds[row]
        if task is None or kind == "place" and col == self.K or kind == "preempt" and col < self.K:
            raise InvalidAction(self.why_invalid(action))
        if col == self.K:
            return Command("preempt", task.tid, None, task.job.jid) if kind == "preempt" else Command("requeue",
                                                                                                     task.tid)
        server = int(self.dest[col])
        if server < 0:
            raise InvalidAction(self.why_invalid(action))
        return Command(kind, task.tid, server)

    def action(self, cmd: Command) -> int | None:
        """The action index of ``cmd`` in the current window, or None if the window has no such action (its
        task or job is not a row of the matching kind, or its server is not a destination column). The
        inverse of :meth:`command`; validity is the mask's business."""
        kind = cmd.kind
        if kind == "preempt":
            row = next((r for r, (t, k) in enumerate(zip(self.tasks, self.kinds))
                        if k == "preempt" and t.job.jid == cmd.jid), None)
            return None if row is None else self.encode(row, self.K)
        want = "migrate" if kind == "requeue" else kind
        row = next((r for r, t in enumerate(self.tasks) if t is not None and t.tid == cmd.tid), None)
        if row is None or self.kinds[row] != want:
            return None
        if kind == "requeue":
            return self.encode(row, self.K)
        try:
            col = self.destinations.index(int(cmd.server))
        except (ValueError, TypeError):
            return None
        return self.encode(row, col)

    def why_invalid(self, action: int, sim: "Simulator | None" = None) -> str:
        """Why ``action`` is not allowed now (the mask's rule in words, for :class:`InvalidAction` and
        ``info["invalid_action"]``). With ``sim``, a destination the task does not fit is explained by the
        simulator's ``fit_reason``."""
        a = action_index(action)
        if not 0 <= a < self.n_actions:
            return f"action {a} out of range 0..{self.n_actions - 1}"
        row, col = divmod(a, self.K + 1)
        head = f"action {a} (row {row}, col {col})"
        task = self.tasks[row]
        if task is None:
            return f"{head}: row {row} is padding (only {sum(t is not None for t in self.tasks)} candidate rows)"
        kind = self.kinds[row]
        head += f", task {task.tid} of job {task.job.jid} ({kind})"
        if col == self.K:
            return f"{head}: 'back to the queue' is only for migration and preemption rows (running tasks)"
        if kind == "preempt":
            return f"{head}: a preemption row allows only 'back to the queue' (col {self.K})"
        server = int(self.dest[col])
        if server < 0:
            return f"{head}: destination column {col} is padding"
        if sim is None:
            return f"{head}: not allowed by the mask"
        if kind == "migrate":
            if server == task.server:
                return f"{head}: server {server} is the task's own server"
            if sim.cluster.overloaded[server]:
                return f"{head}: destination server {server} is overloaded"
        reason = sim.fit_reason(task, server, moving=(kind == "migrate"))
        return f"{head}: {reason or 'not allowed by the mask'}"

    # ------------------------------------------------------------------ build
    def build(self, sim: "Simulator", empty: bool = False) -> None:
        """Choose the destinations and the rows of ``sim``'s current state and fill the mask (``empty``: no
        rows, only "end round", for the terminal state)."""
        c = sim.cluster
        # utilisation (clipped at 2: network/CPU use can exceed capacity), distances to MLF-H's ideal host,
        # destinations and their free resources in one compiled call (envs/kernels.py: numpy's arithmetic)
        k, self.overload_degree = kernels.destinations(
            c.gpu_load, c.server_first_gpu, c.server_n_gpus, c.cpu_use, c.cpu_cap, c.mem_use, c.mem_cap,
            c.net_mbps, c.net_cap_mbps, c.overloaded, sim.n_overloaded, c.server_max_free_gpu_mem, c.cpu_alloc,
            c.mem_alloc, self._gpu_scratch, self.utilisation, self.ideal_distance, self.dest, self.free)
        self._destinations = None  # the list is made when first read (the env's own step does not need it)
        self.k = k
        self._mask2.fill(False)
        tasks: list = [None] * self.W
        kinds: list = [None] * self.W
        n_rows = n_place = 0
        if not empty:
            rows, n_over = self._migration_rows(sim) if sim.n_overloaded and self.migrate_cap else ([], 0)
            n_mig = n_over + self._preemption_rows(sim, rows) if self.preemption else n_over
            if n_mig < self.W and sim.queue:
                rows.extend([t for t in sim.queue.values() if t.is_ready()])
            if rows:
                n_rows, n_place = self._fill(sim, rows, n_mig, n_over, tasks, kinds)
        self.tasks, self.kinds = tasks, kinds
        self.can_act = n_rows > 0  # == mask[:-1].any(): every row filled allows at least one action
        self.queue_beyond = len(sim.queue) - n_place

    def _migration_rows(self, sim: "Simulator") -> tuple[list, int]:
        """The running tasks of overloaded servers not moved in this round, by server then task id, capped."""
        rows: list = []
        cap = self.migrate_cap
        c = sim.cluster
        version, movable, rnd, touched = c.server_version, self._movable, self._round, self.touched
        for s in c.overloaded.nonzero()[0].tolist():
            # cached per (server's task-set version, round): a task joins `touched` only by a command that
            # attaches it to or detaches it from a server, which bumps that server's version
            hit = movable[s]
            if hit[0] != version[s] or hit[1] != rnd:
                hit = movable[s] = (version[s], rnd, [t for t in c.tasks_by_id(s) if t.tid not in touched])
            rows.extend(hit[2][:cap - len(rows)])
            if len(rows) == cap:
                break
        return rows, len(rows)

    def _preemption_rows(self, sim: "Simulator", rows: list) -> int:
        """Append one row per fully placed running job (its first task), most attained GPU service first
        (the natural victims of least-attained-service policies), then job id; returns how many."""
        if not (sim.queue and len(rows) < self.W):
            return 0
        cap = min(self.W - len(rows), self.preempt_rows or self.W)
        seen = {t.job.jid for t in rows}
        touched = self.touched
        n = 0
        for job in sorted(sim.active_jobs.values(), key=_attained):
            if job.jid in seen or not job.fully_placed or any(t.tid in touched for t in job.tasks):
                continue
            rows.append(job.tasks[0])
            n += 1
            if n >= cap:
                break
        return n

    def _fill(self, sim: "Simulator", rows: list, n_mig: int, n_over: int, tasks: list, kinds: list
              ) -> tuple[int, int]:
        """Fit-test every candidate against the destinations, write the mask and the shown rows (running
        rows first, then the waiting tasks that fit somewhere, at most ``rows_per_job`` per job). Returns
        (rows shown, waiting rows shown)."""
        W, K, k = self.W, self.K, self.k
        n = len(rows)
        ok = self._ok
        if ok.shape[0] < n:  # grows with the ready queue; (n, K + 1): column k flags "fits somewhere"
            ok = self._ok = np.empty((2 * n, K + 1), bool)
        tids = np.array([t.tid for t in rows], np.int64)
        n_fit = kernels.fit_mask(tids, self._demand, self.free, k, FIT_EPS, n_mig, n_over, sim.task_server,
                                 sim.cluster.overloaded, self.dest, self._mask2, ok)
        if n_mig:
            tasks[:n_mig] = rows[:n_mig]
            kinds[:n_mig] = ["migrate"] * n_over + ["preempt"] * (n_mig - n_over)
        if not n_fit:
            return n_mig, 0
        sel = ok[n_mig:n, k].nonzero()[0].tolist()
        room = W - n_mig
        cap = self.rows_per_job
        if cap:  # at most `cap` rows per job, so one wide gang cannot fill the window
            per_job: dict[int, int] = {}
            keep = []
            for i in sel:
                jid = rows[n_mig + i].job.jid
                n_j = per_job.get(jid, 0)
                if n_j < cap:
                    per_job[jid] = n_j + 1
                    keep.append(i)
                    if len(keep) == room:
                        break
            sel = keep
        del sel[room:]
        n_place = len(sel)
        if n_place:
            first = n_mig + sel[0]
            if sel[-1] - sel[0] == n_place - 1:  # consecutive candidates (the common case): a slice, no gather
                self._mask2[n_mig:n_mig + n_place, :k] = ok[first:first + n_place, :k]
                tasks[n_mig:n_mig + n_place] = rows[first:first + n_place]
            else:
                self._mask2[n_mig:n_mig + n_place, :k] = ok[n_mig:n, :k].take(sel, axis=0)
                tasks[n_mig:n_mig + n_place] = [rows[n_mig + i] for i in sel]
            kinds[n_mig:n_mig + n_place] = ["place"] * n_place
        return n_mig + n_place, n_place


def _attained(job) -> tuple[float, int]:
    return (-job.running_time * job.spec.n_gpus, job.jid)
