"""Heuristic scheduler baselines: ``make(name, env=None, **params)`` and ``available()``.

``make(name)`` returns the core-level policy (drive a Simulator with :func:`clustergym.baselines.base.run`);
``make(name, env)`` wraps it in :class:`clustergym.baselines.agent.HeuristicAgent` for the Gymnasium env (SB3-style
``predict``). See docs/baselines.md.
"""
from __future__ import annotations

from .base import Candidates, Command, Policy, run
from .fair import Fair
from .gandiva import Gandiva
from .gavel import Gavel
from .graphene import Graphene
from .hlas import HLAS
from .hlas_l import HLASL
from .hlas_p import HLASP, HLASPStandin
from .hypersched import HyperSched
from .mlfs import MLFC, MLFH, MLFHRequirement, MLFSHC, MLFSHCActions
from .simple import EDF, FIFO, SJF, Random
from .sjfbsbf import SJFBSBF, SJFFFS, SJFBySize
from .slaq import SLAQ
from .tiresias import Tiresias
from .unisched import UniSched

REGISTRY: dict[str, type[Policy]] = {cls.name: cls for cls in (
    MLFH, MLFSHC, MLFSHCActions, MLFHRequirement, HLAS, HLASP, HLASPStandin, HLASL, Gavel, Tiresias, Gandiva, Graphene, SLAQ, HyperSched, Fair, FIFO, SJF,
    EDF, Random, UniSched, SJFBSBF, SJFFFS, SJFBySize)}


def available() -> list[str]:
    return list(REGISTRY)


def make(name: str, env=None, **params):
    """A policy by name with its paper defaults overridden by ``params``; wrapped for ``env`` if given."""
    try:
        cls = REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown baseline {name!r}; available: {available()}") from None
    policy = cls(**params)
    if env is None:
        return policy
    from .agent import HeuristicAgent

    return HeuristicAgent(policy, env)


__all__ = ["Candidates", "Command", "Policy", "run", "make", "available", "REGISTRY", "MLFC"]
