"""What runs inside the learning loops, what they print, and how a run is stopped.

- :func:`say`: every console line of training, wrapped to :data:`WIDTH` columns and written through tqdm
  (so it does not break a progress bar); :func:`progress`: the progress bar of a phase;
  :func:`warnings_once`: each warning shown once per run.
- :class:`BCProgress`: the progress bar and TensorBoard curves of behaviour cloning.
- :class:`SummaryCallback`: TensorBoard curves of the training episodes, a short console summary, a
  progress bar.
- :class:`EvalCheckpointCallback`: the periodic evaluation and checkpoint every ``eval_freq`` steps, and
  the stop once a stop is requested (:class:`StopSignals`) or a step budget is reached.
- :class:`StopSignals`: SIGINT (Ctrl-C) and SIGTERM (what batch schedulers send before killing a job) are
  handled alike. While PPO learns, the first one makes the learning loop stop after the current env step, so
  the run ends with a checkpoint and a clean exit; a second one, or one during any other phase (warm start,
  final table), raises ``KeyboardInterrupt`` at once.
"""
from __future__ import annotations

import contextlib
import signal
import textwrap
import threading
import time
import warnings
from collections import deque
from typing import Callable, Iterable, Iterator

import numpy as np
from stable_baselines3.common.callbacks import BaseCallback
from tqdm import tqdm

_SIGNALS = (signal.SIGINT, signal.SIGTERM)
WIDTH = 100  # console columns every line of training fits in (a path longer than that stays whole)


def say(text: str, wrap: bool = True) -> None:
    """Print ``text`` with every line longer than :data:`WIDTH` wrapped at spaces (continuations indented);
    ``wrap=False`` for commands and paths, which must stay whole to be copied."""
    for line in text.split("\n"):
        wrapped = textwrap.wrap(line, WIDTH, subsequent_indent="    ", break_long_words=False,
                                break_on_hyphens=False) if wrap and len(line) > WIDTH else [line]
        for w in wrapped:
            tqdm.write(w)


def progress(items: Iterable | None = None, desc: str = "", enabled: bool = True, total: int | None = None,
             unit: str = "episode") -> tqdm:
    """A progress bar over ``items`` (or of ``total`` steps); ``enabled=False`` draws nothing. It disappears
    when done: the phase's own summary line follows."""
    return tqdm(items, desc=desc, total=total, unit=unit, disable=not enabled, leave=False, dynamic_ncols=True,
                mininterval=0.5)


@contextlib.contextmanager
def warnings_once() -> Iterator[None]:
    """Inside: each warning (category and text) is shown the first time only, however many places issue it
    (e.g. loading a model zip when resuming and again for the final table). The warnings go on to whatever
    showed them before (stderr, or a test's recorder)."""
    seen: set = set()
    with warnings.catch_warnings():  # entering also resets Python's own once-per-place memory
        show = warnings.showwarning

        def once(message, category, filename, lineno, file=None, line=None):
            key = (category, str(message))
            if key not in seen:
                seen.add(key)
                show(message, category, filename, lineno, file, line)
        warnings.showwarning = once
        yield


class BCProgress:
    """The ``callback(i, cross_entropy, loss)`` of ``behaviour_clone``: a progress bar of the gradient steps
    with the cross-entropy, and the curves ``bc/cross_entropy``, ``bc/loss`` in TensorBoard (``writer``,
    every 10 steps, at ``offset + i``). Without a bar, a line at every fifth of the steps."""

    def __init__(self, steps: int, desc: str, enabled: bool, writer=None, offset: int = 0):
        self.steps, self.desc, self.writer, self.offset, self.enabled = steps, desc, writer, offset, enabled
        self.bar = progress(desc=desc, enabled=enabled, total=steps, unit="step")

    def __call__(self, i: int, ce: float, loss: float) -> None:
        if self.writer is not None and i % 10 == 0:
            self.writer.add_scalar("bc/cross_entropy", ce, self.offset + i)
            self.writer.add_scalar("bc/loss", loss, self.offset + i)
        self.bar.update(1)
        if i % 10 == 0:
            self.bar.set_postfix_str(f"cross-entropy {ce:.4f}", refresh=False)
        if not self.enabled and (i + 1) % max(1, self.steps // 5) == 0:
            say(f"  {self.desc} step {i + 1}/{self.steps}: cross-entropy {ce:.4f}")

    def close(self) -> None:
        self.bar.close()


class StopSignals:
    """Context manager installing the SIGINT/SIGTERM handlers (main thread only; elsewhere a no-op)."""

    def __init__(self) -> None:
        self.requested: str | None = None  # the name of the signal that asked to stop
        self._graceful = False
        self._previous: dict = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in _SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}

    @contextlib.contextmanager
    def graceful(self) -> Iterator[None]:
        """Inside: a first signal only sets ``requested`` (polled by :class:`EvalCheckpointCallback`)."""
        self._graceful = True
        try:
            yield
        finally:
            self._graceful = False

    def _handle(self, signum: int, frame) -> None:
        name = signal.Signals(signum).name
        if self._graceful and self.requested is None:
            self.requested = name
            print(f"\n{name}: stopping after the current step, then saving a checkpoint "
                  f"(send it again to stop at once, without one)", flush=True)
            return
        raise KeyboardInterrupt(name)


