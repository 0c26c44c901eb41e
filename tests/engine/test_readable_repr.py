"""Groups, plans and decisions print readably anywhere, also outside a graph context:
an IR op's own repr runs its inner_fn, and a restickify's loads fail under Inductor's
NullHandler (``'NullHandler' object has no attribute 'get_buffer'``)."""

from __future__ import annotations

import torch

import spyre_rules
from spyre_rules import config
from spyre_rules.engine import plan_graph

from helpers import FP16, capture


def _mm_of_transposed():
    # y.t() is read through a restickify copy (buf2) that the matmul's group holds
    return capture("mm_t", lambda x, y: (x + 1) @ y.t(), torch.randn(64, 256, dtype=FP16),
                   torch.randn(128, 256, dtype=FP16))


def test_groups_print_outside_a_graph_context():
    ops = _mm_of_transposed()
    with config.patch(max_span_bytes=32768, ignore_span_overflow_hints=False):
        groups = spyre_rules.span_overflow_groups(ops)
    assert repr(groups) == (
        "[TileGroup(ops=['buf2', 'buf1'], levels=[GroupLevel(hint_id=10000, split=2, "
        "is_reduction=False), GroupLevel(hint_id=10001, split=2, is_reduction=True)])]")


def test_decisions_and_plans_print_outside_a_graph_context():
    ops = _mm_of_transposed()
    with config.patch(max_span_bytes=32768, ignore_span_overflow_hints=False):
        with ops.graph_context(0):
            decisions = plan_graph(ops)
    text = repr(decisions)  # the traces hold the ops: rendered by name
    assert "ComputedBuffer(" not in text
    planned = {d.op: d for d in decisions}["buf1"]
    assert repr(planned.plan).startswith("SpanOverflowTilePlan(levels=(SpanOverflowTileLevel(")
    step = planned.trace[0]
    assert repr(step) == f"TraceStep({step.text()!r})"
