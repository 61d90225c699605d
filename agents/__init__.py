"""PPO agents for clustergym: SB3 policies (:mod:`agents.policies`), behaviour cloning from a heuristic
(:mod:`agents.bc`), shared evaluation (:mod:`agents.evaluate`) and loading saved agents (:mod:`agents.io`).
Training: ``python train/ppo.py`` (docs/training.md)."""
