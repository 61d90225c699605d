"""Evaluation harness: policies x scenarios x seeds in parallel worker processes, summary tables with 95 %
t-intervals and MLFS relative differences, MLFS-style figures and a one-page Markdown report.

    python eval/compare.py --policies mlf-h fifo nomig=mlf-h:migrate=false runs/ppo.zip \\
        --scenarios clustergym/GPUCluster-v1 hetero=clustergym/Hetero-v1:window_jobs=20 \\
        --seeds 0 1 2 --set window_jobs=30 --reference mlf-h --out results/my-sweep
    python eval/compare.py --protocol core-v1 --policies mlf-h my_pkg.policies:make   # a benchmark protocol
    python eval/compare.py --list-protocols / --describe-protocol core-v1             # (eval/protocols.py)
    python eval/compare.py --experiment mlfs-overall          # named reproductions (eval/experiments.py)
    python eval/compare.py --list-experiments
    python eval/compare.py --report-only --out results/my-sweep   # re-aggregate existing run files
    python eval/compare.py --backend ray --address auto ...   # runs as Ray tasks on a cluster (eval/ray_backend.py)

**Policy spec** (:mod:`clustergym.eval.specs`): ``[label=]name[:key=value,...]`` (a heuristic of
``baselines.available()`` with parameters, values parsed as YAML), ``[label=]path.zip`` or a training run folder
(an SB3 agent), ``[label=]checkpoint-folder`` (an RLlib checkpoint; needs the ``rllib`` extra) or
``[label=]module:callable[:key=value,...]`` (``callable(env, **params)`` returns an object with
``predict(obs, action_masks=...)``). Models and callables load lazily in the workers; every spec is checked
before any run starts (``PolicySpecError``). **Scenario spec**: ``[label=]env_id[:key=value,...]`` (EnvConfig
fields as ``gymnasium.make`` keywords; dotted keys for nested dicts: ``generator.load=2``). ``--set`` overrides
apply to every scenario. Runs play held-out windows (``split=test``) unless ``--set split=train`` (or a scenario's
own ``split``) says otherwise; the split used is printed. ``--loads 0.25 0.5 1 2 3`` expands each scenario into a
load sweep: ``--load-mode jobs`` scales ``window_jobs`` by x, ``--load-mode generator`` sets ``generator.load = x``
(generator workloads), ``--load-mode arrival`` sets the trace windows' offered ``load`` to x (inter-arrival times
compressed). ``--protocol NAME`` fixes the scenarios, split and seeds (no ``--scenarios``, ``--set``,
``--seeds``, ``--loads`` or ``--max-steps``) and adds ``protocol.json`` and ``protocol.md`` to the outputs.

**Outputs** (``--out``): ``runs/<policy>__<scenario>__s<seed>.json`` (episode summary + timing and the run's
identity, written last: a finished run is reused only if its identity, i.e. policy and parameters, env id
and every keyword, seed and code version, matches; an interrupted sweep re-runs only missing runs, a changed
spec re-runs the runs it changes) and ``.jobs.csv`` (per-job records of ``sim.job_records()``); aggregated ``episodes.csv``, ``jobs.csv``,
``summary_long.csv`` (every metric: n, mean, std, t-interval, relative difference to the reference),
``summary.csv``/``summary.md`` (wide), ``figures/*.png`` and ``report.md``; with ``--timeline``,
``timelines/<run>.png`` for each run executed in that call (a Gantt of tasks on GPUs, the queue, GPU utilisation
and overloads over time). Every scenario (its fields, its trace file) is checked before any run starts. Every file is written to a
temporary name and moved into place with ``os.replace``.

**Core runs**: the named experiments whose policies choose what the env's window cannot express (SJF-BSBF's GPUs
and sub-batches: ``sjf-bsbf``, ``sjf-bsbf-xi``, ``sjf-bsbf-isolate``) play their runs on the simulator without
the env (:func:`clustergym.eval.specs.core_runs`), with the same files, resume rule, tables and report; they
have no ``decision_mean_us`` and no timelines, and they add their own figures.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sys
import time
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

# absolute imports: this file also runs as a script (python eval/compare.py)
from clustergym.eval.files import atomic_write_csv, atomic_write_parquet, atomic_write_text, remove_stale_temps
from clustergym.eval.specs import (SweepSpecError, canonical, check_collisions, check_policies, check_scenarios,
                                   deep_merge, expand_loads, identity_difference, load_policy, make_runs, parse_kv,
                                   parse_policy, parse_scenario, play_core_run)

# --------------------------------------------------------------------------- one run (worker)


def run_one(run: dict, out_dir: str) -> dict:
    """Play one seeded episode (an env's, or a core run's by its runner: :func:`~clustergym.eval.specs.core_runs`);
    write ``runs/<key>.jobs.csv`` then ``runs/<key>.json``; return the episode row. Importable and picklable
    (spawn/forkserver-safe): everything it needs travels in ``run``."""
    rec, jobs = play_core_run(run) if "runner" in run else _play_env(run, out_dir)
    meta = {"policy": run["policy"], "scenario": run["scenario"], "scenario_base": run["scenario_base"],
            "load": run["load"], "seed": run["seed"], "env_id": run["env_id"]}
    row = {**meta, **rec}
    for k, v in meta.items():
        if k not in jobs.columns:
            jobs.insert(0, k, v)
    jobs = jobs[list(meta) + [c for c in jobs.columns if c not in meta]]
    runs_dir = Path(out_dir) / "runs"
    atomic_write_csv(jobs, runs_dir / f"{run['key']}.jobs.csv")
    fields = ("env_id", "env_kwargs", "policy_spec", "runner", "runner_args", "seed")
    payload = {"row": row, "run": {k: run[k] for k in fields if k in run}, "identity": run.get("identity")}
    atomic_write_text(runs_dir / f"{run['key']}.json", json.dumps(payload, default=_json_default, indent=1))
    return row


def _play_env(run: dict, out_dir: str) -> tuple[dict, "pd.DataFrame"]:
    """(episode record, per-job records) of ``run``'s policy on its env; with ``--timeline`` the run's timeline
    figure too."""
    import pandas as pd

    from clustergym.eval.rollout import predictor, rollout
    from clustergym.scenarios import make_env

    timeline = {"sim": {"record_timeline": True}} if run.get("timeline") else {}  # --timeline: recording only
    env = make_env(run["env_id"], deep_merge(run["env_kwargs"], timeline), disable_env_checker=True)
    try:
        rec = rollout(env, predictor(load_policy(run["policy_spec"], env), env, run["policy"]), run["seed"])
        jobs = pd.DataFrame(env.unwrapped.sim.job_records())
        if timeline:
            env.unwrapped.save_timeline(Path(out_dir) / "timelines" / f"{run['key']}.png",
                                        f"{run['policy']} on {run['scenario']}, seed {run['seed']}")
    finally:
        env.close()
    return rec, jobs


def _json_default(o):
    if isinstance(o, (np.integer,)):
        return int(o)
    if isinstance(o, (np.floating,)):
        return float(o)
    if isinstance(o, (np.bool_,)):
        return bool(o)
    return str(o)


def run_with_warnings(run: dict, out_dir: str) -> tuple[dict, list[tuple[str, str]]]:
    """:func:`run_one`, returning the (category, text) of every warning it raised instead of printing them, so
    the sweep shows each once however many runs and worker processes raise it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for quiet in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.filterwarnings("ignore", category=quiet)  # hidden by Python's defaults too
        row = run_one(run, out_dir)
    return row, [(w.category.__name__, str(w.message)) for w in caught]


