"""Decision-time search (agents/search.py): the job-time score, a zero horizon that reproduces the base exactly,
and that the search takes a proposal only where its copy scored lower."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

import clustergym  # noqa: F401
from clustergym import baselines
from clustergym.agents.search import LookaheadAgent, fork, job_time_in_system
from clustergym.core.job import JobState
from clustergym.scenarios import make_env

ENV_ID = "clustergym/GPUCluster-v1"
CONFIG = {"split": "test", "window_jobs": 12}


def _job(submit, end):
    return SimpleNamespace(spec=SimpleNamespace(submit_time=submit), record=SimpleNamespace(end_time=end))


def test_job_time_counts_each_job_inside_the_horizon_only():
    jobs = [_job(0, 50), _job(5, 30), _job(20, -1.0), _job(150, -1.0), _job(0, 5)]
    # [10, 100]: 40 + 20 + 80 (not ended) + 0 (submitted after) + 0 (ended before)
    assert job_time_in_system(jobs, 10.0, 100.0) == pytest.approx(140.0)


def _episode(env, agent, seed, steps=400):
    obs, _ = env.reset(seed=seed)
    actions = []
    for _ in range(steps):
        a = int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0])
        actions.append(a)
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            break
    return actions, json.dumps(env.unwrapped.sim.summary(), sort_keys=True, default=str)  # NaN == NaN there


def _first_valid(obs, mask):
    return int(np.flatnonzero(mask)[0])


def test_a_zero_horizon_searches_but_always_keeps_the_base():
    env = make_env(ENV_ID, CONFIG)
    base = _episode(env, baselines.make("mlf-h-req", env=env), 3)
    env = make_env(ENV_ID, CONFIG)
    agent = LookaheadAgent(env, _first_valid, horizon_s=0.0, proposal="random")
    assert _episode(env, agent, 3) == base
    assert agent.searches and all(k == p == 0.0 for _, _, k, p in agent.searches)


def test_the_search_takes_a_proposal_exactly_where_its_copy_scored_lower():
    env = make_env(ENV_ID, CONFIG)
    agent = LookaheadAgent(env, _first_valid, horizon_s=1800.0, proposal="random", seed=1)
    obs, _ = env.reset(seed=3)
    for _ in range(200):
        n = len(agent.searches)
        a = int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0])
        if len(agent.searches) > n:
            chosen, proposed, kept, alternative = agent.searches[-1]
            assert a == (proposed if alternative < kept else chosen)
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    assert any(p < k for _, _, k, p in agent.searches)  # the lookahead did find better actions


def test_bad_settings_are_refused_by_name():
    env = make_env(ENV_ID, CONFIG)
    with pytest.raises(ValueError, match="proposal must be one of"):
        LookaheadAgent(env, _first_valid, proposal="best")
    with pytest.raises(ValueError, match="horizon_s must be a number >= 0"):
        LookaheadAgent(env, _first_valid, horizon_s=float("nan"))


# --------------------------------------------------------------------------- the search as a policy spec

SEARCH = "clustergym.eval.lookahead:lookahead"


def test_a_heuristic_proposer_is_told_the_action_taken_not_its_own():
    from clustergym.eval import specs

    env = make_env(ENV_ID, CONFIG)
    spec = specs.parse_policy(f"{SEARCH}:proposer=mlfs-h+c-act,horizon_s=900")
    agent = specs.load_policy(spec, env)
    proposer = agent._tell_proposer.__self__
    obs, _ = env.reset(seed=3)
    for _ in range(300):
        a = int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0])
        w = env.unwrapped.window
        assert proposer._taken == (w.command(a) if w.mask[a] else None)
        obs, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    # mlfs-h+c-act disagreed and the base's action was taken: the proposer holds that one, not its proposal
    assert any(p >= k for _, _, k, p in agent.searches)


def test_the_spec_identity_holds_the_proposer_file_and_bad_proposers_are_named(tmp_path):
    from clustergym.eval import specs

    model = tmp_path / "clone.zip"
    model.write_bytes(b"one")
    spec = specs.parse_policy(f"s={SEARCH}:proposer={model},decode=act-first,proposal=random")
    first = specs.policy_identity(spec)
    assert first["param_files"]["proposer"]["path"] == str(model.resolve())
    model.write_bytes(b"two")
    assert specs.policy_identity(spec)["param_files"]["proposer"]["sha256"] != \
        first["param_files"]["proposer"]["sha256"]
    assert "param_files" not in specs.policy_identity(specs.parse_policy(f"{SEARCH}:proposer=mlfs-h+c-act"))
    env = make_env(ENV_ID, CONFIG)
    for kv, message in (("proposer=mlfs-h+c-act,decode=act-first", "decode='act-first' is for a model proposer"),
                        ("proposer=no-such-heuristic", "is not a heuristic"),
                        (f"proposer={model}", "is not a readable zip")):
        with pytest.raises(specs.PolicySpecError, match=message):
            specs.check_policy(specs.parse_policy(f"{SEARCH}:{kv}"), lambda: make_env(ENV_ID, CONFIG))
    env.close()


def test_each_episode_record_counts_its_own_searches():
    from clustergym.eval import specs
    from clustergym.eval.rollout import predictor, rollout

    def search_on(env):
        agent = specs.load_policy(specs.parse_policy(f"{SEARCH}:proposer=mlfs-h+c-act,horizon_s=600"), env)
        return agent, predictor(agent, env, "search")

    env = make_env(ENV_ID, CONFIG)
    agent, pred = search_on(env)
    first, second = rollout(env, pred, 3), rollout(env, pred, 4)
    alone = rollout(env, search_on(env)[1], 4)
    assert second["policy_searches"] == alone["policy_searches"] == len(agent.searches) > 0  # its own, not a sum
    assert 0 < first["policy_searches"] and 0 <= second["policy_proposals_taken"] <= second["policy_searches"]
    assert second["policy_proposals_taken"] == sum(p < k for _, _, k, p in agent.searches)
    assert "policy_searches" not in rollout(env, predictor("mlf-h-req", env), 3)


def test_heuristics_that_attach_a_controller_are_refused_as_base_or_proposer():
    env = make_env(ENV_ID, CONFIG)
    with pytest.raises(ValueError, match="proposer 'mlfs-h\\+c' attaches a controller"):
        LookaheadAgent(env, baselines.make("mlfs-h+c", env=env))
    with pytest.raises(ValueError, match="base: 'mlfs-h\\+c' attaches a controller"):
        LookaheadAgent(env, _first_valid, base="mlfs-h+c")


def test_as_a_dagger_teacher_the_search_builds_on_the_learners_action():
    from clustergym.agents.search import search_teacher

    env = make_env(ENV_ID, CONFIG)
    teacher = search_teacher(env, "mlf-h-req", "mlfs-h+c-act", horizon_s=600.0)
    obs, _ = env.reset(seed=3)
    for _ in range(60):
        mask = env.unwrapped.action_masks()
        teacher.predict(obs, action_masks=mask)
        learner = int(np.flatnonzero(mask)[0])  # a learner that takes the first valid action, not the label
        teacher.record_taken(learner)
        w = env.unwrapped.window
        assert teacher.base._taken == teacher._tell_proposer.__self__._taken == w.command(learner)
        obs, _, term, trunc, _ = env.step(learner)
        if term or trunc:
            break


def test_behaviour_cloning_data_labelled_by_the_search_is_the_search_agents_episode():
    from functools import partial

    from clustergym.agents.bc import collect
    from clustergym.agents.search import search_teacher

    teacher = partial(search_teacher, base="mlf-h-req", proposer="mlfs-h+c-act", horizon_s=1800.0, proposal="random")
    config = {"split": "test", "window_jobs": 20, "load": 6.0}  # where this search takes 2 of its proposals
    data = collect(teacher, ENV_ID, config, [4], max_steps=400)
    env = make_env(ENV_ID, config)
    agent = teacher(env)
    actions, _ = _episode(env, agent, 4)
    assert list(data["actions"]) == actions
    assert any(p < k for _, _, k, p in agent.searches)  # so the labels are not the base's own
    env = make_env(ENV_ID, config)
    base_actions, _ = _episode(env, baselines.make("mlf-h-req", env=env), 4)
    assert actions != base_actions


def test_the_terminal_term_is_the_run_time_the_submitted_jobs_still_need():
    from clustergym.agents.search import remaining_run_time

    env = make_env(ENV_ID, CONFIG)
    obs, _ = env.reset(seed=3)
    sim = env.unwrapped.sim
    submitted = [j for j in sim.jobs if j.spec.submit_time <= sim.now]
    assert submitted and all(j.iters == 0 for j in submitted)  # nothing has run yet: all of each job is left
    assert remaining_run_time(sim) == pytest.approx(
        sum(j.target_iters * sim.cluster.mean_iter_time(j.model) for j in submitted))
    agent = baselines.make("mlf-h-req", env=env)
    for _ in range(60):  # an hour or so of the teacher: jobs run, end and arrive
        obs, *_ = env.step(int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0]))
    ended = [j for j in submitted if j.record.end_time >= 0]
    assert ended and remaining_run_time(sim) < sum(
        j.target_iters * sim.cluster.mean_iter_time(j.model) for j in sim.jobs if j.spec.submit_time <= sim.now)
    with pytest.raises(ValueError, match="terminal must be one of"):
        LookaheadAgent(env, _first_valid, terminal="value")


def _play_fifo(env, obs, steps):
    agent = baselines.make("fifo", env=env)
    for n in range(steps):
        obs, _, term, trunc, _ = env.step(int(agent.predict(obs, action_masks=env.unwrapped.action_masks())[0]))
        if term or trunc:
            break
    return n, obs


def test_a_copy_without_foresight_sees_no_later_arrival_and_other_noise():
    env = make_env(ENV_ID, {"split": "test", "window_jobs": 20, "load": 6.0})
    _, obs = _play_fifo(env, env.reset(seed=4)[0], 100)
    sim = env.unwrapped.sim
    later = [j for j in sim.jobs if j.spec.submit_time > sim.now]
    assert later
    twin, blind = fork(env), fork(env)
    blind.unwrapped.sim.forget_future(seed=1)
    for e in (twin, blind):
        _play_fifo(e, obs, 100_000)
    arrived = {j.jid for j in blind.unwrapped.sim.jobs if j.state != JobState.PENDING}
    assert not arrived & {j.jid for j in later}  # none of the later jobs came
    assert all(j.state != JobState.PENDING for j in twin.unwrapped.sim.jobs)  # the plain copy saw them all
    present = [j.jid for j in sim.jobs if j.spec.submit_time <= sim.now]
    ends = [[e.unwrapped.sim.job(jid).record.end_time for jid in present] for e in (twin, blind)]
    assert ends[0] != ends[1]  # the jobs present ran otherwise: other noise, and no later jobs to share with


def test_the_search_without_foresight_is_deterministic_and_checks_its_setting():
    def play(foresight):
        env = make_env(ENV_ID, CONFIG)
        return _episode(env, LookaheadAgent(env, _first_valid, horizon_s=1800.0, proposal="random", seed=1,
                                            foresight=foresight), 3, steps=120)
    assert play("none") == play("none")
    with pytest.raises(ValueError, match="foresight must be one of"):
        LookaheadAgent(make_env(ENV_ID, CONFIG), _first_valid, foresight="partial")


def test_a_blind_copy_draws_the_pending_resource_use_changes_again():
    from clustergym.core.engine import EV_ARRIVAL, EV_USAGE

    env = make_env(ENV_ID, {"split": "test", "window_jobs": 20, "load": 6.0})
    _play_fifo(env, env.reset(seed=4)[0], 100)
    sim = env.unwrapped.sim

    def pending(s, kind):
        return sorted((e[3].jid, e[0]) for e in s._events if e[1] == kind and e[0] > s.now)

    blind = fork(sim)
    blind.forget_future(seed=1)
    usage, redrawn = pending(sim, EV_USAGE), pending(blind, EV_USAGE)
    assert usage and [j for j, _ in redrawn] == [j for j, _ in usage]  # each job still changes, once
    assert all(t > blind.now for _, t in redrawn) and redrawn != usage  # at other times
    assert pending(sim, EV_ARRIVAL) and not pending(blind, EV_ARRIVAL)


def test_the_arrivals_ablation_keeps_the_later_arrivals_and_redraws_the_rest():
    from clustergym.core.engine import EV_ARRIVAL, EV_USAGE

    env = make_env(ENV_ID, {"split": "test", "window_jobs": 20, "load": 6.0})
    _play_fifo(env, env.reset(seed=4)[0], 100)
    sim = env.unwrapped.sim

    def pending(s, kind):
        return sorted((e[3].jid, e[0]) for e in s._events if e[1] == kind and e[0] > s.now)

    knowing = fork(sim)
    knowing.forget_future(seed=1, arrivals=True)
    assert pending(sim, EV_ARRIVAL) and pending(knowing, EV_ARRIVAL) == pending(sim, EV_ARRIVAL)
    assert pending(knowing, EV_USAGE) != pending(sim, EV_USAGE)  # the noise is drawn again all the same
    twin = fork(sim)
    twin.forget_future(seed=1)
    assert pending(knowing, EV_USAGE) == pending(twin, EV_USAGE)  # the same redraw as foresight "none"


def test_the_search_plays_each_foresight_apart():
    def play(foresight):
        env = make_env(ENV_ID, {"split": "test", "window_jobs": 20, "load": 6.0})
        agent = LookaheadAgent(env, _first_valid, horizon_s=1800.0, proposal="random", seed=1, foresight=foresight)
        return _episode(env, agent, 4, steps=150)
    runs = {f: play(f) for f in ("oracle", "arrivals", "none")}
    assert runs["arrivals"] == play("arrivals")
    assert len({repr(r) for r in runs.values()}) == 3
