"""A consumer reads a restickified copy through the *copy's* layout, even when the
copy's source is later tiled (regression: fuzzer seed 1:49, auto variant).

``(x + y) @ w`` with ``w`` of one column: the matmul needs ``x + y`` stuck on its
reduction dim, so a restickify copy is inserted; automatic tiling then splits the
add (and the copy) along the columns, shrinking the add's buffer to one tile.
The matmul outside the loop used to compute its index into the copy from the
add's *per-tile* strides (``32*c0 + c1`` instead of ``64*c0 + c1``) and read
the wrong rows.
"""

from __future__ import annotations

import json

import pytest
import torch

from tiling_helpers import loop_counts, run_spyre
from spyre_rules import config
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint


def test_matmul_in_the_loop_reads_the_restickified_copy_through_its_layout():
    g = torch.Generator().manual_seed(100052)
    x, y, w = (torch.randn(s, generator=g) for s in ([32, 64], [32, 64], [64, 1]))

    def fn(x, y, w):
        return (x + y) @ w

    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=4771, sencores=1,
                      span_check="off"):
        compiled = run_spyre(fn, x, y, w)
    torch.testing.assert_close(compiled.output, fn(x, y, w), atol=1e-4, rtol=1e-4)
    specs = compiled.op_specs()
    # The matmul shares the add's loop as a reduction level over k (its accumulator
    # initialised and finalised around the loop), reading each tile of the copy
    # through the copy's own layout.
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (2, ["add", "ReStickifyOpHBM", "batchmatmul"]), "acc_finalize"]]
    _init, add, copy, matmul, _finalize = specs
    assert add.tiled_symbols and copy.tiled_symbols and matmul.tiled_symbols
    operand = matmul.args[0]
    assert operand.name == copy.args[1].name
    assert [str(c) for c in operand.device_coordinates] == ["0", "c1", "c0"]


# --- A transposed read of a hinted op that is also a graph output (fuzz seed 6120) -----------
#
# The op is read inside its loop (by the restickified copy its transposed reader needs) and
# returned, so tiling propagation copies each tile into a full buffer for the caller.  It
# re-pointed the outputs by editing the op's StorageBox in place; the reader's view of the
# op shares that box, so the reader loaded the full copy instead of the restickified one:
# the restickify ran nowhere while plan.json recorded its hint levels (UNRUN), and the
# reader walked a buffer stuck on the wrong dim.


def _hinted_restickify_case(fn, inputs, names, dims, tmp_path, tolerance=0.0):
    """Compile ``fn`` under its hints with a dump dir and compare it with eager (``tolerance``:
    0 for elementwise ops, exact in either dtype); (plan rows, kernels' op order, specs)."""
    for name, size in dims.items():
        declare_tensor_dim(name, size)
    for x, dim_names in zip(inputs, names):
        name_tensor_dims(x, dim_names)
    with config.patch(dump_dir=str(tmp_path)):
        compiled = run_spyre(fn, *inputs)
    expected = fn(*inputs)
    for actual, want in zip(compiled.output, expected):
        torch.testing.assert_close(actual, want, rtol=tolerance, atol=tolerance)
    (plan,) = tmp_path.glob("*/plan.json")
    rows = [(r["op"], r["kind"], r["levels"], (r.get("loop") or {}).get("propagation"))
            for r in json.loads(plan.read_text())["ops"]]
    written = {arg.name for spec in compiled.op_specs() for arg in spec.args if not arg.is_input}
    assert [op for op, _, levels, _ in rows if levels and op not in written] == []
    return rows, [loop_counts(k.specs) for k in compiled.kernels], compiled.op_specs()


def _reads(specs, op):
    return [[a.name for a in spec.args if a.is_input] for spec in specs if spec.op == op]


@pytest.fixture
def _dims(fresh_dims):
    yield
    torch._dynamo.reset()


