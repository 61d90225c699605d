"""Evaluate your own policy on a benchmark protocol: a ``module:callable`` policy spec.

    python examples/evaluate_my_policy.py                       # the smoke-v1 protocol, against MLF-H
    python examples/evaluate_my_policy.py --protocol core-v1    # the benchmark (a few minutes on 2 cores)
    # the same from the command line, from the folder that holds this file:
    #   python eval/compare.py --protocol core-v1 --policies mine=evaluate_my_policy:make_policy mlf-h

The protocol calls ``make_policy(env)`` in each worker and plays its ``predict(obs, action_masks=...)`` (SB3's
signature) on the protocol's held-out windows; results go to ``protocol.md`` and ``protocol.json`` with the
env ids, package versions and machine. The policy here is a small rule of its own, "most idle GPUs": among
the valid actions, place or move a task onto the destination server with the most idle GPUs (ties: the
lower action index, i.e. the earlier row of the queue), and end the round when nothing else is allowed.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from clustergym.observation import SERVER_COLUMNS

IDLE_GPUS = SERVER_COLUMNS.index("idle_gpus")


class MostIdleGPUs:
    """Action layout (clustergym.window): ``a = row * (K + 1) + col``; ``col < K`` is destination server
    ``col`` (a row of ``obs["servers"]``), ``col == K`` sends the task back to the queue, and the last action
    ends the round."""

    def __init__(self, env):
        self.K = env.unwrapped.window.K

    def predict(self, obs: dict, action_masks: np.ndarray | None = None, deterministic: bool = True):
        mask = np.asarray(obs["action_mask"] if action_masks is None else action_masks, dtype=bool)
        end_round = len(mask) - 1
        valid = np.flatnonzero(mask[:end_round])
        cols = valid % (self.K + 1)
        moves = valid[cols < self.K]  # placements and migrations onto a server
        if len(moves) == 0:
            return np.array([end_round]), None
        idle = obs["servers"][moves % (self.K + 1), IDLE_GPUS]
        return np.array([moves[int(np.argmax(idle))]]), None  # argmax: the first of equal ones


def make_policy(env) -> MostIdleGPUs:
    """The factory a ``module:callable`` policy spec names: called with the scenario's env."""
    return MostIdleGPUs(env)


def main(argv: list[str] | None = None) -> int:
    from clustergym.eval import compare

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", default="smoke-v1")
    ap.add_argument("--out", default=None, help="results folder (default results/protocol-<name>)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    # the workers import this file by its module name: its folder goes on the path they inherit
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return compare.main(["--protocol", args.protocol, "--policies", "mine=evaluate_my_policy:make_policy",
                         "mlf-h", "--workers", str(args.workers), "--no-figures", "--no-progress",
                         *(["--out", args.out] if args.out else [])])


if __name__ == "__main__":
    sys.exit(main())
