import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402
import torch  # noqa: E402

# One torch thread, as training and evaluation use: small batches gain nothing from a second thread, and on a
# machine whose other core is busy two threads spin against each other (a 12-step BC test took 48 s instead
# of 2.6 s with a training run on the other core).
torch.set_num_threads(1)


@pytest.fixture(autouse=True, scope="session")
def _sb3_logs_under_pytest_tmp(tmp_path_factory):
    """SB3 makes a log folder in the system temp dir (``/tmp/SB3-<timestamp>``) each time a model learns without
    a logger of its own; point it at pytest's temp dir, which pytest prunes, instead of leaving dozens per run."""
    patch = pytest.MonkeyPatch()
    patch.setenv("SB3_LOGDIR", str(tmp_path_factory.mktemp("sb3-logs")))
    yield
    patch.undo()