def test_transposed_copy_of_a_returned_hinted_op_reads_its_restickified_tiles(tmp_path, _dims):
    """fuzz 6120:95 (manual): t0 = x0 - x0 is returned and read transposed by
    t0.t().contiguous() in the same hint loop."""
    g = torch.Generator().manual_seed(612018455)
    x0, x1 = (torch.randn(s, generator=g).to(torch.float16) for s in ([2, 16], [16]))

    def fn(x0, x1):
        with spyre_hint(slices={"B": 2, "A": 2}):
            t0 = x0 - x0
            t1 = t0.t().contiguous().t()
            t3 = torch.where(x0 > 0, t1, x0) * x1
        t4 = torch.where(torch.arange(2)[:, None] >= torch.arange(16)[None, :], t3, 0.0)
        return t4[:, 1:14:2] * 2.0, t0

    rows, loops, specs = _hinted_restickify_case(
        fn, (x0, x1), (["A", "B"], ["B"]), {"A": 2, "B": 16}, tmp_path)
    both = [[1, 2], [0, 2]]
    assert rows == [
        ("buf0", "pointwise", [], None), ("buf1", "pointwise", [], None),
        ("buf2", "pointwise", [], None),
        ("buf3", "pointwise", both, "loop-internal"),
        ("buf4", "pointwise", both, "copied to buf13"),
        ("buf13", "copy", both, None),
        ("buf11", "ReStickifyOpHBM", both, "loop-internal"),
        ("buf5", "pointwise", [[0, 2], [1, 2]], "loop-internal"),
        ("buf12", "ReStickifyOpHBM", [[0, 2], [1, 2]], "loop-internal"),
        ("buf6", "pointwise", both, "loop-internal"),
        ("buf7", "pointwise", both, "writes full buffer"),
        ("buf8", "pointwise", [], None), ("buf9", "pointwise", [], None),
        ("buf10", "pointwise", [], None),
    ]
    assert loops[3] == [(2, [(2, ["gt", "sub", "copy", "ReStickifyOpHBM", "clone",
                                  "ReStickifyOpHBM", "where", "mul"])])]
    assert _reads(specs, "clone") == [["buf11"]]
    assert _reads(specs, "ReStickifyOpHBM") == [["buf4"], ["buf5"]]


def test_transposed_product_of_a_returned_hinted_max_reads_its_restickified_tiles(tmp_path, _dims):
    """fuzz 6120:270 (manual): t0 = maximum(x0, x1) returned, t0.transpose(0, 2) * 2."""
    g = torch.Generator().manual_seed(612018630)
    x0, x1 = (torch.randn(s, generator=g).to(torch.float16) for s in ([12, 5, 8], [1, 1, 8]))

    def fn(x0, x1):
        with spyre_hint(slices={"A": 12, "B": 5}):
            t0 = torch.maximum(x0, x1)
            t1 = t0.transpose(0, 2) * 2.0
        return t1, t0

    rows, loops, specs = _hinted_restickify_case(
        fn, (x0, x1), (["A", "B", "C"], [None, None, "C"]), {"A": 12, "B": 5, "C": 8}, tmp_path)
    ab = [[0, 12], [1, 5]]
    assert rows == [
        ("buf0", "pointwise", ab, "copied to buf3"),
        ("buf3", "copy", ab, None),
        ("buf2", "ReStickifyOpHBM", ab, "loop-internal"),
        ("buf1", "pointwise", [[2, 12], [1, 5]], "writes full buffer"),
    ]
    assert loops == [[(12, [(5, ["maximum", "copy", "ReStickifyOpHBM", "mul"])])]]
    assert _reads(specs, "mul") == [["buf2"]]
    assert _reads(specs, "ReStickifyOpHBM") == [["buf0"]]


