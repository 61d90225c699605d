"""The env's running-job rows: preemption (EnvConfig.preemption, on by default) and Tiresias acting through
them."""
import gymnasium as gym
import numpy as np

from clustergym import baselines
import clustergym  # noqa: F401


def _env(**kw):
    return gym.make("clustergym/GPUCluster-v1", invalid_action="raise", window_jobs=30, **kw)


def test_running_job_rows_preempt_the_whole_job():
    env = _env()
    u = env.unwrapped
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    seen = 0
    for _ in range(3000):
        m = u.action_masks()[:-1].reshape(u.W, u.window.C)
        rows = [r for r, k in enumerate(u.window.kinds) if k == "running" and m[r, u.K]]
        if rows:
            r = rows[0]
            assert not m[r, :u.K].any()
            job = u.window.tasks[r].job
            before = job.record.preemptions
            env.step(u.window.encode(r, u.K))
            assert job.record.preemptions == before + 1 and job.n_placed == 0
            seen += 1
            if seen >= 3:
                break
            continue
        valid = np.flatnonzero(u.action_masks())
        _, _, te, tr, _ = env.step(int(rng.choice(valid)))
        if te or tr:
            env.reset()
    assert seen >= 1, "no preemption row appeared"


def test_without_preemption_running_rows_only_change_stopping_rules():
    env = _env(preemption=False)
    u = env.unwrapped
    env.reset(seed=1)
    rng = np.random.default_rng(0)
    running = 0
    for _ in range(600):
        m = u.action_masks()[:-1].reshape(u.W, u.window.C)
        for r, k in enumerate(u.window.kinds):
            if k == "running":
                running += 1
                assert not m[r, :u.K + 1].any() and m[r, u.K + 1:].any()
        _, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        if te or tr:
            break
    assert running
    off = _env(preemption=False, stop_option_actions=False)
    off.reset(seed=1)
    assert off.unwrapped.window.C == off.unwrapped.K + 1
    for _ in range(200):
        assert "running" not in off.unwrapped.window.kinds
        _, _, te, tr, _ = off.step(int(np.flatnonzero(off.unwrapped.action_masks())[0]))
        if te or tr:
            break


def test_tiresias_preempts_through_the_env():
    """One server of 4 GPUs: job 0 (4 GPUs) runs past Tiresias's first queue threshold (3600 GPU-s = 900 s);
    job 1 (4 GPUs) arrives at 1000 s and sits in a higher queue, so Tiresias suspends job 0 for it."""
    from clustergym.gym_env import ClusterEnv
    from helpers import MODELS, cluster, job, models

    specs = [job(0, model="toy-none", R=4, iters=3000), job(1, submit=1000.0, model="toy-none", R=4, iters=100)]
    env = ClusterEnv(dict(invalid_action="raise"), cluster_spec=cluster(1), job_specs=specs,
                     models=models, model_names=list(MODELS))
    agent = baselines.make("tiresias", env=env)
    obs, _ = env.reset(seed=0)
    for _ in range(1000):
        a, _ = agent.predict(obs, action_masks=env.action_masks())
        obs, _, te, tr, info = env.step(a)
        if te or tr:
            break
    recs = {r["job_id"]: r for r in env.sim.job_records()}
    assert info["summary"]["preemptions"] == 1 and recs[0]["preemptions"] == 1
    assert recs[1]["end"] < recs[0]["end"]  # the short job overtook the long one
