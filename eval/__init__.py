"""Evaluation (docs/eval.md): one episode loop for every policy, statistics, and the sweep runner.

- :mod:`clustergym.eval.rollout`: the episode loop (``predictor``, ``rollout``, ``evaluate``).
- :mod:`clustergym.eval.stats`: t-intervals, the table metrics and their directions, the tables.
- :mod:`clustergym.eval.specs`: policy and scenario specs, load sweeps, the run list.
- :mod:`clustergym.eval.compare`: the sweep runner and its CLI (``python eval/compare.py``).
- :mod:`clustergym.eval.report`, :mod:`clustergym.eval.plots`, :mod:`clustergym.eval.experiments`: a sweep's
  report, figures and the named paper reproductions.
- :mod:`clustergym.eval.files`: atomic file writes and safe file names.
- benchmarks and tables run on demand: ``bench``, ``bench_env``, ``bench_policies``, ``sanity_table``,
  ``trajectory_hash``, ``extract_speeds``.
"""

# Topic modules of named reproductions register themselves with eval/experiments.py on import. They are imported
# here, not at the bottom of experiments.py, so that no two modules import each other (tests/test_import_graph.py):
# importing any clustergym.eval module runs this first, so experiments.get() always sees them.
from . import experiments_unisched  # noqa: E402,F401  (registers its experiments)
