"""PPO agents for clustergym: SB3 policies (:mod:`clustergym.agents.policies`), behaviour cloning from a heuristic
(:mod:`clustergym.agents.bc`), the reward relative to a heuristic (:mod:`clustergym.agents.relative_reward`) and
loading saved agents (:mod:`clustergym.agents.io`). Training: ``python train/ppo.py`` (docs/training.md);
evaluation: :mod:`clustergym.eval.rollout`."""
