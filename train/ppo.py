"""Train a PPO agent on a clustergym scenario: warm start from MLF-H, fine-tune with (Maskable)PPO, compare.

``python train/ppo.py`` (or ``make train``) with no arguments trains the default pairwise MaskablePPO agent on
``clustergym/GPUCluster-v0`` and writes a run folder under ``runs/`` with the model, its config, TensorBoard
logs and a results table against the heuristics on held-out windows. ``--help`` lists the flags;
docs/training.md describes everything. All logic is in importable functions (``train(cfg)``, ``main(argv)``).
"""
from __future__ import annotations

import argparse
import copy
import csv
import json
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Sequence


import numpy as np
import yaml

# Every key a --config YAML may set (unknown keys are rejected by name). Flags override the YAML.
DEFAULTS: dict[str, Any] = {
    "scenario": "clustergym/GPUCluster-v0",
    "env": {},                    # EnvConfig overrides for training and evaluation envs (e.g. window_jobs)
    "reward_weights": None,       # 5 floats (beta_1..beta_5); None = the env default (MLFS §4.1)
    "timesteps": 30_000,          # PPO environment steps (after BC)
    "n_envs": 1,                  # >1: SubprocVecEnv (torch then uses 1 thread)
    "seed": 0,
    "device": "cpu",
    "torch_threads": 1,           # torch intra-op threads (1 is fastest for these small nets on 2 cores)
    "policy": "pairwise",         # mlp | pairwise
    "algo": "maskable",           # maskable (MaskablePPO) | ppo (plain PPO, no masks from the env)
    "d": 64,                      # pairwise embedding width
    "share_encoder": True,        # False: the critic gets its own encoder (value gradients leave the actor's alone)
    "net_arch": [256, 256],       # mlp policy hidden layers (pi and vf)
    "train_max_steps": 5000,      # agent steps per training episode (truncation; keeps episodes bounded)
    # behaviour cloning (warm start)
    "expert": "mlf-h",
    "reward_baseline": None,      # a heuristic: train on the env's reward minus its reward on the same window
                                  # (agents/relative_reward.py, an input-dependent baseline; train/long.yaml uses
                                  # it; measured effect mixed, docs/training.md); None = the env's own reward
    "bc_steps": 800,              # gradient steps on the expert's own rollouts; 0 = no warm start
    "bc_episodes": 40,            # expert episodes on training windows
    "bc_holdout_episodes": 5,     # further expert episodes to measure agreement on unseen states
    "bc_dagger_rounds": 2,        # DAgger: roll out the cloned policy, label its states with the expert, retrain
    "bc_dagger_episodes": 10,     # learner episodes per DAgger round (other training windows)
    "bc_dagger_steps": 300,       # gradient steps after each DAgger round (on all states so far)
    "bc_dagger_max_steps": 2000,  # agent-step cap per DAgger episode
    "bc_batch_size": 128,
    "bc_lr": 1.0e-3,
    "bc_value_coef": 0.5,
    # PPO
    "learning_rate": 3.0e-5,      # small steps and a tight KL target: PPO stays close to the cloned policy
    "n_steps": 1024,
    "batch_size": 128,
    "n_epochs": 4,
    "gamma": 0.998,               # per agent step; a round takes several zero-time steps, so look far ahead
    "gae_lambda": 0.95,
    "clip_range": 0.1,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "target_kl": 0.02,
    # evaluation on held-out windows (split="test"): periodic evaluation (which picks the best checkpoint) and the
    # final table use different windows, so the table is not measured on the windows the checkpoint was chosen on
    "eval_freq": 10_000,          # env steps between periodic evaluations (0 = only before/after training)
    "eval_episodes": 5,           # held-out windows per periodic evaluation
    "val_seed": 20_000,           # periodic-evaluation windows use reset(seed=val_seed + i)
    "eval_max_steps": 10_000,     # agent-step cap per periodic evaluation episode (MLF-H needs < 1,000)
    "select_metric": "mean_jct_censored",  # best checkpoint: fewest unfinished jobs, then lowest mean of this
    "eval_baselines": ["mlf-h", "fifo"],
    "eval_seed": 10_000,          # final-table windows use reset(seed=eval_seed + i)
    "final_eval_episodes": 20,    # held-out windows in the final results table
    "final_eval_max_steps": 10_000,  # agent-step cap per final evaluation episode (None = env's max_steps)
    "final_baselines": ["random", "fifo", "tiresias", "mlf-h", "mlfs-h+c"],
    "log_every": 2,               # one-line summary every this many PPO rollouts
    "progress_bar": True,
    "out": None,                  # run folder; None = runs/<scenario>-<timestamp>
}

