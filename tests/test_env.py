"""Tests of the Gymnasium environment (envs/gym_env.py and friends)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import clustergym  # noqa: F401  (registers the ids)
from clustergym.config import OBJECTIVE_NAMES, ConfigError, EnvConfig
from clustergym.core.commands import Command
from clustergym.core.engine import InvalidCommand
from clustergym.core.workload import STOP_OPTIONS
from clustergym.gym_env import InvalidAction
from clustergym.wrappers import MOReward

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = "clustergym/GPUCluster-v1"
HETERO = "clustergym/Hetero-v1"
SMALL = {"window_jobs": 8}


def greedy_action(u) -> int:
    """First valid placement, else end the round (never migrates): finishes episodes quickly."""
    m = u.action_masks()
    for a in np.flatnonzero(m[:-1]):
        if u.window.kinds[a // u.window.C] == "place" and a % u.window.C < u.K:
            return int(a)
    return u.end_round_action


def run_episode(env, seed, policy=greedy_action, max_steps=100_000):
    obs, info = env.reset(seed=seed)
    u = env.unwrapped
    total = np.zeros(len(OBJECTIVE_NAMES))
    rewards = []
    for _ in range(max_steps):
        obs, r, te, tr, info = env.step(policy(u))
        total += info["objectives"]
        rewards.append(r)
        if te or tr:
            return total, rewards, info, te, tr
    raise AssertionError("episode did not end")


# ------------------------------------------------------------------ registration and config
def test_docstring_snippet_runs():
    from clustergym.gym_env import ClusterEnv

    doc = ClusterEnv.__doc__
    code = textwrap.dedent(doc.split(".. code-block:: python")[1].split("**Decision points.**")[0])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout.strip().splitlines()[-1]) > 0  # the mean JCT of the finished episode
    for section in ("**Observation**", "**Action**", "**Invalid actions.**", "**Reward**", "**Termination**",
                    "**Truncation**", "**Version History**", 'invalid_action="raise"'):
        assert section in doc



def test_ids_registered():
    for env_id in (DEFAULT, "clustergym/MLFS80-Philly-v1", HETERO, "clustergym/MLFS2474-v1", "clustergym/Hare160-Philly-v1"):
        assert env_id in gym.registry
        assert gym.registry[env_id].max_episode_steps is None


def test_config_rejects_unknown_keys(tmp_path):
    with pytest.raises(ConfigError, match="windw_jobs"):
        gym.make(DEFAULT, windw_jobs=3)
    with pytest.raises(ConfigError, match="tick"):
        EnvConfig.from_dict({"sim": {"tick": 5}})
    with pytest.raises(ConfigError, match="bogus"):
        EnvConfig.from_dict({"mapping": {"bogus": 1}})
    p = tmp_path / "c.yaml"
    p.write_text("cluster: tiny-8\nwindow_jobs: 5\nreward_weights: [1, 0, 0, 0, 0, 0, 0]\nsim: {overload_threshold: 0.8}\n")
    cfg = EnvConfig.from_yaml(p)
    assert cfg.cluster == "tiny-8" and cfg.reward_weights == (1.0, 0, 0, 0, 0, 0, 0) and cfg.sim["overload_threshold"] == 0.8
    env = gym.make(DEFAULT, config=str(p), window_size=4)
    assert env.unwrapped.config.window_jobs == 5 and env.unwrapped.W == 4
    p.write_text("cluster: tiny-8\nnope: 1\n")
    with pytest.raises(ConfigError, match="nope"):
        EnvConfig.from_yaml(p)
    with pytest.raises(ConfigError, match="invalid_action"):
        EnvConfig(invalid_action="ignore")


# ------------------------------------------------------------------ checkers
@pytest.mark.parametrize("env_id", [DEFAULT, HETERO])
def test_gymnasium_check_env(env_id):
    from gymnasium.utils.env_checker import check_env

    check_env(gym.make(env_id, **SMALL).unwrapped)


@pytest.mark.parametrize("env_id", [DEFAULT, HETERO])
def test_sb3_check_env(env_id):
    from stable_baselines3.common.env_checker import check_env

    check_env(gym.make(env_id, **SMALL).unwrapped)


# ------------------------------------------------------------------ masks vs the core
def _check_mask_against_core(u):
    m = u.action_masks()
    sim = u.sim
    assert m[u.end_round_action]
    w = u.window
    m2 = m[:-1].reshape(u.W, w.C)
    migrating = {t.job for t, kind in zip(w.tasks, w.kinds) if kind == "migrate"}
    for r, (t, kind) in enumerate(zip(w.tasks, w.kinds)):
        if t is None:
            assert not m2[r].any(), "padding row has a valid action"
            continue
        jid = t.job.jid
        # -v2: a job with migration rows and a running-job row has its stop options on the migration row only
        on_other_row = kind == "running" and t.job in migrating
        assert not on_other_row or w.preempt_migrating
        for o, option in enumerate(STOP_OPTIONS):  # the stop options: the simulator's rule, once per round
            assert m2[r, u.K + 1 + o] == (sim.stop_option_error(jid, option) is None
                                           and jid not in sim.round.option_jobs and not on_other_row), (r, option)
        if kind == "running":  # a fully placed job: preemption while tasks wait, nothing else
            assert t.job.fully_placed and not m2[r, :u.K].any()
            waiting_ok = w.preempt_empty_queue or bool(sim.queue)  # -v2: also while nothing waits
            assert m2[r, u.K] == (w.preemption and waiting_ok and t.job not in sim.round.moved_jobs
                                  and sim.leases.suspend_error(t.job) is None)  # a running lease holds it
            assert m2[r].any()
            continue
        assert m2[r, u.K] == (kind == "migrate")
        if kind == "place":
            assert t.is_ready()
        for col, s in enumerate(w.destinations):
            if s < 0:
                assert not m2[r, col]
                continue
            fits = sim.fit_reason(t, s, moving=(kind == "migrate")) is None
            if kind == "place":
                assert m2[r, col] == fits, (r, col, sim.fit_reason(t, s))
            elif m2[r, col]:
                assert fits and s != t.server and not sim.cluster.overloaded[s]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), scenario=st.sampled_from([HETERO, DEFAULT]), steps=st.integers(20, 120))
def test_masked_random_rollouts_never_rejected(seed, scenario, steps):
    env = gym.make(scenario, window_jobs=10, invalid_action="raise")
    obs, info = env.reset(seed=seed)
    u = env.unwrapped
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        _check_mask_against_core(u)
        m = u.action_masks()
        assert np.array_equal(obs["action_mask"].astype(bool), m)
        assert np.array_equal(info["action_mask"], m)
        assert m[:-1].any() or u.sim.is_done(), "agent sees a state whose only action is end-round"
        a = int(rng.choice(np.flatnonzero(m)))
        try:
            obs, r, te, tr, info = env.step(a)
        except InvalidCommand as e:  # the mask allowed something the core rejects
            raise AssertionError(f"core rejected masked action {a}: {e}") from e
        assert env.observation_space.contains(obs)
        if te or tr:
            break
    # a masked-out action raises, naming index, row/col and the reason
    m = u.action_masks()
    bad = np.flatnonzero(~m)
    if len(bad) and not u.sim.is_done():
        with pytest.raises(InvalidAction, match=rf"action {bad[0]} \(row"):
            env.step(int(bad[0]))


def test_invalid_action_penalty_mode():
    env = gym.make(HETERO, **SMALL, invalid_action="penalty", invalid_penalty=-2.5)
    obs, info = env.reset(seed=3)
    u = env.unwrapped
    bad = int(np.flatnonzero(~u.action_masks())[0])
    t0, q0 = u.sim.now, len(u.sim.queue)
    obs2, r, te, tr, info = env.step(bad)
    # (the first step also pays out what accrued before the first decision point)
    assert r == pytest.approx(-2.5 + np.dot(u.config.reward_weights, info["objectives"]), abs=1e-12)
    assert "invalid_action" in info and "row" in info["invalid_action"]
    assert u.sim.now == t0 and len(u.sim.queue) == q0
    for k in obs:
        assert np.array_equal(obs[k], obs2[k])
    # the env keeps no reference to what it returned: a caller writing into its arrays changes nothing
    kept = {k: v.copy() for k, v in obs2.items()}
    for v in obs2.values():
        v.fill(7)
    obs2b, *_ = env.step(bad)
    for k in kept:
        assert np.array_equal(obs2b[k], kept[k]), k
    obs3, r, _, _, info = env.step(u.action_space.n + 5)
    assert r == -2.5 and np.array_equal(info["objectives"], np.zeros(len(OBJECTIVE_NAMES))) and "out of range" in info["invalid_action"]


@pytest.mark.parametrize("mode", ["penalty", "raise"])
@pytest.mark.parametrize("bad,why", [(None, "NoneType"), (-0.5, "float"), (3.0, "float"), (True, "bool"),
                                     ("3", "str"), (np.float64(2.0), "float64"), (np.bool_(True), "bool"),
                                     (np.array([1, 2]), r"shape \(2,\)"), (np.array(0.0), "float64 array"),
                                     ([1], "list")])
def test_step_takes_integers_only(mode, bad, why):
    env = gym.make(HETERO, **SMALL, invalid_action=mode)
    env.reset(seed=0)
    u = env.unwrapped
    t0, steps = u.sim.now, u._steps
    with pytest.raises(InvalidAction, match=rf"action .* is a .*{why}.*step\(\) takes an action index"):
        env.step(bad)
    assert u.sim.now == t0 and u._steps == steps  # nothing happened


def test_step_accepts_python_and_numpy_integers():
    ref = gym.make(HETERO, **SMALL)
    ref.reset(seed=0)
    a = int(np.flatnonzero(ref.unwrapped.action_masks()[:-1])[0])
    obs, r, *_ = ref.step(a)
    for form in (np.int64(a), np.int32(a), np.uint16(a), np.array(a), np.array([a]), np.array([[a]], np.int8)):
        env = gym.make(HETERO, **SMALL, invalid_action="raise")
        env.reset(seed=0)
        obs2, r2, *_ = env.step(form)
        assert r2 == r and all(np.array_equal(obs[k], obs2[k]) for k in obs), type(form)


def test_default_invalid_action_rule_is_penalty():
    assert EnvConfig().invalid_action == "penalty" and EnvConfig().invalid_penalty == -0.1
    env = gym.make(HETERO, **SMALL)  # a masked-out action: a no-op with reward invalid_penalty
    env.reset(seed=0)
    bad = int(np.flatnonzero(~env.unwrapped.action_masks())[0])
    _, r, _, _, info = env.step(bad)
    assert "invalid_action" in info
    with pytest.raises(InvalidAction, match=rf"action {bad} "):  # one keyword away: invalid_action="raise"
        env = gym.make(HETERO, **SMALL, invalid_action="raise")
        env.reset(seed=0)
        env.step(bad)


# ------------------------------------------------------------------ helpers for heuristics
def test_window_translates_actions_and_commands():
    env = gym.make(HETERO, **SMALL, preemption=True)
    env.reset(seed=1)
    u = env.unwrapped
    w = u.window
    assert w.decode(u.end_round_action) is None and w.command(u.end_round_action) is None
    assert w.C == u.K + 1 + len(STOP_OPTIONS) and u.end_round_action == u.W * w.C
    for row in (0, u.W - 1):
        for col in (0, u.K, w.C - 1):
            assert w.decode(w.encode(row, col)) == (row, col)
    assert len(w.tasks) == u.W and len(w.kinds) == u.W and len(w.destinations) == u.K
    rng = np.random.default_rng(0)
    kinds_seen = set()
    for _ in range(300):  # every allowed action decodes to a command that encodes back to it
        for a in np.flatnonzero(u.action_masks()[:-1]):
            cmd = w.command(a)
            row, col = w.decode(a)
            t = w.tasks[row]
            if col > u.K:  # a stop option, on the row's job (the first row of that job encodes it)
                assert cmd == Command("stop-option", jid=t.job.jid, option=STOP_OPTIONS[col - u.K - 1])
                assert w.decode(w.action(cmd))[1] == col and w.tasks[w.decode(w.action(cmd))[0]].job is t.job
                kinds_seen.add(cmd.kind)
                continue
            assert cmd.tid == t.tid and w.action(cmd) == a
            expect = {"place": "place", "migrate": "migrate" if col < u.K else "requeue", "running": "preempt"}
            assert cmd.kind == expect[w.kinds[row]]
            assert cmd.server == (w.destinations[col] if col < u.K else None)
            assert cmd.kind != "preempt" or cmd.jid == t.job.jid
            kinds_seen.add(cmd.kind)
        _, _, te, tr, _ = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        if te or tr:
            env.reset()
    assert {"place", "preempt", "stop-option"} <= kinds_seen
    r = next(i for i, k in enumerate(w.kinds) if k == "place")
    t, s = w.tasks[r], w.destinations[0]
    assert w.action(Command("place", t.tid, s)) == w.encode(r, 0)
    assert w.action(Command("requeue", t.tid)) is None  # a waiting task has no "back to the queue"
    assert w.action(Command("migrate", t.tid, s)) is None  # nor a migration
    assert w.action(Command("place", 10**9, s)) is None
    assert w.action(Command("place", t.tid, 10**6)) is None
    assert w.action(Command("preempt", jid=10**9)) is None
    assert w.action(Command("stop-option", jid=10**9, option="opt-stop")) is None
    assert w.action(Command("stop-option", jid=t.job.jid, option="never")) is None
    with pytest.raises(ValueError, match="only for migration"):
        w.command(w.encode(r, u.K))
    pad = next((i for i, x in enumerate(w.tasks) if x is None), None)
    if pad is not None:
        with pytest.raises(ValueError, match="padding"):
            w.command(w.encode(pad, 0))
    # a heuristic placing through the window ends the episode
    total, _, info, te, tr = run_episode(gym.make(HETERO, **SMALL), 2)
    assert te and info["summary"]["unfinished"] == 0


def test_destinations_on_large_cluster():
    env = gym.make("clustergym/MLFS2474-v1", window_jobs=60)
    obs, _ = env.reset(seed=0)
    u = env.unwrapped
    assert obs["gpu_loads"].shape == (32, 8) and obs["tasks"].shape[0] == 32
    c = u.sim.cluster
    util = c.utilisation()
    U = np.stack([util[k] for k in ("gpu", "cpu", "mem", "net")], axis=1)
    under = ~c.overloaded
    ideal = U[under].min(axis=0)
    d = np.sqrt(((U - ideal) ** 2).sum(axis=1))
    expect = sorted(range(c.n_servers), key=lambda s: (d[s], s))[:32]
    assert u.window.destinations == expect
    rng = np.random.default_rng(0)
    for _ in range(50):
        _check_mask_against_core(u)
        obs, r, te, tr, info = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
        assert env.observation_space.contains(obs)


# ------------------------------------------------------------------ reward == metrics
@pytest.mark.parametrize("env_id,seed", [(HETERO, 0), (HETERO, 5), (DEFAULT, 1)])
def test_reward_sums_match_summary(env_id, seed):
    env = gym.make(env_id, window_jobs=12)
    u = env.unwrapped
    total, rewards, info, te, tr = run_episode(env, seed)
    assert te and not tr
    s, cfg, n = info["summary"], u.config, u.sim.n_jobs
    assert s["unfinished"] == 0 and s["not_submitted"] == 0
    np.testing.assert_allclose(total[0], -s["mean_jct"] / cfg.time_scale, rtol=1e-9)
    np.testing.assert_allclose(total[1], s["deadline_ratio"], rtol=1e-12)
    np.testing.assert_allclose(total[2], -s["bandwidth_mb"] / (n * cfg.bytes_scale), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(total[3], s["accuracy_ratio"], rtol=1e-12)
    np.testing.assert_allclose(total[4], s["mean_accuracy"], rtol=1e-9)
    np.testing.assert_allclose(sum(rewards), np.dot(cfg.reward_weights, total), rtol=1e-9)
    np.testing.assert_allclose(u.objective_totals(), total, rtol=1e-9)


def test_truncation_carries_summary():
    env = gym.make(HETERO, window_jobs=12, max_steps=5)
    *_, info, te, tr = run_episode(env, 0)
    assert tr and not te and "summary" in info and info["steps"] == 5
    env = gym.make(HETERO, window_jobs=12, max_sim_time=600.0)
    *_, info, te, tr = run_episode(env, 0)
    assert tr and not te and info["summary"]["sim_time"] <= 600.0 and info["summary"]["unfinished"] + info["summary"]["not_submitted"] > 0


def test_mo_wrapper():
    env = MOReward(gym.make(HETERO, **SMALL))
    assert env.reward_space.shape == (len(OBJECTIVE_NAMES),)
    env.reset(seed=0)
    _, r, _, _, info = env.step(greedy_action(env.unwrapped))
    assert isinstance(r, np.ndarray) and r.dtype == np.float32 and r.shape == (len(OBJECTIVE_NAMES),)
    np.testing.assert_allclose(np.dot(env.unwrapped.config.reward_weights, r), info["scalar_reward"], rtol=1e-5, atol=1e-7)
    assert env.action_masks().dtype == bool


# ------------------------------------------------------------------ determinism
TRAJ = textwrap.dedent("""
    import hashlib, json, numpy as np, gymnasium as gym, envs
    def traj(env_id, seed, n):
        env = gym.make(env_id, window_jobs=10)
        obs, info = env.reset(seed=seed)
        u = env.unwrapped
        rng = np.random.default_rng(seed)
        h = hashlib.sha256()
        rs = []
        for _ in range(n):
            for k in sorted(obs): h.update(obs[k].tobytes())
            obs, r, te, tr, info = env.step(int(rng.choice(np.flatnonzero(u.action_masks()))))
            rs.append(r)
            if te or tr: break
        h.update(np.array(rs).tobytes())
        h.update(json.dumps(u.sim.summary(), sort_keys=True, default=float).encode())
        return h.hexdigest()
