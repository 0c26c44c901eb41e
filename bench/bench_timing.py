"""The timing loop the bench scripts share: the median wall time of repeated calls."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["median_call_seconds"]


def median_call_seconds(fn: Callable[..., Any], inputs: Sequence[Any], runs: int) -> float:
    """Median seconds of ``runs`` calls ``fn(*inputs)`` (the median ignores a slow outlier)."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn(*inputs)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def interleaved_medians(runners: dict[str, Callable[..., Any]], inputs: Sequence[Any],
                        calls: int) -> dict[str, float]:
    """Median seconds per call of each runner, the runners called in turn ``calls`` times.

    One call of each per round, so a slow spell of a shared machine hits every side
    alike instead of whichever happened to be timing then.
    """
    times: dict[str, list[float]] = {key: [] for key in runners}
    for _ in range(calls):
        for key, fn in runners.items():
            start = time.perf_counter()
            fn(*inputs)
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(t) for key, t in times.items()}


def set_threads(threads: int) -> str:
    """Give both sides the same intra-op thread count; the line every bench prints.

    Eager ops run parallel over torch's worker threads and the executor mostly
    does not: on a loaded machine descheduled workers stall eager, and on an idle
    one they speed it up; either way a ratio over unequal thread counts is not a
    measure of the program.
    """
    import torch

    torch.set_num_threads(threads)
    return f"torch {torch.__version__}, {torch.get_num_threads()} intra-op thread(s) on both sides"