# keys that may differ on --resume without refusing (they do not change what is trained)
_RESUME_FREE = {"out", "progress_bar", "log_every", "device", "torch_threads"}


class ConfigError(ValueError):
    pass


# integer settings and their least allowed value (0 = "none": no warm start, no periodic evaluation between the
# ones before and after training, no final table)
_COUNTS = {"timesteps": 0, "n_envs": 1, "n_steps": 1, "batch_size": 1, "n_epochs": 1, "train_max_steps": 1,
           "bc_steps": 0, "bc_episodes": 0, "bc_holdout_episodes": 0, "bc_dagger_rounds": 0, "bc_dagger_episodes": 0,
           "bc_dagger_steps": 0, "bc_dagger_max_steps": 1, "bc_batch_size": 1, "eval_freq": 0, "eval_episodes": 1,
           "eval_max_steps": 1, "final_eval_episodes": 0, "log_every": 1}
_MAY_BE_NONE = {"train_max_steps", "bc_dagger_max_steps", "eval_max_steps"}  # None = no step cap


# ---------------------------------------------------------------------------------------------- config
def check_keys(d: dict, where: str) -> None:
    bad = sorted(set(d) - set(DEFAULTS))
    if bad:
        raise ConfigError(f"unknown key(s) {bad} in {where}; known: {sorted(DEFAULTS)}")


def parse_weights(s: str | Sequence[float] | None) -> list[float] | None:
    if s is None:
        return None
    if isinstance(s, str):
        try:
            w = [float(x) for x in s.split(",")]
        except ValueError:
            raise ConfigError(f"--reward-weights must be 5 comma-separated floats, got {s!r}") from None
    else:
        w = [float(x) for x in s]
    if len(w) != 5:
        raise ConfigError(f"reward_weights needs 5 values (beta_1..beta_5), got {len(w)}")
    return w


def build_config(overrides: dict | None = None, config_file: str | None = None) -> dict:
    cfg = copy.deepcopy(DEFAULTS)
    if config_file:
        with open(config_file) as f:
            y = yaml.safe_load(f) or {}
        if not isinstance(y, dict):
            raise ConfigError(f"{config_file} must hold a mapping")
        check_keys(y, config_file)
        cfg.update(y)
    if overrides:
        check_keys(overrides, "overrides")
        cfg.update(overrides)
    cfg["reward_weights"] = parse_weights(cfg["reward_weights"])
    for key, least in _COUNTS.items():
        v = cfg[key]
        if v is None and key in _MAY_BE_NONE:
            continue
        if isinstance(v, bool) or not isinstance(v, int) or v < least:
            raise ConfigError(f"{key} must be an integer >= {least}, got {v!r}")
    if cfg["bc_steps"] > 0 and cfg["bc_episodes"] < 1:
        raise ConfigError("bc_episodes must be >= 1 when bc_steps > 0 (the warm start clones expert episodes)")
    if cfg["policy"] not in ("mlp", "pairwise"):
        raise ConfigError(f"policy must be 'mlp' or 'pairwise', got {cfg['policy']!r}")
    if cfg["algo"] not in ("maskable", "ppo"):
        raise ConfigError(f"algo must be 'maskable' or 'ppo', got {cfg['algo']!r}")
    if not isinstance(cfg["env"], dict):
        raise ConfigError("env must be a mapping of EnvConfig fields")
    if str(cfg["reward_baseline"]).lower() == "none":  # from the flag or a YAML file: the env's own reward
        cfg["reward_baseline"] = None
    if cfg["reward_baseline"] is not None:
        from clustergym import baselines

        if cfg["reward_baseline"] not in baselines.available():
            raise ConfigError(f"reward_baseline must be None or one of {baselines.available()}, "
                              f"got {cfg['reward_baseline']!r}")
    return cfg


def env_config(cfg: dict, split: str) -> dict:
    e = dict(cfg["env"])
    if cfg["reward_weights"] is not None:
        e["reward_weights"] = list(cfg["reward_weights"])
    e["split"] = split
    return e