def saved_identity(out_dir: str | os.PathLike, run: dict) -> tuple[bool, dict | None]:
    """(whether ``run``'s file exists, the identity saved in it: None if it has none or cannot be read)."""
    p = Path(out_dir) / "runs" / f"{run['key']}.json"
    if not p.exists():
        return False, None
    try:
        return True, json.loads(p.read_text()).get("identity")
    except (json.JSONDecodeError, UnicodeDecodeError):
        return True, None


def is_done(out_dir: str | os.PathLike, run: dict) -> bool:
    """``run`` finished with the same identity (a run without one, e.g. a test's, counts as done if its file
    exists)."""
    exists, saved = saved_identity(out_dir, run)
    return exists and ("identity" not in run or (saved is not None and canonical(saved) == canonical(run["identity"])))


def stale_runs(out_dir: str | os.PathLike, runs: list[dict]) -> list[tuple[dict, str]]:
    """The runs whose file another spec made, each with the first field where the specs differ."""
    out = []
    for r in runs:
        exists, saved = saved_identity(out_dir, r)
        if exists and not is_done(out_dir, r):
            out.append((r, identity_difference(saved, r["identity"]) if saved else "no identity saved"))
    return out


def _clear_stale(out_dir: Path, runs: list[dict]) -> None:
    """Remove the files of runs made by another spec (they are run again) and say so."""
    stale = stale_runs(out_dir, runs)
    for r, _ in stale:
        for suffix in (".json", ".jobs.csv"):
            (out_dir / "runs" / f"{r['key']}{suffix}").unlink(missing_ok=True)
    if stale:
        print(f"{len(stale)} finished runs in {out_dir / 'runs'} were made by another spec and run again "
              f"(e.g. {stale[0][0]['key']}, {stale[0][1]})", file=sys.stderr)


