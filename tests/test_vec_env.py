"""train/vec_env.py: the grouped worker-process vector env steps every env as DummyVecEnv does (auto-reset,
terminal observations, masks), answers queries in index order, and a PPO run on it trains the same weights."""
from __future__ import annotations

from functools import partial

import numpy as np
import pytest
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv

from clustergym.train import ppo
from clustergym.train.config import load_config
from clustergym.train.vec_env import GroupedSubprocVecEnv

SMALL = {"window_jobs": 6, "max_steps": 40}  # short episodes, so auto-resets happen within the test


def _vec(cls, n: int = 3, **kw):
    return make_vec_env(ppo.worker_env if cls is GroupedSubprocVecEnv else ppo.make_env, n_envs=n, seed=7,
                        vec_env_cls=cls, vec_env_kwargs=kw or None,
                        env_kwargs={"env_id": "clustergym/GPUCluster-v1", "config": SMALL})


def _valid_actions(masks: list[np.ndarray], rng: np.random.Generator) -> np.ndarray:
    return np.array([rng.choice(np.flatnonzero(m)) for m in masks])


def test_grouped_workers_step_every_env_as_the_dummy_vec_env_does():
    dummy, grouped = _vec(DummyVecEnv), _vec(GroupedSubprocVecEnv, n_workers=2)
    try:
        assert [len(g) for g in grouped.groups] == [2, 1]  # contiguous groups: envs 0-1 and 2
        a, b = dummy.reset(), grouped.reset()
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(120):
            for k in a:
                np.testing.assert_array_equal(a[k], b[k], err_msg=k)
            masks = dummy.env_method("action_masks")
            np.testing.assert_array_equal(np.stack(masks), np.stack(grouped.env_method("action_masks")))
            actions = _valid_actions(masks, rng)
            a, ra, da, ia = dummy.step(actions)
            b, rb, db, ib = grouped.step(actions)
            np.testing.assert_array_equal(ra, rb)
            np.testing.assert_array_equal(da, db)
            for x, y in zip(ia, ib):
                assert x.keys() == y.keys() and x["elapsed_s"] == y["elapsed_s"]
                assert x["TimeLimit.truncated"] == y["TimeLimit.truncated"]
                if "terminal_observation" in x:
                    np.testing.assert_array_equal(x["terminal_observation"]["tasks"],
                                                  y["terminal_observation"]["tasks"])
            ends += int(da.sum())
        assert ends > 0  # some episodes ended and were reset inside the workers
        assert grouped.get_attr("sim_config", indices=[2, 0]) == dummy.get_attr("sim_config", indices=[2, 0])
        assert grouped.env_method("action_masks", indices=[2])[0].shape == masks[2].shape
        assert grouped.env_is_wrapped(type(dummy.envs[0])) == [True] * 3
    finally:
        dummy.close()
        grouped.close()
        grouped.close()  # a second close is a no-op


def test_bad_worker_counts_are_refused_by_name():
    with pytest.raises(ValueError, match="n_workers must be >= 1"):
        GroupedSubprocVecEnv([lambda: None], n_workers=0)
    with pytest.raises(ValueError, match="at least one env"):
        GroupedSubprocVecEnv([], n_workers=2)


def _trained_weights(vec_env: str) -> dict[str, th.Tensor]:
    th.manual_seed(0)
    cfg = load_config(overrides={"env": {"window_jobs": 6}, "n_envs": 3, "vec_env": vec_env, "env_workers": 2,
                                 "train_max_steps": 60, "n_steps": 32, "batch_size": 48, "n_epochs": 2,
                                 "bc_steps": 0, "progress_bar": False, "d": 16})
    env = ppo.training_envs(cfg)
    try:
        model = ppo.new_model(cfg, env, None)
        from clustergym.agents.semi_mdp import callbacks

        model.learn(192, callback=callbacks(model))
        return {k: v.clone() for k, v in model.policy.state_dict().items()}
    finally:
        env.close()


