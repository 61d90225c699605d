"""MLF-H's host rule (MLFS §3.3.2's ideal virtual host) against its ``placement="pack"`` ablation (the shared best
fit): the ideal host places a job's tasks one at a time and weighs each server's utilisation as much as the
task's traffic to it, so it can split a job that one idle server would hold."""
from __future__ import annotations

import pytest

from clustergym import baselines
from clustergym.core.commands import execute
from clustergym.core.engine import SimConfig, Simulator
from clustergym.core.view import ClusterView

import helpers


def _servers_of_the_4_gpu_job(**params) -> list[int]:
    """A BERT job in 4 model partitions, alone on three idle 4-GPU servers (the bundled model catalogue), placed
    by MLF-H (requirement stops)."""
    specs = [helpers.job(1, model="BERT", P=4, iters=10**6)]
    sim = Simulator(helpers.cluster(3), specs, SimConfig(usage_change_mean_s=0.0), 0)
    policy = baselines.make("mlf-h-req", **params)
    policy.attach(sim)
    view = ClusterView(sim)
    while sim.next_decision():
        while (cmd := policy.decide(view)) is not None:
            policy.observe(view, cmd)
            execute(sim, cmd)
        job = sim.job_by_id[1]
        if job.tasks and all(t.server >= 0 for t in job.tasks):
            return sorted(t.server for t in job.tasks)
    raise AssertionError("job 1 was never placed")


def test_best_fit_keeps_a_4_gpu_job_on_one_idle_server():
    assert _servers_of_the_4_gpu_job(placement="pack") == [0, 0, 0, 0]


def test_the_ideal_host_splits_it():
    # partition 1 has no traffic to partition 0's server, so the least-used server is nearest the ideal host
    assert _servers_of_the_4_gpu_job() == [0, 0, 1, 1]


def test_an_unknown_placement_is_refused():
    with pytest.raises(ValueError, match="placement must be 'ideal' or 'pack'"):
        baselines.make("mlf-h", placement="tetris")
