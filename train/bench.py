"""PPO training throughput: env steps per second of ``MaskablePPO.learn`` with the default recipe's network
and hyper-parameters (``train/config.py``), rollouts and updates together, no warm start, no evaluation.

    .venv/bin/python train/bench.py [--n-envs 64] [--steps 2048] [--batch-size 256] [--threads 1]
                                    [--vec-env auto|dummy|subproc|grouped|pipelined] [--env-workers 2]
                                    [--n-epochs 1] [--d 64] [--init-from AGENT.zip] [--profile [--sort KEY]]

Without flags it measures the default recipe's setting (64 envs x 16 steps, one epoch, ``vec_env: auto``);
``--n-envs 8 --n-epochs 4 --vec-env dummy`` is ``train/classic.yaml``'s.

Prints wall-clock steps/s and steps per CPU-second of this process (``time.process_time``; with
``--vec-env subproc``, ``grouped`` or ``pipelined`` the workers' CPU is not in it), so a measurement on a shared
machine still says how much CPU a step costs. One rollout is played first and not timed (numba compilation, the
first reset).
``--profile`` prints cProfile's 35 most expensive calls (cumulative). ``--init-from`` starts from a saved agent's
weights (e.g. a run's ``checkpoints/last.zip`` after the warm start): the states, and so a step's cost, are then
those a trained policy reaches, where an untrained one leaves more jobs waiting (more window rows per state).
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-envs", type=int, default=None, help="training envs (default: the recipe's)")
    p.add_argument("--steps", type=int, default=2048)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    p.add_argument("--vec-env", choices=("auto", "dummy", "subproc", "grouped", "pipelined"), default="auto")
    p.add_argument("--env-workers", type=int, default=2, help="worker processes of --vec-env grouped")
    p.add_argument("--scenario", default="clustergym/GPUCluster-v1")
    p.add_argument("--n-epochs", type=int, default=None, help="PPO epochs per rollout (default: the recipe's)")
    p.add_argument("--d", type=int, default=None, help="pairwise encoder width (default: the recipe's)")
    p.add_argument("--init-from", default=None, help="a saved agent whose weights start the policy")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--sort", default="cumulative", help="cProfile sort key of --profile (e.g. tottime)")
    a = p.parse_args(argv)
    import torch

    from stable_baselines3.common.logger import Logger

    from clustergym.agents.semi_mdp import callbacks
    from clustergym.train import ppo
    from clustergym.train.config import TrainConfig, load_config

    torch.set_num_threads(a.threads)
    n_envs = a.n_envs or TrainConfig.n_envs
    cfg = load_config(overrides={"scenario": a.scenario, "n_envs": n_envs, "vec_env": a.vec_env,
                                 "env_workers": a.env_workers,
                                 "n_steps": max(16, 1024 // n_envs), "batch_size": a.batch_size, "bc_steps": 0,
                                 "progress_bar": False,
                                 **{k: v for k, v in (("n_epochs", a.n_epochs), ("d", a.d)) if v is not None}})
    env = ppo.training_envs(cfg)
    model = ppo.new_model(cfg, env, None)
    if a.init_from:
        from clustergym.agents.io import load_agent

        model.policy.load_state_dict(load_agent(a.init_from, algo=cfg.algo).policy.state_dict())

    model.set_logger(Logger(folder=None, output_formats=[]))  # no log files (SB3 would make a /tmp folder)
    model.learn(cfg.n_envs * cfg.n_steps, callback=callbacks(model))  # not timed: compilation, first reset
    prof = cProfile.Profile() if a.profile else None
    w0, c0 = time.time(), time.process_time()
    if prof:
        prof.enable()
    model.learn(a.steps, callback=callbacks(model), reset_num_timesteps=False)
    if prof:
        prof.disable()
    wall, cpu = time.time() - w0, time.process_time() - c0
    env.close()
    print(f"{a.scenario}: {cfg.n_envs} env(s) ({cfg.vec_env}), batch {a.batch_size}, {cfg.n_epochs} epochs, d {cfg.d}, "
          f"torch threads {a.threads}: "
          f"{a.steps} steps, wall {wall:.1f} s ({a.steps / wall:.0f} steps/s), CPU {cpu:.1f} s "
          f"({a.steps / cpu:.0f} steps per CPU-second)")
    if prof:
        pstats.Stats(prof).sort_stats(a.sort).print_stats(35)


if __name__ == "__main__":
    main()
