"""Quiet, useful output: no solver log unless asked, each warning of a sweep once."""
import subprocess
import sys
import warnings

from clustergym.eval import compare, specs

SOLVES = """
import numpy as np
from clustergym.baselines.gavel import solve_max_min
args = (np.array([[2.0, 1.0], [1.0, 1.0]]), np.array([1.0, 1.0]), np.array([1.0, 1.0]))
print("quiet", flush=True)
print(solve_max_min(*args)[1], flush=True)
print("verbose", flush=True)
print(solve_max_min(*args, verbose=True)[1], flush=True)
"""


def test_gavel_lp_prints_nothing_unless_verbose():
    # a fresh process: HiGHS prints its banner when a process makes its first solver
    out = subprocess.run([sys.executable, "-c", SOLVES], capture_output=True, text=True, timeout=120).stdout
    quiet, verbose = out.split("verbose\n")
    assert quiet == "quiet\nOptimal Solution Found\n"  # no banner, no log
    assert "Model status" in verbose and verbose.endswith("\nOptimal Solution Found\n")


def test_each_warning_of_a_sweep_is_shown_once_with_its_count(tmp_path, monkeypatch, capsys):
    runs = specs.make_runs([specs.parse_policy("fifo")],
                           specs.expand_loads([specs.parse_scenario("clustergym/GPUCluster-v1")], None), [0, 1, 2])

    def noisy(run, out_dir):
        warnings.warn("loading a zip can execute code", UserWarning)
        warnings.warn("loading a zip can execute code", UserWarning)  # twice in one run: one run counted
        if run["seed"] == 0:
            warnings.warn("odd window", RuntimeWarning)
        warnings.warn("hidden by Python's defaults", DeprecationWarning)
        return {"seed": run["seed"]}
    monkeypatch.setattr(compare, "run_one", noisy)
    res = compare.sweep(runs, tmp_path, workers=0, progress=False)
    assert res["warnings"] == {("UserWarning", "loading a zip can execute code"): 3,
                               ("RuntimeWarning", "odd window"): 1}
    err = capsys.readouterr().err.splitlines()
    assert err.count("warning (3 of 3 runs): UserWarning: loading a zip can execute code") == 1
    assert err.count("warning (1 of 3 runs): RuntimeWarning: odd window") == 1
    assert not any("Deprecation" in line for line in err)


def test_the_simulator_benchmark_shows_progress_and_says_where_its_results_are(tmp_path, capsys):
    import json

    from clustergym.eval import bench

    out = tmp_path / "bench.json"
    res = bench.main(["--jobs", "40", "--out", str(out)])
    err = capsys.readouterr().err
    assert "jobs ended" in err  # the progress bar, on stderr
    assert err.rstrip().endswith(f"bench: results in {out}")
    assert json.loads(out.read_text()) == [json.loads(json.dumps(res))] and res["jobs"] == 40
    bench.main(["--jobs", "40", "--json"])
    err = capsys.readouterr().err
    assert "jobs ended" not in err and err.rstrip().endswith("results printed above (stdout); --out FILE also "
                                                              "writes them as JSON")
