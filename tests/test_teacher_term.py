"""The teacher term (agents/teacher_term.py): labels of every training state from the teacher, told the
learner's moves; a pass that lowers the teacher's cross-entropy; its linear schedule; the recipe's wiring."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import clustergym  # noqa: F401  (registers the ids)
from clustergym import baselines
from clustergym.agents.teacher_term import TeacherLabels, TeacherTerm, teacher_coef
from clustergym.config import ConfigError
from clustergym.scenarios import make_env
from clustergym.train import ppo
from clustergym.train.config import load_config

ENV = ("clustergym/GPUCluster-v1", {"window_jobs": 10})


def test_labels_follow_the_teachers_own_episode():
    """Stepping with the labels replays the teacher's own episode: same actions as the teacher run alone."""
    alone = make_env(*ENV)
    agent = baselines.make("mlf-h-req", env=alone)
    obs, _ = alone.reset(seed=5)
    own = []
    for _ in range(150):
        a = int(agent.predict(obs, action_masks=alone.unwrapped.action_masks())[0])
        own.append(a)
        obs, _, te, tr, _ = alone.step(a)
        if te or tr:
            break
    env = TeacherLabels(make_env(*ENV))
    assert env.label == -1  # no teacher yet
    env.set_teacher("mlf-h-req")
    env.reset(seed=5)
    labels = []
    for _ in own:
        labels.append(env.label)
        env.step(env.label)
    assert labels == own


def test_labels_build_on_the_learners_moves():
    """When the learner takes other actions, the teacher is told each one before the env steps (record_taken,
    while the window is still the one the action indexes), and each label is a valid action of its state."""
    env = TeacherLabels(make_env(*ENV))
    env.set_teacher("mlf-h-req")
    env.reset(seed=6)
    told, record = [], env.teacher.record_taken

    def spy(action):  # the action, and whether the window it is read against still allows it
        told.append((action, bool(env.unwrapped.action_masks()[action])))
        record(action)

    env.teacher.record_taken = spy
    rng = np.random.default_rng(0)
    taken, deviations = [], 0
    for _ in range(200):
        mask = env.unwrapped.action_masks()
        assert mask[env.label]
        a = int(rng.choice(np.flatnonzero(mask)))
        deviations += a != env.label
        taken.append(a)
        _, _, te, tr, _ = env.step(a)
        if te or tr:
            break
    assert [a for a, _ in told] == taken and deviations > 0
    assert all(valid for _, valid in told)  # told before the step, while the action's window was current


def test_schedule_falls_linearly_to_zero():
    assert teacher_coef(0.5, 0, 1000) == 0.5 and teacher_coef(0.5, 500, 1000) == 0.25
    assert teacher_coef(0.5, 1000, 1000) == 0.0 and teacher_coef(0.5, 5000, 1000) == 0.0
    assert teacher_coef(2.0, 500, 1000, end=2.0) == 2.0 and teacher_coef(2.0, 500, 1000, end=1.0) == 1.5
    assert teacher_coef(2.0, 3000, 1000, end=1.0) == 1.0
    for bad in ((-1.0, 100), (1.0, 100, 0, -0.5)):
        with pytest.raises(ValueError, match="teacher coefficients"):
            TeacherTerm(*bad)


def test_the_pass_lowers_the_teachers_cross_entropy(tmp_path):
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import configure

    from clustergym.agents.policies import overload_threshold, policy_spec

    env = TeacherLabels(make_env(*ENV))
    env.set_teacher("mlf-h-req")
    cls, kw = policy_spec("pairwise", "maskable", overload_threshold=overload_threshold(env))
    model = MaskablePPO(cls, env, policy_kwargs=kw, n_steps=64, batch_size=32, device="cpu", seed=0)
    model.set_logger(configure(str(tmp_path), []))
    obs, _ = env.reset(seed=7)
    states, labels = [], []
    for _ in range(64):
        states.append(obs)
        labels.append(env.label)
        obs, _, te, tr, _ = env.step(env.label)
        if te or tr:
            obs, _ = env.reset()
    data = {k: np.stack([s[k] for s in states]).astype(np.float32) for k in states[0]}
    term = TeacherTerm(5.0, 10_000)
    term.init_callback(model)
    before = term._measure(data, np.array(labels))
    for _ in range(5):
        term._teacher_pass(data, np.array(labels))
    after = term._measure(data, np.array(labels))
    assert after[0] < before[0] and after[1] >= before[1]


@pytest.mark.parametrize("vec_env", ["dummy", "grouped"])
def test_recipe_runs_with_the_term_and_logs_it(tmp_path, vec_env):
    """Also with env workers, which reset early (reset_async): the teacher is set before that reset."""
    from test_train import TINY, _scalars

    res = ppo.train(load_config(None, {**TINY, "timesteps": 384, "expert": "mlf-h-req", "teacher_coef": 1.0,
                                       "final_eval_episodes": 0, "out": str(tmp_path / "run"),
                                       "vec_env": vec_env, "n_envs": 2}))
    tags = _scalars(Path(res["out"]) / "tb" / "ppo_1")
    for t in ("teacher/coef", "teacher/cross_entropy", "teacher/agreement"):
        assert t in tags, t
    coefs = [v for _, v in tags["teacher/coef"]]
    assert coefs == sorted(coefs, reverse=True) and 0 < coefs[0] <= 1.0


def test_bad_settings_are_named(tmp_path):
    with pytest.raises(ConfigError, match="teacher_coef"):
        load_config(None, {"teacher_coef": -0.1})
    from test_train import TINY

    with pytest.raises(ConfigError, match="needs a teacher"):
        load_config(None, {**TINY, "bc_steps": 0, "teacher_coef": 1.0})
    folder = type("Folder", (), {"state": {}})()  # a run whose state has no warm start (resumed from elsewhere)
    with pytest.raises(ConfigError, match="needs a teacher"):
        ppo.teacher_name(load_config(None, {**TINY, "teacher_coef": 1.0}), folder)
    assert ppo.teacher_name(load_config(None, {**TINY, "expert": "sjf", "bc_steps": 0, "teacher_coef": 1.0}),
                            folder) == "sjf"
    folder.state = {"bc": {"expert": "mlf-h-req"}}
    assert ppo.teacher_name(load_config(None, {**TINY, "teacher_coef": 1.0}), folder) == "mlf-h-req"
