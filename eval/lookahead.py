"""Decision-time search as a policy spec of the evaluation harness (``eval/compare.py``, ``train/ppo.py``'s
final tables): :class:`clustergym.agents.search.LookaheadAgent` with its proposer given as a policy spec.

    python eval/compare.py --policies mlf-h-req \\
        "search=clustergym.eval.lookahead:lookahead:proposer=runs/seed-3,decode=act-first,proposal=random" \\
        --scenarios load6=clustergym/GPUCluster-v1:load=6.0,max_steps=10000 --seeds 10000 10001

``proposer`` is a policy spec without a label (a heuristic's name, a model file or run folder, an RLlib
checkpoint); ``decode`` is the decoding of a model proposer (``joint`` unless given). The run's identity holds
the proposer's file digest (:func:`clustergym.eval.specs.policy_identity`), so a retrained proposer re-runs it.
"""
from __future__ import annotations

from typing import Any

from clustergym.agents.search import LookaheadAgent
from clustergym.eval.specs import check_policy, load_policy, parse_policy


def lookahead(env: Any, proposer: str, base: str = "mlf-h-req", horizon_s: float = 3600.0,
              proposal: str = "agent", seed: int = 0, decode: str | None = None,
              terminal: str = "none", foresight: str = "oracle") -> LookaheadAgent:
    """A :class:`LookaheadAgent` on ``env`` whose proposer is the policy of the spec ``proposer``."""
    spec = parse_policy(str(proposer))
    if decode is not None:
        if spec["kind"] not in ("agent", "rllib"):
            raise ValueError(f"decode={decode!r} is for a model proposer; {proposer!r} is a {spec['kind']}")
        spec["params"] = {**spec["params"], "decode": decode}
    check_policy(spec)
    return LookaheadAgent(env, load_policy(spec, env), base=base, horizon_s=horizon_s, proposal=proposal,
                          seed=seed, terminal=terminal, foresight=foresight)