def test_permuted_copy_of_a_returned_hinted_abs_feeds_a_linear_through_its_restickify(
        tmp_path, _dims):
    """fuzz 6120:396 (manual): t0 = x0.abs() returned, t0.permute(1, 2, 0).contiguous() read
    by F.linear under a nested hint."""
    g = torch.Generator().manual_seed(612018756)
    x0, x1, x2 = (torch.randn(s, generator=g) for s in ([3, 6, 6], [32, 3], [32]))

    def fn(x0, x1, x2):
        with spyre_hint(slices={"C": 6}):
            t0 = x0.abs()
            t1 = t0.permute(1, 2, 0).contiguous()
            with spyre_hint(slices={"B": 6}):
                t3 = torch.nn.functional.linear(t1, x1, x2)
                t4 = t3[:, :, 30:31:1] * 2.0
        return t4, t0

    rows, loops, specs = _hinted_restickify_case(
        fn, (x0, x1, x2), (["A", "B", "C"], ["D", "A"], ["D"]),
        {"A": 3, "B": 6, "C": 6, "D": 32}, tmp_path, tolerance=1e-4)
    assert rows == [
        ("buf0", "pointwise", [[2, 6]], "copied to buf7"),
        ("buf7", "copy", [[2, 6]], None),
        ("buf5", "ReStickifyOpHBM", [[2, 6]], "loop-internal"),
        ("buf1", "pointwise", [[1, 6]], "writes full buffer"),
        ("buf6", "ReStickifyOpHBM", [], None),
        ("buf2", "reduction:batchmatmul", [[1, 6], [0, 6]], "loop-internal"),
        ("buf3", "pointwise", [[1, 6], [0, 6]], "loop-internal"),
        ("buf4", "pointwise", [[1, 6], [0, 6]], "writes full buffer"),
    ]
    assert _reads(specs, "clone") == [["buf5"]]
    assert ["buf0"] in _reads(specs, "ReStickifyOpHBM")


def test_transposed_copy_of_a_returned_hinted_where_reduces_through_its_restickify(
        tmp_path, _dims):
    """fuzz 6120:662 (manual): t0 = where(x0 > 0, x0, x1) returned,
    t0.transpose(0, 1).contiguous().amin(dim=1) in the same hint loop."""
    g = torch.Generator().manual_seed(612019022)
    x0, x1 = (torch.randn(s, generator=g) for s in ([3, 32], [3, 32]))

    def fn(x0, x1):
        with spyre_hint(slices={"A": 3}):
            t0 = torch.where(x0 > 0, x0, x1)
            t1 = t0.transpose(0, 1).contiguous()
            t2 = t1.amin(dim=1, keepdim=True)
        return t2, t0

    rows, loops, specs = _hinted_restickify_case(
        fn, (x0, x1), (["A", "B"], ["A", "B"]), {"A": 3, "B": 32}, tmp_path)
    assert rows == [
        ("buf0", "pointwise", [[0, 3]], "loop-internal"),
        ("buf1", "pointwise", [[0, 3]], "copied to buf5"),
        ("buf5", "copy", [[0, 3]], None),
        ("buf4", "ReStickifyOpHBM", [[0, 3]], "loop-internal"),
        ("buf2", "pointwise", [[1, 3]], "loop-internal"),
        ("buf3", "reduction:min", [[0, 3]], "writes full buffer"),
    ]
    assert _reads(specs, "clone") == [["buf4"]]
    assert _reads(specs, "ReStickifyOpHBM") == [["buf1"]]


def test_views_of_a_returned_hinted_op_are_re_pointed_to_its_full_copy(_dims):
    """The outputs t0, t0.t() and t0[2:5] all hold t0's StorageBox; re-pointing rebuilds each
    output's boxes and views, so all three read the full copy, not t0's last tile."""
    declare_tensor_dim("A", 8)
    declare_tensor_dim("B", 64)
    x = torch.randn(8, 64)
    name_tensor_dims(x, ["A", "B"])

    def fn(x):
        with spyre_hint(slices={"A": 2}):
            t0 = x * 2
            t1 = t0 + 1
        return t0, t0.t(), t0[2:5], t1

    compiled = run_spyre(fn, x)
    for actual, want in zip(compiled.output, fn(x)):
        assert (actual.shape, actual.stride()) == (want.shape, want.stride())
        torch.testing.assert_close(actual, want, rtol=0, atol=0)
    assert [loop_counts(k.specs) for k in compiled.kernels] == [[(2, ["mul", "copy", "add"])]]
