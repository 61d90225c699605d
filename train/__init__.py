"""Training (``python train/ppo.py``; docs/training.md).

- :mod:`clustergym.train.ppo`: the recipe (environments, model, warm start, PPO, final table) and the CLI.
- :mod:`clustergym.train.config`: ``TrainConfig``, its YAML file and flags, their checks, ``--resume``'s config.
- :mod:`clustergym.train.callbacks`: what runs inside PPO's loop, and stopping on SIGINT/SIGTERM.
- :mod:`clustergym.train.rundir`: the run folder: atomic files, the lock, checkpoints and resuming.
- :mod:`clustergym.train.rllib_ppo`: the Ray RLlib path (optional extra).
"""
