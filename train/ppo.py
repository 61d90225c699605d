"""Train a PPO agent on a clustergym scenario: warm start from MLF-H, fine-tune with (Maskable)PPO, compare.

``python train/ppo.py`` (or ``make train``) with no arguments trains the default pairwise MaskablePPO agent on
``clustergym/GPUCluster-v1`` and writes a run folder under ``runs/`` with the model, its config, TensorBoard
logs and a results table against the heuristics on held-out windows. ``--help`` lists the flags;
docs/training.md describes everything.

The recipe, in the order of this file (each phase one function; :func:`train` calls them in turn):

1. configuration: defaults, ``--config`` YAML and flags (``train/config.py``), the run folder
   (``train/rundir.py``: locked while the run is live, every file written atomically);
2. environments: the ``n_envs`` training envs (in this process, or SubprocVecEnv workers with ``vec_env:
   subproc``), optionally on the reward relative to a heuristic;
3. model: (Maskable)PPO with the pairwise or MLP policy;
4. warm start: behaviour cloning of the expert's rollouts, then DAgger rounds;
5. PPO, with a periodic evaluation on held-out windows that keeps the best checkpoint (``train/callbacks.py``);
6. final table: the best checkpoint against the heuristics on other held-out windows.

Ctrl-C or SIGTERM during PPO stops after the current step with a checkpoint (``--resume`` continues); the
process then exits with 128 + the signal number.
"""
from __future__ import annotations

import signal
import sys
import time
from functools import partial
from typing import Sequence

import numpy as np

# absolute imports: this file also runs as a script (python train/ppo.py)
from clustergym.agents.decode import DecodedAgent, check_decode, destination_columns
from clustergym.config import ConfigError
from clustergym.scenarios import make_env
from clustergym.train.callbacks import (BCProgress, EvalCheckpointCallback, StopSignals, SummaryCallback,
                                        ValueWarmup, progress, say, warnings_once)
from clustergym.train.config import NO_TEACHER, TrainConfig, config_from_args, make_parser
from clustergym.eval.specs import canonical, code_version
from clustergym.eval.stats import selection_score  # noqa: F401  (the checkpoint ranking; tests use it from here)
from clustergym.train.rundir import RunFolder, RunFolderError, kept_checkpoint
from clustergym.train.threads import numeric_platform


# ---------------------------------------------------------------------------------------------- 2. environments
def reward_wrapper(cfg: TrainConfig, ecfg: dict):
    """The training-reward wrapper of ``cfg.reward_baseline`` for envs of config ``ecfg`` (None = none)."""
    if not cfg.reward_baseline:
        return None
    from clustergym.agents.relative_reward import RelativeToHeuristic

    return partial(RelativeToHeuristic, make_twin=partial(make_env, cfg.scenario, dict(ecfg)),
                   heuristic=cfg.reward_baseline)