class SummaryCallback(BaseCallback):
    """TensorBoard: episode return/length and every numeric info["summary"] entry at episode ends;
    a one-line console summary of the last training episodes every ``log_every`` rollouts; a progress bar."""

    def __init__(self, total: int, log_every: int, progress: bool):
        super().__init__()
        self.total, self.log_every, self.progress = total, max(1, log_every), progress
        self.recent: deque = deque(maxlen=20)
        self.rollouts = 0
        self.bar = None
        self.t0 = time.time()
        self.n0 = 0

    def _on_training_start(self) -> None:
        self.n0 = self.num_timesteps
        self.t0 = time.time()
        if self.progress:
            self.bar = tqdm(total=self.total, initial=self.num_timesteps, unit="step", desc="PPO",
                            dynamic_ncols=True, mininterval=1.0, leave=False)

    def _on_step(self) -> bool:
        if self.bar is not None:
            self.bar.update(self.training_env.num_envs)
        for info in self.locals.get("infos", []):
            if info.get("episode") is not None:
                self._episode_end(info)
        return True

    def _episode_end(self, info: dict) -> None:
        ep = info["episode"]
        cut = bool(info.get("TimeLimit.truncated"))  # ended by train_max_steps
        self.logger.record_mean("episode/return", float(ep["r"]))
        self.logger.record_mean("episode/length", float(ep["l"]))
        self.logger.record_mean("episode/cut_by_step_cap", float(cut))
        summ = info.get("summary")
        if summ is None:
            return
        rec = {"return": float(ep["r"]), "cut": float(cut)}
        if "heuristic_return" in info and not cut:
            # reward_baseline runs, episodes that ended (not cut by the step cap): > 0 = better than the baseline
            # heuristic on that window
            rec["vs_baseline"] = float(ep["r"]) - float(info["heuristic_return"])
            self.logger.record_mean("episode/return_minus_baseline", rec["vs_baseline"])
        for k, v in summ.items():
            if isinstance(v, (int, float, np.integer, np.floating)):
                self.logger.record_mean(f"summary/{k}", float(v))
                rec[k] = float(v)
        self.recent.append(rec)

    def _on_rollout_end(self) -> None:
        self.rollouts += 1
        if self.rollouts % self.log_every:
            return
        fps = (self.num_timesteps - self.n0) / max(1e-9, time.time() - self.t0)
        msg = f"[{self.num_timesteps:,}/{self.total:,} steps, {fps:.0f}/s]"
        say(msg + (self._recent_summary() if self.recent else " no training episode finished yet"))

    def _recent_summary(self) -> str:
        """The last training episodes: return (and its margin over the reward baseline on the episodes that
        ended), share cut by the step cap, mean JCT in hours and deadline ratio."""
        def m(k):
            xs = [r[k] for r in self.recent if k in r]
            return float(np.mean(xs)) if xs else float("nan")

        vs = f" ({m('vs_baseline'):+.3f} vs base)" if any("vs_baseline" in r for r in self.recent) else ""
        return (f" train: return {m('return'):.3f}{vs}, cut {m('cut'):.0%}, JCT {m('mean_jct') / 3600:.2f} h, "
                f"deadline {m('deadline_ratio'):.2f}")

    def _on_training_end(self) -> None:
        if self.bar is not None:
            self.bar.close()


class ValueWarmup(BaseCallback):
    """Critic-only PPO for the first ``steps`` env steps: before each PPO update that starts below ``steps``
    every parameter outside the critic (its head, ``value_net``, and its own encoder when not shared) is
    frozen, so the actor, and the encoder it shares with the critic, stay the clone while the critic learns
    the values of the cloned policy under the training reward; afterwards everything trains. Logs
    ``train/actor_frozen``."""

    def __init__(self, steps: int):
        super().__init__()
        self.steps = int(steps)

    def _on_rollout_end(self) -> None:
        frozen = self.num_timesteps <= self.steps
        policy = self.model.policy
        head = getattr(policy.mlp_extractor, "vf", None) or policy.mlp_extractor.value_net  # pairwise | SB3 MLP
        modules = [head, policy.value_net]
        if not policy.share_features_extractor:  # the critic's own encoder is the critic's too
            modules.append(policy.vf_features_extractor)
        critic = {id(p) for m in modules for p in m.parameters()}
        for p in policy.parameters():
            p.requires_grad_(not frozen or id(p) in critic)
        self.logger.record("train/actor_frozen", float(frozen))

    def _on_step(self) -> bool:
        return True


class EvalCheckpointCallback(BaseCallback):
    """At the first rollout start ``eval_freq`` or more env steps after the last evaluation,
    ``evaluate_and_checkpoint(model, logger)``; stops learning once ``stop`` has a request or ``stop_at`` steps
    are done.

    The policy changes only in the update after each rollout, so an evaluation at a rollout start evaluates the
    policy trained on exactly ``num_timesteps`` steps, the step it is logged and kept at. (One made during a
    rollout would evaluate the policy of the rollout's start under a later step, and one made at the run's last
    step would miss the update that follows it.) The run's last update is evaluated after ``learn`` returns."""

    def __init__(self, eval_freq: int, evaluate_and_checkpoint: Callable, stop: StopSignals,
                 stop_at: int | None = None):
        super().__init__()
        self.eval_freq, self.evaluate_and_checkpoint = eval_freq, evaluate_and_checkpoint
        self.stop, self.stop_at = stop, stop_at
        self.last = 0
        self.eval_seconds = 0.0  # wall time spent in the evaluations (the run reports PPO's speed without it)

    def _on_training_start(self) -> None:
        self.last = self.num_timesteps

    def _on_rollout_start(self) -> None:
        if self.eval_freq and self.num_timesteps - self.last >= self.eval_freq:
            self.last = self.num_timesteps
            start = time.time()
            self.evaluate_and_checkpoint(self.model, self.logger)
            self.eval_seconds += time.time() - start

    def _on_step(self) -> bool:
        if self.stop.requested is not None:
            return False
        return not (self.stop_at is not None and self.num_timesteps >= self.stop_at)