# --------------------------------------------------------------------------- the sweep


def sweep(runs: list[dict], out_dir: str | os.PathLike, workers: int = 2, mp_context: str = "spawn",
          progress: bool = True, backend: str = "local") -> dict:
    """Execute the runs not yet done (in ``workers`` processes; 0 = in this process; ``backend="ray"``: as tasks
    on the Ray cluster :func:`clustergym.eval.ray_backend.connect` joined) after checking that no
    two collide; finished runs of another spec are run again. Every warning of the runs is printed once, with
    the number of runs that raised it. Returns {"executed": [keys], "skipped": [keys], "failed": {key: error},
    "warnings": {(category, text): runs}, "wall_s": float}."""
    check_collisions(runs)
    out_dir = Path(out_dir)
    (out_dir / "runs").mkdir(parents=True, exist_ok=True)
    remove_stale_temps(out_dir / "runs")  # left by runs killed mid-write
    _clear_stale(out_dir, runs)
    todo = [r for r in runs if not is_done(out_dir, r)]
    skipped = [r["key"] for r in runs if is_done(out_dir, r)]
    # longest first (bigger windows) for a better balance across workers
    todo.sort(key=lambda r: -int(r["env_kwargs"].get("window_jobs", 0) or 0))
    t0 = time.perf_counter()
    from tqdm import tqdm

    res: dict = {"executed": [], "skipped": skipped, "failed": {}, "warnings": Counter()}
    with tqdm(total=len(todo), desc="runs", unit="run", disable=not progress, dynamic_ncols=True) as bar:
        done = partial(_finished, res, bar)
        if backend == "ray" and todo:
            from clustergym.eval import compare as _self  # by module name, so Ray pickles the function by reference
            from clustergym.eval.ray_backend import run_on_ray

            run_on_ray(todo, out_dir, _self.run_with_warnings, done, res)
        elif workers <= 0:
            for r in todo:
                try:
                    done(r["key"], result=run_with_warnings(r, str(out_dir)))
                except Exception as e:  # noqa: BLE001  (report and go on)
                    done(r["key"], error=e)
        elif todo:
            _in_workers(todo, out_dir, workers, mp_context, done, res)
    for (category, text), n in res["warnings"].items():
        print(f"warning ({n} of {len(todo)} runs): {category}: {text}", file=sys.stderr)
    for k, e in res["failed"].items():
        print(f"FAILED {k}: {e}", file=sys.stderr)
    return {**res, "wall_s": time.perf_counter() - t0}


def _finished(res: dict, bar, key: str, result: tuple | None = None, error: BaseException | None = None) -> None:
    """Book one run's end: executed with its warnings (each counted once per run), or failed."""
    if error is None:
        res["executed"].append(key)
        res["warnings"].update(set(result[1]))
    else:
        res["failed"][key] = f"{type(error).__name__}: {error}"
    bar.update(1)