def test_ppo_on_grouped_workers_trains_the_same_weights_as_in_one_process():
    dummy, grouped = _trained_weights("dummy"), _trained_weights("grouped")
    assert dummy.keys() == grouped.keys()
    for k in dummy:
        assert th.equal(dummy[k], grouped[k]), k


def test_the_default_is_the_fast_setting_and_classic_yaml_the_one_before():
    from pathlib import Path

    from clustergym.config import ConfigError

    fast = load_config()
    assert (fast.n_envs, fast.n_steps, fast.n_epochs, fast.vec_env) == (64, 16, 1, "pipelined")
    classic = load_config(str(Path(__file__).resolve().parent.parent / "train" / "classic.yaml"))
    assert (classic.n_envs, classic.n_steps, classic.n_epochs, classic.vec_env) == (8, 128, 4, "dummy")
    assert fast.n_envs * fast.n_steps == classic.n_envs * classic.n_steps == 1024  # the same rollout size
    assert load_config(overrides={"vec_env": "grouped", "env_workers": 3}).env_workers == 3
    with pytest.raises(ConfigError, match="env_workers"):
        load_config(overrides={"env_workers": 0})
    with pytest.raises(ConfigError, match="vec_env"):
        load_config(overrides={"vec_env": "threads"})


@pytest.mark.parametrize("overrides,kind", [
    ({}, "pipelined"), ({"vec_env": "auto"}, "pipelined"), ({"n_envs": 2}, "pipelined"),
    ({"n_envs": 1}, "dummy"),  # one env: nothing to overlap
    ({"teacher_coef": 0.5}, "dummy"),  # the teacher term reads every env's label at each step
    ({"algo": "ppo"}, "dummy"),  # the overlapped rollout is MaskablePPO's
    ({"vec_env": "grouped"}, "grouped"),  # a choice of the user's is kept
])
def test_vec_env_auto_picks_the_pipelined_rollout_only_where_it_applies(overrides, kind):
    cfg = load_config(overrides=overrides)
    assert cfg.vec_env == kind
    assert load_config(overrides=cfg.to_dict()) == cfg  # the resolved value is what a run folder saves


def _pipelined_model(n_envs: int = 3, seed: int = 0):
    cfg = load_config(overrides={"env": {"window_jobs": 6}, "n_envs": n_envs, "vec_env": "pipelined", "seed": seed,
                                 "train_max_steps": 15, "n_steps": 40, "batch_size": 60, "n_epochs": 1,
                                 "bc_steps": 0, "progress_bar": False, "d": 16})
    env = ppo.training_envs(cfg)
    return cfg, env, ppo.new_model(cfg, env, None)


