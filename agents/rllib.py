"""An RLlib checkpoint (new API stack, e.g. written by ``train/rllib_ppo.py``) as a policy with SB3's
``predict(obs, action_masks=...)``, so the episode loop, sweeps and protocols evaluate it like any other policy.

Needs the ``rllib`` extra (``pip install 'clustergym[rllib]'``; Ray pins other versions, so give it a venv of its
own). The checkpoint's RLModule (``learner_group/learner/rl_module/<module_id>``) is loaded without starting Ray.
Its observation space says which layout it reads: the env's own Dict observation
(:class:`clustergym.agents.rllib_pairwise.PairwiseRLModule`, ``train/rllib_ppo.py --policy pairwise``), or
:class:`clustergym.wrappers.MaskedFlatObservation`'s ``{"action_mask", "observations"}`` (RLlib's action-masking
MLP, ``--policy mlp``). :meth:`RLlibPolicy.predict` gives the module the observation in its layout and
takes the action with the highest logit among those the mask allows (RLlib's greedy action, what evaluation
uses; the action-masking module already sets masked logits to the float minimum, the mask is applied again
so a module without masking stays valid), or with ``decode="row-kind"`` the most probable row and kind of
command first (:mod:`clustergym.agents.decode`).

.. warning:: RLlib checkpoints hold pickled Python objects: loading one can run arbitrary code. Load only
   checkpoints you trust.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from .decode import check_decode, greedy_action

MODULE_DIR = Path("learner_group") / "learner" / "rl_module"


def module_path(checkpoint: str | os.PathLike, module_id: str = "default_policy") -> Path:
    """The folder of the RLModule ``module_id`` inside an algorithm checkpoint (or the module folder itself);
    FileNotFoundError naming what is missing."""
    p = Path(checkpoint)
    for candidate in (p / MODULE_DIR / module_id, p):
        if (candidate / "module_state.pkl").is_file() or (candidate / "module_state.pt").is_file():
            return candidate
    raise FileNotFoundError(f"{p} holds no RLModule {module_id!r} (looked for {MODULE_DIR / module_id}/"
                            f"module_state.pkl): give the folder that RLlib's save_to_path wrote")


class RLlibPolicy:
    """``RLlibPolicy(checkpoint, env).predict(obs, action_masks=mask) -> (array([action]), None)``."""

    def __init__(self, checkpoint: str | os.PathLike, env: Any, module_id: str = "default_policy",
                 decode: str = "joint"):
        try:
            from ray.rllib.core.rl_module.rl_module import RLModule
        except ImportError as e:
            raise ImportError(f"loading the RLlib checkpoint {checkpoint} needs Ray RLlib: pip install "
                              f"'clustergym[rllib]' (in a venv of its own)") from e
        from clustergym.wrappers import MaskedFlatObservation

        self.path = module_path(checkpoint, module_id)
        self.module = RLModule.from_checkpoint(str(self.path))
        self.module.eval()
        space = getattr(self.module, "observation_space", None)
        flat = space is not None and "observations" in getattr(space, "spaces", {})
        # only the wrapper's observation() is used: the env is not stepped here
        self.layout = MaskedFlatObservation(env) if flat else None
        self.name = Path(checkpoint).name
        self.decode = check_decode(decode)

    def predict(self, obs: dict, action_masks: np.ndarray | None = None, deterministic: bool = True,
                **_: Any) -> tuple[np.ndarray, None]:
        import torch

        if not deterministic:
            raise ValueError("RLlibPolicy acts greedily (the evaluation action); deterministic=False is not supported")
        x = self.layout.observation(obs) if self.layout is not None else dict(obs)
        mask = np.asarray(action_masks if action_masks is not None else obs["action_mask"], dtype=bool).reshape(-1)
        x["action_mask"] = mask.astype(np.float32)
        batch = {"obs": {k: torch.as_tensor(np.asarray(v, dtype=np.float32))[None] for k, v in x.items()}}
        with torch.no_grad():
            logits = self.module.forward_inference(batch)["action_dist_inputs"][0].numpy()
        return np.array([greedy_action(logits, mask, obs, self.decode)]), None
