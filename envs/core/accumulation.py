"""Gradient accumulation: a job trains its per-GPU batch ``B`` as ``s`` sub-batches of ``B / s`` (SJF-BSBF §IV).

The job's convergence is unchanged (the same ``B`` per update), so its iteration budget is too; what changes:

- **Time** (SJF-BSBF Eqs. 3 and 7). One sub-batch costs ``t_comp(B/s) = alpha + beta B/s``; an iteration runs
  ``s`` of them before synchronising. This simulator times synchronisation after the compute of the DAG's
  critical path (no compute/communication overlap: Eq. 7 with delta = 1), so accumulation multiplies each
  task's compute by ``s t_comp(B/s) / t_comp(B) = s a + (1 - a)`` (:func:`compute_factor`), with ``a =
  alpha / t_comp(B)`` the model's ``batch_fixed_share`` (``envs/data/batch_scaling.csv``, fitted to Gavel's solo
  V100 times over batch sizes by ``eval/extract_colocation.py``; the median of those fits for models without
  such a series).
- **GPU memory**. The paper gives no formula. Ours: a replica's memory (the catalogue's ``gpu_memory_gb`` at
  batch ``B``) is a static part (fp32 weights, gradients and one optimiser moment: ``3 x 4 bytes x params``,
  at most the whole) plus activations that scale with the sub-batch, ``static + (memory - static) / s``
  (:func:`replica_memory_gb`); each task needs its parameter share of it plus the runtime overhead
  (:func:`clustergym.core.dag.worker_gpu_memory`).

``s`` is a power of two from 1 to ``B`` (the paper's search: "[1, B] with a step of power two"), chosen by the
scheduler while none of the job's tasks holds a slot (SJF-BSBF never changes a running job's batch):
``Command("sub-batch", jid=j, steps=s)``, :func:`set_steps`. The Gymnasium env offers it as columns of a
waiting job's row when ``EnvConfig.sub_batch_actions`` is n > 0 (steps 1, 2, ... 2^(n-1),
:mod:`clustergym.window`).
"""
from __future__ import annotations

from dataclasses import replace

from .catalogue import ModelProfile
from .dag import worker_gpu_memory
from .job import JOB_ACTIVE, InvalidCommand, Job

STATIC_BYTES_PER_PARAM = 12.0  # fp32 weights, gradients and one optimiser moment


def fixed_share(model: ModelProfile) -> float:
    """The model's fixed share ``a`` of one iteration (ValueError naming the model when it has none)."""
    if model.batch_fixed_share is None:
        raise ValueError(f"model {model.name!r} has no batch_fixed_share: it cannot use gradient accumulation")
    return model.batch_fixed_share


def power_of_two(steps: object) -> bool:
    """Whether ``steps`` is an integer power of two >= 1 (a bool is not an integer here)."""
    return not isinstance(steps, bool) and isinstance(steps, int) and steps >= 1 and not steps & (steps - 1)


def steps_error(model: ModelProfile, steps: object) -> str | None:
    """Why ``steps`` is not a valid accumulation for ``model`` (a power of two in [1, batch]), or None."""
    if isinstance(steps, bool) or not isinstance(steps, int):
        return f"accumulation steps must be an integer, got {steps!r}"
    if not power_of_two(steps):
        return f"accumulation steps must be a power of two >= 1, got {steps}"
    if steps > model.batch_size:
        return f"accumulation steps {steps} exceed model {model.name!r}'s batch size {model.batch_size}"
    if steps > 1 and model.batch_fixed_share is None:
        return f"model {model.name!r} has no batch_fixed_share: it cannot use gradient accumulation"
    return None


def compute_factor(model: ModelProfile, steps: int) -> float:
    """An iteration's compute with ``steps`` sub-batches over its compute in one batch: ``s a + (1 - a)``."""
    if steps == 1:
        return 1.0
    a = fixed_share(model)
    return steps * a + (1.0 - a)


def replica_memory_gb(model: ModelProfile, steps: int) -> float:
    """GPU memory of one full replica training with ``steps`` sub-batches (module rule)."""
    if steps == 1:
        return model.gpu_memory_gb
    static = min(model.gpu_memory_gb, STATIC_BYTES_PER_PARAM * model.params_m * 1e6 / 2**30)
    return static + (model.gpu_memory_gb - static) / steps


def set_steps(job: Job, steps: int) -> None:
    """Give ``job`` ``steps`` sub-batches per iteration (InvalidCommand when :func:`set_steps_error` says no):
    its tasks' GPU memory follows; the compute factor applies when they are placed
    (:func:`clustergym.core.progress.on_attach`)."""
    why = set_steps_error(job, steps)
    if why:
        raise InvalidCommand(why)
    job.accum_steps = steps
    for t in job.tasks:
        if not t.is_ps:
            t.t = replace(t.t, gpu_memory_gb=memory_needed(job.model, t.t.share, steps))


def set_steps_error(job: Job, steps: object) -> str | None:
    """Why ``job`` may not switch to ``steps`` sub-batches now, or None."""
    jid = job.jid
    if job.state != JOB_ACTIVE or job.n_placed:
        return (f"job {jid} must be active with no placed task to change its sub-batch (SJF-BSBF never changes a "
                f"running job's batch)")
    why = steps_error(job.model, steps)
    if why:
        return f"job {jid}: {why}"
    if steps == job.accum_steps:
        return f"job {jid} already uses {steps} accumulation steps"
    return None


def memory_needed(model: ModelProfile, share: float, steps: int) -> float:
    """GPU memory of a worker task with parameter share ``share`` at ``steps`` sub-batches."""
    return worker_gpu_memory(replica_memory_gb(model, steps), share)