def _in_workers(todo: list[dict], out_dir: Path, workers: int, mp_context: str, done, res: dict) -> None:
    from clustergym.eval import compare as _self  # the importable module, so the worker pickles by module name

    ex = ProcessPoolExecutor(max_workers=min(workers, len(todo)), mp_context=multiprocessing.get_context(mp_context))
    try:
        futs = {ex.submit(_self.run_with_warnings, r, str(out_dir)): r["key"] for r in todo}
        for f in as_completed(futs):
            try:
                done(futs[f], result=f.result())
            except Exception as e:  # noqa: BLE001
                done(futs[f], error=e)
    except KeyboardInterrupt:  # Ctrl-C / SIGTERM: stop our workers; finished runs stay, the rest re-runs
        procs = list((getattr(ex, "_processes", None) or {}).values())
        ex.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            if p.is_alive():
                p.terminate()
        print(f"interrupted: {len(res['executed'])} runs finished in this call; re-run the same command to resume",
              file=sys.stderr)
        raise
    ex.shutdown(wait=True)


class StaleRunsError(RuntimeError):
    """Run files in the output folder that another spec made (re-aggregating them would show old numbers)."""


def collect(out_dir: str | os.PathLike, runs: list[dict] | None = None):
    """(episodes, jobs) DataFrames from the run files (only the given runs, or all of them); a given run whose
    file holds another identity raises :class:`StaleRunsError`."""
    import pandas as pd

    rdir = Path(out_dir) / "runs"
    stale = stale_runs(out_dir, runs) if runs is not None else []
    if stale:
        raise StaleRunsError(f"{len(stale)} of the {len(runs)} run files in {rdir} were made by another spec than "
                             f"this one (e.g. {stale[0][0]['key']}, {stale[0][1]}): run the sweep (without "
                             f"--report-only) to run them again, or give another --out")
    keys = [r["key"] for r in runs] if runs is not None else sorted(p.name[:-5] for p in rdir.glob("*.json"))
    rows, jobs = [], []
    for k in keys:
        p = rdir / f"{k}.json"
        if not p.exists():
            continue
        rows.append(json.loads(p.read_text())["row"])
        jp = rdir / f"{k}.jobs.csv"
        if jp.exists():
            jobs.append(pd.read_csv(jp))
    ep = pd.DataFrame(rows)
    jb = pd.concat(jobs, ignore_index=True) if jobs else pd.DataFrame()
    return ep, jb


