"""Train the project's agent with Ray RLlib's PPO (new API stack): the recipe of ``train/ppo.py`` on a Ray
cluster. docs/training.md ("Training on a Ray cluster") describes it.

    pip install -e ".[rllib]"      # or: make test-rllib (installs the extra, runs its tests on a 2-node cluster)
    python train/rllib_ppo.py --num-env-runners 2                   # a Ray instance in this process
    python train/rllib_ppo.py --address auto --num-env-runners 8    # join the cluster of `ray start`

It takes the settings of ``train/ppo.py`` (``train/config.py``: ``--config`` YAML and the same flags) plus
``--address``, ``--num-env-runners`` and ``--num-cpus``, and runs the same phases:

1. the run folder (locked while live) and ``config.yaml``; the Ray connection (an address that cannot be
   reached stops here, :class:`clustergym.eval.ray_backend.RayAddressError`);
2. warm start (``--policy pairwise``): ``train/ppo.py``'s behaviour cloning of the expert and DAgger rounds
   (``agents/bc.py``) on an SB3 pairwise policy in this process (``bc.json``), whose weights are then copied
   into the RLModule (:func:`clustergym.agents.rllib_pairwise.load_sb3_policy`) and sent to the learner and
   every env runner;
3. PPO: ``ceil(timesteps / n_steps)`` RLlib iterations of ``n_steps`` env steps each, sampled by
   ``--num-env-runners`` env runners (0 = this process) on training windows, the learner in this process;
   one line per iteration; the checkpoint goes to ``<run>/rllib_checkpoint``;
4. the final table of ``train/ppo.py`` (:func:`clustergym.train.ppo.comparison_table`): the checkpoint, played
   greedily by :class:`clustergym.agents.rllib.RLlibPolicy`, against the heuristics on held-out windows.

``--policy pairwise`` (default) is :class:`~clustergym.agents.rllib_pairwise.PairwiseRLModule` on the env's Dict
observation; ``--policy mlp`` is RLlib's action-masking MLP (``net_arch`` hidden layers) on
:class:`clustergym.wrappers.MaskedFlatObservation`, without the warm start (``--bc-steps 0``). Masked actions get
probability 0 and the env runs with ``invalid_action="raise"``, so one invalid action would stop training.

PPO settings map onto RLlib's: ``learning_rate`` -> ``lr``, ``n_steps`` -> ``train_batch_size_per_learner``,
``batch_size`` -> ``minibatch_size``, ``n_epochs`` -> ``num_epochs``, ``gae_lambda`` -> ``lambda_``,
``clip_range`` -> ``clip_param``, ``ent_coef`` -> ``entropy_coeff``, ``vf_coef`` -> ``vf_loss_coeff``,
``max_grad_norm`` -> ``grad_clip`` (global norm). ``target_kl``: SB3 stops an update's epochs early past it;
RLlib has no early stop, so it becomes the target of RLlib's adaptive KL penalty (``use_kl_loss``, ``kl_target``;
none: no KL term). Not on this path, refused by name if set: ``n_envs`` other than 1 (use
``--num-env-runners``), ``gamma_hour`` (RLlib discounts per step; this path's default is none),
``value_warmup_steps``, ``teacher_coef``, ``train_start_steps``, ``init_from``, ``algo ppo`` (the module always masks), ``share_encoder false``, ``reward_baseline``, a ``device`` other than cpu and
``--resume``. There is no periodic evaluation (the ``eval_*``/``val_seed``/``select_metric`` settings do not
apply): the table is of the final checkpoint. Nor is there train/ppo.py's probe of the updates (``probe_*``).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import gymnasium as gym

# absolute imports: this file also runs as a script (python train/rllib_ppo.py)
from clustergym.config import ConfigError
from clustergym.train.config import TrainConfig, config_from_args, make_parser
from clustergym.train.rundir import RunFolder, RunFolderError

CHECKPOINT_DIR = "rllib_checkpoint"


def make_env(config: dict[str, Any]):
    """RLlib env creator (picklable ``config``): ``scenario``, ``env`` (EnvConfig overrides) and ``flat``
    (wrap in MaskedFlatObservation, for the MLP)."""
    from clustergym.scenarios import make_env as make_scenario
    from clustergym.wrappers import MaskedFlatObservation

    env = make_scenario(config["scenario"], dict(config["env"]), invalid_action="raise")
    return MaskedFlatObservation(env) if config["flat"] else env


class RLlibEnv(gym.Wrapper):
    """The env as RLlib builds it, ``RLlibEnv(env_config)``: :func:`make_env` as a class, the form RLlib takes
    besides a name in Tune's registry (that registry keys its entries by the first Ray job of the process, so a
    second Ray session in one process, as in the tests, would not find the name)."""

    def __init__(self, config: dict[str, Any]):
        super().__init__(make_env(config))


# This path's own defaults under a YAML file and flags (a value a user sets otherwise is refused by name,
# check_rllib): RLlib samples with env runners, one env per process, not train/ppo.py's batched envs; and its
# PPO discounts per step only, so the warm start's value targets must too (no discount per simulated hour).
# train/ppo.py's rollout (64 envs x 16 steps, one epoch) does not carry over to one env per runner: an
# iteration keeps the 128 steps and four epochs of train/classic.yaml.
RLLIB_DEFAULTS = {"n_envs": 1, "gamma_hour": None, "n_steps": 128, "n_epochs": 4}


def check_rllib(cfg: TrainConfig) -> None:
    """ConfigError naming each setting this path does not honour (see the module docstring)."""
    bad = []
    if cfg.n_envs != 1:
        bad.append(f"n_envs {cfg.n_envs} (RLlib samples with --num-env-runners)")
    if cfg.algo != "maskable":
        bad.append(f"algo {cfg.algo!r} (the RLModule always masks invalid actions: leave algo 'maskable')")
    if not cfg.share_encoder:
        bad.append("share_encoder false (the RLModule's critic reads the actor's pooled embedding)")
    if cfg.reward_baseline:
        bad.append(f"reward_baseline {cfg.reward_baseline!r} (train/ppo.py only)")
    if cfg.device != "cpu":
        bad.append(f"device {cfg.device!r} (the learner runs on CPU)")
    if cfg.gamma_hour is not None:
        bad.append(f"gamma_hour {cfg.gamma_hour} (RLlib's PPO discounts per step only: gamma)")
    if cfg.value_warmup_steps:
        bad.append(f"value_warmup_steps {cfg.value_warmup_steps} (train/ppo.py only)")
    if cfg.teacher_coef:
        bad.append(f"teacher_coef {cfg.teacher_coef} (train/ppo.py only)")
    if cfg.train_start_steps:
        bad.append(f"train_start_steps {cfg.train_start_steps} (train/ppo.py only)")
    if cfg.init_from:
        bad.append(f"init_from {cfg.init_from!r} (train/ppo.py only)")
    if cfg.policy == "mlp" and cfg.bc_steps > 0:
        bad.append("bc_steps > 0 with policy mlp (the warm start clones into the pairwise policy: add --bc-steps 0)")
    if bad:
        raise ConfigError("train/rllib_ppo.py does not support: " + "; ".join(bad))


def module_spec(cfg: TrainConfig, env):
    """The RLModuleSpec of ``cfg.policy`` for ``env`` (already in the module's observation layout)."""
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec

    if cfg.policy == "pairwise":
        from clustergym.agents.policies import action_layout, overload_threshold
        from clustergym.agents.rllib_pairwise import PairwiseRLModule

        return RLModuleSpec(module_class=PairwiseRLModule, observation_space=env.observation_space,
                            action_space=env.action_space,
                            model_config={"d": cfg.d, "overload_threshold": overload_threshold(env),
                                          **action_layout(env)})
    from ray.rllib.examples.rl_modules.classes.action_masking_rlm import ActionMaskingTorchRLModule

    return RLModuleSpec(module_class=ActionMaskingTorchRLModule, observation_space=env.observation_space,
                        action_space=env.action_space, model_config={"fcnet_hiddens": list(cfg.net_arch)})


def ppo_config(cfg: TrainConfig, spec, num_env_runners: int):
    """RLlib's PPOConfig of ``cfg`` (the mapping of the module docstring)."""
    from ray.rllib.algorithms.ppo import PPOConfig

    env_config = {"scenario": cfg.scenario, "env": cfg.train_env_config(), "flat": cfg.policy == "mlp"}
    kl = {"use_kl_loss": cfg.target_kl is not None, **({"kl_target": cfg.target_kl} if cfg.target_kl else {})}
    return (PPOConfig()
            .environment(RLlibEnv, env_config=env_config)
            .env_runners(num_env_runners=num_env_runners)
            .training(train_batch_size_per_learner=cfg.n_steps, minibatch_size=min(cfg.batch_size, cfg.n_steps),
                      num_epochs=cfg.n_epochs, lr=cfg.learning_rate, gamma=cfg.gamma, lambda_=cfg.gae_lambda,
                      clip_param=cfg.clip_range, entropy_coeff=cfg.ent_coef, vf_loss_coeff=cfg.vf_coef,
                      grad_clip=cfg.max_grad_norm, grad_clip_by="global_norm", **kl)
            .rl_module(rl_module_spec=spec)
            .debugging(seed=cfg.seed))


def warm_start_module(cfg: TrainConfig, folder: RunFolder, spec) -> tuple[Any, dict]:
    """(the RLModule's warm-started weights, the BC statistics): ``train/ppo.py``'s warm start on an SB3 pairwise
    policy, copied into a module built from ``spec``."""
    from clustergym.agents.rllib_pairwise import load_sb3_policy
    from clustergym.scenarios import make_env as make_scenario
    from clustergym.train.ppo import new_model, warm_start

    env = make_scenario(cfg.scenario, cfg.train_env_config())
    try:
        model = new_model(cfg, env, str(folder.path / "tb"))
        stats = warm_start(cfg, folder, model)
    finally:
        env.close()
    module = spec.build()
    load_sb3_policy(module, model.policy)
    return module.get_state(), stats


def state_digest(state: dict) -> float:
    """A checksum of a module state (the sum of every weight, in float64)."""
    import numpy as np

    return float(sum(np.asarray(v, dtype=np.float64).sum() for v in state.values()))


def _take_state(runner, state: dict) -> float:
    runner.module.set_state(state)
    return state_digest(runner.module.get_state())


def set_module_state(algo, state: dict) -> None:
    """Put ``state`` into the learner's module and every env runner's copy of it, and check that each took it
    (RuntimeError otherwise)."""
    from functools import partial

    from ray.rllib.core import DEFAULT_MODULE_ID

    algo.learner_group.set_weights({DEFAULT_MODULE_ID: state})
    # synchronous, before the first sample (RLlib's own sync after each update does not wait for the runners)
    digests = algo.env_runner_group.foreach_env_runner(partial(_take_state, state=state), local_env_runner=True)
    want = state_digest(state)
    if any(abs(d - want) > 1e-9 * max(1.0, abs(want)) for d in digests):
        raise RuntimeError(f"the warm-start weights did not reach every env runner (checksums {digests}, want {want})")


def sampling_nodes(algo) -> int:
    """How many Ray nodes the remote env runners run on (0 without remote env runners)."""
    import ray

    ids = algo.env_runner_group.foreach_env_runner(lambda _: ray.get_runtime_context().get_node_id(),
                                                   local_env_runner=False)
    return len(set(ids))


def run_ppo(cfg: TrainConfig, folder: RunFolder, algo) -> dict:
    """The PPO iterations, one console line each, then the checkpoint; returns the last line's record."""
    from clustergym.train.callbacks import say

    iterations = math.ceil(cfg.timesteps / cfg.n_steps)
    last: dict[str, Any] = {"iteration": 0, "env_steps": 0}
    t0 = time.perf_counter()
    for i in range(1, iterations + 1):
        runners = algo.train().get("env_runners", {})
        last = {"iteration": i, "env_steps": int(runners.get("num_env_steps_sampled_lifetime", 0)),
                "episode_return_mean": runners.get("episode_return_mean"),
                "episodes": int(runners.get("num_episodes_lifetime", 0)),
                "seconds": round(time.perf_counter() - t0, 1)}
        say(json.dumps(last), wrap=False)
    last["checkpoint"] = str(algo.save_to_path(str(folder.path / CHECKPOINT_DIR)))
    say(f"checkpoint: {last['checkpoint']}", wrap=False)
    return last


def train(cfg: TrainConfig, address: str | None = None, num_env_runners: int = 0,
          num_cpus: int | None = None) -> dict:
    """Run the recipe (module docstring); returns the last iteration's record with ``out``, ``nodes`` (Ray
    nodes sampling), ``bc``, ``results_md`` and ``results``."""
    import torch

    from clustergym.eval.ray_backend import connected

    check_rllib(cfg)
    if cfg.torch_threads:
        torch.set_num_threads(cfg.torch_threads)
    with connected(address, num_cpus=num_cpus):  # RayAddressError before the run folder or any work
        folder = RunFolder(cfg.out or cfg.default_out())
        cfg.out = str(folder.path)
        with folder.lock():
            folder.start(cfg.to_dict())
            return _train(cfg, folder, num_env_runners)


def _train(cfg: TrainConfig, folder: RunFolder, num_env_runners: int) -> dict:
    from clustergym.train.callbacks import say

    layout = make_env({"scenario": cfg.scenario, "env": cfg.train_env_config(), "flat": cfg.policy == "mlp"})
    spec = module_spec(cfg, layout)
    layout.close()
    bc = None
    if cfg.bc_steps > 0:
        state, bc = warm_start_module(cfg, folder, spec)
        folder.write_json("bc.json", bc)
    algo = ppo_config(cfg, spec, num_env_runners).build_algo()
    try:
        if bc is not None:
            set_module_state(algo, state)
        nodes = sampling_nodes(algo)
        if num_env_runners:
            say(f"Sampling with {num_env_runners} env runners on {nodes} Ray node(s)", wrap=False)
        last = run_ppo(cfg, folder, algo)
    finally:
        algo.stop()
    result = {**last, "out": str(folder.path), "nodes": nodes, "bc": bc, "results_md": None, "results": []}
    if cfg.final_eval_episodes:
        result["results_md"], result["results"] = final_table(cfg, folder, Path(last["checkpoint"]), last["iteration"])
    say(f"Done. Results in {folder.path}: {CHECKPOINT_DIR}/ (RLlib checkpoint, a policy spec of eval/compare.py)"
        + (", results.md, results.csv, paired.csv, episodes.csv" if cfg.final_eval_episodes else "")
        + (", bc.json" if bc is not None else ""), wrap=False)
    return result


def final_table(cfg: TrainConfig, folder: RunFolder, checkpoint: Path, iteration: int) -> tuple[str, list[dict]]:
    """``train/ppo.py``'s final table for the RLlib checkpoint (played greedily among the masked actions)."""
    from clustergym.agents.rllib import RLlibPolicy
    from clustergym.scenarios import make_env as make_scenario
    from clustergym.train.ppo import comparison_table

    env = make_scenario(cfg.scenario, cfg.env_config("test"))
    try:
        agent = RLlibPolicy(checkpoint, env)
    finally:
        env.close()
    which = f"final checkpoint (iteration {iteration})"
    return comparison_table(cfg, folder, agent, f"{cfg.policy}, RLlib PPO, {which}", which)


def make_rllib_parser() -> argparse.ArgumentParser:
    """``train/ppo.py``'s flags (train/config.py) plus the Ray ones."""
    p = make_parser()
    p.prog = "train/rllib_ppo.py"
    p.description = ("Train the project's agent with Ray RLlib's PPO: warm start, PPO on env runners across a Ray "
                     "cluster, the final table against the heuristics. The settings of train/ppo.py, plus:")
    ray_flags = p.add_argument_group("Ray")
    ray_flags.add_argument("--address", default=None,
                           help="join this Ray cluster ('auto' = started on this machine by `ray start`, or "
                                "host:port of its head); default: a Ray instance in this process")
    ray_flags.add_argument("--num-env-runners", type=int, default=0, help="remote env runners; 0 = sample here")
    ray_flags.add_argument("--num-cpus", type=int, default=None, help="CPUs of the Ray instance without --address")
    return p


def main(argv: Sequence[str] | None = None) -> dict:
    args = make_rllib_parser().parse_args(argv)
    try:
        import ray  # noqa: F401
    except ImportError:
        raise SystemExit("Ray RLlib is not installed: pip install -e '.[rllib]' (in a venv of its own)") from None
    from clustergym.eval.ray_backend import RayAddressError

    try:
        if args.resume:
            raise ConfigError("train/rllib_ppo.py has no --resume: start the run again (another --out)")
        if args.address is not None and args.num_cpus is not None:
            raise ConfigError("--num-cpus is for a Ray instance in this process; a cluster's CPUs are its nodes'")
        cfg, _ = config_from_args(args, RLLIB_DEFAULTS)
        return train(cfg, args.address, args.num_env_runners, args.num_cpus)
    except (ConfigError, RunFolderError, RayAddressError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
