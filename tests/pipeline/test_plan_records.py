"""The pipeline pass over captured programs: groups, tiling and plan records."""

from __future__ import annotations

import pytest
import torch

import spyre_rules
from spyre_rules import Unsupported, config
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint
from spyre_rules.ir.loop_stamp import loop_count, loop_group_id, loop_tiled_dims

from pipeline_helpers import AUTO, FP16, auto_refusal, capture_auto, h, records, run_auto
from spyre_rules.program.op_spec import iter_op_specs


def add(a, b):
    return a + b


def sum0(a):
    return a.sum(dim=0)


def test_pass_runs_right_after_the_hint_pass(pipeline_pass):
    from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES
    from spyre_rules.hints import assign_dim_hints

    assert PRE_SCHEDULING_PASSES[:2] == [assign_dim_hints, pipeline_pass.coarse_tiling_pass]
    assert PRE_SCHEDULING_PASSES.count(pipeline_pass.coarse_tiling_pass) == 1


def test_add_is_tiled_five_ways_on_host_dim_1():
    ops = capture_auto(add, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1))
    (op,) = ops
    assert [int(r) for r in op.data.ranges] == [1, 4, 16, 64]
    assert loop_count(op) == [5] and loop_tiled_dims(op) == [[1]]
    record = records(ops)["buf0"]
    assert record["decision"] == "plan"
    assert record["source"] == "automatic"
    assert record["levels"] == [[1, 5]]
    assert record["own_plan"] == [[1, 5]]
    assert record["reason"] == "output span overflow"
    assert record["rule"] == "grouping.new_run"
    assert record["hint_ids"] == [10000]
    assert record["loop"] == {"loop_group_id": [0], "loop_count": [5],
                              "loop_tiled_dims": [[1]], "loop_tiled_reduction_dims": [[]],
                              "propagation": "writes full buffer"}
    rules = [(s["section"], s["rule"], s["outcome"]) for s in record["rule_trace"]]
    assert rules == [
        ("candidates", "output_span", "emit"),
        ("search", "order", "dims"),
        ("legality", "splits", "legal"),
        ("search", "required", "splits"),
        ("validation", "output_spans_fit", "fail"),  # 2 tiles of 10 rows
        ("validation", "output_spans_fit", "fail"),  # 3 remainder tiles of 8 (the last 4)
        ("validation", "output_spans_fit", "fail"),  # 4 tiles of 5
        ("validation", "accepted", "accept"),  # 5 tiles of 4
        ("search", "plan", "plan"),
        ("grouping", "new_run", "start"),
    ]


def test_sum_dim0_gets_the_span_safe_plan():
    """x.sum(dim=0), x (2, 20, 16, 64), 8 KiB.  The reference's ((0, 10)) leaves the write of
    each tile into the full (20, 16, 64) output spanning 40,960 bytes, so the bundled
    policy picks ((0, 10), (1, 6)) (tests/engine/test_seed_examples.py, test 4); the
    reference's plan comes back when that requirement is dropped (test_end_to_end.py)."""
    ops = capture_auto(sum0, h(2, 20, 16, 64))
    (op,) = ops
    record = records(ops)["buf0"]
    assert (record["decision"], record["levels"], record["rule"]) == (
        "plan", [[0, 10], [1, 6]], "grouping.reduction_opens_run")
    assert record["reason"] == "input span overflow for arg0_1; output span overflow"
    assert loop_count(op) == [10, 6] and loop_tiled_dims(op) == [[0], [1]]
    assert [int(r) for r in op.data.ranges] == [2, 3, 64]  # tiles of 3 rows, the last 1


def test_seed_add_at_the_real_limit_plans_two_tiles_without_running_it():
    """(1, 8195, 256, 64) fp16 at 256 MiB: span 268,533,760 B -> plan ((1, 2)), 2 remainder
    tiles of 4224 rows (the last 3971): fewer loop trips than the reference's exact ((1, 5)).
    Only captured (the executor would need ~1 GB of simulated memory)."""
    x = torch.empty(1, 8195, 256, 64, dtype=FP16)
    ops = capture_auto(add, x, x, max_span_bytes=256 * 1024 * 1024)
    record = records(ops)["buf0"]
    assert (record["decision"], record["levels"]) == ("plan", [[1, 2]])
    step = next(s for s in record["rule_trace"] if s["rule"] == "output_span")
    assert step["values"]["span_bytes"] == "268533760"
    assert [int(r) for r in ops[0].data.ranges] == [1, 4224, 256, 64]


def test_capture_alone_neither_plans_nor_tiles():
    """capture_operations returns the ops as the planners see them (the pass is skipped)."""
    torch._dynamo.reset()
    with config.patch(**AUTO):
        ops = spyre_rules.capture_operations(add, h(1, 20, 16, 64), h(1, 20, 16, 64))
    assert records(ops)["buf0"]["decision"] == "no plan"
    assert loop_group_id(ops[0]) is None
    assert getattr(ops[0], "dim_hints", None) is None


def test_off_by_default_records_why():
    ops = capture_auto(add, h(1, 20, 16, 64), h(1, 20, 16, 64), ignore_span_overflow_hints=True)
    record = records(ops)["buf0"]
    assert (record["decision"], record["levels"], record["rule_trace"]) == ("no plan", [], [])
    assert record["reason"] == (
        "automatic span-overflow tiling is off (config.ignore_span_overflow_hints)")
    assert loop_group_id(ops[0]) is None


def test_ignore_wsr_hints_also_turns_it_off():
    ops = capture_auto(add, h(1, 20, 16, 64), h(1, 20, 16, 64), ignore_wsr_hints=True)
    assert records(ops)["buf0"]["reason"] == (
        "automatic span-overflow tiling is off (config.ignore_wsr_hints)")
    assert loop_group_id(ops[0]) is None