def worker_env(env_id: str, config: dict):
    """The env of one SubprocVecEnv worker process. Workers ignore SIGINT and SIGTERM: Ctrl-C reaches every
    process of the terminal's group, and a worker dying of it would break the main process's pipe before
    the main process could save a checkpoint and close the workers."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    return make_env(env_id, config)


def training_envs(cfg: TrainConfig):
    """``n_envs`` envs on training windows (DummyVecEnv: in this process, so one forward pass serves every env's
    step; SubprocVecEnv with ``vec_env: subproc``; ``grouped``: ``env_workers`` processes stepping a group of
    envs each, train/vec_env.py; ``pipelined``: one such process, for train/pipelined.py's overlapped rollout),
    each with a Monitor inside the reward wrapper, so logged episode returns stay the env's own objective."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv

    from clustergym.train.vec_env import GroupedSubprocVecEnv

    ecfg = cfg.train_env_config()
    parallel = cfg.vec_env != "dummy"
    vec_cls = {"dummy": DummyVecEnv, "subproc": SubprocVecEnv}.get(cfg.vec_env, GroupedSubprocVecEnv)
    workers = {"grouped": cfg.env_workers, "pipelined": 1}.get(cfg.vec_env)
    wrap = reward_wrapper(cfg, ecfg)
    make = worker_env if parallel else make_env
    if cfg.train_start_steps:  # inside the Monitor: it counts only the learner's part of an episode
        make = partial(teacher_started_env, make, cfg.train_start_steps)
    if cfg.teacher_coef > 0:  # the teacher's labels of every training state (agents/teacher_term.py)
        from clustergym.agents.teacher_term import TeacherLabels

        wrap = partial(_wrapped, TeacherLabels, wrap)
    return make_vec_env(make, n_envs=cfg.n_envs, seed=cfg.seed, vec_env_cls=vec_cls,
                        vec_env_kwargs={"n_workers": workers} if workers else None,
                        env_kwargs={"env_id": cfg.scenario, "config": ecfg}, wrapper_class=wrap)


def teacher_started_env(make, max_steps: int, env_id: str, config: dict):
    """``make(env_id, config)`` with episodes that start where the teacher's prefix left them
    (train/start_states.py; the teacher is set in :func:`run_ppo`)."""
    from clustergym.train.start_states import TeacherStart

    return TeacherStart(make(env_id, config), max_steps)


def _wrapped(outer, inner, env):
    """``outer(inner(env))``, or ``outer(env)`` without an inner wrapper (picklable for SubprocVecEnv)."""
    return outer(inner(env) if inner is not None else env)


def teacher_name(cfg: TrainConfig, folder: RunFolder) -> str:
    """The teacher term's teacher: the warm start's (its choice when ``expert`` is "best"), else ``expert``."""
    chosen = (folder.state.get("bc") or {}).get("expert")
    if chosen:
        return chosen
    if cfg.expert == "best":
        raise ConfigError(NO_TEACHER)
    return cfg.expert


# ---------------------------------------------------------------------------------------------- 3. model
def new_model(cfg: TrainConfig, env, tb_dir: str):
    from clustergym.agents.policies import action_layout, overload_threshold, policy_spec

    policy_cls, pkw = policy_spec(cfg.policy, cfg.algo, cfg.net_arch, cfg.d, cfg.share_encoder,
                                  overload_threshold=overload_threshold(env), **action_layout(env))
    if cfg.vec_env == "pipelined":  # the overlapped rollout (train/pipelined.py)
        from clustergym.train.pipelined import PipelinedMaskablePPO as Algo
    elif cfg.algo == "maskable":
        from sb3_contrib import MaskablePPO as Algo
    else:
        from stable_baselines3 import PPO as Algo
    buffer = {}
    if cfg.gamma_hour is not None:  # discount per simulated second (agents/semi_mdp.py)
        from clustergym.agents.semi_mdp import buffer_class

        buffer = {"rollout_buffer_class": buffer_class(cfg.algo),
                  "rollout_buffer_kwargs": {"gamma_hour": cfg.gamma_hour, "lambda_per": cfg.lambda_per}}
    return Algo(policy_cls, env, learning_rate=cfg.learning_rate, n_steps=cfg.n_steps, batch_size=cfg.batch_size,
                n_epochs=cfg.n_epochs, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda, clip_range=cfg.clip_range,
                ent_coef=cfg.ent_coef, vf_coef=cfg.vf_coef, max_grad_norm=cfg.max_grad_norm, target_kl=cfg.target_kl,
                policy_kwargs=pkw, tensorboard_log=tb_dir, seed=cfg.seed, device=cfg.device, verbose=0, **buffer)


# ---------------------------------------------------------------------------------------------- 4. warm start
def warm_start(cfg: TrainConfig, folder: RunFolder, model) -> dict:
    """Roll out the expert on training windows, behaviour-clone it into the policy, then DAgger rounds; returns
    the BC statistics (``bc.json``): agreement with the expert on training and held-out states."""
    from clustergym.agents.bc import agreement, behaviour_clone, collect, disagreement_split
    from clustergym.train.teacher import choose_teacher, labelling_teacher, search_settings, searched

    t0 = time.time()
    expert, choice = choose_teacher(cfg)
    base = warm_start_base(cfg)
    train_seeds = [base + i for i in range(cfg.bc_episodes)]
    hold_seeds = holdout_seeds(cfg, cfg.bc_holdout_episodes)
    ecfg = cfg.train_env_config()
    labeller = labelling_teacher(cfg, expert)
    say(f"BC: rolling out {expert}{searched(cfg)} on {len(train_seeds)} + {len(hold_seeds)} training windows")
    wrap = reward_wrapper(cfg, ecfg)  # value targets on the training reward
    data = collect(labeller, cfg.scenario, ecfg, progress(train_seeds, "expert rollouts", cfg.progress_bar),
                   gamma=cfg.gamma, wrap=wrap, gamma_hour=cfg.gamma_hour)
    hold = (collect(labeller, cfg.scenario, ecfg, progress(hold_seeds, "held-out rollouts", cfg.progress_bar),
                    gamma=cfg.gamma, gamma_hour=cfg.gamma_hour) if hold_seeds else None)
    t1 = time.time()
    writer = _bc_writer(folder)

    def agree(d, **kw) -> float:
        return agreement(model.policy, d, **kw) if d is not None else float("nan")

    before = agree(hold)
    bar = BCProgress(cfg.bc_steps, "BC", cfg.progress_bar, writer)
    behaviour_clone(model.policy, data, cfg.bc_steps, cfg.bc_batch_size, cfg.bc_lr, cfg.bc_value_coef,
                    seed=cfg.seed, callback=bar, end_coef=cfg.bc_end_coef)
    bar.close()
    after_bc = agree(hold)
    say(f"  after BC on the expert's rollouts: held-out agreement {after_bc:.3f}")
    expert_states = int(len(data["actions"]))
    data, dagger = dagger_rounds(cfg, labeller, model, data, hold, base, wrap, writer)
    res = {"expert": expert, "expert_choice": choice, "search": search_settings(cfg),
           "train_states": int(len(data["actions"])),
           "expert_states": expert_states,
           "dagger": dagger, "holdout_states": int(len(hold["actions"])) if hold is not None else 0,
           "agreement_train": agree(data), "agreement_holdout": agree(hold),
           "agreement_holdout_before": before, "agreement_holdout_bc_only": after_bc,
           "agreement_holdout_placements": agree(hold, exclude_end=True),
           "holdout_disagreement": disagreement_split(model.policy, hold) if hold is not None else {},
           "holdout_end_round_share": float(np.mean(hold["actions"] == hold["masks"].shape[1] - 1))
           if hold is not None and len(hold["actions"]) else float("nan"),
           "rollout_s": t1 - t0, "train_s": time.time() - t1}
    if writer is not None:
        writer.add_scalar("bc/agreement_train", res["agreement_train"], cfg.bc_steps)
        writer.add_scalar("bc/agreement_holdout", res["agreement_holdout"], cfg.bc_steps)
        writer.close()
    say(f"BC: {res['train_states']:,} states; agreement with {expert}: train {res['agreement_train']:.3f}, "
        f"held-out {res['agreement_holdout']:.3f}\n"
        f"  (held-out before BC {before:.3f}, on the expert's placements {res['agreement_holdout_placements']:.3f}; "
        f"{res['rollout_s']:.0f} s rollouts, {res['train_s']:.0f} s training)")
    return res


def warm_start_base(cfg: TrainConfig) -> int:
    """The first of the warm start's training-window seeds (expert rollouts from here, held-out ones from
    +50,000, DAgger's from +100,000)."""
    return cfg.seed * 100_003 + 7


def holdout_seeds(cfg: TrainConfig, n: int) -> list[int]:
    """The first ``n`` training windows the warm start holds out (its agreement windows; the PPO probe's)."""
    return [warm_start_base(cfg) + 50_000 + i for i in range(n)]


def dagger_rounds(cfg: TrainConfig, expert, model, data: dict, hold: dict | None, base: int, wrap, writer):
    """DAgger: roll out the cloned policy on other training windows, label its states with the expert, retrain
    on everything so far. Returns (all states, per-round statistics)."""
    from clustergym.agents.bc import agreement, behaviour_clone, collect_dagger, merge

    rounds = []
    n = cfg.bc_dagger_rounds
    for k in range(n):
        t0 = time.time()
        seeds = [base + 100_000 + 1000 * k + i for i in range(cfg.bc_dagger_episodes)]
        dd = collect_dagger(model.policy, expert, cfg.scenario, cfg.train_env_config(),
                            progress(seeds, f"DAgger {k + 1}/{n} rollouts", cfg.progress_bar), gamma=cfg.gamma,
                            max_steps=cfg.bc_dagger_max_steps, wrap=wrap, gamma_hour=cfg.gamma_hour,
                            decode=cfg.decode)
        on_policy = agreement(model.policy, dd)  # before training on them: states the learner itself reaches
        data = merge(data, dd)
        bar = BCProgress(cfg.bc_dagger_steps, f"DAgger {k + 1}/{n} BC", cfg.progress_bar)
        behaviour_clone(model.policy, data, cfg.bc_dagger_steps, cfg.bc_batch_size, cfg.bc_lr, cfg.bc_value_coef,
                        seed=cfg.seed + 1 + k, callback=bar, end_coef=cfg.bc_end_coef)
        bar.close()
        rec = {"round": k + 1, "learner_states": int(len(dd["actions"])), "agreement_on_learner_states": on_policy,
               "agreement_holdout": agreement(model.policy, hold) if hold is not None else float("nan"),
               "seconds": time.time() - t0}
        rounds.append(rec)
        if writer is not None:
            writer.add_scalar("bc/dagger_agreement_on_learner_states", on_policy, k + 1)
            writer.add_scalar("bc/dagger_agreement_holdout", rec["agreement_holdout"], k + 1)
        say(f"  DAgger {k + 1}/{n}: {rec['learner_states']:,} learner states, agreement there {on_policy:.3f} "
            f"before retraining; held-out now {rec['agreement_holdout']:.3f} [{rec['seconds']:.0f} s]")
    return data, rounds


def _bc_writer(folder: RunFolder):
    """TensorBoard writer of the BC curves (``tb/bc``), or None without TensorBoard."""
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        return None
    return SummaryWriter(str(folder.path / "tb" / "bc"))


# ---------------------------------------------------------------------------------------------- 5. PPO
def baseline_means(cfg: TrainConfig, folder: RunFolder) -> dict[str, dict[str, float]]:
    """The heuristics' means on the validation windows (computed once per run, kept in the state)."""
    m = cfg.select_metric
    for b in cfg.eval_baselines:
        if b not in folder.state["baselines"]:
            bs, hit = _baseline_score(cfg, b)
            folder.state["baselines"][b] = bs
            say(f"  {b} on the validation windows: {m} {bs.get(m, float('nan')):.0f}, unfinished "
                f"{bs.get('unfinished', 0):.1f}, return {bs['episode_return']:.3f}"
                + (f" (from {cfg.baseline_cache})" if hit else ""))
    return folder.state["baselines"]


def _baseline_score(cfg: TrainConfig, heuristic: str) -> tuple[dict[str, float], bool]:
    """(heuristic's means on the validation windows, whether they were read from ``cfg.baseline_cache``)."""
    from clustergym.eval.rollout import evaluate
    from clustergym.eval.stats import episode_means
    from clustergym.train.baseline_cache import cached, entry_key

    env, seeds, metric = cfg.env_config("test"), cfg.val_seeds(), cfg.select_metric

    def compute() -> dict[str, float]:
        recs = evaluate(heuristic, cfg.scenario, env, progress(seeds, heuristic, cfg.progress_bar),
                        max_steps=cfg.eval_max_steps)
        return episode_means(recs, metric)

    if not cfg.baseline_cache:
        return compute(), False
    key = entry_key(heuristic, cfg.scenario, env, seeds, cfg.eval_max_steps, metric)
    return cached(cfg.baseline_cache, key, compute)  # shared with other runs (train/baseline_cache.py)


_DESTINATION_COLUMNS: dict[tuple[str, str], int | None] = {}  # (scenario, evaluation config) -> columns per row


def decoded(cfg: TrainConfig, model):
    """``model`` reading its deterministic action with ``cfg.decode``. The destination columns come from an env
    of the evaluation config (made once per config in a process), never the model's training env: a subprocess
    vector env may be mid-reset (the pipelined one starts the next rollout's reset early) and refuses attribute
    reads then."""
    if check_decode(cfg.decode) == "joint":
        return model
    config = cfg.env_config("test")
    key = (cfg.scenario, canonical(config))
    if key not in _DESTINATION_COLUMNS:
        env = make_env(cfg.scenario, config)
        try:
            _DESTINATION_COLUMNS[key] = destination_columns(env)
        finally:
            env.close()
    return DecodedAgent(model, destinations=_DESTINATION_COLUMNS[key], decode=cfg.decode)


def periodic_eval(cfg: TrainConfig, folder: RunFolder, model, logger) -> dict:
    """Evaluate ``model`` on the validation windows, log ``eval/*`` next to the heuristics, save it as
    ``best_model.zip`` if it ranks best so far (:func:`selection_score`); returns its means. The windows are
    played in lockstep, one batched forward pass per round (``evaluate_lockstep``); the final table plays
    them one at a time, as ``eval/compare.py`` does."""
    from clustergym.eval.rollout import evaluate_lockstep
    from clustergym.eval.stats import episode_means

    t0 = time.time()
    with progress(desc="eval", enabled=cfg.progress_bar, total=cfg.eval_episodes) as bar:
        recs = evaluate_lockstep(decoded(cfg, model), cfg.scenario, cfg.env_config("test"),
                                 cfg.val_seeds(), max_steps=cfg.eval_max_steps, on_episode_end=lambda _: bar.update())
    s = episode_means(recs, cfg.select_metric)
    base = baseline_means(cfg, folder)
    m = cfg.select_metric
    for k, v in s.items():
        logger.record(f"eval/{k}", v)
    for b, bs in base.items():
        for k in ("episode_return", "mean_jct", "mean_jct_censored", "unfinished"):
            if k in bs:
                logger.record(f"eval_baseline/{b}/{k}", bs[k])
        if bs.get("mean_jct"):
            logger.record(f"eval/mean_jct_over_{b}", s["mean_jct"] / bs["mean_jct"])
        if bs.get(m) and m in s:
            logger.record(f"eval/{m}_over_{b}", s[m] / bs[m])
    step, score, best = int(model.num_timesteps), selection_score(s, m), folder.state["best_score"]
    improved = best is None or tuple(score) < tuple(best)
    if improved:
        folder.state["best_score"], folder.state["best_step"] = list(score), step
        folder.save_model(model, "best_model.zip")
    if cfg.keep_checkpoints:  # every evaluated model, for choosing a checkpoint afterwards by another rule
        folder.save_model(model, kept_checkpoint(step))
    keep = ("episode_return", "mean_jct", "mean_jct_censored", "unfinished", "deadline_ratio", "agent_steps")
    folder.state["evals"].append({"step": step, **{k: s[k] for k in keep if k in s}})
    logger.dump(step)
    folder.save_state()
    say(f"  eval@{step:,}: {m} {s.get(m, float('nan')):.0f}, unfinished {s.get('unfinished', 0):.1f}, return "
        f"{s['episode_return']:.3f}{' (new best)' if improved else ''} [{time.time() - t0:.0f} s]")
    return s


def run_ppo(cfg: TrainConfig, folder: RunFolder, model, stop: StopSignals, stop_at: int | None) -> bool:
    """PPO from the model's step count to ``cfg.timesteps`` with periodic evaluations and checkpoints (a new run
    first evaluates the warm-started policy, so "best" can be the clone itself). Ends with a checkpoint;
    returns False if stopped early (a signal or ``stop_at``), True after the last evaluation otherwise."""
    from stable_baselines3.common.utils import configure_logger

    evaluate_and_checkpoint = partial(_evaluate_and_checkpoint, cfg, folder)
    tb_dir = str(folder.path / "tb")
    if model.num_timesteps < cfg.timesteps:
        if cfg.teacher_coef > 0:  # before any reset: the envs label each state they show with the teacher's action
            model.env.env_method("set_teacher", teacher_name(cfg, folder))
        if cfg.train_start_steps:  # before any reset: the teacher plays each episode's prefix
            model.env.env_method("set_start_teacher", teacher_name(cfg, folder))
        if hasattr(model.env, "reset_async"):  # env workers reset during the first evaluation; learn() collects it
            model.env.reset_async()
    with stop.graceful():
        if model.num_timesteps == 0 and not folder.state["evals"]:
            model.set_logger(configure_logger(0, tb_dir, "ppo", True))
            evaluate_and_checkpoint(model, model.logger)
        if model.num_timesteps < cfg.timesteps and stop.requested is None:
            from clustergym.agents.semi_mdp import callbacks

            evals = EvalCheckpointCallback(cfg.eval_freq, evaluate_and_checkpoint, stop, stop_at)
            cbs = [*callbacks(model),  # before any callback that may stop the rollout
                   SummaryCallback(cfg.timesteps, cfg.log_every, cfg.progress_bar), evals]
            if cfg.value_warmup_steps:
                cbs.append(ValueWarmup(cfg.value_warmup_steps))
            if cfg.teacher_coef > 0:
                from clustergym.agents.teacher_term import TeacherTerm

                cbs.append(TeacherTerm(cfg.teacher_coef, cfg.timesteps, cfg.seed, cfg.teacher_coef_end))
            probe = policy_probe(cfg, folder)
            if probe is not None:
                cbs.append(probe)
            n0, t0 = model.num_timesteps, time.time()
            model.learn(cfg.timesteps - model.num_timesteps, callback=cbs, tb_log_name="ppo",
                        reset_num_timesteps=False, progress_bar=False)
            say(throughput_line(model.num_timesteps - n0, time.time() - t0, evals.eval_seconds, cfg))
        folder.checkpoint(model)
    if stop.requested is not None or model.num_timesteps < cfg.timesteps:
        say(f"Interrupted at step {model.num_timesteps:,}; continue with: python train/ppo.py --resume "
            f"{folder.path}", wrap=False)
        return False
    if cfg.eval_freq and folder.state["evals"] and folder.state["evals"][-1]["step"] != model.num_timesteps:
        if not hasattr(model, "logger"):  # resumed at its last step: no learn() configured one
            model.set_logger(configure_logger(0, tb_dir, "ppo", False))
        periodic_eval(cfg, folder, model, model.logger)
    return True


def policy_probe(cfg: TrainConfig, folder: RunFolder):
    """The TensorBoard probe of PPO's updates (train/probes.py) on the teacher's states, or None when
    ``probe_states`` is 0 or no teacher is known (said on the console)."""
    if not cfg.probe_states:
        return None
    try:
        teacher = teacher_name(cfg, folder)
    except ConfigError:
        say("No PPO probe: no teacher is known (init_from with expert 'best'); name one with --expert")
        return None
    from clustergym.train.probes import PolicyProbe, probe_states

    t0 = time.time()
    data = probe_states(teacher, cfg.scenario, cfg.train_env_config(), holdout_seeds(cfg, cfg.probe_episodes),
                        cfg.probe_states, cfg.seed)
    say(f"PPO probe: {len(data['actions']):,} of {teacher}'s states on {cfg.probe_episodes} held-out training "
        f"window(s), every {cfg.probe_every} rollout(s) [{time.time() - t0:.0f} s]")
    return PolicyProbe(data, cfg.probe_every)


def throughput_line(steps: int, seconds: float, eval_seconds: float, cfg: TrainConfig) -> str:
    """PPO's speed: env steps per second of wall time, with and without the periodic evaluations in it."""
    training = max(seconds - eval_seconds, 1e-9)
    return (f"PPO: {steps:,} env steps in {seconds:.0f} s: {steps / max(seconds, 1e-9):,.0f} steps/s with the periodic "
            f"evaluations ({eval_seconds:.0f} s), {steps / training:,.0f} steps/s training alone ({cfg.n_envs} env(s), "
            f"{cfg.vec_env})")


def _evaluate_and_checkpoint(cfg: TrainConfig, folder: RunFolder, model, logger) -> None:
    periodic_eval(cfg, folder, model, logger)
    folder.checkpoint(model)


# ---------------------------------------------------------------------------------------------- 6. final table
def final_table(cfg: TrainConfig, folder: RunFolder, model) -> tuple[str, list[dict]]:
    """The best checkpoint (else ``model``) and the heuristics on the final held-out windows: writes results.csv,
    episodes.csv, paired.csv and results.md (every metric); prints a compact table and the paired one; returns
    the full table's Markdown and rows."""
    from clustergym.agents.io import load_agent

    best = folder.path / "best_model.zip"
    agent = load_agent(best, device=cfg.device, algo=cfg.algo) if best.exists() else model
    which = f"best checkpoint (step {folder.state['best_step']:,})" if best.exists() else "final model"
    return comparison_table(cfg, folder, decoded(cfg, agent),
                            f"{cfg.policy}, {cfg.algo}, {which}, {cfg.decode} decoding", which)


def comparison_table(cfg: TrainConfig, folder: RunFolder, agent, description: str,
                     which: str) -> tuple[str, list[dict]]:
    """``agent`` (anything :func:`clustergym.eval.rollout.predictor` takes) and ``cfg.final_baselines`` on the
    final held-out windows: the files and console tables of :func:`final_table`. ``description`` names the
    agent in results.md's title, ``which`` on the console (train/rllib_ppo.py calls it for an RLlib
    checkpoint)."""
    from clustergym.eval.rollout import evaluate
    from clustergym.eval.stats import compact_table, paired_table, results_table

    seeds = cfg.final_seeds()
    say(f"Final evaluation on {len(seeds)} held-out windows (split='test', seeds {seeds[0]}..{seeds[-1]})")
    by_policy: dict[str, list[dict]] = {}
    for name in ["agent", *cfg.final_baselines]:
        t0 = time.time()
        by_policy[name] = evaluate(agent if name == "agent" else name, cfg.scenario, cfg.env_config("test"),
                                   progress(seeds, name, cfg.progress_bar), name=name,
                                   max_steps=cfg.final_eval_max_steps)
        say(f"  {name}: {time.time() - t0:.0f} s")
    rows, md = results_table(by_policy)
    paired_rows, paired_md = paired_table(by_policy, "agent")
    paired_title = "Paired on the same windows (agent − other; better: lower JCT, unfinished; higher deadline):"
    md += "\n" + paired_title + "\n\n" + paired_md
    env_id = {"env_id": cfg.scenario}  # every results file names the env id, whose version names the dynamics
    folder.write_csv("paired.csv", [{**env_id, **r} for r in paired_rows])
    folder.write_csv("results.csv", [{**env_id, **r} for r in rows])
    folder.write_csv("episodes.csv", [r for recs in by_policy.values() for r in recs])
    header = (f"# {cfg.scenario}: agent ({description}) vs heuristics\n\n"
              f"Held-out windows (split='test'), {cfg.final_eval_episodes} seeds, mean ± 95 % t-interval; "
              f"agent-step cap {cfg.final_eval_max_steps} per episode.\n\n")
    folder.write_text("results.md", header + md)
    say(f"\nAgent ({which}) vs heuristics on {len(seeds)} held-out windows of {cfg.scenario}\n"
        f"(mean ± 95 % t-interval; JCT: censored mean)\n\n{compact_table(by_policy)}\n{paired_title}\n\n{paired_md}")
    return md, rows


# ---------------------------------------------------------------------------------------------- the recipe
def train(cfg: TrainConfig, resume: bool = False, stop_at: int | None = None) -> dict:
    """Run (or resume) the training run ``cfg`` describes; returns ``out``, ``num_timesteps``, ``interrupted``,
    ``signal`` (the name of the signal that stopped it, or None), ``bc``, ``results_md`` and ``results``.
    ``stop_at`` stops PPO once that many steps are done, as Ctrl-C would (for tests)."""
    import torch

    from clustergym.train.threads import training_threads

    cfg.val_seeds()  # validation windows that cannot be kept apart from the final ones stop the run here
    folder = RunFolder(cfg.out or cfg.default_out())
    cfg.out = str(folder.path)
    threads = 1 if cfg.vec_env == "subproc" else cfg.torch_threads or torch.get_num_threads()  # 0: torch's own
    with training_threads(threads), folder.lock(), StopSignals() as stop, warnings_once():
        env = None
        try:
            env = training_envs(cfg)
            return _train(cfg, folder, env, resume, stop, stop_at)
        except KeyboardInterrupt as e:
            return _stopped_at_once(folder, str(e) or "SIGINT")
        finally:
            if env is not None:
                env.close()


def _train(cfg: TrainConfig, folder: RunFolder, env, resume: bool, stop: StopSignals, stop_at: int | None) -> dict:
    tb_dir = str(folder.path / "tb")
    version = code_version()  # the code this process started with (the checkout may change during the run)
    if resume:
        folder.load_state()
        model = folder.load_checkpoint(env, cfg.device, cfg.algo)
        if cfg.vec_env == "pipelined":
            from clustergym.train.pipelined import pipelined

            model = pipelined(model)
        model.tensorboard_log = tb_dir
        folder.write_config(cfg.to_dict())  # a larger --timesteps extends the run
        say(f"Resuming {folder.path} at step {model.num_timesteps:,} of {cfg.timesteps:,}\n"
            f"TensorBoard: {folder.tensorboard_command()}", wrap=False)
    else:
        folder.start(cfg.to_dict())
        say(f"Run folder: {folder.path}\nTensorBoard: {folder.tensorboard_command()}", wrap=False)
        model = new_model(cfg, env, tb_dir)
        if cfg.init_from is not None:
            from clustergym.agents.io import load_agent

            saved = load_agent(cfg.init_from, device=cfg.device, algo=cfg.algo)
            model.policy.load_state_dict(saved.policy.state_dict())
            say(f"Policy weights from {cfg.init_from}", wrap=False)
        elif cfg.bc_steps > 0:
            folder.state["bc"] = warm_start(cfg, folder, model)
            folder.write_json("bc.json", folder.state["bc"])
    folder.record_code(version, model.num_timesteps, numeric_platform())
    result = {"out": str(folder.path), "bc": folder.state.get("bc"), "results_md": None, "results": []}
    if not run_ppo(cfg, folder, model, stop, stop_at):
        return {**result, "num_timesteps": int(model.num_timesteps), "interrupted": True, "signal": stop.requested}
    folder.save_model(model, "final_model.zip")
    if cfg.final_eval_episodes:
        result["results_md"], result["results"] = final_table(cfg, folder, model)
    else:
        say("No final table (final_eval_episodes = 0).")
    folder.state["finished"] = True
    folder.save_state()
    say(finished_message(folder, bool(cfg.final_eval_episodes)), wrap=False)
    return {**result, "num_timesteps": int(model.num_timesteps), "interrupted": False, "signal": None}


def finished_message(folder: RunFolder, with_table: bool) -> str:
    """Where a finished run's results are."""
    lines = [f"Done. Results in {folder.path}:"]
    if with_table:
        lines.append("  tables: results.md (every metric; paired), results.csv, paired.csv, episodes.csv")
    best = "best_model.zip (best checkpoint), " if (folder.path / "best_model.zip").exists() else ""
    lines += [f"  agent: {best}final_model.zip (last step)",
              f"  TensorBoard: {folder.tensorboard_command()}"]
    return "\n".join(lines)


def _stopped_at_once(folder: RunFolder, signal_name: str) -> dict:
    """A KeyboardInterrupt outside the graceful stop of PPO: nothing more is saved."""
    step = folder.state.get("num_timesteps", 0)
    if (folder.path / "checkpoints" / "last.zip").exists():
        print(f"\nStopped by {signal_name} at once; the last checkpoint (step {step:,}) stays: continue with "
              f"python train/ppo.py --resume {folder.path}", file=sys.stderr, flush=True)
    else:
        print(f"\nStopped by {signal_name} before the first checkpoint: nothing to resume; start the run again "
              f"(delete {folder.path} or give another --out)", file=sys.stderr, flush=True)
    return {"out": str(folder.path), "num_timesteps": int(step), "interrupted": True, "signal": signal_name,
            "bc": folder.state.get("bc"), "results_md": None, "results": []}


def main(argv: Sequence[str] | None = None) -> dict:
    args = make_parser().parse_args(argv)
    try:
        cfg, resume = config_from_args(args)
        res = train(cfg, resume=resume)
    except (ConfigError, RunFolderError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    if res["signal"]:  # stopped by Ctrl-C or SIGTERM: exit as the signal would, after the checkpoint
        raise SystemExit(128 + signal.Signals[res["signal"]].value)
    return res


if __name__ == "__main__":
    main()
