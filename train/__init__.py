"""Training entry points (``python train/ppo.py``)."""
