"""The verifier's veto (engine/veto.py): a plan that the policy accepts but the
independent span verifier refuses is never applied, whatever rules/ says."""

from __future__ import annotations

import pytest
import torch

from spyre_rules import config
from spyre_rules.engine import plan_graph
from spyre_rules.engine.api import graph_scope
from spyre_rules.engine.veto import plan_problems

from helpers import FP16, by_name, capture, span_problems
from test_policy_loading import rules_copy

# A validation section that accepts every combination the search tries.
PERMISSIVE = [("require per_tile_layout: has_output_coords(op, tile)",
               "require anything: has_output_coords(op, tile) or true;\n  require per_tile_layout: has_output_coords(op, tile)")]
DROPPED = ["output_spans_fit", "input_spans_fit", "full_buffer_write_fits", "per_tile_layout"]


def _permissive_copy(tmp_path):
    target = rules_copy(tmp_path, {"planner.rules": PERMISSIVE})
    text = (target / "planner.rules").read_text()
    start = text.index("validation {")
    end = text.index("\n}", start)
    body = "validation {\n  require anything: has_output_coords(op, tile) or true;\n}"
    (target / "planner.rules").write_text(text[:start] + body + text[end + 2:])
    return target


def problems_of(ops, name, splits, limit=8192):
    """``plan_problems`` (or the test helper's ``span_problems``) inside the op's graph."""
    op = by_name(ops, name)
    with graph_scope(ops) as graph_of, graph_of(op):
        return plan_problems(op, splits, limit), span_problems(op, splits, limit)


def _add_small():
    return capture("add_small", lambda a, b: a + b, torch.randn(1, 20, 16, 64, dtype=FP16),
                   torch.randn(1, 20, 16, 64, dtype=FP16))


@pytest.mark.unsafe_plans
def test_permissive_policy_unsafe_plan_is_refused(tmp_path, monkeypatch):
    """x + y on (1, 20, 16, 64) fp16 at 8 KiB: the permissive policy's cheapest
    combination is {1: 2}, whose per-tile buffer spans 20,480 bytes."""
    monkeypatch.setenv("SPYRE_RULES_PATH", str(_permissive_copy(tmp_path)))
    ops = _add_small()
    assert problems_of(ops, "buf0", ((1, 2),))[1]  # the test helper's verifier agrees: unsafe
    with config.patch(max_span_bytes=8192):
        decision = {d.op: d for d in plan_graph(ops)}["buf0"]
    assert decision.decision == "unsupported"
    assert decision.reason == (
        "Cannot auto-tile buf0: the span verifier refuses split {1: 2}, which the `validation` section "
        "(requirements `anything` held) accepted: per-tile output buffer: device dim 0 (d0) spans "
        "20480 bytes > 8192 (and 3 more)")
    veto = [s for s in decision.trace if s.section == "veto"]
    assert [(s.rule, s.outcome) for s in veto] == [("span_verifier", "refuse")]


def test_bundled_plan_passes_the_veto():
    """The bundled policy's plan for the same op, {1: 5}, is span-safe: no problem."""
    ops = _add_small()
    with config.patch(max_span_bytes=8192):
        decision = {d.op: d for d in plan_graph(ops)}["buf0"]
    assert decision.plan.splits == ((1, 5),)
    assert problems_of(ops, "buf0", ((1, 5),)) == ([], [])
    assert problems_of(ops, "buf0", ((1, 2),))[0] == [
        "per-tile output buffer: device dim 0 (d0) spans 20480 bytes > 8192",
        "tile write into the full output buffer: device dim 0 (d0) spans 20480 bytes > 8192",
        "read of arg0_1: device dim 0 (d0) spans 20480 bytes > 8192",
        "read of arg1_1: device dim 0 (d0) spans 20480 bytes > 8192"]


def test_veto_measures_every_tile_of_a_reduction_read():
    """x.sum(dim=0) on (2, 20, 16, 64) split {0: 10}: the per-tile buffer fits but
    every tile's write into the full output buffer spans 40,960 bytes."""
    ops = capture("sum0", lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))
    problems, helper = problems_of(ops, "buf0", ((0, 10),))
    assert helper == ["full-buffer write: device dim 0 (d1) tile () spans 40960 > 8192"]
    assert problems == ["tile write into the full output buffer: device dim 0 (d1) spans 40960 bytes > 8192"]


def _repeat_consumer(a, y):
    c = a + 1
    d = c.repeat(1, 1, 2, 1) * y  # its own plan is {1: 10}; the run's {1: 5} is too coarse for it
    return c, d


def test_group_conformed_split_is_refused_by_the_veto(tmp_path, monkeypatch):
    """A grouping policy that conforms without asking `conforms` puts buf1 in buf0's
    {1: 5} run; every tile of buf1 would then span 16,384 bytes: the veto refuses
    the group before any hint is stamped, naming the grouping rule."""
    from spyre_rules.hints import group_operations
    from spyre_rules import Unsupported
    from helpers import without_hints

    target = rules_copy(tmp_path, {"grouping.rules": [("and conforms(op, run.tiling) and tiles_correspond", "and tiles_correspond")]})
    monkeypatch.setenv("SPYRE_RULES_PATH", str(target))
    ops = capture("repeat_consumer", _repeat_consumer, torch.randn(1, 20, 16, 64, dtype=FP16),
                  torch.randn(1, 20, 32, 64, dtype=FP16))
    with without_hints(ops), config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False):
        with pytest.raises(Unsupported) as info:
            group_operations(ops)
        assert all(getattr(op, "dim_hints", None) in (None, []) for op in ops)
    assert str(info.value) == (
        "Cannot auto-tile buf1: the span verifier refuses split {1: 5}, which grouping rule `to_open_run` "
        "accepted: per-tile output buffer: device dim 0 (d0) spans 16384 bytes > 8192 (and 1 more)")
