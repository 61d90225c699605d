"""Shared evaluation: run a policy (an SB3 model, a heuristic name or any ``predict``-er) on seeded episodes.

``evaluate(policy, env_id, config, seeds)`` returns one record per episode: ``policy``, ``seed``,
``episode_return``, ``steps``, ``truncated``, ``wall_s`` and every entry of ``info["summary"]``.
``summarize(records)`` gives mean and a 95 % Student-t interval per metric; ``results_table`` formats them.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Sequence

import numpy as np

from clustergym.eval.stats import fmt_num, t_interval, t_quantile

# metrics of sim.summary() reported in the results table (plus episode_return), and which way is better
TABLE_METRICS: tuple[str, ...] = ("episode_return", "mean_jct", "mean_jct_censored", "p99_jct", "deadline_ratio", "accuracy_ratio",
                                  "mean_accuracy", "bandwidth_mb", "mean_waiting", "overload_occurrences",
                                  "migrations", "unfinished", "steps")
HIGHER_IS_BETTER = {"episode_return", "deadline_ratio", "accuracy_ratio", "mean_accuracy"}


def t95(df: int) -> float:
    """Two-sided 95 % Student-t critical value (the exact quantile, shared with eval/stats.py)."""
    return t_quantile(0.975, df) if df >= 1 else float("nan")


def make_env(env_id: str, config: dict | None = None, **overrides: Any):
    import gymnasium as gym

    import clustergym  # noqa: F401  (registers the scenarios)

    kw = {**dict(config or {}), **overrides}
    kw.setdefault("render_mode", None)
    return gym.make(env_id, **kw)


def _predict_fn(policy: Any, env) -> tuple[str, Any]:
    """(name, fn(obs, mask) -> int action)."""
    if isinstance(policy, str):
        from clustergym import baselines

        agent = baselines.make(policy, env=env)
        return policy, lambda obs, mask: int(agent.predict(obs, action_masks=mask)[0])
    from sb3_contrib import MaskablePPO

    if isinstance(policy, MaskablePPO):
        return "agent", lambda obs, mask: int(policy.predict(obs, deterministic=True, action_masks=mask)[0])
    try:
        from stable_baselines3.common.base_class import BaseAlgorithm

        if isinstance(policy, BaseAlgorithm):  # plain PPO: no masks (the pairwise policy masks internally)
            return "agent", lambda obs, mask: int(policy.predict(obs, deterministic=True)[0])
    except ImportError:  # pragma: no cover
        pass
    name = getattr(policy, "name", type(policy).__name__)
    return name, lambda obs, mask: int(policy.predict(obs, action_masks=mask)[0])


def evaluate(policy: Any, env_id: str, config: dict | None, seeds: Iterable[int], *, name: str | None = None,
             max_steps: int | None = None) -> list[dict]:
    """Per-episode records of ``policy`` on ``env_id`` with env ``config`` (EnvConfig fields, e.g.
    ``split="test"``), one episode per seed (``reset(seed=seed)``). ``max_steps`` caps agent steps per
    episode (the env's own ``max_steps`` otherwise); capped episodes have ``truncated=True``."""
    cfg = dict(config or {})
    if max_steps is not None:
        cfg["max_steps"] = int(max_steps)
    env = make_env(env_id, cfg)
    pname, act = _predict_fn(policy, env)
    pname = name or pname
    u = env.unwrapped
    records = []
    try:
        for seed in seeds:
            t0 = time.perf_counter()
            obs, info = env.reset(seed=int(seed))
            ret, steps, done = 0.0, 0, bool(info.get("summary"))
            term = trunc = False
            while not done:
                a = act(obs, u.action_masks())
                obs, r, term, trunc, info = env.step(a)
                ret += float(r)
                steps += 1
                done = term or trunc
            summ = info.get("summary") or u.sim.summary()
            rec = {"policy": pname, "seed": int(seed), "episode_return": ret, "steps": steps,
                   "truncated": bool(trunc and not term), "wall_s": time.perf_counter() - t0}
            for k, v in summ.items():
                if isinstance(v, (int, float, np.integer, np.floating)):
                    rec[k] = float(v)
            records.append(rec)
    finally:
        env.close()
    return records


def summarize(records: Sequence[dict], metrics: Sequence[str] = TABLE_METRICS) -> dict[str, dict[str, float]]:
    """metric -> {mean, half (95 % t half-width), lo, hi, n} over the records."""
    out = {}
    for m in metrics:
        vals = [r[m] for r in records if m in r and r[m] is not None]
        if not vals:
            continue
        mean, lo, hi, half, n = t_interval(vals)  # non-finite values (e.g. no job ended) are left out
        out[m] = {"mean": mean, "half": half, "lo": lo, "hi": hi, "n": n}
    return out


def results_table(by_policy: dict[str, Sequence[dict]], metrics: Sequence[str] = TABLE_METRICS) -> tuple[list[dict], str]:
    """(CSV rows: policy, metric, mean, ci95_low, ci95_high, n; Markdown table of 'mean ± half-width')."""
    rows, stats = [], {}
    for p, recs in by_policy.items():
        stats[p] = summarize(recs, metrics)
        for m, s in stats[p].items():
            rows.append({"policy": p, "metric": m, "mean": s["mean"], "ci95_low": s["lo"], "ci95_high": s["hi"],
                         "n": s["n"]})
    cols = [m for m in metrics if any(m in s for s in stats.values())]
    lines = ["| policy | " + " | ".join(cols) + " |", "|---|" + "---|" * len(cols)]
    for p, s in stats.items():
        cells = [(f"{fmt_num(s[m]['mean'])} ± {fmt_num(s[m]['half'])}" if m in s else "") for m in cols]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return rows, "\n".join(lines)


PAIRED_METRICS: tuple[str, ...] = ("mean_jct_censored", "deadline_ratio", "unfinished")


def paired_table(by_policy: dict[str, Sequence[dict]], reference: str = "agent",
                 metrics: Sequence[str] = PAIRED_METRICS) -> tuple[list[dict], str]:
    """The reference policy against each other policy on the *same* windows: per metric, the mean per-window
    difference (reference − other) with its 95 % t-interval, and on how many windows the reference is better,
    equal (within 1e-9 relative) or worse. Pairing removes the window-to-window spread that dominates the
    unpaired intervals of :func:`results_table`. Records are paired by ``seed``; a policy missing a seed
    the reference has is an error (a silent drop would bias the comparison)."""
    ref = {r["seed"]: r for r in by_policy[reference]}
    rows = []
    lines = [f"| vs | metric | mean difference ({reference} − vs) | 95 % interval | better / equal / worse |",
             "|---|---|---|---|---|"]
    for p, recs in by_policy.items():
        if p == reference:
            continue
        other = {r["seed"]: r for r in recs}
        missing = sorted(set(ref) - set(other))
        if missing:
            raise ValueError(f"paired_table: policy {p!r} has no record for seed(s) {missing}")
        for m in metrics:
            pairs = [(ref[s][m], other[s][m]) for s in sorted(ref) if m in ref[s] and m in other[s]]
            pairs = [(a, b) for a, b in pairs if np.isfinite(a) and np.isfinite(b)]
            if not pairs:
                continue
            d = [a - b for a, b in pairs]
            mean, lo, hi, _, n = t_interval(d)
            sign = 1.0 if m in HIGHER_IS_BETTER else -1.0
            tol = [1e-9 * max(1.0, abs(b)) for _, b in pairs]
            better = sum(sign * x > t for x, t in zip(d, tol))
            worse = sum(sign * x < -t for x, t in zip(d, tol))
            rows.append({"reference": reference, "vs": p, "metric": m, "mean_diff": mean, "ci95_low": lo,
                         "ci95_high": hi, "n": n, "better": better, "equal": n - better - worse, "worse": worse})
            lines.append(f"| {p} | {m} | {fmt_num(mean)} | [{fmt_num(lo)}, {fmt_num(hi)}] | "
                         f"{better} / {n - better - worse} / {worse} |")
    return rows, "\n".join(lines)
