"""The window's optional columns (:class:`SlotAndSubBatchColumns`, mixed into :class:`clustergym.window.Window`):
GPU slots per destination server (``EnvConfig.gpu_actions``) and sub-batch options per waiting job
(``sub_batch_actions``), SJF-BSBF's two choices. The layout and the mask rule are in the window's docstring and
docs/env.md, "GPU slots and sub-batches"; these are the parts that only those columns use: a column's server
and GPU, the slot of a command's GPU, the masks and the reasons for a refusal."""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .core.accumulation import power_of_two, set_steps_error
from .core.commands import Command
from .core.resources import fits

if TYPE_CHECKING:
    from .core.engine import Simulator
    from .core.job import Job, Task


def sub_batch_column(steps: object, n_sub: int) -> int | None:
    """The sub-batch option index of ``steps`` accumulation steps (2^i -> i), None if not one of ``n_sub``."""
    if not power_of_two(steps):
        return None
    i = steps.bit_length() - 1
    return i if i < n_sub else None


class SlotAndSubBatchColumns:
    """The GPU-slot and sub-batch parts of :class:`~clustergym.window.Window` (its state: ``G``, ``K``, ``D``,
    ``n_sub``, ``dest``, ``k``, ``_first_gpu``, ``_n_gpus``, ``_demand``, ``_mask2``, ``_mask_move``,
    ``_mask_sub``, ``_row_tids``, ``_bits``, ``_record`` (the simulator's round record), ``_sim``)."""

    def _destination(self, task: "Task", col: int) -> tuple[int, int | None]:
        """(server, GPU) of destination column ``col`` for ``task``: GPU None without GPU slots and for a
        parameter server (slot 0); server -1 for a padding column or slot (:meth:`_padding` says why)."""
        if not self.G:  # the default layout: the env's step path, kept to one lookup
            return int(self.dest[col]), None
        if self._padding(task, col) is not None:
            return -1, None
        server, slot = self._column(col)
        return server, None if task.is_ps else int(self._first_gpu[server]) + slot

    def _column(self, col: int) -> tuple[int, int]:
        """(server, GPU slot) of destination column ``col``: slot 0 without GPU slots; server -1 for padding."""
        if not self.G:
            return int(self.dest[col]), 0
        dc, slot = divmod(col, self.G)
        return int(self.dest[dc]), slot

    def _gpu_slot(self, task: "Task", server: int, gpu: int | None, moving: bool) -> int | None:
        """The GPU slot of ``server`` a command's ``gpu`` is (for a command without one, the GPU the simulator's
        rule would choose, :meth:`Simulator.best_gpu`; slot 0 for a parameter server), None if none."""
        if task.is_ps:
            return 0 if gpu is None or gpu < 0 else None
        if gpu is None:
            gpu = self._sim.best_gpu(task, server, moving) if self._sim is not None else -1
        slot = int(gpu) - int(self._first_gpu[server])
        return slot if gpu >= 0 and 0 <= slot < self._n_gpus[server] else None

    def _padding(self, task: "Task", col: int) -> str | None:
        """Why destination column ``col`` names no destination for ``task``, None if it names one."""
        server, slot = self._column(col)
        if server < 0:
            return f"padding (server column {col // max(1, self.G)})" if self.G else "padding"
        if slot >= self._n_gpus[server]:
            return f"GPU slot {slot} of server {server}, which has {int(self._n_gpus[server])} GPUs"
        if task.is_ps and slot:
            return f"GPU slot {slot} of server {server}: a parameter server takes no GPU (slot 0 places it)"
        return None

    def _sub_batch_reason(self, job: "Job", steps: int, kind: str) -> str:
        """Why ``job`` may not change to ``steps`` sub-batches now (the sub-batch columns' mask rule)."""
        if kind != "place":
            return f"sub-batch {steps}: only a waiting job's row changes its sub-batch"
        once = self._record.error(self._sim, Command("sub-batch", jid=job.jid, steps=steps))  # the round rule
        if once:
            return f"sub-batch {steps}: {once}"
        return f"sub-batch {steps}: {set_steps_error(job, steps) or 'not allowed by the mask'}"

    def _sub_bits(self, job: "Job") -> int:
        """The sub-batch options ``job`` may take now, as bits (bit i: 2^i steps; ``set_steps_error``): none
        once a task is placed or after a change in this round. Kept for the current build."""
        bits = self._bits.get(job)
        if bits is None:
            bits = self._bits[job] = 0 if job.n_placed or job.jid in self._record.batch_jobs else sum(
                1 << i for i in range(self.n_sub) if set_steps_error(job, 1 << i) is None)
        return bits

    def _sub_batch_rows(self, rows: list, lo: int, hi: int, fits_somewhere: np.ndarray) -> int:
        """Flag the waiting candidates ``rows[lo:hi]`` whose job may change its sub-batch as shown, also where
        they fit no destination (a job may fit only with a smaller sub-batch); returns how many were added."""
        added = 0
        for i in range(lo, hi):
            if not fits_somewhere[i] and self._sub_bits(rows[i].job):
                fits_somewhere[i] = True
                added += 1
        return added

    def _write_sub_batch_mask(self, tasks: list, kinds: list, n_rows: int) -> None:
        """The sub-batch columns of the shown waiting rows."""
        for r in range(n_rows):
            if kinds[r] == "place":
                bits = self._sub_bits(tasks[r].job)
                self._mask_sub[r] = [bits >> i & 1 for i in range(self.n_sub)]

    def _expand_gpu_slots(self, sim: "Simulator", n_rows: int) -> None:
        """With GPU slots: a row's slot g of a destination is valid where the server is (the per-server mask,
        ``_mask_move``) and GPU g exists and has the task's GPU memory free (the simulator's rule for a place or
        migrate with ``gpu``); a parameter server takes slot 0 only (it uses no GPU)."""
        c, G, k = sim.cluster, self.G, self.k
        dest = self.dest[:k]
        slot = np.arange(G)
        real = slot < self._n_gpus[dest][:, None]  # (k, G)
        gid = np.minimum(self._first_gpu[dest][:, None] + slot, c.n_gpus - 1)
        free = (c.gpu_mem_cap - c.gpu_mem_used)[gid]
        need = self._demand[self._row_tids[:n_rows], 0]  # -inf for a parameter server
        ok = self._mask_move[:n_rows, :k, None] & real & fits(free, need[:, None, None])
        ok[np.isneginf(need), :, 1:] = False
        self._mask2[:n_rows, :k * G] = ok.reshape(n_rows, k * G)
        self._mask2[:n_rows, self.D] = self._mask_move[:n_rows, self.K]
