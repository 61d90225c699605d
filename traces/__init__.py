"""``clustergym.traces``: the bundled job traces as package data (no code).

The repository keeps them in ``traces/`` at its root; ``pyproject.toml`` maps that folder onto this package, so a
wheel carries the traces with their licences and ``clustergym.core.trace_schema.traces_dir`` finds them through
``importlib.resources`` wherever the package is installed. What each file is and where it comes from:
``README.md`` beside this file.
"""
