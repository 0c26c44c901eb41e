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
