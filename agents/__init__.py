"""PPO agents for clustergym: SB3 policies (:mod:`clustergym.agents.policies`), behaviour cloning from a heuristic
(:mod:`clustergym.agents.bc`), shared evaluation (:mod:`clustergym.agents.evaluate`) and loading saved agents (:mod:`clustergym.agents.io`).
Training: ``python train/ppo.py`` (docs/training.md)."""
