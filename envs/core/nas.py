"""NAS groups: the trials of one neural architecture search, and the rule its controller stops them by.

Hare (§V-A) describes NAS as "a group of training jobs running in parallel for competition", where a trial "may
be soon killed because its loss descending speed falls behind other competitors". Hare gives no rule; ours is
the asynchronous successive halving of hyperparameter-search controllers (ASHA, Li et al., MLSys 2020), with
a trial that is not promoted stopped rather than paused:

- **Trials.** Jobs with the same ``JobSpec.nas_group`` are one search. They differ in ``curve_pace`` (how fast
  each architecture moves along its model's learning curve), so at the same iteration their losses differ.
- **Rungs.** A trial is judged when it reaches progress ``nas_first_rung`` x ``nas_eta``^k of its budget
  (k = 0, 1, ... while below 1; rung iteration = the whole iteration at that progress, as
  :meth:`~clustergym.core.job.Job.iterations_at`); a rung at or past the trial's stopping point is not judged.
- **The rule.** At rung k the controller ranks the trial's loss at the rung iteration among the losses every
  trial of its group recorded at rung k so far (itself included; ties by job id): it continues if its rank is
  within the best ceil(n / ``nas_eta``) of those n, else the controller stops it. The first trial at a rung
  always continues; a trial judged later competes with every earlier one. Losses are compared at the same
  progress of each trial's budget, the same iteration when their budgets agree (as generated groups' do).
- **Records.** A stopped trial ends as :attr:`~clustergym.core.job.JobState.STOPPED` (the summary's
  ``stopped``; its record's ``stopped_by`` is "nas"), with the time it spent as its JCT and the accuracy it
  reached. The controller is the user's, not the scheduler's: no policy command is involved.

:func:`make_nas_groups` turns some of a workload's jobs into groups (the generator's option).
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterable, Mapping, Sequence

import numpy as np

from .config import number_error
from .job import Job
from .workload import JobSpec

# the child of the generator's seed that draws the groups (a stream of its own: the other draws are unchanged)
NAS_STREAM = 2
# the generator's NAS options when not given: no groups; groups of 4 trials; paces exp(0.3 N(0, 1))
NAS_FRACTION, NAS_GROUP_SIZE, NAS_PACE_SIGMA = 0.0, 4, 0.3


def nas_options(generator: Mapping) -> tuple[float, int, float]:
    """(nas_fraction, nas_group_size, nas_pace_sigma) of a generator-options dict, the defaults where absent."""
    return (generator.get("nas_fraction", NAS_FRACTION), generator.get("nas_group_size", NAS_GROUP_SIZE),
            generator.get("nas_pace_sigma", NAS_PACE_SIGMA))


def rung_progress(first_rung: float, eta: float) -> tuple[float, ...]:
    """The rungs' progress: ``first_rung`` x ``eta``^k for k = 0, 1, ... while below 1."""
    out, x = [], first_rung
    while x < 1.0 - 1e-12:
        out.append(x)
        x *= eta
    return tuple(out)


