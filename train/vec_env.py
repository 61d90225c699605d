"""A vector env whose envs are stepped in a few worker processes, each holding a group of them.

Why. SB3's ``SubprocVecEnv`` gives every env its own process and one pipe round trip per env and step; with
32 envs on a 2-core machine that is 32 processes and 32 round trips per step, more than the env steps cost.
``DummyVecEnv`` steps every env in the learner's process, so the second core idles through the rollout.
:class:`GroupedSubprocVecEnv` steps the envs in ``n_workers`` processes (2 by default, one per core), each
stepping its group of envs in turn and answering with one message of stacked arrays per step.

What it keeps. Each env is stepped with the actions it is given, in the order given, and auto-reset as SB3's
vector envs do (``terminal_observation`` and ``TimeLimit.truncated`` in the step's info, the reset's info in
``reset_infos``), so a training run's trajectories equal ``DummyVecEnv``'s (tests/test_vec_env.py compares
them). The action masks of MaskablePPO (``env_method("action_masks")``) are computed by the workers right after
each step and reset and sent with the observations, so asking for them costs no second round trip.

Workers are started with multiprocessing's ``forkserver`` method (``spawn`` where there is none), so, as with
SB3's ``SubprocVecEnv``, a script that builds one needs the ``if __name__ == "__main__":`` guard.
Workers ignore SIGINT and SIGTERM when their env factory says so (``train.ppo.worker_env``), so that a Ctrl-C
reaches the learner, which checkpoints and then closes them.
"""
from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import CloudpickleWrapper, VecEnv, VecEnvIndices

MASKS = "action_masks"


def _stack(observations: Sequence[Any]) -> Any:
    """Stack per-env observations (dicts of arrays, or arrays) along a new first axis."""
    first = observations[0]
    if isinstance(first, dict):
        return {k: np.stack([o[k] for o in observations]) for k in first}
    return np.stack(observations)


def concat_obs(parts: Sequence[Any]) -> Any:
    """Join batches of observations (dicts of arrays, or arrays) along their first axis, in order."""
    if isinstance(parts[0], dict):
        return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def _masks(envs: Sequence[gym.Env]) -> np.ndarray | None:
    """The envs' action masks stacked, or None where an env has none."""
    try:
        return np.stack([env.get_wrapper_attr(MASKS)() for env in envs])
    except AttributeError:
        return None


def _step_group(envs: Sequence[gym.Env], actions: np.ndarray) -> tuple:
    """Step each env of a group once, resetting those whose episode ended (SB3's auto-reset convention)."""
    obs, rewards, dones, infos, reset_infos = [], [], [], [], []
    for env, action in zip(envs, actions):
        o, r, terminated, truncated, info = env.step(action)
        done = terminated or truncated
        info["TimeLimit.truncated"] = truncated and not terminated
        reset_info: dict = {}
        if done:
            info["terminal_observation"] = o
            o, reset_info = env.reset()
        obs.append(o)
        rewards.append(r)
        dones.append(done)
        infos.append(info)
        reset_infos.append(reset_info)
    return _stack(obs), np.array(rewards, dtype=np.float32), np.array(dones), infos, reset_infos, _masks(envs)


def _reset_group(envs: Sequence[gym.Env], seeds: Sequence[int | None], options: Sequence[dict]) -> tuple:
    obs, infos = zip(*(env.reset(seed=s, **({"options": o} if o else {})) for env, s, o in zip(envs, seeds, options)))
    return _stack(obs), list(infos), _masks(envs)


def _call(envs: Sequence[gym.Env], command: str, data: Any) -> Any:
    """The answers of a group's envs (``data[0]`` their indices in the group) to an attribute or method query."""
    from stable_baselines3.common.env_util import is_wrapped

    local, *rest = data
    picked = [envs[i] for i in local]
    if command == "env_method":
        name, args, kwargs = rest
        return [env.get_wrapper_attr(name)(*args, **kwargs) for env in picked]
    if command == "get_attr":
        return [env.get_wrapper_attr(rest[0]) for env in picked]
    if command == "has_attr":
        return [_has_attr(env, rest[0]) for env in picked]
    if command == "set_attr":
        return [setattr(env, rest[0], rest[1]) for env in picked]
    if command == "is_wrapped":
        return [is_wrapped(env, rest[0]) for env in picked]
    raise ValueError(f"GroupedSubprocVecEnv worker: unknown command {command!r}")


def _has_attr(env: gym.Env, name: str) -> bool:
    try:
        env.get_wrapper_attr(name)
        return True
    except AttributeError:
        return False


def _worker(remote, parent_remote, fns: CloudpickleWrapper) -> None:
    parent_remote.close()
    envs = [fn() for fn in fns.var]
    remote.send((envs[0].observation_space, envs[0].action_space))
    try:
        while True:
            command, data = remote.recv()
            if command == "step":  # (indices in the group, their actions)
                local, actions = data
                remote.send(_step_group([envs[i] for i in local], actions))
            elif command == "reset":
                remote.send(_reset_group(envs, *data))
            elif command == "close":
                break
            else:
                remote.send(_call(envs, command, data))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        for env in envs:
            env.close()
        remote.close()


