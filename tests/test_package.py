"""The installed import name is `clustergym`: every module imports through it, nothing generic at the top level."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_TOP_LEVEL = ("envs", "agents", "baselines", "eval", "train")
SOURCE_DIRS = ("envs", "agents", "baselines", "eval", "train", "tests")


def test_no_source_imports_an_old_top_level_name():
    pattern = re.compile(rf"^\s*(from|import)\s+({'|'.join(OLD_TOP_LEVEL)})(\.|\s|$)", re.M)
    offenders = []
    for d in SOURCE_DIRS:
        for path in (ROOT / d).rglob("*.py"):
            for m in pattern.finditer(path.read_text()):
                offenders.append(f"{path.relative_to(ROOT)}: {m.group(0).strip()}")
    assert not offenders, offenders


def test_every_subpackage_imports_from_outside_the_repository(tmp_path):
    code = ("import sys, clustergym, clustergym.core.engine, clustergym.agents.policies, clustergym.baselines, "
            "clustergym.eval.compare, clustergym.train\n"
            f"bad = [m for m in sys.modules if m.split('.')[0] in {OLD_TOP_LEVEL!r}]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], cwd=tmp_path, check=True)