def default_out(cfg: dict) -> str:
    name = cfg["scenario"].split("/")[-1]
    return str(Path("runs") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")


# ---------------------------------------------------------------------------------------------- callbacks
def _callbacks():
    from stable_baselines3.common.callbacks import BaseCallback

    class SummaryCallback(BaseCallback):
        """TensorBoard: episode return/length and every numeric info["summary"] entry at episode ends;
        a one-line console summary every ``log_every`` rollouts; a tqdm progress bar."""

        def __init__(self, total: int, log_every: int, progress: bool, status: dict):
            super().__init__()
            self.total, self.log_every, self.progress, self.status = total, max(1, log_every), progress, status
            self.recent: deque = deque(maxlen=20)
            self.rollouts = 0
            self.bar = None
            self.t0 = time.time()
            self.n0 = 0

        def _on_training_start(self) -> None:
            self.n0 = self.num_timesteps
            self.t0 = time.time()
            if self.progress:
                from tqdm import tqdm

                self.bar = tqdm(total=self.total, initial=self.num_timesteps, unit="step", desc="PPO",
                                dynamic_ncols=True, mininterval=1.0)

        def _on_step(self) -> bool:
            if self.bar is not None:
                self.bar.update(self.training_env.num_envs)
            for info in self.locals.get("infos", []):
                ep = info.get("episode")
                if ep is None:
                    continue
                cut = bool(info.get("TimeLimit.truncated"))  # ended by train_max_steps
                self.logger.record_mean("episode/return", float(ep["r"]))
                self.logger.record_mean("episode/length", float(ep["l"]))
                self.logger.record_mean("episode/cut_by_step_cap", float(cut))
                summ = info.get("summary")
                if summ is not None:
                    rec = {"return": float(ep["r"]), "cut": float(cut)}
                    if "heuristic_return" in info and not cut:
                        # reward_baseline runs, episodes that ended (not cut by the step cap): > 0 = better than
                        # the baseline heuristic on that window
                        rec["vs_baseline"] = float(ep["r"]) - float(info["heuristic_return"])
                        self.logger.record_mean("episode/return_minus_baseline", rec["vs_baseline"])
                    for k, v in summ.items():
                        if isinstance(v, (int, float, np.integer, np.floating)):
                            self.logger.record_mean(f"summary/{k}", float(v))
                            rec[k] = float(v)
                    self.recent.append(rec)
            return True

        def _on_rollout_end(self) -> None:
            self.rollouts += 1
            if self.rollouts % self.log_every:
                return
            fps = (self.num_timesteps - self.n0) / max(1e-9, time.time() - self.t0)
            msg = f"[{self.num_timesteps:,}/{self.total:,} steps, {fps:.0f} steps/s]"
            if self.recent:
                def m(k):
                    xs = [r[k] for r in self.recent if k in r]
                    return float(np.mean(xs)) if xs else float("nan")

                msg += (f" train episodes (last {len(self.recent)}): return {m('return'):.3f}"
                        + (f" ({m('vs_baseline'):+.3f} vs baseline on those that ended)"
                           if any("vs_baseline" in r for r in self.recent) else "")
                        + f", {m('cut'):.0%} cut by the step cap, "
                        f"mean JCT {m('mean_jct'):.0f} s, deadline {m('deadline_ratio'):.2f}, "
                        f"accuracy {m('accuracy_ratio'):.2f}, overloads {m('overload_occurrences'):.1f}")
            else:
                msg += " (no training episode finished yet)"
            if self.status.get("last_eval"):
                msg += " | " + self.status["last_eval"]
            (self.bar.write if self.bar is not None else print)(msg)

        def _on_training_end(self) -> None:
            if self.bar is not None:
                self.bar.close()

    class EvalCheckpointCallback(BaseCallback):
        """Every ``eval_freq`` steps: evaluate on held-out windows, log eval/*, keep the best model (fewest
        unfinished jobs, then the lowest ``select_metric``: :func:`selection_score`), save the last checkpoint
        and the run state."""

        def __init__(self, run: "Run"):
            super().__init__()
            self.run = run
            self.last = None

        def _on_training_start(self) -> None:
            self.last = self.num_timesteps

        def _on_step(self) -> bool:
            f = self.run.cfg["eval_freq"]
            if f and self.num_timesteps - self.last >= f:
                self.last = self.num_timesteps
                self.run.periodic_eval(self.model, self.logger)
                self.run.checkpoint(self.model)
            stop = self.run.stop_at
            return not (stop is not None and self.num_timesteps >= stop)

    return SummaryCallback, EvalCheckpointCallback


# ---------------------------------------------------------------------------------------------- run
def selection_score(means: dict[str, float], metric: str) -> tuple[float, float]:
    """Checkpoint ranking (smaller is better): mean unfinished jobs per held-out window first (a policy cannot
    look good by leaving jobs waiting until the step cap), then ``metric`` (negated if higher is better)."""
    from clustergym.eval.stats import HIGHER_IS_BETTER

    v = float(means.get(metric, float("inf")))
    if not np.isfinite(v):
        v = float("inf")
    return float(means.get("unfinished", 0.0)), (-v if metric in HIGHER_IS_BETTER else v)


class Run:
    def __init__(self, cfg: dict, out: Path, stop_at: int | None = None):
        self.cfg, self.out, self.stop_at = cfg, out, stop_at
        self.state_file = out / "state.json"
        self.state: dict[str, Any] = {"best_score": None, "best_step": None, "baselines": {}, "bc": None,
                                      "evals": []}
        if self.state_file.exists():
            self.state.update(json.loads(self.state_file.read_text()))
        self.status: dict[str, str] = {}

    def save_state(self) -> None:
        self.state_file.write_text(json.dumps(self.state, indent=1, default=float))

    def val_seeds(self) -> list[int]:
        """Windows of the periodic evaluation (checkpoint selection)."""
        return [int(self.cfg["val_seed"]) + i for i in range(int(self.cfg["eval_episodes"]))]

    def final_seeds(self) -> list[int]:
        """Windows of the final table: not the ones the best checkpoint was selected on."""
        return [int(self.cfg["eval_seed"]) + i for i in range(int(self.cfg["final_eval_episodes"]))]

    def baseline_means(self) -> dict[str, dict[str, float]]:
        from clustergym.eval.rollout import evaluate
        from clustergym.eval.stats import metric_intervals as summarize

        cfg = self.cfg
        for b in cfg["eval_baselines"]:
            if b not in self.state["baselines"]:
                recs = evaluate(b, cfg["scenario"], env_config(cfg, "test"), self.val_seeds(),
                                max_steps=cfg["eval_max_steps"])
                self.state["baselines"][b] = {k: v["mean"] for k, v in summarize(recs).items()}
        return self.state["baselines"]

    def periodic_eval(self, model, logger) -> dict:
        from clustergym.eval.rollout import evaluate
        from clustergym.eval.stats import metric_intervals as summarize

        cfg = self.cfg
        t0 = time.time()
        recs = evaluate(model, cfg["scenario"], env_config(cfg, "test"), self.val_seeds(),
                        max_steps=cfg["eval_max_steps"])
        s = {k: v["mean"] for k, v in summarize(recs).items()}
        base = self.baseline_means()
        for k, v in s.items():
            logger.record(f"eval/{k}", v)
        for b, bs in base.items():
            for k in ("episode_return", "mean_jct", "mean_jct_censored", "unfinished"):
                if k in bs:
                    logger.record(f"eval_baseline/{b}/{k}", bs[k])
            if bs.get("mean_jct"):
                logger.record(f"eval/mean_jct_over_{b}", s["mean_jct"] / bs["mean_jct"])
            if bs.get(cfg["select_metric"]) and cfg["select_metric"] in s:
                logger.record(f"eval/{cfg['select_metric']}_over_{b}", s[cfg["select_metric"]] / bs[cfg["select_metric"]])
        step = int(model.num_timesteps)
        score = selection_score(s, cfg["select_metric"])
        best = self.state["best_score"]
        improved = best is None or tuple(score) < tuple(best)
        if improved:
            self.state["best_score"], self.state["best_step"] = list(score), step
            model.save(self.out / "best_model.zip")
        keep = ("episode_return", "mean_jct", "mean_jct_censored", "unfinished", "deadline_ratio", "steps")
        self.state["evals"].append({"step": step, **{k: s[k] for k in keep if k in s}})
        m = cfg["select_metric"]
        parts = [f"eval@{step:,}: {m} {s.get(m, float('nan')):.0f}, unfinished {s.get('unfinished', 0):.1f}, "
                 f"return {s['episode_return']:.3f}"]
        for b, bs in base.items():
            parts.append(f"{b} {bs.get(m, float('nan')):.0f}/{bs.get('unfinished', 0):.1f}/{bs['episode_return']:.3f}")
        self.status["last_eval"] = "; ".join(parts) + (" (new best)" if improved else "")
        logger.dump(step)
        self.save_state()
        print(f"  {self.status['last_eval']}  [{time.time() - t0:.0f} s]", flush=True)
        return s

    def checkpoint(self, model) -> None:
        (self.out / "checkpoints").mkdir(exist_ok=True)
        model.save(self.out / "checkpoints" / "last.zip")
        self.state["num_timesteps"] = int(model.num_timesteps)
        self.save_state()


def _make_vec_env(cfg: dict):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from clustergym.scenarios import make_env

    ecfg = train_env_config(cfg)
    n = int(cfg["n_envs"])
    vec_cls = SubprocVecEnv if n > 1 else DummyVecEnv
    # Monitor sits inside the wrapper, so logged episode returns stay the env's own objective
    return make_vec_env(make_env, n_envs=n, seed=int(cfg["seed"]), vec_env_cls=vec_cls,
                        env_kwargs={"env_id": cfg["scenario"], "config": ecfg},
                        wrapper_class=reward_wrapper(cfg, ecfg))


def train_env_config(cfg: dict) -> dict:
    """The env config of training windows: ``env_config(cfg, "train")`` with the ``train_max_steps`` cap. PPO's
    envs and the BC warm start both use it, so the relative-reward twin (built from the same config) replays
    the heuristic under the same step cap for the critic's targets as for PPO's rewards."""
    ecfg = env_config(cfg, "train")
    if cfg["train_max_steps"]:
        ecfg.setdefault("max_steps", int(cfg["train_max_steps"]))
    return ecfg


def reward_wrapper(cfg: dict, ecfg: dict):
    """The training-reward wrapper of ``cfg["reward_baseline"]`` for envs of config ``ecfg`` (None = none)."""
    if not cfg.get("reward_baseline"):
        return None
    from functools import partial

    from clustergym.scenarios import make_env
    from clustergym.agents.relative_reward import RelativeToHeuristic

    return partial(RelativeToHeuristic, make_twin=partial(make_env, cfg["scenario"], dict(ecfg)),
                   heuristic=cfg["reward_baseline"])


def _new_model(cfg: dict, env, tb_dir: str):
    from clustergym.agents.policies import policy_spec

    policy_cls, pkw = policy_spec(cfg["policy"], cfg["algo"], cfg["net_arch"], cfg["d"], cfg["share_encoder"])
    if cfg["algo"] == "maskable":
        from sb3_contrib import MaskablePPO as Algo
    else:
        from stable_baselines3 import PPO as Algo
    return Algo(policy_cls, env, learning_rate=cfg["learning_rate"], n_steps=cfg["n_steps"],
                batch_size=cfg["batch_size"], n_epochs=cfg["n_epochs"], gamma=cfg["gamma"],
                gae_lambda=cfg["gae_lambda"], clip_range=cfg["clip_range"], ent_coef=cfg["ent_coef"],
                vf_coef=cfg["vf_coef"], max_grad_norm=cfg["max_grad_norm"], target_kl=cfg["target_kl"],
                policy_kwargs=pkw, tensorboard_log=tb_dir, seed=int(cfg["seed"]), device=cfg["device"], verbose=0)


def warm_start(run: Run, model) -> dict:
    """Roll out the expert on training windows, behaviour-clone it into the policy, measure agreement."""
    from clustergym.agents.bc import agreement, behaviour_clone, collect, collect_dagger, disagreement_split, merge

    cfg = run.cfg
    t0 = time.time()
    base = int(cfg["seed"]) * 100_003 + 7
    train_seeds = [base + i for i in range(cfg["bc_episodes"])]
    hold_seeds = [base + 50_000 + i for i in range(cfg["bc_holdout_episodes"])]
    ecfg = train_env_config(cfg)
    print(f"BC: rolling out {cfg['expert']} on {len(train_seeds)} + {len(hold_seeds)} training windows ...", flush=True)
    wrap = reward_wrapper(cfg, ecfg)  # value targets on the training reward
    data = collect(cfg["expert"], cfg["scenario"], ecfg, train_seeds, gamma=cfg["gamma"], wrap=wrap)
    hold = collect(cfg["expert"], cfg["scenario"], ecfg, hold_seeds, gamma=cfg["gamma"]) if hold_seeds else None
    t1 = time.time()
    writer = None
    try:
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(run.out / "tb" / "bc"))
    except Exception:  # noqa: BLE001 - TensorBoard is optional for BC curves
        pass

    def cb(i, ce, loss):
        if writer is not None and i % 10 == 0:
            writer.add_scalar("bc/cross_entropy", ce, i)
            writer.add_scalar("bc/loss", loss, i)
        if (i + 1) % max(1, cfg["bc_steps"] // 5) == 0:
            print(f"  BC step {i + 1}/{cfg['bc_steps']}: cross-entropy {ce:.4f}", flush=True)

    before = agreement(model.policy, hold) if hold is not None else float("nan")
    behaviour_clone(model.policy, data, cfg["bc_steps"], cfg["bc_batch_size"], cfg["bc_lr"], cfg["bc_value_coef"],
                    seed=int(cfg["seed"]), callback=cb)
    after_bc = agreement(model.policy, hold) if hold is not None else float("nan")
    print(f"  after BC on the expert's rollouts: held-out agreement {after_bc:.3f}", flush=True)
    expert_states = int(len(data["actions"]))
    dagger = []
    for k in range(int(cfg["bc_dagger_rounds"])):
        t2 = time.time()
        seeds = [base + 100_000 + 1000 * k + i for i in range(cfg["bc_dagger_episodes"])]
        dd = collect_dagger(model.policy, cfg["expert"], cfg["scenario"], ecfg, seeds, gamma=cfg["gamma"],
                            max_steps=cfg["bc_dagger_max_steps"], wrap=wrap)
        on_policy = agreement(model.policy, dd)  # before training on them: states the learner itself reaches
        data = merge(data, dd)
        behaviour_clone(model.policy, data, cfg["bc_dagger_steps"], cfg["bc_batch_size"], cfg["bc_lr"],
                        cfg["bc_value_coef"], seed=int(cfg["seed"]) + 1 + k)
        rec = {"round": k + 1, "learner_states": int(len(dd["actions"])), "agreement_on_learner_states": on_policy,
               "agreement_holdout": agreement(model.policy, hold) if hold is not None else float("nan"),
               "seconds": time.time() - t2}
        dagger.append(rec)
        if writer is not None:
            writer.add_scalar("bc/dagger_agreement_on_learner_states", on_policy, k + 1)
            writer.add_scalar("bc/dagger_agreement_holdout", rec["agreement_holdout"], k + 1)
        print(f"  DAgger round {k + 1}: {rec['learner_states']} learner states (agreement there before "
              f"retraining {on_policy:.3f}); held-out agreement now {rec['agreement_holdout']:.3f} "
              f"[{rec['seconds']:.0f} s]", flush=True)
    res = {"expert": cfg["expert"], "train_states": int(len(data["actions"])), "expert_states": expert_states,
           "dagger": dagger,
           "holdout_states": int(len(hold["actions"])) if hold is not None else 0,
           "agreement_train": agreement(model.policy, data),
           "agreement_holdout": agreement(model.policy, hold) if hold is not None else float("nan"),
           "agreement_holdout_before": before, "agreement_holdout_bc_only": after_bc,
           "agreement_holdout_placements": agreement(model.policy, hold, exclude_end=True) if hold is not None
           else float("nan"),
           "holdout_disagreement": disagreement_split(model.policy, hold) if hold is not None else {},
           "holdout_end_round_share": float(np.mean(hold["actions"] == hold["masks"].shape[1] - 1))
           if hold is not None and len(hold["actions"]) else float("nan"), "rollout_s": t1 - t0, "train_s": time.time() - t1}
    if writer is not None:
        writer.add_scalar("bc/agreement_train", res["agreement_train"], cfg["bc_steps"])
        writer.add_scalar("bc/agreement_holdout", res["agreement_holdout"], cfg["bc_steps"])
        writer.close()
    print(f"BC: {res['train_states']} states; agreement with {cfg['expert']}: train {res['agreement_train']:.3f}, "
          f"held-out states {res['agreement_holdout']:.3f} (before BC {before:.3f}; on its placements only "
          f"{res['agreement_holdout_placements']:.3f}) "
          f"[{res['rollout_s']:.0f} s rollouts, {res['train_s']:.0f} s training]", flush=True)
    return res


def final_evaluation(run: Run, model) -> tuple[list[dict], str, list[dict]]:
    from clustergym.eval.rollout import evaluate
    from clustergym.eval.stats import paired_table, results_table

    cfg = run.cfg
    seeds = run.final_seeds()
    ecfg = env_config(cfg, "test")
    by_policy: dict[str, list[dict]] = {}
    print(f"Final evaluation on {len(seeds)} held-out windows (split='test', seeds {seeds[0]}..{seeds[-1]}) ...",
          flush=True)
    for name in ["agent"] + list(cfg["final_baselines"]):
        t0 = time.time()
        pol = model if name == "agent" else name
        by_policy[name] = evaluate(pol, cfg["scenario"], ecfg, seeds, name=name, max_steps=cfg["final_eval_max_steps"])
        print(f"  {name}: {time.time() - t0:.0f} s", flush=True)
    rows, md = results_table(by_policy)
    prows, pmd = paired_table(by_policy, "agent")
    _write_csv(run.out / "paired.csv", prows)
    md += ("\n\nPaired on the same windows (agent − other; lower JCT and unfinished, higher deadline ratio are "
           "better):\n\n" + pmd)
    records = [r for recs in by_policy.values() for r in recs]
    return rows, md, records


def _write_csv(path: Path, rows: list[dict]) -> None:
    keys: list[str] = []
    for r in rows:
        keys.extend(k for k in r if k not in keys)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def final_table(run: Run, model) -> tuple[str, list[dict]]:
    """Evaluate the best checkpoint (else the final model) and the heuristics on the final held-out windows;
    write results.csv, episodes.csv, paired.csv and results.md; return the table's Markdown and rows."""
    from clustergym.agents.io import load_agent

    cfg, out = run.cfg, run.out
    best = out / "best_model.zip"
    eval_model = load_agent(best, device=cfg["device"], algo=cfg["algo"], warn=False) if best.exists() else model
    which = f"best checkpoint (step {run.state['best_step']:,})" if best.exists() else "final model"
    rows, md, records = final_evaluation(run, eval_model)
    _write_csv(out / "results.csv", rows)
    _write_csv(out / "episodes.csv", records)
    header = (f"# {cfg['scenario']}: agent ({cfg['policy']}, {cfg['algo']}, {which}) vs heuristics\n\n"
              f"Held-out windows (split='test'), {cfg['final_eval_episodes']} seeds, mean ± 95 % t-interval; "
              f"agent-step cap {cfg['final_eval_max_steps']} per episode.\n\n")
    (out / "results.md").write_text(header + md + "\n")
    print("\n" + header + md + "\n", flush=True)
    return md, rows


def train(cfg: dict, resume: bool = False, stop_at: int | None = None) -> dict:
    """Run (or resume) a training run described by ``cfg`` (from :func:`build_config`); returns a dict with
    ``out``, ``bc``, ``results_md`` and ``num_timesteps``. ``stop_at`` interrupts PPO once that many steps
    are done (as Ctrl-C would; for tests)."""
    import torch

    import clustergym  # noqa: F401

    out = Path(cfg["out"] or default_out(cfg))
    cfg["out"] = str(out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg["n_envs"] > 1 or cfg["torch_threads"]:
        torch.set_num_threads(1 if cfg["n_envs"] > 1 else int(cfg["torch_threads"]))
    run = Run(cfg, out, stop_at)
    tb_dir = str(out / "tb")
    env = _make_vec_env(cfg)
    last = out / "checkpoints" / "last.zip"
    if resume and last.exists():
        from clustergym.agents.io import load_agent

        model = load_agent(last, env=env, device=cfg["device"], algo=cfg["algo"], warn=False)
        model.tensorboard_log = tb_dir
        print(f"Resuming {out} at step {model.num_timesteps:,} of {cfg['timesteps']:,}", flush=True)
    else:
        with open(out / "config.yaml", "w") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)
        model = _new_model(cfg, env, tb_dir)
        if cfg["bc_steps"] > 0:
            run.state["bc"] = warm_start(run, model)
            (out / "bc.json").write_text(json.dumps(run.state["bc"], indent=1))
    SummaryCallback, EvalCheckpointCallback = _callbacks()
    remaining = int(cfg["timesteps"]) - int(model.num_timesteps)
    interrupted = False
    if remaining > 0:
        if model.num_timesteps == 0 and not resume:
            # evaluate the warm-started policy before PPO so "best" can be the BC policy itself
            from stable_baselines3.common.utils import configure_logger

            model.set_logger(configure_logger(0, tb_dir, "ppo", True))
            run.periodic_eval(model, model.logger)
            run.checkpoint(model)
        cbs = [SummaryCallback(int(cfg["timesteps"]), cfg["log_every"], cfg["progress_bar"], run.status),
               EvalCheckpointCallback(run)]
        try:
            model.learn(remaining, callback=cbs, tb_log_name="ppo", reset_num_timesteps=False,
                        progress_bar=False)
        except KeyboardInterrupt:
            interrupted = True
        if stop_at is not None and model.num_timesteps < int(cfg["timesteps"]):
            interrupted = True
    run.checkpoint(model)
    if interrupted:
        print(f"Interrupted at step {model.num_timesteps:,}; continue with: python train/ppo.py --resume {out}",
              flush=True)
        env.close()
        return {"out": str(out), "num_timesteps": int(model.num_timesteps), "interrupted": True,
                "bc": run.state.get("bc")}
    if cfg["eval_freq"] and run.state["evals"] and run.state["evals"][-1]["step"] != model.num_timesteps:
        run.periodic_eval(model, model.logger)
    model.save(out / "final_model.zip")
    env.close()
    md, rows = None, []
    if cfg["final_eval_episodes"]:
        md, rows = final_table(run, model)
    else:
        print("No final table (final_eval_episodes = 0).", flush=True)
    run.state["finished"] = True
    run.save_state()
    print(f"Run folder: {out}  (tensorboard --logdir {out / 'tb'})", flush=True)
    return {"out": str(out), "num_timesteps": int(model.num_timesteps), "interrupted": False,
            "bc": run.state.get("bc"), "results_md": md, "results": rows}


# ---------------------------------------------------------------------------------------------- CLI
def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="train/ppo.py",
        description="Train a PPO agent (MaskablePPO by default) on a clustergym scenario: behaviour-clone MLF-H, "
                    "fine-tune with PPO, log to TensorBoard, evaluate against the heuristics on held-out windows. "
                    "Flags left out take the --config YAML value, else the default (shown).",
        )  # defaults are written into each help text: the flags default to None (= "take the config")
    D = DEFAULTS
    p.add_argument("--scenario", default=None, help=f"registered env id (default {D['scenario']})")
    p.add_argument("--timesteps", type=int, default=None, help=f"PPO env steps (default {D['timesteps']})")
    p.add_argument("--n-envs", type=int, default=None, help="parallel envs; >1 uses SubprocVecEnv (default 1)")
    p.add_argument("--seed", type=int, default=None, help=f"seed (default {D['seed']})")
    p.add_argument("--config", default=None, help="YAML file overriding any default (unknown keys are rejected)")
    p.add_argument("--bc-steps", type=int, default=None, help=f"BC gradient steps, 0 = no warm start "
                                                              f"(default {D['bc_steps']})")
    p.add_argument("--reward-weights", default=None, help="beta_1..beta_5 of MLFS Eq. 7 as 5 comma-separated "
                                                          "floats (default: the env's 0.5,0.55,0.25,0.15,0.15)")
    p.add_argument("--reward-baseline", default=None, metavar="HEURISTIC",
                   help=f"train on the reward minus this heuristic's on the same window, 'none' = the env's own "
                        f"reward (default {D['reward_baseline']})")
    p.add_argument("--out", default=None, help="run folder (default runs/<scenario>-<timestamp>)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue the run in RUN_DIR from its last checkpoint (same config; flags given must match, "
                        "except a larger --timesteps, which extends a run, finished or not)")
    p.add_argument("--device", default=None, help="torch device (default cpu)")
    p.add_argument("--policy", choices=["mlp", "pairwise"], default=None, help="network (default pairwise)")
    p.add_argument("--algo", choices=["maskable", "ppo"], default=None, help="MaskablePPO or plain PPO "
                                                                              "(default maskable)")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help=f"held-out windows per periodic evaluation (default {D['eval_episodes']})")
    p.add_argument("--eval-freq", type=int, default=None,
                   help=f"env steps between periodic evaluations, 0 = none (default {D['eval_freq']})")
    p.add_argument("--final-eval-episodes", type=int, default=None,
                   help=f"held-out windows in the final table, 0 = none (default {D['final_eval_episodes']})")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p


