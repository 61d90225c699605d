"""The ready queue: the waiting tasks whose DAG parents all hold a slot (MLFS's dependency rule for placement,
:meth:`Task.is_ready`), in queue order. The engine tells it each task state change, so a read costs a copy of
the list instead of a readiness test of every waiting task: on contended scenarios thousands of tasks wait
while only a few change state per step."""
from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, Iterator

from .job import TASK_WAITING

if TYPE_CHECKING:
    from .job import Task


class ReadyQueue:
    """Ready tasks ordered by ``Task.queue_seq``, the count of queue entries when the task last entered the
    queue (so, queue order: the simulator's queue keeps tasks in the order they entered it)."""

    __slots__ = ("_seqs", "_tasks", "_next_seq")

    def __init__(self) -> None:
        self._seqs: list[int] = []  # sorted; parallel to _tasks
        self._tasks: list[Task] = []
        self._next_seq = 0

    def __iter__(self) -> Iterator[Task]:
        """The ready tasks in queue order, without a copy: no task may change state while this is read."""
        return iter(self._tasks)

    def tasks(self) -> list[Task]:
        """The ready tasks in queue order (a new list)."""
        return self._tasks.copy()

    def entered(self, task: Task) -> None:
        """``task`` has just entered the queue (submitted, or back from a slot): it is ready if its parents hold
        slots; its waiting DAG children, if it held a slot until now, no longer are."""
        task.queue_seq = self._next_seq
        self._next_seq += 1
        tasks = task.job.tasks
        for c in task.t.children:
            self._discard(tasks[c])
        if task.is_ready():
            self._seqs.append(task.queue_seq)  # the largest sequence number: the end of the queue
            self._tasks.append(task)

    def attached(self, task: Task) -> None:
        """``task`` has just taken a slot (placed from the queue, or moved): it leaves the ready tasks, and its
        waiting children whose other parents hold slots join them at their place in the queue."""
        self._discard(task)
        tasks = task.job.tasks
        for c in task.t.children:
            child = tasks[c]
            if child.state == TASK_WAITING and child.is_ready():
                self._insert(child)

    def left(self, task: Task) -> None:
        """``task`` has left the queue without a slot (its job ended)."""
        self._discard(task)

    def _insert(self, task: Task) -> None:
        i = bisect_left(self._seqs, task.queue_seq)
        if i == len(self._seqs) or self._seqs[i] != task.queue_seq:
            self._seqs.insert(i, task.queue_seq)
            self._tasks.insert(i, task)

    def _discard(self, task: Task) -> None:
        # sequence numbers are never reused, so only the task itself can hold its number here
        i = bisect_left(self._seqs, task.queue_seq)
        if i < len(self._seqs) and self._seqs[i] == task.queue_seq:
            del self._seqs[i]
            del self._tasks[i]
