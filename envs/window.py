"""The candidate set of a decision state: window rows, destination columns, the action mask, and the one
translation between action indices and :class:`~clustergym.core.commands.Command`.

:class:`Window` is what the env shows and what every policy chooses from. The env builds it after each
command and decision point (:meth:`Window.build`), executes ``window.command(a)`` for an action ``a``, and
reports ``window.why_invalid(a)`` for a masked-out one; the heuristic adapter maps its preferred commands to
actions with ``window.action(cmd)``; behaviour cloning maps actions back with ``window.command(a)``.

Action layout: ``C = K + 1 + N`` columns per row, ``N = len(STOP_OPTIONS)`` (3) with ``stop_options`` and
0 without; ``a = row * C + col`` for ``row < W``, ``col < C``; ``a = W * C`` ends the round. Two optional
column sets (:mod:`clustergym.window_columns`) widen it to ``C = D + 1 + N + n_sub``: with GPU slots the K
destination columns become ``D = K x G`` (column ``c`` is GPU slot ``c % G`` of server column ``c // G``), and
``n_sub`` sub-batch columns follow the stop options (column ``D + 1 + N + i``: ``Command("sub-batch", jid=j,
steps=2**i)`` on a waiting job's row). In the table below read ``K`` as ``D`` then.

=============  ===================================  ====================================  =================================
row kind       ``col < K`` (destination ``col``)    ``col == K``                          ``col == K + 1 + o``
=============  ===================================  ====================================  =================================
``"place"``    ``Command("place", tid, server)``    not allowed                           ``Command("stop-option", jid=j,
                                                                                          option=STOP_OPTIONS[o])``
``"migrate"``  ``Command("migrate", tid, server)``  ``Command("requeue", tid)``           the same, on the row's job
``"running"``  not allowed                          ``Command("preempt", tid, None, j)``  the same, on the row's job
=============  ===================================  ====================================  =================================

(``tid`` is the row's task and ``j`` its job; a running-job row shows its job's first task and its "back to
the queue" preempts the whole job.)

Which rows, in order (:meth:`Window.build`):

1. ``"migrate"``: running tasks on overloaded servers not moved in this round, by server index then task id;
   at most ``migrate_rows``.
2. ``"running"`` (with ``preemption`` or ``stop_options``): one row per fully placed running job not already
   a migration row, if it has a valid action (preemption: on, tasks waiting or ``preempt_empty_queue``, no
   task of the job moved in this round and no lease of the job still running, :mod:`clustergym.core.lease`;
   or a stop-option change);
   at most ``running_rows``. With ``preempt_migrating`` (the ``-v2`` ids) a job shown by migration rows gets
   a running-job row too when it may be preempted, so every running job can be preempted whole; that row's
   stop-option columns are masked (the job's migration row carries them).
3. ``"place"``: ready waiting tasks that fit some destination, in queue order, at most ``rows_per_job`` per
   job (default 1: one row per waiting job, its first ready task that fits).

**Overflow.** When more candidates qualify than rows remain, the rows are drawn so that no ordering rule of a
heuristic is favoured: waiting jobs whose gang is already partly placed come first (every policy completes a
started gang, and the engine strands its slots otherwise), then jobs are taken in turn from four orderings,
arrival, fewest GPUs, least attained GPU service, earliest deadline, skipping jobs already taken; running-job
rows likewise from four (most attained GPU service, latest arrival, most GPUs, latest deadline: the natural
victims of those rules). The rows drawn are shown in queue (running jobs: submission) order. The orderings
and the draw live in :mod:`clustergym.window_overflow`.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import kernels
from .core.commands import Command
from .core.resources import FIT_EPS  # the admission rule's float allowance: the mask's fit test uses the same
from .core.rounds import RoundRecord
from .core.workload import STOP_OPTIONS
from .window_columns import SlotAndSubBatchColumns, sub_batch_column
from .window_overflow import RUNNING_ORDERS, round_robin, waiting_rows

if TYPE_CHECKING:
    from .core.engine import Simulator
    from .core.job import Job


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


_N_STOP = len(STOP_OPTIONS)
_OPTION_INDEX = {o: i for i, o in enumerate(STOP_OPTIONS)}


class Window(SlotAndSubBatchColumns):
    """W rows by C = K + 1 (+ 3 stop options) columns, the action mask over them, and encode/decode of
    actions (the module docstring gives the layout and the row rule).

    State after :meth:`build` (read-only for callers):

    - ``tasks``: the Task of each row, None for padding; ``kinds``: ``"place"``/``"migrate"``/``"running"``
      or None per row; ``destinations``: the server id of each column, -1 for padding (``dest`` is the same
      as an int64 array, ``k`` the number of real columns);
    - ``mask`` (bool, ``n_actions``): the valid actions (see :meth:`why_invalid` for the rule);
      ``can_act``: some action other than "end round" is valid;
    - for the observation: ``utilisation`` (S, 4) per server (GPU, CPU, memory, network; clipped at 2),
      ``ideal_distance`` (S,) to the ideal host, ``free`` (3, K) largest free GPU memory, free CPU and free
      memory per column, ``overload_degree`` of the cluster, ``queue_beyond`` (waiting tasks not shown).
    """

    def __init__(self, W: int, K: int, *, rows_per_job: int | None = 1, migrate_rows: int | None = 8,
                 preemption: bool = True, running_rows: int | None = 16, stop_options: bool = True,
                 gpu_slots: int = 0, sub_batches: int = 0, preempt_migrating: bool = False,
                 preempt_empty_queue: bool = False):
        self.W, self.K = int(W), int(K)
        self.rows_per_job, self.preemption = rows_per_job, bool(preemption)
        # a running job shown by migration rows gets a running-job row too (its only whole-job preemption)
        self.preempt_migrating = bool(preempt_migrating)
        # preemption offered with nothing waiting (a job preempted to be placed again elsewhere)
        self.preempt_empty_queue = bool(preempt_empty_queue)
        # the jobs of this build with both kinds of row (their running row: preemption only)
        self._dual_jobs: set | frozenset = frozenset()
        self.n_stop = _N_STOP if stop_options else 0
        self.G = int(gpu_slots)  # GPU slots per destination column (0: the column is the server)
        self.D = self.K * self.G if self.G else self.K  # destination columns; column D is "back to the queue"
        self.n_sub = int(sub_batches)  # sub-batch columns: 1, 2, 4, ... 2^(n_sub - 1) accumulation steps
        self.C = self.D + 1 + self.n_stop + self.n_sub  # columns per row
        self.migrate_cap = self.W if migrate_rows is None else min(self.W, int(migrate_rows))
        # running-job rows exist when they have an action: preemption or a stop-option change
        self.running_cap = (0 if not (self.preemption or self.n_stop)
                            else self.W if running_rows is None else min(self.W, int(running_rows)))
        self.n_actions = self.W * self.C + 1
        self.end_round_action = self.n_actions - 1
        self.mask = np.zeros(self.n_actions, bool)
        self.mask[-1] = True  # "end round" is always valid; build() rewrites only the (row, col) part
        # destinations (per server) and "back to the queue"; with GPU slots a scratch that build() expands
        self._mask_move = np.zeros((self.W, self.K + 1), bool) if self.G else None
        self._bind_mask_views()
        self.tasks: list = [None] * self.W
        self.kinds: list = [None] * self.W
        self.dest = np.full(self.K, -1, np.int64)
        self._destinations: list[int] | None = None
        self._lookup: tuple[dict, dict, dict] | None = None
        self.k = 0
        self.can_act = False
        self.queue_beyond = 0
        self.overload_degree = 0.0
        self.utilisation = np.empty((0, 4))  # per-server arrays, sized by reset()
        self.ideal_distance = np.empty(0)
        self.free = np.empty((3, self.K))
        self._record = RoundRecord()  # the simulator's round record (core/rounds.py), from reset() on
        self._sim: "Simulator | None" = None  # the simulator of the last build (the GPU rule of action())
        self._preempt_ok = False
        self._round = 0  # rounds so far (keys the per-round cache of movable tasks)

    def _bind_mask_views(self) -> None:
        """The (row, column) views of ``mask`` that build() writes through."""
        self._mask2 = self.mask[:-1].reshape(self.W, self.C)
        if not self.G:
            self._mask_move = self._mask2[:, :self.K + 1]
        self._mask_stop = self._mask2[:, self.D + 1:self.D + 1 + self.n_stop]  # the stop options
        self._mask_sub = self._mask2[:, self.D + 1 + self.n_stop:]  # the sub-batch options

    def __setstate__(self, state: dict) -> None:
        # a copy or unpickling gives each view storage of its own (numpy copies a view as an array): bind again
        self.__dict__.update(state)
        self._bind_mask_views()

    @classmethod
    def from_config(cls, cfg, gpus_per_server: int = 0) -> "Window":
        """The window of an :class:`~clustergym.config.EnvConfig` (``gpus_per_server``: the GPU slots of each
        destination column when ``cfg.gpu_actions``)."""
        return cls(cfg.window_size, cfg.n_destinations, rows_per_job=cfg.rows_per_job,
                   migrate_rows=cfg.migrate_rows, preemption=cfg.preemption, running_rows=cfg.running_rows,
                   stop_options=cfg.stop_option_actions, gpu_slots=gpus_per_server if cfg.gpu_actions else 0,
                   sub_batches=cfg.sub_batch_actions, preempt_migrating=cfg.preempt_migrating,
                   preempt_empty_queue=cfg.preempt_empty_queue)

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
        jobs = sim.jobs
        n = max(1, len(jobs))
        self._jobs, self._jidx = jobs, {job: i for i, job in enumerate(jobs)}
        self._job_of_task = np.array([self._jidx[t.job] for t in sim.tasks], np.int64).reshape(-1)
        self._counts = np.zeros(n, np.int64)  # scratch of the per-job row cap
        # stop options (kernels.stop_mask): each job's current rule, the options the simulator's rule allows
        # per (job, current rule) as bits (-1: not asked yet; it does not change while the job is active),
        # and the round in which the job's rule last changed
        self._cur = np.array([_OPTION_INDEX[j.stop_option] for j in jobs] or [0], np.int64)
        self._stop_table = np.full((n, _N_STOP), -1, np.int64)
        self._changed = np.full(n, -1, np.int64)
        self._missing = np.empty(self.W, np.int64)
        self._codes: dict = {}  # Job -> (its rule, stop code): the running rows' Python-side lookup
        self._drawn: tuple = (None, set())  # the last overflow draw of running rows: (key, Jobs drawn)
        self._row_tids = np.empty(0, np.int64)
        self._movable: list[tuple[int, int, list]] = [(-1, -1, [])] * S
        self._first_gpu, self._n_gpus = sim.cluster.server_first_gpu, sim.cluster.server_n_gpus
        self._round = -1
        self.new_round(sim)

    def new_round(self, sim: "Simulator") -> None:
        """A new decision round (the simulator has cleared its round record). A job's rule changes by a command
        (recorded by :meth:`touch`) or, between rounds, by a controller (MLF-C): it is read again here."""
        self._record = sim.round
        self._round += 1
        cur, jidx = self._cur, self._jidx
        for job in sim.active_jobs.values():
            cur[jidx[job]] = _OPTION_INDEX[job.stop_option]

    def touch(self, sim: "Simulator", cmd: Command) -> None:
        """Update the window's caches after an executed command (the round rule's record is the simulator's,
        :mod:`clustergym.core.rounds`): a job's current stop option, a sub-batch's GPU memory demand."""
        if cmd.kind == "stop-option":
            job = sim.job_by_id[cmd.jid]
            j = self._jidx[job]
            self._changed[j] = self._round
            self._cur[j] = _OPTION_INDEX[job.stop_option]
            return
        if cmd.kind == "sub-batch":  # the job's tasks now need the sub-batch's GPU memory
            for t in sim.job_by_id[cmd.jid].tasks:
                if not t.is_ps:
                    self._demand[t.tid, 0] = t.t.gpu_memory_gb

    @property
    def destinations(self) -> list[int]:
        """The server id of each destination column, -1 for padding (``dest`` as a list)."""
        d = self._destinations
        if d is None:
            d = self._destinations = self.dest.tolist()
        return d

    # ------------------------------------------------------------------ encode / decode
    def encode(self, row: int, col: int) -> int:
        """The action index of (row, col); ``col == D`` is "back to the queue", ``D + 1 + o`` stop option o,
        ``D + 1 + n_stop + i`` sub-batch option i (``D``: the destination columns, K or K x G)."""
        if not (0 <= row < self.W and 0 <= col < self.C):
            raise ValueError(f"row must be in 0..{self.W - 1} and col in 0..{self.C - 1}, got ({row}, {col})")
        return row * self.C + col

    def decode(self, action: int) -> tuple[int, int] | None:
        """(row, col) of an action index, None for "end round"."""
        a = action if type(action) is int else action_index(action)
        if a == self.end_round_action:
            return None
        if not 0 <= a < self.end_round_action:
            raise InvalidAction(f"action {a} out of range 0..{self.n_actions - 1}")
        return divmod(a, self.C)

    def command(self, action: int) -> Command | None:
        """The command an action stands for in the current window (None for "end round"), by the table in
        the module docstring. Raises :class:`InvalidAction` for a padding row or column or a combination the
        table leaves out; it does not check the mask (validity is :attr:`mask`'s business)."""
        rc = self.decode(action)
        if rc is None:
            return None
        row, col = rc
        task, kind = self.tasks[row], self.kinds[row]
        D = self.D
        if task is None or kind == "place" and col == D or kind == "running" and col < D:
            raise InvalidAction(self.why_invalid(action))
        if col > D + self.n_stop:
            return Command("sub-batch", jid=task.job.jid, steps=1 << (col - D - 1 - self.n_stop))
        if col > D:
            return Command("stop-option", jid=task.job.jid, option=STOP_OPTIONS[col - D - 1])
        if col == D:
            return (Command("preempt", task.tid, None, task.job.jid) if kind == "running"
                    else Command("requeue", task.tid))
        server, gpu = self._destination(task, col)
        if server < 0:
            raise InvalidAction(self.why_invalid(action))
        return Command(kind, task.tid, server, gpu=gpu)

    def _rows(self) -> tuple[dict, dict, dict]:
        """(row of each task, running-job row of each job, first row of each job) of the current window."""
        if self._lookup is None:
            by_tid: dict[int, int] = {}
            running: dict[int, int] = {}
            first: dict[int, int] = {}
            for r, (t, kind) in enumerate(zip(self.tasks, self.kinds)):
                if t is None:
                    continue
                by_tid.setdefault(t.tid, r)
                first.setdefault(t.job.jid, r)
                if kind == "running":
                    running[t.job.jid] = r
            self._lookup = (by_tid, running, first)
        return self._lookup

    def action(self, cmd: Command) -> int | None:
        """The action index of ``cmd`` in the current window, or None if the window has no such action (its
        task or job is not a row of the matching kind, or its server is not a destination column). The
        inverse of :meth:`command`; validity is the mask's business."""
        kind = cmd.kind
        by_tid, running, first = self._rows()
        if kind == "stop-option":
            row = first.get(cmd.jid)
            if row is None or not self.n_stop or cmd.option not in STOP_OPTIONS:
                return None
            return self.encode(row, self.D + 1 + STOP_OPTIONS.index(cmd.option))
        if kind == "sub-batch":
            row, i = first.get(cmd.jid), sub_batch_column(cmd.steps, self.n_sub)
            return None if row is None or i is None else self.encode(row, self.D + 1 + self.n_stop + i)
        if kind == "preempt":
            row = running.get(cmd.jid)
            return None if row is None else self.encode(row, self.D)
        want = "migrate" if kind == "requeue" else kind
        row = by_tid.get(cmd.tid)
        if row is None or self.kinds[row] != want:
            return None
        if kind == "requeue":
            return self.encode(row, self.D)
        try:
            col = self.destinations.index(int(cmd.server))
        except (ValueError, TypeError):
            return None
        slot = self._gpu_slot(self.tasks[row], int(cmd.server), cmd.gpu, kind == "migrate") if self.G else 0
        return None if slot is None else self.encode(row, col * max(1, self.G) + slot)

    def why_invalid(self, action: int, sim: "Simulator | None" = None) -> str:
        """Why ``action`` is not allowed now (the mask's rule in words, for :class:`InvalidAction` and
        ``info["invalid_action"]``). With ``sim``, a destination the task does not fit is explained by the
        simulator's ``fit_reason`` and a stop option by its ``stop_option_error``."""
        a = action_index(action)
        if not 0 <= a < self.n_actions:
            return f"action {a} out of range 0..{self.n_actions - 1}"
        row, col = divmod(a, self.C)
        head = f"action {a} (row {row}, col {col})"
        task = self.tasks[row]
        if task is None:
            return f"{head}: row {row} is padding (only {sum(t is not None for t in self.tasks)} candidate rows)"
        kind = self.kinds[row]
        jid = task.job.jid
        head += f", task {task.tid} of job {jid} ({kind})"
        D = self.D
        if col > D + self.n_stop:
            return f"{head}: {self._sub_batch_reason(task.job, 1 << (col - D - 1 - self.n_stop), kind)}"
        if col > D:
            option = STOP_OPTIONS[col - D - 1]
            if kind == "running" and task.job in self._dual_jobs:
                return f"{head}: job {jid}'s stop options are on its migration row {self._rows()[2][jid]}"
            once = self._record.error(sim, Command("stop-option", jid=jid, option=option))  # the round rule
            if once:
                return f"{head}: {once}"
            reason = sim.stop_option_error(jid, option) if sim is not None else None
            return f"{head}: stop option {option!r}: {reason or 'not allowed by the mask'}"
        if col == D:
            if kind == "place":
                return f"{head}: 'back to the queue' is only for migration and running-job rows (running tasks)"
            if kind == "running":
                if not self.preemption:
                    return f"{head}: preemption is off (EnvConfig.preemption)"
                moved = self._record.error(sim or self._sim, Command("preempt", jid=jid))  # the round rule
                if moved:
                    return f"{head}: {moved}"
                held = sim.leases.suspend_error(task.job) if sim is not None else None
                if held:
                    return f"{head}: {held}"
                return (f"{head}: no task is waiting and EnvConfig.preempt_empty_queue is off (on in the -v2 "
                        "ids)")
            return f"{head}: not allowed by the mask"
        if kind == "running":
            return f"{head}: a running-job row allows only preemption (col {D}) and stop options"
        server, gpu = self._destination(task, col)
        if server < 0:
            return f"{head}: destination column {col} is {self._padding(task, col)}"
        if sim is None:
            return f"{head}: not allowed by the mask"
        if kind == "migrate":
            if server == task.server:
                return f"{head}: server {server} is the task's own server"
            if sim.cluster.overloaded[server]:
                return f"{head}: destination server {server} is overloaded"
        reason = sim.fit_reason(task, server, gpu, moving=(kind == "migrate"))
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
        self._lookup = None
        self._sim = sim
        self.k = k
        self._mask2.fill(False)
        if self.G:
            self._mask_move.fill(False)
        if self.n_sub:
            self._bits: dict = {}  # Job -> its sub-batch options now (_sub_bits), for this build
        tasks: list = [None] * self.W
        kinds: list = [None] * self.W
        n_rows = n_place = 0
        if not empty:
            rows, n_over = self._migration_rows(sim) if sim.n_overloaded and self.migrate_cap else ([], 0)
            n_mig = n_over + self._running_rows(sim, rows) if self.running_cap else n_over
            if n_mig < self.W and sim.queue:
                rows.extend(sim.ready)
            if rows:
                n_rows, n_place = self._fill(sim, rows, n_mig, n_over, tasks, kinds)
                if n_mig > n_over:  # running-job rows: "back to the queue" preempts, if allowed
                    pre, touched = self._preempt_ok, self._record.moved_jobs
                    held = sim.leases.suspend_error  # a job whose lease still runs cannot be suspended
                    self._mask_move[n_over:n_mig, self.K] = [pre and t.job not in touched and held(t.job) is None
                                                             for t in tasks[n_over:n_mig]]
                if self.n_stop:
                    self._write_stop_mask(sim)
                    if self._dual_jobs and n_mig > n_over:  # their stop options are on their migration rows
                        dual = self._dual_jobs
                        self._mask_stop[n_over:n_mig] &= np.array([t.job not in dual for t in tasks[n_over:n_mig]],
                                                                  bool)[:, None]
                if self.G:
                    self._expand_gpu_slots(sim, n_rows)
                if self.n_sub:
                    self._write_sub_batch_mask(tasks, kinds, n_rows)
        self.tasks, self.kinds = tasks, kinds
        self.can_act = n_rows > 0  # == mask[:-1].any(): every row shown allows at least one action
        self.queue_beyond = len(sim.queue) - n_place

    def _ask_rule(self, sim: "Simulator", j: int) -> int:
        """The options job ``j`` (an index of ``sim.jobs``) may move to from its current one, as bits (bit o:
        ``STOP_OPTIONS[o]``), by the simulator's rule (``Simulator.stop_option_error``); kept in the table."""
        job = self._jobs[j]
        code = sum(1 << o for o, opt in enumerate(STOP_OPTIONS) if sim.stop_option_error(job.jid, opt) is None)
        self._stop_table[j, _OPTION_INDEX[job.stop_option]] = code
        return code

    def _stop_code(self, sim: "Simulator", job: "Job") -> int:
        """The stop options ``job`` may move to now, as bits: none after a change in this round. The bits of a
        (job, current rule) pair do not change while the job is active, so they are kept per job and rule."""
        if job.jid in self._record.option_jobs:
            return 0
        hit = self._codes.get(job)
        if hit is None or hit[0] != job.stop_option:
            j = self._jidx[job]
            code = int(self._stop_table[j, _OPTION_INDEX[job.stop_option]])
            hit = self._codes[job] = (job.stop_option, code if code >= 0 else self._ask_rule(sim, j))
        return hit[1]

    def _write_stop_mask(self, sim: "Simulator") -> None:
        """The stop-option columns of the shown rows (:func:`clustergym.kernels.stop_mask`), asking the
        simulator's rule for the (job, current option) pairs not met before."""
        args = (self._row_tids, self._job_of_task, self._cur, self._stop_table, self._changed, self._round,
                self._mask_stop, self._missing)
        missing = kernels.stop_mask(*args)
        if missing:
            for j in set(self._missing[:missing].tolist()):
                self._ask_rule(sim, j)
            kernels.stop_mask(*args)

    def _migration_rows(self, sim: "Simulator") -> tuple[list, int]:
        """The running tasks of overloaded servers not moved in this round, by server then task id, capped."""
        rows: list = []
        cap = self.migrate_cap
        c = sim.cluster
        version, movable, rnd, touched = c.server_version, self._movable, self._round, self._record.moved_tasks
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

    def _running_rows(self, sim: "Simulator", rows: list) -> int:
        """Append one row per fully placed running job with a valid action (not already a migration row, unless
        ``preempt_migrating`` and preemption is valid for it; its first task), at most ``running_rows`` (the
        overflow drawn by :func:`~clustergym.window_overflow.round_robin`); returns how many."""
        self._preempt_ok = pre = self.preemption and (self.preempt_empty_queue or bool(sim.queue))
        self._dual_jobs = frozenset()
        room = min(self.W - len(rows), self.running_cap)
        if room <= 0:
            return 0
        seen = {t.job for t in rows} if rows else ()
        touched, stop, code, held = self._record.moved_jobs, self.n_stop, self._stop_code, sim.leases.suspend_error
        if self.preempt_migrating and pre and seen:  # those it may preempt are candidates like any other
            self._dual_jobs = {j for j in seen
                               if j.n_placed == len(j.tasks) and j not in touched and held(j) is None}
            seen = seen - self._dual_jobs
        jobs = [j for j in sim.active_jobs.values()
                if j.n_placed == len(j.tasks) and j not in seen
                and (pre and j not in touched and held(j) is None or stop and code(sim, j))]
        if len(jobs) > room:
            # drawn once per round and set of candidates (within a round the orderings cannot change)
            key = (self._round, room, tuple(map(id, jobs)))
            if self._drawn[0] != key:
                self._drawn = (key, set(round_robin(jobs, RUNNING_ORDERS, sim.now, room)))
            keep = self._drawn[1]
            jobs = [j for j in jobs if j in keep]
        rows.extend([j.tasks[0] for j in jobs])
        return len(jobs)

    def _fill(self, sim: "Simulator", rows: list, n_mig: int, n_over: int, tasks: list, kinds: list
              ) -> tuple[int, int]:
        """Fit-test every candidate against the destinations, write the mask and the shown rows (running
        rows first, then the waiting tasks that fit somewhere, at most ``rows_per_job`` per job, the overflow
        drawn by :func:`~clustergym.window_overflow.waiting_rows`). Returns (rows shown, waiting rows shown)."""
        W, K, k = self.W, self.K, self.k
        n = len(rows)
        ok = self._ok
        if ok.shape[0] < n:  # grows with the ready queue; (n, K + 1): column k flags "fits somewhere"
            ok = self._ok = np.empty((2 * n, K + 1), bool)
        tids = np.array([t.tid for t in rows], np.int64)
        n_fit = kernels.fit_mask(tids, self._demand, self.free, k, FIT_EPS, n_mig, n_over, sim.task_server,
                                 sim.cluster.overloaded, self.dest, self._mask_move, ok)
        if self.n_sub:
            n_fit += self._sub_batch_rows(rows, n_mig, n, ok[:, k])
        if n_mig:
            tasks[:n_mig] = rows[:n_mig]
            kinds[:n_mig] = ["migrate"] * n_over + ["running"] * (n_mig - n_over)
        if not n_fit:
            self._row_tids = tids[:n_mig]
            return n_mig, 0
        fits = ok[n_mig:n, k]
        if self.rows_per_job:  # at most `rows_per_job` rows per job, so one wide gang cannot fill the window
            sel = kernels.first_rows_per_job(fits, tids, n_mig, self._job_of_task, self.rows_per_job,
                                             self._counts).tolist()
        else:
            sel = fits.nonzero()[0].tolist()
        room = W - n_mig
        if len(sel) > room:
            sel = waiting_rows(sim, rows[n_mig:], sel, room)
        n_place = len(sel)
        if n_place:
            first = n_mig + sel[0]
            if sel[-1] - sel[0] == n_place - 1:  # consecutive candidates (the common case): a slice, no gather
                self._mask_move[n_mig:n_mig + n_place, :k] = ok[first:first + n_place, :k]
                tasks[n_mig:n_mig + n_place] = rows[first:first + n_place]
                shown = tids[first:first + n_place]
            else:
                self._mask_move[n_mig:n_mig + n_place, :k] = ok[n_mig:n, :k].take(sel, axis=0)
                tasks[n_mig:n_mig + n_place] = [rows[n_mig + i] for i in sel]
                shown = tids[n_mig:].take(sel)
            kinds[n_mig:n_mig + n_place] = ["place"] * n_place
            self._row_tids = np.concatenate((tids[:n_mig], shown)) if n_mig else shown
        else:
            self._row_tids = tids[:n_mig]
        return n_mig + n_place, n_place
