"""Torch's intra-op threads for training. On more than one thread torch's default kernels let two runs of one
seed part in the last bits of the weights (docs/training.md, "Throughput"), so several threads always come with
torch's deterministic algorithms, which keep the summation order fixed. Across CPUs the vector unit torch
dispatches to (AVX2, AVX-512) changes the kernels' sums too: :func:`numeric_platform` names it for the run's
record."""
from __future__ import annotations

import platform
from contextlib import contextmanager
from typing import Iterator

import torch


@contextmanager
def training_threads(n: int) -> Iterator[None]:
    """Run the block on ``n`` torch threads, with deterministic algorithms when ``n`` > 1; both restored after."""
    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(n)
    torch.use_deterministic_algorithms(deterministic or n > 1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        torch.use_deterministic_algorithms(deterministic)


def numeric_platform() -> dict[str, str]:
    """What decides the learner's floating-point results besides the code and the seed: torch's version and the
    CPU capability its kernels dispatch to (``ATEN_CPU_CAPABILITY`` overrides it), and the CPU architecture.
    One seed trains other weights where these differ (docs/training.md, "Runs on another CPU")."""
    return {"torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "machine": platform.machine()}