def aggregate(out_dir: str | os.PathLike, runs: list[dict] | None = None, reference: str | None = None,
              title: str = "Evaluation sweep", notes: str = "", figures: bool = True, bootstrap: int = 0,
              meta: dict | None = None, extra_figures: Callable | None = None) -> dict:
    """Write episodes.csv, jobs.csv, summary_long.csv, summary.csv/.md, figures and report.md; an experiment's
    own figures too (``extra_figures(episodes, fig_dir, order)`` -> their paths)."""
    from clustergym.eval import plots, report, stats

    out_dir = Path(out_dir)
    ep, jb = collect(out_dir, runs)
    if ep.empty:
        raise RuntimeError(f"no finished runs under {out_dir / 'runs'}")
    order = list(dict.fromkeys(r["policy"] for r in runs)) if runs else list(dict.fromkeys(ep["policy"]))
    atomic_write_csv(ep, out_dir / "episodes.csv")
    if not jb.empty:
        atomic_write_csv(jb, out_dir / "jobs.csv")
        atomic_write_parquet(jb, out_dir / "jobs.parquet")
    atomic_write_parquet(ep, out_dir / "episodes.parquet")
    if reference is not None and reference not in set(ep["policy"]):
        print(f"warning: reference policy {reference!r} not in the sweep; no relative differences", file=sys.stderr)
        reference = None
    long = stats.summarize(ep, reference=reference, bootstrap=bootstrap)
    atomic_write_csv(long, out_dir / "summary_long.csv")
    wide_metrics = [m for m in stats.TABLE_METRICS if m in ep.columns]
    wide = stats.wide_table(long, wide_metrics)
    atomic_write_csv(wide, out_dir / "summary.csv")
    atomic_write_text(out_dir / "summary.md", stats.to_markdown(wide))
    iqm = None
    if reference is not None and bootstrap:
        iqm = stats.paired_iqm(ep, reference, [m for m in report.REL_METRICS if m in ep.columns], n_boot=bootstrap)
        atomic_write_csv(iqm, out_dir / "summary_iqm.csv")
    load_long = None
    if "load" in ep.columns and ep.groupby("scenario_base")["load"].nunique().max() > 1:
        load_long = stats.summarize(ep, group=("scenario_base", "load", "policy"), reference=reference)
        atomic_write_csv(load_long, out_dir / "summary_by_load.csv")
    figs = (plots.all_figures(ep, jb, long, load_long, out_dir / "figures", order=order, reference=reference)
            if figures else [])
    if figures and extra_figures is not None:
        figs += extra_figures(ep, out_dir / "figures", order)
    rep = report.write_report(out_dir, title=title, episodes=ep, long=long, figures=figs, reference=reference,
                              notes=notes, meta=meta or {}, order=order, iqm=iqm)
    return {"episodes": ep, "jobs": jb, "long": long, "load_long": load_long, "iqm": iqm, "figures": figs,
            "report": rep}


# --------------------------------------------------------------------------- CLI

DEFAULT_SCENARIO = "clustergym/GPUCluster-v1"
DEFAULT_POLICIES = ("mlf-h", "fifo")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python eval/compare.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--experiment", help="a named reproduction of eval/experiments*.py (see --list-experiments)")
    ap.add_argument("--list-experiments", action="store_true")
    ap.add_argument("--protocol", help="a benchmark protocol of eval/protocols.py: fixed scenarios, split and seeds")
    ap.add_argument("--list-protocols", action="store_true")
    ap.add_argument("--describe-protocol", metavar="NAME", help="print a protocol's scenarios, split and seeds")
    ap.add_argument("--policies", nargs="+", default=None, metavar="SPEC",
                    help="policy specs (default mlf-h fifo); with --experiment: the labels of its policies to run")
    ap.add_argument("--scenarios", nargs="+", default=None, metavar="SPEC",
                    help=f"scenario specs (default {DEFAULT_SCENARIO})")
    ap.add_argument("--seeds", nargs="+", type=int, default=None,
                    help="episode seeds (default 0 1 2; experiments: their own default)")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE", help="env overrides for every scenario")
    ap.add_argument("--loads", nargs="*", type=float, default=None, help="load sweep factors x, e.g. 0.25 0.5 1 2 3")
    ap.add_argument("--load-mode", choices=("jobs", "generator", "arrival"), default="jobs")
    ap.add_argument("--reference", default=None, help="policy label for relative differences (y - z) / z")
    ap.add_argument("--out", default=None,
                    help="output folder (default results/<experiment>, results/protocol-<name> or results/sweep)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes (0 = in-process)")
    ap.add_argument("--mp-context", default="spawn", choices=("spawn", "forkserver", "fork"))
    ap.add_argument("--backend", default="local", choices=("local", "ray"),
                    help="local worker processes, or tasks on a Ray cluster (eval/ray_backend.py; the rllib extra)")
    ap.add_argument("--address", default=None,
                    help="--backend ray: the cluster ('auto' = started on this machine, or host:port of its head); "
                         "default: a Ray instance in this process with --workers CPUs")
    ap.add_argument("--max-steps", type=int, default=None, help="env max_steps (truncation) for every run")
    ap.add_argument("--bootstrap", type=int, default=2000,
                    help="resamples of the bootstrap intervals of interquartile means (0 = none)")
    ap.add_argument("--quick", action="store_true", help="experiments: a smoke-test size (1 seed, small windows)")
    ap.add_argument("--report-only", action="store_true", help="re-aggregate the run files already in --out")
    ap.add_argument("--no-figures", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--timeline", action="store_true",
                    help="draw each env run executed now as timelines/<run>.png (tasks on GPUs, queue, "
                         "utilisation, overloads over time; core runs have none)")
    return ap


