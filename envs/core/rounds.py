"""The decision round's rule, in one place for every consumer (the env's window and mask, the heuristics' core
runs): within one round (the commands given at one decision point, between two ``Simulator.next_decision``
calls), a task placed, migrated or requeued is not migrated or requeued again (a preempted job's tasks count
as moved), a job with such a task, or preempted, is not preempted, and a job's stopping rule and its sub-batch
change at most once. A waiting task may always be placed, also one requeued or preempted in the round: it then
runs and cannot move again. So every round is finite (no place-requeue ping-pong). Heuristics may hold back
more (most do not place a task they requeued in the same round); that is their preference, not the rule.

The simulator owns one :class:`RoundRecord` (``sim.round``), cleared at each decision point;
:func:`~clustergym.core.commands.execute` records every executed command in it and
:func:`~clustergym.core.commands.command_error` refuses, with the reason, a command the rule forbids.
"""
from __future__ import annotations

from typing import Any  # the Simulator and a Command: not imported, the engine imports this module


class RoundRecord:
    """What the executed commands of the current round touched. ``moved_tasks``: ids of tasks placed, migrated or
    requeued (every task of a preempted job); ``moved_jobs``: the :class:`~clustergym.core.job.Job` objects with
    such a task, or preempted; ``option_jobs`` / ``batch_jobs``: ids of jobs whose stopping rule / sub-batch
    changed. Consumers read the sets and never write them."""

    __slots__ = ("moved_tasks", "moved_jobs", "option_jobs", "batch_jobs")

    def __init__(self) -> None:
        self.moved_tasks: set[int] = set()
        self.moved_jobs: set = set()
        self.option_jobs: set[int] = set()
        self.batch_jobs: set[int] = set()

    def clear(self) -> None:
        """A new round: every task may move again, every job's rule and sub-batch change again."""
        self.moved_tasks.clear()
        self.moved_jobs.clear()
        self.option_jobs.clear()
        self.batch_jobs.clear()

    def record(self, sim: Any, cmd: Any) -> None:
        """Note an executed command."""
        kind = cmd.kind
        if kind == "stop-option":
            self.option_jobs.add(cmd.jid)
        elif kind == "sub-batch":
            self.batch_jobs.add(cmd.jid)
        elif kind == "preempt":
            job = sim.job_by_id[cmd.jid]
            self.moved_tasks.update(t.tid for t in job.tasks)
            self.moved_jobs.add(job)
        else:  # place, migrate, requeue
            self.moved_tasks.add(cmd.tid)
            self.moved_jobs.add(sim.tasks[cmd.tid].job)

    def error(self, sim: Any, cmd: Any) -> str | None:
        """Why the rule forbids ``cmd`` in this round, or None (an unknown id is left to the simulator's checks)."""
        kind = cmd.kind
        if kind == "stop-option":
            return (f"job {cmd.jid}'s stopping rule was already changed in this round"
                    if cmd.jid in self.option_jobs else None)
        if kind == "sub-batch":
            return f"job {cmd.jid}'s sub-batch was already changed in this round" if cmd.jid in self.batch_jobs else None
        if kind == "preempt":
            job = sim.job_by_id.get(cmd.jid)
            return (f"a task of job {cmd.jid} was placed, moved or preempted in this round"
                    if job is not None and job in self.moved_jobs else None)
        if kind == "place":  # a waiting task: placeable even if requeued in this round
            return None
        return f"task {cmd.tid} was already placed or moved in this round" if cmd.tid in self.moved_tasks else None
