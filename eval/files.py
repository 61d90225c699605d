"""Output files of sweeps and training runs: written whole or not at all, under safe names.

Every writer goes through :func:`atomic_write`: the content goes to a temporary file in the target's folder,
which is then moved over the target with ``os.replace`` (atomic on POSIX and Windows). A process killed
mid-write leaves the previous file intact plus a ``.<name>.*.tmp`` file that :func:`remove_stale_temps`
clears. The data is not fsync'ed: this guards against killed processes, not against power loss.
"""
from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path
from typing import IO, Callable


def atomic_write(path: str | os.PathLike, write: Callable[[IO], None], binary: bool = False) -> Path:
    """Call ``write(f)`` on a temporary file next to ``path``, then move it to ``path``; returns ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"newline": ""})) as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write(path, lambda f: f.write(text))


def atomic_write_csv(df, path: str | os.PathLike) -> Path:
    """A pandas DataFrame as CSV without its index."""
    return atomic_write_text(path, df.to_csv(index=False))


def write_paired_report(out: str | os.PathLike, paired, name: str, report: str) -> None:
    """A diagnostic's outputs in folder ``out``: the paired rows (a DataFrame) as ``paired.csv`` and the Markdown
    ``report`` as ``name``, both atomically; prints the report."""
    atomic_write_csv(paired, Path(out) / "paired.csv")
    atomic_write_text(Path(out) / name, report)
    print(report)


def atomic_write_parquet(df, path: str | os.PathLike) -> bool:
    """Parquet if pyarrow is importable (optional); returns whether it was written."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    atomic_write(path, lambda f: df.to_parquet(f, index=False), binary=True)
    return True


def remove_stale_temps(folder: str | os.PathLike) -> int:
    """Delete the temporary files that killed writers left in ``folder``; returns how many."""
    stale = list(Path(folder).glob(".*.tmp"))
    for p in stale:
        p.unlink(missing_ok=True)
    return len(stale)


def safe_name(s: str) -> str:
    """``s`` with every run of characters outside ``[A-Za-z0-9_.+-]`` replaced by one ``-`` (a file name)."""
    return re.sub(r"[^A-Za-z0-9_.+-]+", "-", s).strip("-")


def report_results(rows: list, out: str | os.PathLike | None, command: str) -> Path | None:
    """The end of a benchmark: write ``rows`` (JSON-serialisable) to ``out`` as JSON when given, and say on stderr
    where the results are (that file, or the lines printed above on stdout)."""
    import json
    import sys

    if out is None:
        print(f"{command}: results printed above (stdout); --out FILE also writes them as JSON", file=sys.stderr)
        return None
    path = atomic_write_text(out, json.dumps(rows, indent=1, default=str) + "\n")
    print(f"{command}: results in {path}", file=sys.stderr)
    return path