class NasControl:
    """The controllers of every NAS group of a simulation (module docstring): which rung each trial is due at
    next, and the losses each group recorded at each rung."""

    def __init__(self, jobs: Iterable[Job], first_rung: float, eta: float) -> None:
        self.eta = eta
        self.rungs = rung_progress(first_rung, eta)
        self.groups: dict[int, list[Job]] = {}
        for job in sorted(jobs, key=lambda j: j.jid):
            if job.spec.nas_group is not None:
                self.groups.setdefault(job.spec.nas_group, []).append(job)
        self._next: dict[Job, int] = {j: 0 for g in self.groups.values() for j in g}  # the trial's next rung
        self._recorded: dict[tuple[int, int], list[tuple[float, int]]] = {}  # (group, rung) -> (loss, job id)

    def trials(self, group: int) -> list[Job]:
        """The trials of ``group``, by job id (empty for an unknown group)."""
        return list(self.groups.get(group, ()))

    def rung_iters(self, job: Job) -> float | None:
        """The iteration of the trial's next rung, or None (not a trial, no rung left before its stopping point)."""
        k = self._next.get(job)
        if k is None or k >= len(self.rungs):
            return None
        it = job.iterations_at(self.rungs[k])
        return it if it < job.target_iters else None

    def rung_time(self, job: Job, now: float) -> float | None:
        """When a progressing trial reaches its next rung at its current rate (its progress is materialised up
        to ``now``), or None (no rung due, or it is not progressing)."""
        it = self.rung_iters(job)
        if it is None or not job.rate > 0 or job.n_placed < len(job.tasks):
            return None
        return max(now, job.paused_until) + max(0.0, it - job.iters) / job.rate

    def judge(self, job: Job) -> bool:
        """Record the trial's loss at its rung and say whether it continues (the rule of the module docstring);
        its next rung is the following one."""
        k, it = self._next[job], self.rung_iters(job)
        if it is None:
            return True
        seen = self._recorded.setdefault((job.spec.nas_group, k), [])
        mine = (job.loss_at_iter(it), job.jid)
        seen.append(mine)
        self._next[job] = k + 1
        return sorted(seen).index(mine) < math.ceil(len(seen) / self.eta)


# ----------------------------------------------------------------------------------------- workloads

def nas_option_error(fraction: float, group_size: int, pace_sigma: float) -> tuple[str, str] | None:
    """(option, why) for the first invalid NAS option of the generator, else None: ``nas_fraction`` in [0, 1],
    ``nas_group_size`` an integer >= 2, ``nas_pace_sigma`` finite >= 0."""
    why = number_error(fraction, 0.0, False, 1.0)
    if why:
        return "nas_fraction", f"nas_fraction {why} (got {fraction!r})"
    why = number_error(group_size, 2.0, integer=True) if not math.isinf(group_size) else "must be finite"
    if why:
        return "nas_group_size", f"nas_group_size {why} (got {group_size!r})"
    why = number_error(pace_sigma, 0.0)
    if why:
        return "nas_pace_sigma", f"nas_pace_sigma {why} (got {pace_sigma!r})"
    return None


def check_nas_options(fraction: float, group_size: int, pace_sigma: float) -> None:
    """A ValueError naming the first invalid NAS option (:func:`nas_option_error`)."""
    bad = nas_option_error(fraction, group_size, pace_sigma)
    if bad:
        raise ValueError(bad[1])


def make_nas_groups(specs: Sequence[JobSpec], seed: int, fraction: float, group_size: int = NAS_GROUP_SIZE,
                    pace_sigma: float = NAS_PACE_SIGMA) -> list[JobSpec]:
    """``specs`` (in submission order) with about ``fraction`` of them turned into NAS groups of
    ``group_size`` trials. Walking the jobs in order, a job not yet in a group starts one with probability
    q = f / (g (1 - f) + f) (so that a share f of the jobs end up in groups of g) if g - 1 jobs follow it; the
    g - 1 jobs after it become its trials: copies of it (model, GPUs, budget, submit time, deadline ...) with
    their own job ids, all in group = its job id. Every trial's ``curve_pace`` is exp(``pace_sigma`` x N(0, 1)).
    Draws come from a stream of ``seed`` of their own (:data:`NAS_STREAM`); ``fraction`` 0 returns the specs
    unchanged."""
    check_nas_options(fraction, group_size, pace_sigma)
    out = list(specs)
    if fraction == 0.0:
        return out
    g = int(group_size)
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed, spawn_key=(NAS_STREAM,))))
    q = fraction / (g * (1.0 - fraction) + fraction)
    i = 0
    while i + g <= len(out):
        if rng.random() >= q:
            i += 1
            continue
        lead = out[i]
        paces = np.exp(pace_sigma * rng.standard_normal(g))
        for k in range(g):
            out[i + k] = replace(lead, job_id=out[i + k].job_id, nas_group=lead.job_id, curve_pace=float(paces[k]))
        i += g
    return out
