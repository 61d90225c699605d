"""MaskablePPO whose rollouts overlap the policy's forward pass with the envs' steps (``vec_env: pipelined``).

Why. In SB3's rollout loop the learner's process scores every env's observation, then waits while the envs
step, then scores again: on a 2-core machine one core idles through each half. Here the envs live in a worker
process (:class:`~clustergym.train.vec_env.GroupedSubprocVecEnv` with one worker) and are split into two
halves A and B that take turns, a step apart:

    score A(t), send A(t) | score B(t) while the worker steps A(t) | score A(t+1) while it steps B(t) | ...

so the forward pass of one half runs while the other half's envs step. Nothing of PPO changes: every
action is drawn from the rollout's policy (no update happens within a rollout), the buffer stores the same
transitions in the same layout as SB3's loop, and time-limit truncations are bootstrapped with the critic as
SB3 does. What differs from ``vec_env: dummy`` with the same seed is the order of the random draws (half A's
actions are drawn before half B's), so a run is a different draw of the same process, reproducible with its
seed.

Callbacks see each combined step as in SB3's loop (``infos``, ``rewards``, ``dones`` and ``new_obs`` in
``locals``), once both halves have stepped; when one stops training the rollout ends there. Half A may then
have taken one more step that is not stored, as SB3's own loop leaves its envs one step past the last stored
observation when a callback stops it. The teacher term reads each env's
label at every step, which the overlap would race with; it needs another ``vec_env`` (checked in the config).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch as th
from sb3_contrib import MaskablePPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor

from clustergym.train.threads import training_threads
from clustergym.train.vec_env import GroupedSubprocVecEnv, concat_obs


def _halves(n_envs: int) -> tuple[range, range]:
    mid = (n_envs + 1) // 2
    return range(0, mid), range(mid, n_envs)


def _take(obs: Any, part: range) -> Any:
    if isinstance(obs, dict):
        return {k: v[part.start:part.stop] for k, v in obs.items()}
    return obs[part.start:part.stop]


class PipelinedMaskablePPO(MaskablePPO):
    """MaskablePPO with the overlapped rollout described in the module docstring when its env is a
    :class:`GroupedSubprocVecEnv` of at least two envs; SB3's own loop otherwise."""

    def collect_rollouts(self, env, callback: BaseCallback, rollout_buffer, n_rollout_steps: int,
                         use_masking: bool = True) -> bool:
        if not isinstance(env, GroupedSubprocVecEnv) or env.num_envs < 2 or not use_masking:
            return super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps, use_masking)
        self.policy.set_training_mode(False)
        rollout_buffer.reset()
        callback.on_rollout_start()
        half_a, half_b = _halves(env.num_envs)
        masks = np.stack(env.env_method("action_masks"))
        obs_b, masks_b = _take(self._last_obs, half_b), masks[half_b.start:half_b.stop]
        a = self._send(env, half_a, _take(self._last_obs, half_a), masks[half_a.start:half_a.stop])
        for t in range(n_rollout_steps):
            b = self._send(env, half_b, obs_b, masks_b)  # scored while the worker steps half A
            done_a = env.step_part_wait(half_a)
            # half A's next step is scored while the worker steps half B
            next_a = self._send(env, half_a, done_a[0], done_a[4]) if t + 1 < n_rollout_steps else None
            done_b = env.step_part_wait(half_b)
            obs_b, masks_b = done_b[0], done_b[4]
            new_obs, dones = concat_obs((done_a[0], obs_b)), np.concatenate((done_a[2], done_b[2]))
            if not self._store(callback, rollout_buffer, a, b, new_obs, np.concatenate((done_a[1], done_b[1])),
                               dones, done_a[3] + done_b[3]):
                if next_a is not None:
                    env.step_part_wait(half_a)  # half A's extra step: read, so the pipe stays in step
                return False
            a = next_a
        with th.no_grad():
            values = self.policy.predict_values(obs_as_tensor(new_obs, self.device))
        rollout_buffer.compute_returns_and_advantage(last_values=values, dones=dones)
        callback.on_rollout_end()
        return True

    def train(self) -> None:
        """PPO's update with one more torch thread than the rollout: the worker's core idles while the learner
        updates (measured on the 2-core machine: about a tenth more env steps/s than the update on one thread;
        in the rollout, a second thread only contends with the worker). Several threads come with torch's
        deterministic algorithms (:func:`~clustergym.train.threads.training_threads`)."""
        threads = th.get_num_threads()
        with training_threads(min(threads + 1, os.cpu_count() or threads + 1)):
            super().train()

    def _send(self, env: GroupedSubprocVecEnv, part: range, obs: Any, masks: np.ndarray) -> dict:
        """Score one half's observations, send its actions to the worker, and keep what the buffer needs."""
        with th.inference_mode():  # no autograd bookkeeping at all: about a tenth off this forward pass on the CPU
            actions, values, log_probs = self.policy(obs_as_tensor(obs, self.device), action_masks=masks)
        actions = actions.cpu().numpy()
        env.step_part_async(part, actions)
        return {"obs": obs, "actions": actions, "values": values, "log_probs": log_probs, "masks": masks}

    def _store(self, callback: BaseCallback, rollout_buffer, a: dict, b: dict, new_obs: Any, rewards: np.ndarray,
               dones: np.ndarray, infos: list[dict]) -> bool:
        """One combined step: callbacks, the info buffer, time-limit bootstrapping, the buffer row."""
        self.num_timesteps += len(dones)
        callback.update_locals({"infos": infos, "rewards": rewards, "dones": dones, "new_obs": new_obs})
        if not callback.on_step():
            return False
        self._update_info_buffer(infos, dones)
        for i, done in enumerate(dones):
            info = infos[i]
            if done and info.get("terminal_observation") is not None and info.get("TimeLimit.truncated", False):
                terminal = self.policy.obs_to_tensor(info["terminal_observation"])[0]
                with th.no_grad():
                    rewards[i] += self.gamma * self.policy.predict_values(terminal)[0]
        rollout_buffer.add(concat_obs((a["obs"], b["obs"])), np.concatenate((a["actions"], b["actions"])).reshape(-1, 1),
                           rewards, self._last_episode_starts, th.cat((a["values"], b["values"])),
                           th.cat((a["log_probs"], b["log_probs"])),
                           action_masks=np.concatenate((a["masks"], b["masks"])))
        self._last_obs = new_obs
        self._last_episode_starts = dones
        return True


def pipelined(model: MaskablePPO) -> PipelinedMaskablePPO:
    """A loaded MaskablePPO (a checkpoint to resume) as a :class:`PipelinedMaskablePPO`: the subclass adds no
    state, only the rollout loop, so the loaded object takes the subclass as it is."""
    if not isinstance(model, MaskablePPO):
        raise TypeError(f"vec_env pipelined resumes MaskablePPO checkpoints, got {type(model).__name__}")
    model.__class__ = PipelinedMaskablePPO
    return model