def test_coarse_tiling_off_leaves_everything_alone():
    ops = capture_auto(add, h(1, 20, 16, 64), h(1, 20, 16, 64), coarse_tiling=False)
    record = records(ops)["buf0"]
    assert (record["decision"], record["reason"]) == (
        "no plan", "coarse tiling is off (config.coarse_tiling)")
    assert loop_group_id(ops[0]) is None


def test_small_op_has_no_plan_with_the_rule_that_said_so():
    ops = capture_auto(add, h(1, 2, 16, 64), h(1, 2, 16, 64))
    record = records(ops)["buf0"]
    assert (record["decision"], record["levels"], record["source"]) == ("no plan", [], None)
    assert record["rule"] == "candidates.none"
    assert record["reason"] == "no span exceeds the limit"
    assert [s["rule"] for s in record["rule_trace"]] == ["none", "no_plan"]


def _hinted_and_free(x, y):
    with spyre_hint(slices={"H": 4}):
        a = x + 1
    b = y * 2
    return a, b


def test_user_hint_wins_over_the_automatic_plan():
    declare_tensor_dim("H", 20)
    x, y = h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)
    name_tensor_dims(x, [None, "H", None, None])
    ops = capture_auto(_hinted_and_free, x, y)
    plan = records(ops)
    assert (plan["buf0"]["decision"], plan["buf0"]["levels"]) == ("user hint", [[1, 4]])
    assert plan["buf0"]["source"] == "user hint"
    assert (plan["buf1"]["decision"], plan["buf1"]["levels"]) == ("plan", [[1, 5]])
    assert [loop_count(op) for op in ops] == [[4], [5]]
    assert [loop_group_id(op) for op in ops] == [(0,), (1,)]


def lm_head(x, w):
    return torch.nn.functional.linear(x, w)


def test_lm_head_records_show_each_op_tiling_its_own_dim_of_one_loop():
    ops = capture_auto(lm_head, h(2, 64), h(1024, 64, seed=1))
    plan = records(ops)
    assert [(n, r["levels"], r["hint_ids"], r["rule"]) for n, r in plan.items()] == [
        ("buf1", [[0, 16]], [10000], "grouping.new_run"),
        ("buf0", [[1, 16]], [10000], "grouping.run_tiles_agree")]
    assert [loop_group_id(op) for op in ops] == [(0,), (0,)]


def sum_over_the_run_dim(x):
    c = x + 1
    return c, c.sum(dim=1)


# The sum's read of c's full buffer over the reduced dim (19 rows) overflows whatever it
# splits: the planner refuses the sum itself, naming that read.
CONFLICT = ("Cannot auto-tile buf1 (aten ops: sum.dim_IntList): no legal split brings its read under "
            "the limit of 8192 bytes (reduction-controlled input span for buf0: device dim 0 (d2) "
            "spans 311296 bytes); host dim 3: split 19 fails reduction_tile_extent (a Reduction "
            "tile must keep at least 2 iterations of host dim 3)")


def test_the_sum_over_the_run_dim_runs_after_the_loop():
    """The run splits host dim 1 of c, which the sum reduces: the sum runs after the loop
    over c's full buffer, one row per reduction tile inside 4 output tiles (its fp32
    accumulator of one output tile must fit: validation accumulator_fits)."""
    ops = capture_auto(sum_over_the_run_dim, h(1, 19, 128, 64))
    record = records(ops)["buf1"]
    assert (record["decision"], record["levels"], record["rule"]) == (
        "plan", [[1, 4], [0, 19]], "grouping.after_open_run_loop")


def _conform(a):
    # a is fp32: the cast needs {1: 10}; d's own plan is {1: 5}.  (This used to read
    # c[:, :, :8, :] with an own plan of {1: 4}: the read of c spanned 10,240 bytes.)
    c = a.half()
    d = c * 2
    return c, d


def test_conforming_op_runs_the_open_runs_split():
    ops = capture_auto(_conform, h(1, 20, 16, 64).float())
    record = records(ops)["buf1"]
    assert (record["own_plan"], record["levels"], record["rule"]) == (
        [[1, 5]], [[1, 10]], "grouping.to_open_run")
    assert record["rule_message"] == (
        "buf1 reads the open run and its split {1: 10} is legal and sufficient for buf1")
    assert [op.get_name() for op in ops] == ["buf0", "buf2", "buf1"]  # buf2: buf0's full copy
    assert list(records(ops)) == ["buf0", "buf2", "buf1"]


def test_gathered_rows_over_the_limit_are_read_in_windows():
    """fuzz 2912:517: index_select(x * 2, 1, i) on (2, 12, 37) fp16 at 1148 bytes: the read of
    all 12 rows the index may pick spans 3072 bytes whatever the split (the decision once said
    "no span exceeds the limit" while the span check flagged it; then the search refused
    naming it).  The rows are now read in 3 windows of 4 (1024 bytes each,
    backend/gathered_windows.py): every access fits and the result is eager's, bit for bit."""
    g = torch.Generator().manual_seed(0)
    x, i = torch.randn(2, 12, 37, generator=g).half(), torch.randint(0, 12, (2,), generator=g)
    fn = lambda a, b: torch.index_select(a * 2.0, 1, b)  # noqa: E731
    run = run_auto(fn, x, i, max_span_bytes=1148, sencores=2, span_check="error")
    assert torch.equal(run.output, fn(x, i))
    (spec,) = [s for k in run.kernels for s in iter_op_specs(k.specs)
               if any(a.indirect for a in s.args)]
    assert [(a.indirect[0].size, str(a.device_coordinates[0])) for a in spec.args if a.indirect] == [
        (4, "ind1"), (4, "ind2 + 4"), (4, "ind3 + 8")]
