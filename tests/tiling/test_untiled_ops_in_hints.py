"""Ops inside a hint block that the hint does not tile (issue class W3): equal eager.

An op with no dim of the hinted name computes its whole result in every
iteration; it runs once, outside the loop, and the tiled ops of the loop read
its full buffer at their own tile.  Spans are verified on every TensorArg.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from layout_cases import check  # noqa: E402
from tiling_helpers import run_spyre  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.backend.pass_lists import PRE_SCHEDULING_PASSES  # noqa: E402
from spyre_rules.hints import DimHint, spyre_hint  # noqa: E402
from spyre_rules.passes.tiling_propagation import tile_groups  # noqa: E402

F16, F32 = torch.float16, torch.float32
C, U = "compact", "unrolled"


def scaled_unnamed_plus_named(k):
    def fn(a, b):
        with spyre_hint(slices={"A": k}):
            y = a * 2.0  # a's dims are not named: the hint does not tile this op
            return y + b
    return fn


def untiled_result_also_returned(k):
    def fn(a, b):
        with spyre_hint(slices={"A": k}):
            y = a - 1.0
            return y, y * b
    return fn


def matmul_over_merged_rows(k):
    def fn(x0, w, x2):
        with spyre_hint(slices={"A": k}):
            return x2 - x0 @ w.t()
    return fn


def outer_level_only_op(ka, kb):
    def fn(x, v):
        with spyre_hint(slices={"A": ka}):
            with spyre_hint(slices={"B": kb}):
                y = v * 3.0  # named A only: the inner level on B does not tile it
                return x + y[:, None]
    return fn


@pytest.mark.parametrize("a, b, k, dtype, mode", [
    (8, 64, 2, F32, C),  # the W3 case
    (8, 64, 2, F16, U),
    (64, 64, 4, F16, C),
    (128, 64, 8, F32, U),
])
def test_unnamed_producer_read_by_a_tiled_op(a, b, k, dtype, mode):
    check(scaled_unnamed_plus_named(k), [(a, b), (a, b)], [None, ["A", "B"]], dtype, mode)


@pytest.mark.parametrize("a, b, k, dtype, mode", [
    (8, 64, 2, F16, C),
    (64, 128, 4, F32, U),
])
def test_untiled_result_read_in_the_loop_and_returned(a, b, k, dtype, mode):
    check(untiled_result_also_returned(k), [(a, b), (a, b)], [None, ["A", "B"]], dtype, mode)


@pytest.mark.parametrize("a, b, d, e, k, dtype, mode", [
    (8, 2, 16, 8, 2, F32, C),  # the W3b case
    (8, 2, 16, 8, 4, F32, U),
    (4, 4, 32, 64, 2, F16, C),
    (16, 2, 16, 32, 4, F16, U),
])
def test_matmul_3d_by_2d_in_the_loop(a, b, d, e, k, dtype, mode):
    check(matmul_over_merged_rows(k), [(a, b, d), (e, d), (a, b, e)],
          [["A", "B", "D"], ["E", "D"], ["A", "B", "E"]], dtype, mode)


@pytest.mark.parametrize("a, b, ka, kb, dtype, mode", [
    (8, 128, 2, 2, F16, C),
    (4, 256, 2, 4, F32, U),
    (16, 128, 4, 2, F32, C),
])
def test_op_tiled_by_the_outer_level_only(a, b, ka, kb, dtype, mode):
    check(outer_level_only_op(ka, kb), [(a, b), (a,)], [["A", "B"], ["A"]], dtype, mode)


def test_the_plan_says_the_untiled_op_runs_outside_the_loop(tmp_path):
    with config.patch(dump_dir=str(tmp_path)):
        check(scaled_unnamed_plus_named(2), [(8, 64), (8, 64)], [None, ["A", "B"]], F32, C)
    (plan_file,) = tmp_path.glob("*/plan.json")
    records = {r["op"]: r for r in json.loads(plan_file.read_text())["ops"]}
    untiled, tiled = records["buf0"], records["buf1"]
    assert (untiled["decision"], untiled["levels"], "loop" in untiled) == ("user hint", [], False)
    assert untiled["reason"] == (
        "in spyre_hint block(s) on ['A'] but has no dim of those names: not tiled, runs once "
        "outside the loop"
    )
    assert tiled["levels"] == [[0, 2]]
    assert tiled["loop"]["propagation"] == "writes full buffer"


def test_loop_invariant_op_kept_in_an_explicit_loop_is_read_at_each_tile():
    """A group may still hold an op no level tiles (explicit groups): its buffer is the
    full one, and the tiled reader moves over it with its own tile."""
    done = {}

    def pass_(graph):
        first, second = list(graph.operations)[:2]
        first.dim_hints = [DimHint(["A"], 2, None, False, 0, None)]
        second.dim_hints = [DimHint(["A"], 2, None, False, 0, 0)]
        done.update(tile_groups(graph, [([first, second], [(0, 2, False)])]))

    a, b = torch.randn(8, 64), torch.randn(8, 64)
    PRE_SCHEDULING_PASSES.append(pass_)
    try:
        compiled = run_spyre(lambda a, b: a * 2.0 + b, a, b)
    finally:
        PRE_SCHEDULING_PASSES.remove(pass_)
    assert done == {"buf0": "loop-invariant", "buf1": "writes full buffer"}
    torch.testing.assert_close(compiled.output, a * 2.0 + b)