def test_the_pipelined_rollout_stores_what_the_envs_and_the_policy_gave():
    """Replaying the stored actions on the same envs in one process gives the stored observations, rewards and
    episode starts; the stored log-probabilities and values are the policy's for those states and actions."""
    from clustergym.agents.semi_mdp import callbacks
    from clustergym.train.pipelined import PipelinedMaskablePPO

    cfg, env, model = _pipelined_model()
    try:
        assert isinstance(model, PipelinedMaskablePPO) and len(env.groups) == 1
        _, callback = model._setup_learn(cfg.n_steps * cfg.n_envs, callback=callbacks(model))
        callback.on_training_start(locals(), globals())
        assert model.collect_rollouts(model.env, callback, model.rollout_buffer, n_rollout_steps=cfg.n_steps)
    finally:
        env.close()
    buf = model.rollout_buffer
    replay = make_vec_env(ppo.make_env, n_envs=cfg.n_envs, seed=cfg.seed, vec_env_cls=DummyVecEnv,
                          env_kwargs={"env_id": cfg.scenario, "config": cfg.train_env_config()})
    obs, ends = replay.reset(), 0
    for t in range(cfg.n_steps):
        for k in obs:
            np.testing.assert_array_equal(buf.observations[k][t], obs[k], err_msg=f"{k} at step {t}")
        np.testing.assert_array_equal(np.stack(replay.env_method("action_masks")), buf.action_masks[t])
        obs, rewards, dones, _ = replay.step(buf.actions[t].reshape(-1).astype(int))
        kept = ~dones  # a truncated step's stored reward also holds the critic's bootstrap
        np.testing.assert_allclose(buf.rewards[t][kept], rewards[kept], rtol=1e-6)
        if t + 1 < cfg.n_steps:
            np.testing.assert_array_equal(buf.episode_starts[t + 1], dones)
        ends += int(dones.sum())
    assert ends > 0  # episodes ended (and were reset by the worker) within the rollout
    flat = {k: th.as_tensor(v.reshape(-1, *v.shape[2:])) for k, v in buf.observations.items()}
    with th.no_grad():
        masks = buf.action_masks.reshape(-1, buf.action_masks.shape[-1])
        values, log_probs, _ = model.policy.evaluate_actions(flat, th.as_tensor(buf.actions.reshape(-1)),
                                                             action_masks=masks)
    np.testing.assert_allclose(log_probs.numpy(), buf.log_probs.reshape(-1), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(values.numpy().reshape(-1), buf.values.reshape(-1), rtol=1e-4, atol=1e-4)


def test_pipelined_training_is_reproducible_and_refuses_the_teacher_term():
    from clustergym.agents.semi_mdp import callbacks
    from clustergym.config import ConfigError

    weights = []
    for _ in range(2):
        th.manual_seed(0)
        cfg, env, model = _pipelined_model(n_envs=4)
        try:
            model.learn(2 * cfg.n_steps * cfg.n_envs, callback=callbacks(model))
        finally:
            env.close()
        weights.append(model.policy.state_dict())
    assert all(th.equal(weights[0][k], weights[1][k]) for k in weights[0])
    with pytest.raises(ConfigError, match="pipelined needs algo maskable and teacher_coef 0"):
        load_config(overrides={"vec_env": "pipelined", "teacher_coef": 0.5})


def test_the_pipelined_update_takes_one_more_thread_and_gives_it_back(monkeypatch):
    """The worker's core idles while the learner updates, so the update runs on one more torch thread (at most
    the machine's cores) and the rollout's count is restored after it, also when the update fails."""
    from clustergym.train.pipelined import PipelinedMaskablePPO

    monkeypatch.setattr("os.cpu_count", lambda: 8)
    seen = []
    monkeypatch.setattr(MaskablePPO, "train",
                        lambda self: seen.append((th.get_num_threads(), th.are_deterministic_algorithms_enabled())))
    before = th.get_num_threads()
    th.set_num_threads(1)
    try:
        PipelinedMaskablePPO.train(object.__new__(PipelinedMaskablePPO))
        # two threads, with the kernels whose sums keep one order (else two runs of a seed part in the last bits)
        assert seen == [(2, True)] and th.get_num_threads() == 1 and not th.are_deterministic_algorithms_enabled()
        monkeypatch.setattr(MaskablePPO, "train", lambda self: 1 / 0)
        with pytest.raises(ZeroDivisionError):
            PipelinedMaskablePPO.train(object.__new__(PipelinedMaskablePPO))
        assert th.get_num_threads() == 1 and not th.are_deterministic_algorithms_enabled()
    finally:
        th.set_num_threads(before)


def test_a_stopped_pipelined_rollout_leaves_the_workers_in_step():
    """A callback that stops the rollout mid-way: half A's extra step is read, so no answer is left in the pipe
    for the next rollout to take for its own, and the next rollout runs."""
    from stable_baselines3.common.callbacks import BaseCallback

    from clustergym.agents.semi_mdp import callbacks

    class StopAfter(BaseCallback):
        def __init__(self, n: int):
            super().__init__()
            self.n = n

        def _on_step(self) -> bool:
            self.n -= 1
            return self.n > 0

    cfg, env, model = _pipelined_model()
    try:
        _, cb = model._setup_learn(10_000, callback=[*callbacks(model), StopAfter(3)])
        cb.on_training_start(locals(), globals())
        assert not model.collect_rollouts(model.env, cb, model.rollout_buffer, n_rollout_steps=cfg.n_steps)
        assert not any(remote.poll(1.0) for remote in env.remotes)  # nothing left unread
        _, cb = model._setup_learn(10_000, callback=callbacks(model))
        cb.on_training_start(locals(), globals())
        assert model.collect_rollouts(model.env, cb, model.rollout_buffer, n_rollout_steps=cfg.n_steps)
    finally:
        env.close()


def test_the_recipe_runs_pipelined_and_resumes(tmp_path, monkeypatch):
    """train/ppo.py end to end with vec_env pipelined: periodic evaluations, the final table, and a resume that
    extends the run (the loaded checkpoint takes the pipelined rollout again)."""
    from test_train import TINY

    cfg = load_config(overrides={**TINY, "n_envs": 2, "vec_env": "pipelined", "final_eval_episodes": 1,
                                 "out": str(tmp_path / "run")})
    res = ppo.train(cfg)
    assert not res["interrupted"] and res["num_timesteps"] == 256 and (tmp_path / "run" / "final_model.zip").exists()
    from clustergym.train.pipelined import PipelinedMaskablePPO

    sends, send = [], PipelinedMaskablePPO._send
    monkeypatch.setattr(PipelinedMaskablePPO, "_send", lambda self, *a: sends.append(1) or send(self, *a))
    more = load_config(overrides={**TINY, "n_envs": 2, "vec_env": "pipelined", "final_eval_episodes": 1,
                                  "timesteps": 512, "out": str(tmp_path / "run")})
    assert ppo.train(more, resume=True)["num_timesteps"] == 512
    assert len(sends) == 256  # the resumed run's 128 steps of both halves went through the pipelined rollout


def test_an_early_reset_gives_what_reset_gives_and_the_env_refuses_other_calls_meanwhile():
    early, plain = _vec(GroupedSubprocVecEnv, n_workers=2), _vec(GroupedSubprocVecEnv, n_workers=2)
    try:
        early.reset_async()
        for call in (lambda: early.env_method("action_masks"), lambda: early.get_attr("sim_config"),
                     lambda: early.step(np.zeros(3, dtype=int)), lambda: early.seed(1)):
            with pytest.raises(RuntimeError, match="reset_async is under way"):
                call()
        a, b = early.reset(), plain.reset()  # the seeds of make_vec_env, used by either reset
        for k in a:
            np.testing.assert_array_equal(a[k], b[k], err_msg=k)
        np.testing.assert_array_equal(np.stack(early.env_method("action_masks")),
                                      np.stack(plain.env_method("action_masks")))
        assert early.get_attr("sim_config") == plain.get_attr("sim_config")  # the pipes are in step again
    finally:
        early.close()
        plain.close()


def test_the_recipe_trains_the_same_agent_on_grouped_workers_as_in_one_process(tmp_path):
    """ppo.train end to end (the early reset during the first evaluation included): the same final weights."""
    from test_train import TINY

    from clustergym.agents.io import load_agent

    weights = []
    for vec_env in ("dummy", "grouped"):
        cfg = load_config(overrides={**TINY, "bc_steps": 0, "n_envs": 2, "vec_env": vec_env, "final_eval_episodes": 0,
                                     "out": str(tmp_path / vec_env)})
        ppo.train(cfg)
        weights.append(load_agent(tmp_path / vec_env / "final_model.zip").policy.state_dict())
    assert all(th.equal(weights[0][k], weights[1][k]) for k in weights[0])