class GroupedSubprocVecEnv(VecEnv):
    """``len(env_fns)`` envs stepped in ``n_workers`` processes, contiguous groups of about equal size."""

    def __init__(self, env_fns: list[Callable[[], gym.Env]], n_workers: int = 2, start_method: str | None = None):
        if not env_fns:
            raise ValueError("GroupedSubprocVecEnv needs at least one env")
        if n_workers < 1:
            raise ValueError(f"GroupedSubprocVecEnv: n_workers must be >= 1, got {n_workers}")
        n_workers = min(n_workers, len(env_fns))
        bounds = np.linspace(0, len(env_fns), n_workers + 1).round().astype(int)
        self.groups = [range(a, b) for a, b in zip(bounds[:-1], bounds[1:])]
        ctx = mp.get_context(start_method or ("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"))
        self.remotes, self.processes = [], []
        for group in self.groups:
            remote, work = ctx.Pipe()
            p = ctx.Process(target=_worker, args=(work, remote, CloudpickleWrapper([env_fns[i] for i in group])),
                            daemon=True)
            p.start()
            work.close()
            self.remotes.append(remote)
            self.processes.append(p)
        observation_space, action_space = self.remotes[0].recv()
        for remote in self.remotes[1:]:
            remote.recv()
        self._reset_pending = False  # a reset sent by reset_async, not yet collected
        super().__init__(len(env_fns), observation_space, action_space)
        self._masks: np.ndarray | None = None
        self.closed = False

    def step_async(self, actions: np.ndarray) -> None:
        self.step_part_async(range(self.num_envs), actions)

    def step_wait(self):
        obs, rewards, dones, infos, _ = self.step_part_wait(range(self.num_envs))
        return obs, rewards, dones, infos

    def step_part_async(self, part: range, actions: np.ndarray) -> None:
        """Send the actions of the envs ``part`` (a range of env indices) to their workers, which step them
        while this process goes on (e.g. scoring another part's observations: train/pipelined.py)."""
        self._refuse_while_resetting("step")
        actions = np.asarray(actions)
        if len(actions) != len(part):
            raise ValueError(f"step_part_async: {len(actions)} actions for {len(part)} envs ({part})")
        for remote, group in zip(self.remotes, self.groups):
            local = [i - group.start for i in part if i in group]
            if local:
                remote.send(("step", (local, actions[[i + group.start - part.start for i in local]])))

    def step_part_wait(self, part: range) -> tuple:
        """The step results of the envs ``part`` sent by :meth:`step_part_async`, in index order: observations,
        rewards, dones, infos and their action masks (None where the envs have none)."""
        answers = [remote.recv() for remote, group in zip(self.remotes, self.groups)
                   if any(i in group for i in part)]
        obs, rewards, dones, infos, reset_infos, masks = zip(*answers)
        self.reset_infos[part.start:part.stop] = [i for a in reset_infos for i in a]
        masks = None if any(m is None for m in masks) else np.concatenate(masks)
        if masks is not None and self._masks is not None:
            self._masks[part.start:part.stop] = masks
        else:
            self._masks = masks if len(part) == self.num_envs else None
        return (concat_obs(obs), np.concatenate(rewards), np.concatenate(dones), [i for a in infos for i in a],
                masks)

    def reset_async(self) -> None:
        """Start the reset :meth:`reset` would do (with the seeds and options set now), so the workers reset
        while this process does something else (the run's first evaluation); the next :meth:`reset` collects
        it. Seeds or options set in between are refused, as they would not reach the envs."""
        if not self._reset_pending:
            for remote, group in zip(self.remotes, self.groups):
                remote.send(("reset", ([self._seeds[i] for i in group], [self._options[i] for i in group])))
            self._reset_pending = True

    def seed(self, seed: int | None = None):
        self._refuse_while_resetting("seed")
        return super().seed(seed)

    def set_options(self, options=None) -> None:
        self._refuse_while_resetting("set_options")
        super().set_options(options)

    def _refuse_while_resetting(self, what: str) -> None:
        if getattr(self, "_reset_pending", False):  # its answers would be taken for this call's
            raise RuntimeError(f"GroupedSubprocVecEnv {what}: a reset started by reset_async is under way; call "
                               f"reset() first")

    def reset(self):
        self.reset_async()
        self._reset_pending = False
        obs, infos, masks = zip(*(remote.recv() for remote in self.remotes))
        self.reset_infos = [i for part in infos for i in part]
        self._masks = None if any(m is None for m in masks) else np.concatenate(masks)
        self._reset_seeds()
        self._reset_options()
        return concat_obs(obs)

    def close(self) -> None:
        if self.closed:
            return
        for remote in self.remotes:
            try:
                remote.send(("close", None))
            except (BrokenPipeError, OSError):
                pass
        for p in self.processes:
            p.join(timeout=30)
            if p.is_alive():
                p.terminate()
        for remote in self.remotes:
            remote.close()
        self.closed = True

    def _ask(self, command: str, indices: VecEnvIndices, *data: Any) -> list[Any]:
        """Send a query to the workers holding ``indices`` and gather the answers in the order of ``indices``."""
        self._refuse_while_resetting(command)
        wanted = list(self._get_indices(indices))
        asked = []
        for remote, group in zip(self.remotes, self.groups):
            local = [i - group.start for i in wanted if i in group]
            if local:
                remote.send((command, (local, *data)))
                asked.append((remote, [group.start + i for i in local]))
        answers = {}
        for remote, global_ids in asked:
            answers.update(zip(global_ids, remote.recv()))
        return [answers[i] for i in wanted]

    def env_method(self, method_name: str, *method_args, indices: VecEnvIndices = None, **method_kwargs) -> list[Any]:
        self._refuse_while_resetting(method_name)
        if method_name == MASKS and not method_args and not method_kwargs and self._masks is not None:
            return [self._masks[i] for i in self._get_indices(indices)]  # sent with the last step or reset
        return self._ask("env_method", indices, method_name, method_args, method_kwargs)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        return self._ask("get_attr", indices, attr_name)

    def has_attr(self, attr_name: str) -> bool:
        return all(self._ask("has_attr", None, attr_name))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        self._ask("set_attr", indices, attr_name, value)

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return self._ask("is_wrapped", indices, wrapper_class)

    def get_images(self) -> Sequence[np.ndarray | None]:
        return self._ask("env_method", None, "render", (), {})