def _sigterm(signum, frame):
    raise KeyboardInterrupt


def plan(a: argparse.Namespace) -> dict:
    """The sweep the parsed command line asks for: out, runs, reference, title, notes, and the experiment or
    protocol."""
    from clustergym.eval import experiments

    if a.address is not None and a.backend != "ray":
        raise SweepSpecError(f"--address {a.address} is a Ray cluster's: add --backend ray")
    if a.protocol:
        return _protocol_plan(a)
    if a.experiment:
        out = Path(a.out or f"results/{a.experiment}" + ("-quick" if a.quick else ""))
        exp = experiments.get(a.experiment)(out, quick=a.quick, seeds=a.seeds)
        return {"out": out, "runs": _only_policies(exp["runs"], a.policies, a.experiment),
                "reference": exp.get("reference"), "title": exp["title"],
                "notes": exp.get("notes", ""), "experiment": exp, "protocol": None}
    policies = _parse_policies(a.policies or DEFAULT_POLICIES)
    scenarios = expand_loads([parse_scenario(s) for s in a.scenarios or [DEFAULT_SCENARIO]], a.loads, a.load_mode)
    common: dict = {}
    for kv in a.set:
        common = deep_merge(common, parse_kv(kv))
    runs = make_runs(policies, scenarios, a.seeds if a.seeds is not None else [0, 1, 2], common, a.max_steps)
    return {"out": Path(a.out or "results/sweep"), "runs": runs, "reference": a.reference,
            "title": "Evaluation sweep", "notes": "", "experiment": None, "protocol": None}


def _only_policies(runs: list[dict], labels: Sequence[str] | None, experiment: str) -> list[dict]:
    """An experiment's runs of the policies labelled ``labels`` (all of them for None); an unknown label is a
    SweepSpecError."""
    if not labels:
        return runs
    known = list(dict.fromkeys(r["policy"] for r in runs))
    unknown = [x for x in labels if x not in known]
    if unknown:
        raise SweepSpecError(f"--policies {unknown}: not policies of experiment {experiment!r} (it has {known})")
    return [r for r in runs if r["policy"] in set(labels)]


def _parse_policies(specs: Sequence[str]) -> list[dict]:
    policies = [parse_policy(p) for p in specs]
    labels = [p["label"] for p in policies]
    if len(set(labels)) != len(labels):
        raise SweepSpecError(f"duplicate policy labels {labels}: give labels as label=spec")
    return policies


