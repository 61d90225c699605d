"""Training episodes that start where the teacher's prefix left them (train/start_states.py)."""
import pytest

from clustergym.config import ConfigError
from clustergym.scenarios import make_env
from clustergym.train.config import TrainConfig, load_config
from clustergym.train.start_states import TeacherStart

SCENARIO = TrainConfig().scenario
SMALL = {"window_jobs": 10, "split": "train"}


def _env(max_steps: int, tries: int = 3, teacher: str | None = "fifo") -> TeacherStart:
    env = TeacherStart(make_env(SCENARIO, dict(SMALL)), max_steps, tries)
    if teacher:
        env.set_start_teacher(teacher)
    return env


def test_the_learner_starts_after_the_teachers_prefix():
    env = _env(20)
    plain = make_env(SCENARIO, dict(SMALL))
    starts = []
    for seed in range(6):
        obs, info = env.reset(seed=seed)
        k = info["start_steps"]
        assert 0 <= k < 20 and env.unwrapped._steps == k  # the env counts the teacher's steps
        assert info["episode"] == plain.reset(seed=seed)[1]["episode"]  # the same window as without the wrapper
        starts.append(k)
    assert len(set(starts)) > 1
    again = _env(20)
    assert [again.reset(seed=s)[1]["start_steps"] for s in range(6)] == starts  # seeded


def test_without_a_teacher_episodes_start_at_the_first_decision():
    env = _env(20, teacher=None)
    assert env.reset(seed=0)[1]["start_steps"] == 0 and env.unwrapped._steps == 0


def test_a_prefix_past_the_windows_end_draws_the_next_window():
    env = _env(10**6, tries=1)  # the prefix always outlasts the window
    _, info = env.reset(seed=0)
    first = make_env(SCENARIO, dict(SMALL)).reset(seed=0)[1]["episode"]
    assert info["start_steps"] == 0 and info["episode"] != first and env.unwrapped._steps == 0


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="max_steps and tries must be >= 1"):
        _env(0)
    with pytest.raises(ConfigError, match="train_start_steps needs reward_baseline none"):
        load_config(None, {"train_start_steps": 100, "reward_baseline": "mlf-h"})
