"""Cost of automatic tiling in the compile pipeline, on the demo models.

For each bundled demo model (spyre_rules/examples/span_overflow.py) at the demo
limit: the whole cold compile (``torch._dynamo.reset()``, first call = trace +
compile + run) with automatic tiling on and off, and the time spent inside the
coarse-tiling pass itself (planner + grouping + tile_groups + scratchpad), as
medians over ``--reps`` interleaved repetitions.

Run: ``python bench/bench_pipeline.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES  # noqa: E402
from spyre_rules.commands.demo import MODELS  # noqa: E402
from spyre_rules.examples import span_overflow  # noqa: E402
from spyre_rules.passes import pipeline  # noqa: E402


def _timed_pass(spent: list[float]):
    def timed(graph):
        start = time.perf_counter()
        try:
            return pipeline.coarse_tiling_pass(graph)
        finally:
            spent.append(time.perf_counter() - start)

    return timed


def first_call(model, inputs, auto: bool, spent: list[float]) -> float:
    torch._dynamo.reset()
    index = PRE_SCHEDULING_PASSES.index(pipeline.coarse_tiling_pass)
    PRE_SCHEDULING_PASSES[index] = _timed_pass(spent)
    try:
        with config.patch(max_span_bytes=span_overflow.DEMO_MAX_SPAN_BYTES, sencores=4,
                          ignore_span_overflow_hints=not auto, fallback="error"), torch.no_grad():
            start = time.perf_counter()
            torch.compile(model, backend="spyre_rules")(*inputs)
            return time.perf_counter() - start
    finally:
        PRE_SCHEDULING_PASSES[index] = pipeline.coarse_tiling_pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    print(f"{'model':16} {'auto':5} {'first call s':>13} {'tiling pass s':>14}")
    for name, factory in MODELS.items():
        model, inputs = getattr(span_overflow, factory)()
        results: dict[bool, tuple[list[float], list[float]]] = {True: ([], []), False: ([], [])}
        for _ in range(args.reps):
            for auto in (True, False):
                spent: list[float] = []
                results[auto][0].append(first_call(model, inputs, auto, spent))
                results[auto][1].append(sum(spent))
        for auto in (True, False):
            calls, passes = results[auto]
            print(f"{name:16} {'on' if auto else 'off':5} {statistics.median(calls):13.3f} "
                  f"{statistics.median(passes):14.4f}")


if __name__ == "__main__":
    main()
