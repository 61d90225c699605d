"""The held-out windows a run is judged on: validation windows that share no job with the final table's.

Both sets are windows of the held-out split drawn at ``reset(seed=...)``, so two of them can hold the same
trace jobs: on the default scenario, validation seed 20012 shares 61 of its 100 jobs with the final table's
20 windows (seeds 20000-20011 and 20013-20019 share none). A checkpoint chosen on such a window would be
judged partly where it was chosen. :func:`disjoint_seeds` keeps the first seeds from a start whose windows
share no job id with the final windows.
"""
from __future__ import annotations

import functools
import json
from typing import Sequence

from clustergym.config import ConfigError

# seeds tried beyond the number wanted before giving up (each costs one reset)
MAX_SKIPPED = 1_000


def disjoint_seeds(scenario: str, env_config: dict, start: int, n: int, final: Sequence[int],
                   max_skipped: int | None = None) -> list[int]:
    """The first ``n`` seeds from ``start`` whose windows of ``scenario`` (``env_config``) share no job id
    with the windows of the ``final`` seeds, nor are one of them; :class:`ConfigError` once more than
    ``max_skipped`` (default :data:`MAX_SKIPPED`) seeds were skipped."""
    skip = MAX_SKIPPED if max_skipped is None else int(max_skipped)
    return list(_disjoint(scenario, json.dumps(env_config, sort_keys=True), int(start), int(n),
                          tuple(int(s) for s in final), skip))


@functools.cache
def _disjoint(scenario: str, env_json: str, start: int, n: int, final: tuple[int, ...],
              max_skipped: int) -> tuple[int, ...]:
    if n == 0:
        return ()
    from clustergym.scenarios import make_env

    env = make_env(scenario, json.loads(env_json))
    try:
        taken = set().union(*(_job_ids(env, s) for s in final)) if final else set()
        chosen: list[int] = []
        seed = start
        while len(chosen) < n:
            if seed - start - len(chosen) > max_skipped:
                raise ConfigError(f"no {n} validation windows from seed {start} share no job with the final "
                                  f"table's {len(final)} windows ({len(chosen)} found; {max_skipped} skipped): "
                                  "fewer eval_episodes or final_eval_episodes, or a larger held-out split")
            if seed not in final and not _job_ids(env, seed) & taken:
                chosen.append(seed)
            seed += 1
        return tuple(chosen)
    finally:
        env.close()


def _job_ids(env, seed: int) -> set:
    env.reset(seed=seed)
    return {job.spec.job_id for job in env.unwrapped.sim.jobs}