""")


def _traj(env_id, seed, n):
    ns: dict = {}
    exec(TRAJ, ns)
    return ns["traj"](env_id, seed, n)


def test_determinism_same_process_and_subprocess():
    a = _traj(HETERO, 7, 300)
    assert a == _traj(HETERO, 7, 300)
    assert a != _traj(HETERO, 8, 300)
    code = TRAJ + "\nprint(traj(%r, 7, 300))" % HETERO
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         env={"PYTHONHASHSEED": "123", "PATH": ""}, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == a


def test_reset_without_seed_continues_stream_and_splits_are_disjoint():
    env = gym.make(DEFAULT, **SMALL)
    _, i1 = env.reset(seed=0)
    _, i2 = env.reset()
    assert i1["episode"]["window_start"] != i2["episode"]["window_start"] or i1["episode"]["sim_seed"] != i2["episode"]["sim_seed"]
    starts = {}
    for split in ("train", "test"):
        e = gym.make(DEFAULT, **SMALL, split=split)
        e.reset(seed=0)
        ids = {j.jid for j in e.unwrapped.sim.jobs}
        starts[split] = ids
    assert not (starts["train"] & starts["test"])
    e = gym.make(DEFAULT, **SMALL)
    _, a = e.reset(seed=1, options={"window_start": 1000.0})
    _, b = e.reset(seed=2, options={"window_start": 1000.0})
    assert [j.jid for j in e.unwrapped.sim.jobs][0] >= 0 and a["episode"]["window_start"] == b["episode"]["window_start"] == 1000.0


# ------------------------------------------------------------------ vector envs and learners
def test_gymnasium_vector_envs():
    for mode in ("sync", "async"):
        venv = gym.make_vec(HETERO, num_envs=2, vectorization_mode=mode, window_jobs=6)
        obs, info = venv.reset(seed=0)
        for _ in range(30):
            masks = np.stack(venv.call("action_masks"))
            assert masks.shape == (2, venv.single_action_space.n)
            acts = np.array([np.flatnonzero(m)[0] for m in masks])
            obs, r, te, tr, info = venv.step(acts)
            assert "action_mask" in info
        venv.close()


def test_sb3_subproc_vec_env_masks():
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    venv = make_vec_env("envs:" + HETERO, n_envs=2, seed=0, vec_env_cls=SubprocVecEnv,
                        env_kwargs={"render_mode": None, "window_jobs": 6})
    try:
        venv.reset()
        for _ in range(20):
            masks = np.stack(venv.env_method("action_masks"))
            assert masks.dtype == bool and masks.shape == (2, venv.action_space.n)
            venv.step(np.array([np.flatnonzero(m)[-1] for m in masks]))
    finally:
        venv.close()


def test_maskable_ppo_smoke():
    import torch
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    venv = make_vec_env(HETERO, n_envs=2, seed=0, env_kwargs={"render_mode": None, "window_jobs": 6})
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, device="cpu", seed=0)
    model.learn(256)
    obs = venv.reset()
    acts, _ = model.predict(obs, action_masks=get_action_masks(venv))
    assert all(get_action_masks(venv)[i, a] for i, a in enumerate(acts))


# ------------------------------------------------------------------ rendering and observation
def test_render_modes():
    env = gym.make(HETERO, **SMALL, render_mode="ansi")
    env.reset(seed=0)
    env.step(greedy_action(env.unwrapped))
    txt = env.render()
    assert "queue=" in txt and "s0" in txt
    env = gym.make(HETERO, **SMALL, render_mode="rgb_array", render_history=10)
    env.reset(seed=0)
    for _ in range(30):
        _, _, te, tr, _ = env.step(greedy_action(env.unwrapped))
        if te or tr:
            break
    img = env.render()
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    assert img.shape[0] == 2 * env.unwrapped.sim.cluster.n_gpus and img.shape[1] == 2 * (10 + 6)
    assert img.any()
    # the image is drawn from the public, bounded episode record: the last 10 snapshots
    u = env.unwrapped
    rec = list(u.episode_record)
    assert len(rec) == 10 and all(a.time <= b.time for a, b in zip(rec, rec[1:])) and rec[-1].time <= u.sim.now
    env.reset(seed=0)
    for _ in range(5):
        env.step(greedy_action(u))
    last = u.episode_record.snapshots[-1]  # after the last command (or decision point): the cluster now
    c = u.sim.cluster
    assert last.time == u.sim.now and last.gpu_job.tolist() == [g[0].job.jid if g else -1 for g in c.gpu_tasks]
    assert np.array_equal(last.overloaded, c.overloaded) and last.overloaded is not c.overloaded
    env.reset(seed=1)
    assert len(u.episode_record) <= 1  # cleared on reset (then the first decision point)
    assert len(gym.make(HETERO, **SMALL).unwrapped.episode_record) == 0  # recorded only for rgb_array


def test_observation_contents():
    env = gym.make(HETERO, **SMALL)
    obs, _ = env.reset(seed=0)
    u = env.unwrapped
    b = u.obs_builder
    cols = b.task_cols
    rows = [r for r, t in enumerate(u.window.tasks) if t is not None]
    assert rows == list(range(len(rows)))
    T = obs["tasks"]
    assert (T[rows, cols.index("present")] == 1).all() and (T[len(rows):] == 0).all()
    t = u.window.tasks[0]
    assert T[0, cols.index(f"model_{t.job.spec.model}")] == 1
    assert T[0, cols.index("urgency")] == pytest.approx(t.job.spec.urgency / 10)
    S = obs["servers"]
    n = u.sim.cluster.n_servers
    assert u.window.destinations[:n] == list(range(n)) and (S[:n, 0] == 1).all() and (S[n:] == 0).all()
    assert (obs["gpu_loads"][n:] == -1).all()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:  # resident pages (Linux)
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
@pytest.mark.timeout(3600)
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
def test_soak_1000_episodes_no_memory_growth():
    """1,000 episodes after a warm-up: resident memory between episode 100 and 1,000 grows < 20 MB
    (a leak of one observation per step would be hundreds of MB). Six jobs per window: with four, the
    generator draws only jobs larger than the cluster for seed 1757, an empty episode."""
    import gc

    env = gym.make(HETERO, window_jobs=6)
    for i in range(50):
        run_episode(env, i)
    gc.collect()
    mid = None
    for i in range(1000):
        run_episode(env, 1000 + i)
        if i == 99:
            gc.collect()
            mid = _rss_bytes()
    gc.collect()
    end = _rss_bytes()
    assert end - mid < 20_000_000, (mid, end)


def test_migration_rows_are_capped_so_the_queue_stays_visible():
    # Overload threshold 0.05: every busy server is overloaded, so without the cap the window fills with
    # migration candidates and a non-migrating policy (FIFO) never sees the queue.
    env = gym.make(DEFAULT, window_jobs=30, migrate_rows=3, sim={"overload_threshold": 0.05})
    u = env.unwrapped
    env.reset(seed=0)
    seen_both = False
    for _ in range(400):
        kinds = [k for k in u.window.kinds if k is not None]
        assert kinds.count("migrate") <= 3
        if kinds.count("migrate") == 3 and "place" in kinds:
            seen_both = True
        place_rows = [r for r, k in enumerate(u.window.kinds) if k == "place"]
        mask = u.action_masks()
        a = next((u.window.encode(r, c) for r in place_rows for c in range(u.K) if mask[u.window.encode(r, c)]),
                 u.end_round_action)
        _, _, term, trunc, _ = env.step(a)
        if term or trunc:
            break
    assert seen_both
    with pytest.raises(ConfigError, match="migrate_rows"):
        EnvConfig(migrate_rows=-1)


def test_job_features_follow_placements_inside_a_round():
    # placing one task of a job changes its siblings' "placed_share" at once, in the same decision round
    env = gym.make(DEFAULT, window_jobs=30)
    u = env.unwrapped
    obs, _ = env.reset(seed=0)
    col = u.obs_builder.task_cols.index("placed_share")
    for _ in range(500):
        rows = [r for r, k in enumerate(u.window.kinds) if k == "place"]
        jobs = [u.window.tasks[r].job for r in rows]
        pick = next((r for r, j in zip(rows, jobs) if j.n_tasks > 1 and j.n_placed + 1 < j.n_tasks), None)
        if pick is not None:
            job, now = u.window.tasks[pick].job, u.sim.now
            mask = u.action_masks()
            c = next(c for c in range(u.K) if mask[u.window.encode(pick, c)])
            obs, *_ = env.step(u.window.encode(pick, c))
            sib = [r for r, t in enumerate(u.window.tasks) if t is not None and t.job is job]
            if u.sim.now == now and sib:
                assert obs["tasks"][sib[0], col] == np.float32(job.n_placed / job.n_tasks)
                return
        else:
            env.step(u.end_round_action)
    pytest.fail("no multi-task job was placed part-way in 500 steps")
