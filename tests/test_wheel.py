"""The wheel of ``pip wheel .``: what it holds (fast) and that it works installed outside the repository (slow).

The wheel is built from a copy of the repository (so the build leaves no ``build/`` or ``*.egg-info`` in the
checkout) without build isolation (setuptools comes from this venv, nothing is downloaded).
"""
from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# repository folder -> its place in the wheel (pyproject.toml [tool.setuptools.package-dir])
DATA_FOLDERS = {"traces": "clustergym/traces", "envs/data": "clustergym/data"}
CODE_FOLDERS = {"envs": "clustergym", "agents": "clustergym/agents", "baselines": "clustergym/baselines",
                "eval": "clustergym/eval", "train": "clustergym/train", "traces": "clustergym/traces"}
NOT_COPIED = (".git", ".venv*", "runs", "results", "build", "*.egg-info", "__pycache__", ".pytest_cache",
              ".hypothesis")


def repo_files(folder: str, suffix: str | None = None) -> set[str]:
    """Files under ``folder`` of the repository (relative to it), caches left out."""
    base = ROOT / folder
    return {p.relative_to(base).as_posix() for p in base.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and (suffix is None or p.suffix == suffix)}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(*NOT_COPIED))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                    "--quiet", "-w", str(tmp / "dist"), str(src)], check=True)
    (whl,) = (tmp / "dist").glob("clustergym-*.whl")
    return whl


def test_wheel_holds_the_package_its_data_and_licences_and_nothing_generic(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    top = {n.split("/")[0] for n in names}
    (dist_info,) = [t for t in top if t.endswith(".dist-info")]
    assert top == {"clustergym", dist_info}  # no `eval`, `baselines`, `traces`, `tests` or `examples`
    for folder, dest in DATA_FOLDERS.items():  # every bundled data file, licences and attribution included
        missing = {f for f in repo_files(folder) if not f.endswith(".py")} - {
            n[len(dest) + 1:] for n in names if n.startswith(dest + "/")}
        assert not missing, (folder, missing)
    for folder, dest in CODE_FOLDERS.items():  # every module, envs/core's as clustergym/core/
        assert {f"{dest}/{f}" for f in repo_files(folder, ".py")} - names == set(), folder
    for f in ("LICENSE", "NOTICE"):
        assert f"{dist_info}/licenses/{f}" in names, f
    assert "clustergym/traces/LICENSE-philly-CC-BY-4.0" in names and "clustergym/traces/philly.csv.gz" in names


def _fresh_venv(tmp: Path) -> Path:
    """A venv outside the repository that sees this venv's installed dependencies (a ``.pth`` line per
    site-packages folder; ``.pth`` files inside those folders, such as the editable install's finder, are not
    run) but not the editable clustergym; returns its python."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts" if os.name == "nt" else "bin") / "python"
    target = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                            capture_output=True, text=True, check=True).stdout.strip()
    Path(target, "dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return py


@pytest.mark.slow
def test_installed_wheel_runs_every_scenario_outside_the_repository(wheel, tmp_path):
    # 300 agent steps of each scenario: whole episodes of MLFS80-x2/x3 take minutes each and some windows run to
    # the 30-day horizon (docs/workloads.md); what the test checks is that the installed package finds its data
    py = _fresh_venv(tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index",
                    "--quiet", str(wheel)], check=True)
    code = (
        "import importlib.metadata, pathlib, sys\n"
        "import clustergym\n"
        "from clustergym.core.trace_schema import traces_dir\n"
        "from clustergym.eval.rollout import evaluate\n"
        "from clustergym.scenarios import SCENARIOS\n"
        "home = pathlib.Path(clustergym.__file__).parent\n"
        f"assert home.is_relative_to({str(tmp_path)!r}), home\n"
        "assert traces_dir() == home / 'traces', traces_dir()\n"
        "assert importlib.metadata.version('clustergym') == clustergym_version, importlib.metadata.version\n"
        "for env_id in SCENARIOS:\n"
        "    (rec,) = evaluate('fifo', env_id, {'split': 'test'}, [0], max_steps=300)\n"
        "    assert rec['agent_steps'] > 0 and (rec['terminated'] or rec['truncated']), (env_id, rec)\n"
        "    print(env_id, rec['agent_steps'])\n"
    ).replace("clustergym_version", repr(wheel.name.split("-")[1]))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CLUSTERGYM_TRACES")}
    out = subprocess.run([str(py), "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    from clustergym.scenarios import SCENARIOS

    assert [line.split()[0] for line in out.stdout.splitlines()] == list(SCENARIOS)
