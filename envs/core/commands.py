"""Scheduler commands: what a policy (heuristic, agent or the env's action decoder) asks the simulator to do.

A :class:`Command` is a plain value; :func:`execute` applies it to a :class:`~clustergym.core.engine.Simulator`
and :func:`command_error` says why the simulator would refuse it now (None if it would accept it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .accumulation import set_steps, set_steps_error
from .job import InvalidCommand, TaskState

if TYPE_CHECKING:
    from .engine import Simulator

COMMAND_KINDS = ("place", "migrate", "requeue", "preempt", "stop-option", "sub-batch")


@dataclass(frozen=True)
class Command:
    """One scheduler command. ``kind``: "place" (waiting task ``tid`` -> ``server``), "migrate" (running task
    ``tid`` -> ``server``), "requeue" (running task ``tid`` -> queue), "preempt" (every placed task of job
    ``jid`` -> queue), "stop-option" (job ``jid``'s stopping rule -> ``option``, MLFS §3.5), "sub-batch" (job
    ``jid`` trains with ``steps`` sub-batches per iteration while none of its tasks is placed: gradient
    accumulation, :mod:`clustergym.core.accumulation`). A "place" or "migrate" with ``gpu`` puts the task on that
    GPU of ``server``; without, on the server's least-loaded GPU with room (MLFS §3.3.2)."""

    kind: str
    tid: int = -1
    server: int | None = None
    jid: int = -1
    option: str | None = None
    gpu: int | None = None
    steps: int | None = None


def command_error(sim: "Simulator", cmd: Command) -> str | None:
    """Why ``sim`` would refuse ``cmd`` now, or None if it would accept it: the simulator's own reason first,
    then the round rule's (:mod:`clustergym.core.rounds`)."""
    return _state_error(sim, cmd) or sim.round.error(sim, cmd)


def _state_error(sim: "Simulator", cmd: Command) -> str | None:
    """Why the simulator's state refuses ``cmd`` (the round rule aside), or None."""
    if cmd.kind == "stop-option":
        return sim.stop_option_error(cmd.jid, cmd.option)
    if cmd.kind == "sub-batch":
        job = sim.job_by_id.get(cmd.jid)
        return f"unknown job id {cmd.jid}" if job is None else set_steps_error(job, cmd.steps)
    if cmd.kind == "preempt":
        job = sim.job_by_id.get(cmd.jid)
        return f"unknown job id {cmd.jid}" if job is None else sim.leases.preempt_error(job)
    if cmd.kind not in COMMAND_KINDS:
        return f"unknown command kind {cmd.kind!r}; known: {COMMAND_KINDS}"
    if not 0 <= cmd.tid < len(sim.tasks):
        return f"unknown task id {cmd.tid}"
    t = sim.tasks[cmd.tid]
    if cmd.kind == "requeue":
        return None if t.state == TaskState.RUNNING else f"task {cmd.tid} is not running"
    if cmd.server is None:
        return f"{cmd.kind} of task {cmd.tid} needs a server"
    if cmd.kind == "place":
        if not t.is_ready():
            return f"task {cmd.tid} is not a ready waiting task"
        return sim.fit_reason(t, cmd.server, cmd.gpu)
    if t.state != TaskState.RUNNING:
        return f"task {cmd.tid} is not running"
    reason = sim.fit_reason(t, cmd.server, cmd.gpu, moving=True)
    if reason:
        return reason
    g = -1 if t.is_ps else (sim.best_gpu(t, cmd.server, moving=True) if cmd.gpu is None else cmd.gpu)
    if cmd.server == t.server and g == t.gpu:
        return f"task {cmd.tid} already runs on server {cmd.server} GPU {g}"
    return None


def execute(sim: "Simulator", cmd: Command) -> None:
    """Apply ``cmd`` and record it in the round (``sim.round``). Raises InvalidCommand if the round rule
    (:mod:`clustergym.core.rounds`) or the simulator refuses it."""
    why = sim.round.error(sim, cmd)
    if why:
        raise InvalidCommand(why)
    if cmd.kind == "place":
        sim.place(cmd.tid, cmd.server, cmd.gpu)
    elif cmd.kind == "migrate":
        sim.migrate(cmd.tid, cmd.server, cmd.gpu)
    elif cmd.kind == "requeue":
        sim.requeue(cmd.tid)
    elif cmd.kind == "preempt":
        sim.preempt(cmd.jid)
    elif cmd.kind == "stop-option":
        sim.set_stop_option(cmd.jid, cmd.option)
    elif cmd.kind == "sub-batch":
        set_steps(sim.job(cmd.jid), cmd.steps)  # InvalidCommand for an unknown job or a refused count
    else:
        raise ValueError(f"unknown command kind {cmd.kind!r}; known: {COMMAND_KINDS}")
    sim.round.record(sim, cmd)
