"""clustergym: a Gymnasium environment of a GPU cluster running DAG-structured DL training jobs.

``import clustergym`` registers the scenarios of :mod:`clustergym.scenarios` (``clustergym/GPUCluster-v1`` and named
variants). The simulator core (:mod:`clustergym.core`) does not depend on Gymnasium.
"""
from __future__ import annotations

try:
    import gymnasium  # noqa: F401
except ImportError:  # the core works without gymnasium
    pass
else:
    from .scenarios import SCENARIOS, register_all

    register_all()
