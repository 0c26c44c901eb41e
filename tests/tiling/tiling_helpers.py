"""Helpers for coarse-tiling tests: compile with hints or explicit groups, verify spans.

A plain module (tests must not import conftest).  ``explicit_groups`` installs a
groups function for one compile: the pre-scheduling seam then tiles exactly those
groups (by op position) instead of the hint-derived ones.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backend"))

import torch  # noqa: E402
from spyre_helpers import Compiled, run_spyre  # noqa: E402,F401

from spyre_rules import config  # noqa: E402
from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES  # noqa: E402
from spyre_rules.passes.tiling_propagation import tile_groups  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec, element_bytes, iter_op_specs  # noqa: E402
from spyre_rules.spans import verify_spans  # noqa: E402


@contextlib.contextmanager
def explicit_groups(*groups):
    """Tile ``groups`` = ``([op positions], levels)`` in every graph compiled inside."""

    def pass_(graph):
        ops = list(graph.operations)
        resolved = [([ops[i] for i in positions], *rest) for positions, *rest in groups]
        tile_groups(graph, resolved)

    PRE_SCHEDULING_PASSES.append(pass_)
    try:
        yield
    finally:
        PRE_SCHEDULING_PASSES.remove(pass_)


def loop_counts(items):
    """Nesting of a kernel's program: ``[count, [inner...], ...]`` as plain ints."""
    out = []
    for item in items:
        if isinstance(item, LoopSpec):
            out.append((int(item.count), loop_counts(item.body)))
        else:
            out.append(item.op)
    return out


def verify_program(compiled: Compiled) -> list[tuple[str, str, int]]:
    """verify_spans over every TensorArg of every OpSpec; returns (op, tensor, span bytes)."""
    reports = []
    for spec in compiled.op_specs():
        ranges = {s: int(r) for s, (r, _) in spec.iteration_space.items()}
        for arg in spec.args:
            report = verify_spans(arg.device_size, arg.device_coordinates, ranges,
                                  element_bytes(arg.device_dtype))
            assert report.in_bounds, (spec.op, arg.name, report.out_of_range_dims)
            assert report.max_dim_span_bytes <= config.max_span_bytes, (spec.op, arg.name)
            reports.append((spec.op, arg.name, report.max_dim_span_bytes))
    return reports
