"""Reliability suite (``make test-slow``): 200 randomised episodes per registered scenario, with every
invariant checked after every step.

Each episode: a registered id with a small window (3-6 jobs) and, for half of them, preemption rows; a policy
choosing uniformly among the actions the mask allows (placements, migrations, requeues, preemptions, ending
the round). After every step: the cluster's resources are conserved and within capacity and no task is on two
GPUs (``test_engine.check_invariants``), the resource layer's incremental state equals a rebuild
(``test_caches.check_simulator``), every action the mask allows is one the core accepts
(``test_env._check_mask_against_core``) and simulated time never goes back; every tenth step and at the end the
observation equals one built from scratch (``test_caches.check_env``). At the end every job is accounted for.
The bad-input table (tests/test_bad_inputs.py) and the interrupt/resume tests of training and sweeps
(tests/test_train_crash.py, tests/test_eval_resume.py) carry the ``reliability`` mark and run with this suite.
"""
from __future__ import annotations

import numpy as np
import pytest

from clustergym.core.job import JobState
from clustergym.scenarios import SCENARIOS, make_env
from test_caches import check_env, check_simulator
from test_engine import check_invariants
from test_env import _check_mask_against_core

EPISODES_PER_ID = 200  # per registered id (SCENARIOS)
BLOCKS = 4  # each id's episodes in blocks, so a failure names a small range of seeds
MAX_STEPS = 250  # per episode (the env truncates there): bounds the suite's run time
# the big scenario's 1,000-job windows and 32 x 33 actions shrink like the others' (its cluster does not)
SMALL = {"clustergym/MLFS2474-v1": {"window_size": 16, "n_destinations": 16}}


def run_checked_episode(env, seed: int) -> int:
    """One randomised episode with every invariant checked after every step; returns its step count."""
    u = env.unwrapped
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    sim, now, steps = u.sim, u.sim.now, 0
    check_simulator(sim)
    check_invariants(sim)
    done = u.sim.is_done()
    while not done:
        _check_mask_against_core(u)
        obs, _, te, tr, info = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        steps += 1
        done = te or tr
        assert "invalid_action" not in info, info.get("invalid_action")
        check_invariants(sim)
        check_simulator(sim)
        assert sim.now >= now, f"time went back from {now} to {sim.now}"
        now = sim.now
        if steps % 10 == 0 or done:
            check_env(u, obs)
    s = info["summary"] if steps else sim.summary()
    assert s["jobs"] == s["finished"] + s["stopped"] + s["unfinished"] + s["not_submitted"] == len(sim.jobs)
    assert s["finished"] == sum(j.state == JobState.FINISHED for j in sim.jobs)
    if u._terminated:
        assert s["finished"] + s["stopped"] == s["jobs"]
    else:
        assert u._truncated and (steps == MAX_STEPS or sim.now >= u.config.max_sim_time or sim.stalled)
    return steps


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("block", range(BLOCKS))
@pytest.mark.parametrize("env_id", sorted(SCENARIOS))
def test_randomised_episodes_keep_every_invariant(env_id, block):
    n = EPISODES_PER_ID // BLOCKS
    seeds = range(1000 * block, 1000 * block + n)
    # (a 3-job generated window may hold only jobs wider than the cluster: an empty episode, checked as well)
    envs = {pre: make_env(env_id, **SMALL.get(env_id, {}), window_jobs=3 + block, preemption=pre,
                          max_steps=MAX_STEPS, invalid_action="raise", allow_empty_episode=True)
            for pre in (False, True)}
    steps = [run_checked_episode(envs[seed % 2 == 1], seed) for seed in seeds]
    assert sum(steps) > n  # the episodes took decisions
    assert sum(s == 0 for s in steps) <= n // 20  # (empty or decision-free episodes are rare)
