"""coarse_tile on ops captured from real programs (docs/layout_model.md §5.2/§6)."""

from __future__ import annotations

import pytest
import sympy
import torch

import spyre_rules
from spyre_rules.hints import (
    DimHint,
    HintError,
    declare_tensor_dim,
    hints_to_coarse_tile_groups,
    name_tensor_dims,
    spyre_hint,
)
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.loop_stamp import (
    loop_count,
    loop_group_id,
    loop_remainders,
    loop_stamp,
    loop_tiled_dims,
    loop_tiled_reduction_dims,
)
from spyre_rules.passes.coarse_tile import CoarseTileError, coarse_tile

A, B = 1024, 4096


def seed_inputs(named=True):
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(A, B, generator=gen).to(torch.float16) for _ in range(3)]
    if named:
        declare_tensor_dim("A", A)
        declare_tensor_dim("B", B)
        for x in xs:
            name_tensor_dims(x, ["A", "B"])
    return xs


def seed_program(a, b, c):
    with spyre_hint(slices={"A": 2}):  # outer loop: 2 iterations over rows
        with spyre_hint(slices={"B": 4}):  # inner loop: 4 iterations over cols
            y = a + b
            z = y * c
            return z


def add_mul(a, b, c):
    return (a + b) * c


def three_ops(a, b, c):
    return ((a + b) * c) - a


def device(op):
    dl = op.layout.device_layout
    return list(dl.device_size), list(dl.stride_map)


def state(op):
    return (
        [int(r) for r in op.data.ranges],
        [int(s) for s in op.layout.size],
        device(op),
        loop_group_id(op),
    )


def add_description(capture):
    """How errors name buf0 = a + b (ir_edit.op_description, shared by all passes)."""
    return op_description(capture(add_mul, *seed_inputs(named=False))[0])


def assert_seed_tiles(ops, graph_context):
    for op in ops:
        assert loop_group_id(op) == (0, 0)
        assert loop_count(op) == [2, 4]
        assert all(isinstance(c, sympy.Integer) for c in loop_count(op))
        assert loop_tiled_dims(op) == [[0], [1]]
        assert loop_tiled_reduction_dims(op) == [[], []]
        assert op.data.ranges == [512, 1024]
        assert list(op.layout.size) == [512, 1024]
        assert list(op.layout.stride) == [1024, 1]
        assert device(op) == ([16, 512, 64], [64, 1024, 1])
    with graph_context:
        for op in ops:
            rw = op.get_read_writes()
            for dep in [*rw.writes, *rw.reads]:
                assert list(dep.ranges.values()) == [512, 1024], dep


# --------------------------------------------------------------------------- docs/layout_model.md §5.2


def test_seed003_nested_hints(capture):
    ops = capture(seed_program, *seed_inputs())
    groups = hints_to_coarse_tile_groups(ops)
    assert [([op.get_name() for op in g], levels) for g, levels in groups] == [
        (["buf0", "buf1"], [(0, 2, False), (1, 4, False)])
    ]
    spyre_rules.coarse_tile(ops, groups)
    assert_seed_tiles(ops, ops.graph_context(0))


def test_per_tile_intermediate_read_uses_tile_strides(capture):
    ops = capture(seed_program, *seed_inputs())
    coarse_tile(ops, hints_to_coarse_tile_groups(ops))
    with ops.graph_context(0):
        reads = {d.name: str(d.index) for d in ops[1].get_read_writes().reads}
    # y (buf0) is now the per-tile buffer; the HBM input c keeps its full-row stride.
    assert reads == {"buf0": "1024*d0 + d1", "arg2_1": "4096*d0 + d1"}


