import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import torch  # noqa: E402

# One torch thread, as training and evaluation use: small batches gain nothing from a second thread, and on a
# machine whose other core is busy two threads spin against each other (a 12-step BC test took 48 s instead
# of 2.6 s with a training run on the other core).
torch.set_num_threads(1)
