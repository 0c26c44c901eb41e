"""capture_operations: real Inductor ops, after layouts and restickify, nothing run.

Layout numbers are the worked examples of docs/layout_model.md §1.5 / §6.2 / §6.3.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch._inductor import ir

import spyre_rules
from spyre_rules.engine.records import NO_PLAN
from spyre_rules.executor.runtime import recent_kernels
from spyre_rules.ir.op_identity import stamped_kind
from spyre_rules.layout import FixedTiledLayout


def kinds(ops):
    out = []
    for op in ops:
        assert isinstance(op, ir.ComputedBuffer)
        assert isinstance(op.layout, FixedTiledLayout)
        data = op.data
        if stamped_kind(op):
            out.append(stamped_kind(op))
        elif isinstance(data, ir.Reduction):
            out.append(data.reduction_type)
        else:
            out.append("pointwise")
    return out


def device_sizes(ops):
    return [list(op.layout.device_layout.device_size) for op in ops]


def test_pointwise_chain_one_op_per_aten_op():
    x = torch.randn(4, 150, dtype=torch.float16)
    ops = spyre_rules.capture_operations(lambda x, y: ((x + y).exp() * 2).relu(), x, x)
    assert kinds(ops) == ["pointwise"] * 4
    assert device_sizes(ops) == [[3, 4, 64]] * 4  # 150 -> 3 sticks of 64


def test_lm_head_linear_restickifies_weight():
    x = torch.randn(2, 64, dtype=torch.float16)
    w = torch.randn(1024, 64, dtype=torch.float16)
    ops = spyre_rules.capture_operations(lambda x, w: F.linear(x, w), x, w)
    assert kinds(ops) == ["ReStickifyOpHBM", "batchmatmul"]
    restick, bmm = ops
    assert list(restick.layout.size) == [1024, 64]  # host shape kept
    assert restick.layout.device_layout.device_size == (16, 64, 64)
    assert restick.layout.device_layout.stride_map == (4096, 1, 64)
    assert list(bmm.data.ranges) == [2, 1024] and list(bmm.data.reduction_ranges) == [64]
    assert bmm.layout.device_layout.device_size == (16, 2, 64)
    with ops.graph_context():
        reads = {dep.name for dep in bmm.get_read_writes().reads}
    assert restick.get_name() in reads


def test_sum_dim0_layouts():
    x = torch.randn(2, 20, 16, 64, dtype=torch.float16)
    ops = spyre_rules.capture_operations(lambda x: x.sum(dim=0), x)
    assert kinds(ops) == ["sum"]
    (op,) = ops
    assert op.layout.device_layout.device_size == (16, 1, 20, 64)
    assert op.layout.device_layout.stride_map == (64, 64, 1024, 1)
    graph_input = ops.graphs[0].graph_inputs["arg0_1"].get_layout()
    assert graph_input.device_layout.device_size == (20, 16, 1, 2, 64)


def test_softmax_ops_and_keepdim_stick_choice():
    x = torch.randn(5, 37)
    ops = spyre_rules.capture_operations(lambda x: torch.softmax(x, -1), x)
    assert kinds(ops) == ["max", "pointwise", "pointwise", "sum", "pointwise"]
    # [5, 1] keepdim outputs are stuck on the row dim, not on the size-1 dim.
    assert ops[0].layout.device_layout.device_size == (1, 1, 32)
    assert ops[0].layout.device_layout.stride_map == (32, -1, 1)


def test_bmm_with_transposed_operand():
    a, b = torch.randn(2, 8, 5), torch.randn(2, 8, 6)
    ops = spyre_rules.capture_operations(lambda a, b: a.transpose(-1, -2) @ b, a, b)
    assert kinds(ops) == ["ReStickifyOpHBM", "batchmatmul"]
    assert list(ops[1].data.ranges) == [2, 5, 6]


def test_plan_records_are_placeholders_and_memory_is_mapped():
    x = torch.randn(4, 37)
    ops = spyre_rules.capture_operations(lambda x: x.sum(-1) + 1, x)
    state = ops.state()
    assert set(state.plan) == {op.get_name() for op in ops}
    assert all(r["decision"] == NO_PLAN and r["rule_trace"] == [] for r in state.plan.values())
    segments = list(state.memory.segments.values())
    assert all(s.address % 128 == 0 for s in segments)
    assert all(a.end <= b.address for a, b in zip(segments, segments[1:]))
    for op in ops:
        seg = state.memory.segments[op.get_name()]
        assert op.layout.allocation == {"hbm": seg.address}
        assert seg.size_bytes == op.layout.device_layout.size_in_bytes


def test_capture_runs_no_kernel_and_refuses_unsupported():
    before = len(recent_kernels())
    spyre_rules.capture_operations(lambda x: x * 2, torch.randn(3, 4))
    assert len(recent_kernels()) == before
    with pytest.raises(spyre_rules.Unsupported, match="cummax"):
        spyre_rules.capture_operations(lambda x: torch.cummax(x, 0).values, torch.randn(3, 4))


def _add_mul(x, y):
    return (x + y) * 2


def test_planning_api_on_captured_ops_as_they_are():
    from spyre_rules import config, plan_span_overflow_tile, span_overflow_groups
    from spyre_rules.engine import explain_op

    x = torch.randn(1, 20, 16, 64, dtype=torch.float16)
    ops = spyre_rules.capture_operations(_add_mul, x, x)
    with config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False):
        plan = plan_span_overflow_tile(ops[0])  # no graph_context: the op knows its graph
        with ops.graph_context(0):
            assert plan_span_overflow_tile(ops[0]) == plan
        assert [(lv.selected_host_dim, lv.split_count) for lv in plan.levels] == [(1, 5)]
        decision = explain_op(ops[1])
        assert (decision.decision, decision.reason) == ("plan", "output span overflow")
        # a plain list (a slice of the result has no .graphs) works as well
        groups = span_overflow_groups(list(ops)[1:])
        assert [[op.get_name() for op in g] for g, _ in groups] == [[ops[1].get_name()]]
        assert [[op.get_name() for op in g] for g, _ in span_overflow_groups(ops)] == [
            [ops[0].get_name(), ops[1].get_name()]]


def test_capture_again_with_new_shapes_traces_static_shapes():
    first = spyre_rules.capture_operations(_add_mul, torch.randn(4, 64), torch.randn(4, 64))
    second = spyre_rules.capture_operations(_add_mul, torch.randn(8, 128), torch.randn(8, 128))
    third = spyre_rules.capture_operations(_add_mul, torch.randn(3, 5, 32), torch.randn(3, 5, 32))
    assert [[int(s) for s in op.layout.size] for op in first] == [[4, 64]] * 2
    assert [[int(s) for s in op.layout.size] for op in second] == [[8, 128]] * 2
    assert [[int(s) for s in op.layout.size] for op in third] == [[3, 5, 32]] * 2