def test_nested_explicit_form(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    coarse_tile(ops, [(list(ops), [(2, [0]), (4, [1])])])
    assert_seed_tiles(ops, ops.graph_context(0))


def test_flat_form_tiles_dim_0_by_default(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    coarse_tile(ops, [(list(ops), 4)])
    for op in ops:
        assert (loop_group_id(op), loop_count(op), loop_tiled_dims(op)) == ((0,), [4], [[0]])
        assert op.data.ranges == [256, 4096]
        assert device(op) == ([64, 256, 64], [64, 4096, 1])


def test_flat_form_with_dims(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    coarse_tile(ops, [(list(ops), 2, [1])])
    for op in ops:
        assert (loop_group_id(op), loop_count(op), loop_tiled_dims(op)) == ((0,), [2], [[1]])
        assert op.data.ranges == [1024, 2048]
        assert list(op.layout.stride) == [2048, 1]
        assert device(op) == ([32, 1024, 64], [64, 2048, 1])


def test_one_level_refuses_several_dims_of_one_op(capture):
    """Iteration i of a level takes tile i of each dim it tiles: (2, [0, 1]) would run only
    the two diagonal tiles of four and leave the rest unwritten."""
    ops = capture(add_mul, *seed_inputs(named=False))
    with pytest.raises(CoarseTileError) as err:
        coarse_tile(ops, [(list(ops), 2, [0, 1])])
    assert str(err.value) == (
        "coarse_tile: group 0 level 0: one loop level cannot tile several dims [0, 1] of buf0 "
        "(aten ops: add.Tensor) by 2: its 2 iterations would cover only the diagonal tiles; "
        "give each dim its own level")
    assert [op.data.ranges for op in ops] == [[1024, 4096], [1024, 4096]]


def test_separate_groups_get_their_own_ids(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    coarse_tile(ops, [([ops[0]], 2), ([ops[1]], [(2, [0]), (2, [1])])])
    assert (loop_group_id(ops[0]), loop_count(ops[0])) == ((0,), [2])
    assert (loop_group_id(ops[1]), loop_count(ops[1])) == ((1, 0), [2, 2])
    assert ops[1].data.ranges == [512, 2048]


# --------------------------------------------------------------------------- docs/layout_model.md §6


def test_span_overflow_style_hint_group(capture):
    """layout_model §6.1: ``x + y`` (1, 8195, 256, 64), host dim 1 split 5: 5 divides
    8195, but 1639 rows are no whole 64-row grains, so the tiles are 1664 rows (13 x 128),
    the last 1539 (facts/tile_extent.py)."""
    x = torch.empty(1, 8195, 256, 64, dtype=torch.float16)
    y = torch.empty(1, 8195, 256, 64, dtype=torch.float16)
    (op,) = capture(lambda x, y: x + y, x, y)
    assert device(op) == ([8195, 256, 1, 1, 64], [16384, 64, 64, -1, 1])
    op.dim_hints = [DimHint(["_span_overflow"], 5, sympy.Symbol("d1"), False, 10000, 1)]
    coarse_tile([op], [([op], [(10000, sympy.Integer(5), False)])])
    assert op.data.ranges == [1, 1664, 256, 64]
    assert loop_group_id(op) == (0,)
    assert loop_count(op) == [5]
    assert loop_tiled_dims(op) == [[1]]
    assert loop_tiled_reduction_dims(op) == [[]]
    assert device(op) == ([1664, 256, 1, 1, 64], [16384, 64, -1, -1, 1])


def test_planner_level_with_a_remainder_tile(capture):
    """A planner level (hint-id form) whose count does not divide the dim: tiles of the
    tile extent, the last one shorter, stamped (docs/layout_model.md §5.2).  x + y on
    (1, 8195, 256, 64) in 2 tiles: 4224 rows (33 x 128), the last 3971."""
    x = torch.empty(1, 8195, 256, 64, dtype=torch.float16)
    (op,) = capture(lambda x, y: x + y, x, x.clone())
    op.dim_hints = [DimHint(["_span_overflow"], 2, sympy.Symbol("d1"), False, 10000, 1)]
    coarse_tile([op], [([op], [(10000, sympy.Integer(2), False)])])
    assert op.data.ranges == [1, 4224, 256, 64]
    assert loop_count(op) == [2] and loop_tiled_dims(op) == [[1]]
    assert loop_stamp(op).last_tiles == ((3971,),)
    assert loop_remainders(op) == [{1: 3971}]
    assert device(op) == ([4224, 256, 1, 1, 64], [16384, 64, -1, -1, 1])


def test_a_remainder_dim_is_tiled_by_one_level(capture):
    """Two planner levels on one dim, the outer with a remainder: refused, nothing changed."""
    x = torch.empty(1, 8195, 256, 64, dtype=torch.float16)
    (op,) = capture(lambda x, y: x + y, x, x.clone())
    before = state(op)
    op.dim_hints = [DimHint(["_span_overflow"], 2, sympy.Symbol("d1"), False, 10000, 1),
                    DimHint(["_span_overflow"], 2, sympy.Symbol("d1"), False, 10001, 1)]
    with pytest.raises(CoarseTileError) as info:
        coarse_tile([op], [([op], [(10000, sympy.Integer(2), False), (10001, sympy.Integer(2), False)])])
    assert str(info.value) == (
        f"coarse_tile: group 0: {op_description(op)} tiles dim 1 (size 8195) at several levels "
        "with a shorter last tile; a dim with a remainder tile is tiled by one level")
    assert state(op) == before and loop_stamp(op) is None


def named_sum_input():
    for name, size in dict(N=2, A=20, B=16, C=64).items():
        declare_tensor_dim(name, size)
    x = torch.randn(2, 20, 16, 64, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    return name_tensor_dims(x, ["N", "A", "B", "C"])


def test_reduction_tiled_on_output_dim_via_hint(capture):
    """layout_model §6.2 shape: ``x.sum(dim=0)`` tiled 10 on output dim 0."""

    def f(x):
        with spyre_hint(slices={"A": 10}):
            return x.sum(dim=0)

    ops = capture(f, named_sum_input())
    (op,) = ops
    assert device(op) == ([16, 1, 20, 64], [64, 64, 1024, 1])
    groups = hints_to_coarse_tile_groups(ops)
    assert [levels for _, levels in groups] == [[(0, 10, False)]]
    coarse_tile(ops, groups)
    assert op.data.ranges == [2, 16, 64]
    assert op.data.reduction_ranges == [2]
    assert (loop_group_id(op), loop_count(op), loop_tiled_dims(op)) == ((0,), [10], [[0]])
    assert loop_tiled_reduction_dims(op) == [[]]
    assert device(op) == ([16, 1, 2, 64], [64, 64, 1024, 1])
    with ops.graph_context(0):
        rw = op.get_read_writes()
    assert [list(d.ranges.values()) for d in rw.writes] == [[2, 16, 64]]
    assert [list(d.ranges.values()) for d in rw.reads] == [[2, 16, 64, 2]]


def test_reduction_tiled_on_output_dim_explicit(capture):
    (op,) = ops = capture(lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64).half())
    coarse_tile(ops, [([op], 10, [0])])
    assert op.data.ranges == [2, 16, 64]
    assert op.data.reduction_ranges == [2]
    assert device(op) == ([16, 1, 2, 64], [64, 64, 1024, 1])


# --------------------------------------------------------------------------- errors


def test_hint_count_must_divide_the_dim(capture, root_error):
    def f(a, b, c):
        with spyre_hint(slices={"A": 3}):
            return a + b

    with pytest.raises(Exception) as info:
        capture(f, *seed_inputs())
    assert str(root_error(info.value, HintError)) == (
        "spyre_hint(slices={'A': 3}): count 3 does not divide dim 'A' "
        "(dim 0 of size 1024) of " + add_description(capture)
    )


def test_nested_hint_count_divides_the_tile(capture, root_error):
    def f(a, b, c):
        with spyre_hint(slices={"B": 1024}):
            with spyre_hint(slices={"B": 8}):
                return a + b

    with pytest.raises(Exception) as info:
        capture(f, *seed_inputs())
    assert str(root_error(info.value, HintError)) == (
        "spyre_hint(slices={'B': 8}): count 8 does not divide dim 'B' "
        "(dim 1 of size 4096, 4 per tile of the outer hints) of " + add_description(capture)
    )


def test_hint_on_unknown_dim(capture, root_error):
    def f(a, b, c):
        with spyre_hint(slices={"C": 2}):
            return a + b

    with pytest.raises(Exception) as info:
        capture(f, *seed_inputs())
    assert str(root_error(info.value, HintError)) == (
        f"spyre_hint(slices={{'C': 2}}) names unknown dim 'C' (count 2) on "
        f"{add_description(capture)}; declared dims: A, B"
    )


def test_non_contiguous_group_raises_runtime_error(capture):
    ops = capture(three_ops, *seed_inputs(named=False))
    before = [state(op) for op in ops]
    with pytest.raises(RuntimeError) as info:
        coarse_tile(ops, [([ops[0], ops[2]], 2)])
    assert isinstance(info.value, CoarseTileError)
    assert str(info.value) == (
        "coarse_tile: group 0 ops ['buf0', 'buf2'] are not a contiguous slice of the "
        "operations (['buf1'] sit between them)"
    )
    assert [state(op) for op in ops] == before


def test_reduction_dim_tiled_by_hint_is_a_reduction_level(capture):
    def f(x):
        with spyre_hint(slices={"N": 2}):
            return x.sum(dim=0)

    ops = capture(f, named_sum_input())
    (op,) = ops
    assert op.dim_hints == [DimHint(["N"], 2, op.dim_hints[0].loop_var, True, 0, 0)]
    groups = hints_to_coarse_tile_groups(ops)
    assert [levels for _, levels in groups] == [[(0, 2, True)]]
    coarse_tile(ops, groups)
    assert (loop_count(op), loop_tiled_dims(op), loop_tiled_reduction_dims(op)) == ([2], [[]], [[0]])
    assert op.data.ranges == [20, 16, 64] and op.data.reduction_ranges == [1]


def test_argmax_on_two_reduction_dims_raises_before_mutation(capture):
    """An index reduction turns a tile's local index into the whole range's from the
    points combined so far: its tiles must walk one reduction dim in order."""
    (op,) = ops = capture(lambda x: x.argmax(), torch.randn(4, 64).half())
    before = state(op)
    with pytest.raises(CoarseTileError) as info:
        coarse_tile(ops, [([op], [(2, [0]), (2, [1])])])
    assert str(info.value) == (
        f"coarse_tile: group 0 level 1: {op_description(op)} (argmax) tiles its reduction dim 1 "
        "inside a loop over its reduction dim 0; an index reduction accumulates over one tiled "
        "reduction dim"
    )
    assert state(op) == before
    assert loop_stamp(op) is None


def test_count_must_divide_explicit_dim(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    with pytest.raises(CoarseTileError) as info:
        coarse_tile(ops, [(list(ops), 3)])
    assert str(info.value) == (
        "coarse_tile: group 0 level 0: count 3 does not divide dim 0 (size 1024) of "
        f"{op_description(ops[0])}"
    )


def test_nested_count_must_divide_the_tile(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    with pytest.raises(CoarseTileError) as info:
        coarse_tile(ops, [(list(ops), [(1024, [0]), (2, [0])])])
    assert str(info.value) == (
        "coarse_tile: group 0 level 1: count 2 does not divide dim 0 (size 1 per tile of "
        f"the outer levels (full size 1024)) of {op_description(ops[0])}"
    )


def test_error_in_a_later_group_mutates_nothing(capture):
    ops = capture(three_ops, *seed_inputs(named=False))
    before = [state(op) for op in ops]
    with pytest.raises(CoarseTileError, match="count 3 does not divide dim 1"):
        coarse_tile(ops, [([ops[0]], 2), ([ops[1]], 3, [1])])
    assert [state(op) for op in ops] == before


def test_op_in_two_groups_and_retiling_raise(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    in_two = r"buf0 \(aten ops: add[^)]*\) is in group 0 and group 1"
    with pytest.raises(CoarseTileError, match=in_two):
        coarse_tile(ops, [([ops[0]], 2), ([ops[0]], 2)])
    coarse_tile(ops, [([ops[0]], 2)])
    with pytest.raises(CoarseTileError, match=r"is already tiled \(loop_group_id \(0,\)\)"):
        coarse_tile(ops, [([ops[0]], 2)])


def test_hint_level_missing_on_op_or_disagreeing_raises(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    with pytest.raises(CoarseTileError, match="has no DimHint with hint id 7"):
        coarse_tile(ops, [(list(ops), [(7, 2, False)])])
    for op in ops:
        op.dim_hints = [DimHint(["A"], 2, None, False, 7, 0)]
    with pytest.raises(CoarseTileError, match=r"count 4 disagrees with the DimHint .* \(count 2\)"):
        coarse_tile(ops, [(list(ops), [(7, 4)])])
    coarse_tile(ops, [(list(ops), [(7, 2)])])  # (hint_id, count) pairs are accepted too
    assert ops[0].data.ranges == [512, 4096]


def test_malformed_groups_raise(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    with pytest.raises(CoarseTileError, match="has no ops"):
        coarse_tile(ops, [([], 2)])
    with pytest.raises(CoarseTileError, match="count 0 must be positive"):
        coarse_tile(ops, [(list(ops), 0)])
    with pytest.raises(CoarseTileError, match="is neither"):
        coarse_tile(ops, [(list(ops), [("x",)])])
    with pytest.raises(CoarseTileError, match="dim 5 is out of range"):
        coarse_tile(ops, [(list(ops), 2, [5])])


def test_loop_invariant_hint_level_keeps_the_op_whole(capture):
    ops = capture(add_mul, *seed_inputs(named=False))
    for op in ops:
        op.dim_hints = [DimHint(["A"], 2, None, False, 0, None)]
    assert hints_to_coarse_tile_groups(ops) == []  # no level tiles them: they run in no loop
    coarse_tile(ops, [(list(ops), [(0, 2, False)])])  # an explicit group still may hold them
    for op in ops:
        assert (loop_group_id(op), loop_count(op), loop_tiled_dims(op)) == ((0,), [2], [[]])
        assert op.data.ranges == [1024, 4096]
        assert device(op) == ([64, 1024, 64], [64, 4096, 1])


# --------------------------------------------------------------------------- count 1, extent 1, one dim twice


def test_reduction_dim_split_by_one_keeps_the_op_whole(capture):
    """A count-1 hint over a reduction dim is one tile over the whole dim: nothing to
    accumulate and no loop (a split of 1 is no loop: the hint contract), so only the
    outer level of 2 remains and the reduced dim stays whole."""

    def f(x):
        with spyre_hint(slices={"A": 2}):
            with spyre_hint(slices={"N": 1}):
                return x.sum(dim=0)

    ops = capture(f, named_sum_input())
    (op,) = ops
    coarse_tile(ops, hints_to_coarse_tile_groups(ops))
    assert (loop_group_id(op), loop_count(op), loop_tiled_dims(op)) == ((0,), [2], [[0]])
    assert op.data.ranges == [10, 16, 64]
    assert op.data.reduction_ranges == [2]


def test_reduction_dim_split_by_one_explicitly(capture):
    (op,) = ops = capture(lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64).half())
    coarse_tile(ops, [([op], [(4, [0]), (1, [3])])])
    assert (loop_count(op), loop_tiled_dims(op)) == ([4, 1], [[0], []])
    assert op.data.ranges == [5, 16, 64]


def test_split_equal_to_the_dim_size_leaves_unit_tiles(capture):
    (op,) = ops = capture(lambda x: x + 1.0, torch.randn(8, 64).half())
    coarse_tile(ops, [([op], 8)])
    assert (loop_count(op), loop_tiled_dims(op), op.data.ranges) == ([8], [[0]], [1, 64])
    assert list(op.layout.size) == [1, 64]


def test_nested_levels_on_one_dim_divide_it_twice(capture):
    (op,) = ops = capture(lambda x: x + 1.0, torch.randn(64, 64).half())
    coarse_tile(ops, [([op], [(2, [0]), (4, [0])])])
    assert (loop_count(op), loop_tiled_dims(op), op.data.ranges) == ([2, 4], [[0], [0]], [8, 64])