def _protocol_plan(a: argparse.Namespace) -> dict:
    """The runs of ``--protocol``: its scenarios, split and seeds, the given policies."""
    from clustergym.eval import protocols

    fixed = {"--experiment": a.experiment, "--scenarios": a.scenarios, "--set": a.set, "--seeds": a.seeds,
             "--loads": a.loads, "--max-steps": a.max_steps}
    given = [flag for flag, v in fixed.items() if v]
    if given:
        raise SweepSpecError(f"--protocol {a.protocol} fixes the scenarios, split and seeds: drop {', '.join(given)}"
                             f" (see --describe-protocol {a.protocol})")
    proto = protocols.get(a.protocol)
    policies = _parse_policies(a.policies or DEFAULT_POLICIES)
    reference = a.reference or (proto.reference if proto.reference in {p["label"] for p in policies} else None)
    return {"out": Path(a.out or f"results/protocol-{proto.name}"), "runs": proto.runs(policies),
            "reference": reference, "title": f"Protocol {proto.name}", "notes": proto.summary, "experiment": None,
            "protocol": proto}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; SIGTERM stops it like Ctrl-C while it runs (the previous handler is restored)."""
    import signal

    previous = signal.signal(signal.SIGTERM, _sigterm)
    try:
        return _main(build_parser().parse_args(argv), argv)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _main(a: argparse.Namespace, argv: Sequence[str] | None) -> int:
    if a.list_experiments or a.list_protocols or a.describe_protocol:
        return _listing(a)
    t0 = time.perf_counter()
    try:
        p = plan(a)
        out, runs = p["out"], p["runs"]
        print(f"{len(runs)} runs -> {out}; {split_note(runs)}", file=sys.stderr)
        res = {"executed": [], "skipped": [], "failed": {}, "wall_s": 0.0}
        if not a.report_only:
            check_scenarios(runs)
            check_policies(runs)
            for r in runs if a.timeline else ():
                r["timeline"] = True
            with _backend_session(a):  # Ray: RayAddressError before any run starts
                res = sweep(runs, out, workers=a.workers, mp_context=a.mp_context, progress=not a.no_progress,
                            backend=a.backend)
            print(f"executed {len(res['executed'])}, skipped {len(res['skipped'])} (already done), "
                  f"failed {len(res['failed'])} in {res['wall_s']:.1f} s", file=sys.stderr)
        meta = {"command": "python eval/compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
                "runs": len(runs), "executed": len(res["executed"]), "sweep_wall_s": round(res["wall_s"], 1),
                "workers": a.workers}
        agg = aggregate(out, runs, reference=p["reference"], title=p["title"], notes=p["notes"],
                        figures=not a.no_figures, bootstrap=a.bootstrap, meta=meta,
                        extra_figures=(p["experiment"] or {}).get("figures"))
    except (SweepSpecError, StaleRunsError, ConnectionError) as e:  # ConnectionError: ray_backend.RayAddressError
        print(f"error: {e}", file=sys.stderr)
        return 2
    if p["experiment"] is not None and p["experiment"].get("claims"):
        from clustergym.eval import report

        report.write_claims(out, p["experiment"]["claims"](agg))
    written = "report.md, summary.md, summary_long.csv, episodes.csv, " + ("" if a.no_figures else "figures/, ") + "runs/"
    written += ", timelines/" if a.timeline and not a.report_only else ""
    if p["protocol"] is not None:
        from clustergym.eval import protocols

        # a run's json is the last file it writes, so the runs without one are those that failed and those never
        # run (e.g. --report-only)
        missing = [r["key"] for r in runs if not saved_identity(out, r)[0]]
        protocols.write_results(out, p["protocol"], runs, agg["long"], meta["command"], failed=missing,
                                episodes=agg["episodes"])
        written = "protocol.json, protocol.md, " + written
    print(f"results in {out} ({time.perf_counter() - t0:.1f} s): {written}", file=sys.stderr)
    return 1 if res["failed"] else 0


def _backend_session(a: argparse.Namespace):
    """The Ray connection of ``--backend ray`` for the sweep (a local instance with ``--workers`` CPUs
    without ``--address``); nothing for the local backend."""
    if a.backend != "ray":
        return contextlib.nullcontext()
    from clustergym.eval.ray_backend import connected

    return connected(a.address, num_cpus=max(1, a.workers))


def split_note(runs: Sequence[dict]) -> str:
    """Which part of the traces the runs play, for the console."""
    if all("runner" in r for r in runs):
        return "core level (the simulator without the env, on the experiment's own workloads)"
    splits = sorted({str(r["env_kwargs"].get("split")) for r in runs if "runner" not in r})
    if splits == ["test"]:
        return "split=test (held-out windows)"
    return f"split={'/'.join(splits)}" + (" (training windows: not held out)" if "train" in splits else "")


def _listing(a: argparse.Namespace) -> int:
    """--list-experiments, --list-protocols, --describe-protocol."""
    from clustergym.eval import experiments, protocols

    if a.list_experiments:
        for name, fn in experiments.EXPERIMENTS.items():
            print(f"{name:16s} {(fn.__doc__ or '').strip().splitlines()[0]}")
    if a.list_protocols:
        for name, proto in protocols.PROTOCOLS.items():
            print(f"{name:16s} {proto.summary}")
    if a.describe_protocol:
        try:
            print(protocols.describe(protocols.get(a.describe_protocol)))
        except SweepSpecError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