_FLAG_KEYS = ("scenario", "timesteps", "n_envs", "seed", "bc_steps", "reward_weights", "reward_baseline", "out", "device",
              "policy", "algo", "eval_episodes", "eval_freq", "final_eval_episodes")


def main(argv: Sequence[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    flags = {k: getattr(args, k) for k in _FLAG_KEYS if getattr(args, k) is not None}
    if args.no_progress:
        flags["progress_bar"] = False
    try:
        if args.resume:
            run_dir = Path(args.resume)
            saved_file = run_dir / "config.yaml"
            if not saved_file.exists():
                raise ConfigError(f"--resume: {saved_file} not found")
            saved = yaml.safe_load(saved_file.read_text())
            given = build_config(flags, args.config) if args.config else None
            cmp = dict(flags)
            if given is not None:  # a --config given on resume must describe the same run
                cmp = {k: v for k, v in given.items() if k not in _RESUME_FREE}
            if "reward_weights" in cmp:
                cmp["reward_weights"] = parse_weights(cmp["reward_weights"])
            extend = int(cmp.pop("timesteps", saved["timesteps"]))  # a larger --timesteps extends the run
            if extend < int(saved["timesteps"]):
                raise ConfigError(f"--resume refuses: --timesteps {extend} is below the saved {saved['timesteps']}")
            diff = {k: (saved.get(k), v) for k, v in cmp.items() if k not in _RESUME_FREE and saved.get(k) != v}
            if diff:
                raise ConfigError("--resume refuses: flags differ from the saved config: "
                                  + ", ".join(f"{k}: saved {a!r}, given {b!r}" for k, (a, b) in diff.items()))
            saved.update({k: v for k, v in flags.items() if k in _RESUME_FREE})
            if extend > int(saved["timesteps"]):
                print(f"Extending {run_dir} from {saved['timesteps']:,} to {extend:,} PPO steps", flush=True)
                saved["timesteps"] = extend
                (run_dir / "config.yaml").write_text(yaml.safe_dump(saved, sort_keys=False))
            saved["out"] = str(run_dir)
            cfg = build_config(saved)
            return train(cfg, resume=True)
        cfg = build_config(flags, args.config)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2)
    return train(cfg)


if __name__ == "__main__":
    main()
