"""codegen/in_allocation.py: the compile-time proof that every access stays in its allocation.

The crafted program is the loop nest of issue 40 (``a @ a.T`` at (127, 64) fp16):
a (127, 127) output, device [2, 127, 64] at byte 32640, rows tiled by the outer
level and columns by the inner one, 64 + 63 each.  Its corner tile with the outer
dim's whole range (what codegen/tail.py emitted before the fix) is refused with the
byte range it reaches; with both remainders it is proven, every tile's bytes exact."""

from __future__ import annotations

import pytest
import sympy

from spyre_rules.codegen.in_allocation import (
    AllocationBoundsError,
    access_bounds,
    prove_in_allocation,
)
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg

c0, c1 = sympy.symbols("c0 c1")
BASE, SIZE = 32640, 2 * 127 * 64 * 2  # buf0's allocation [32640, 65152)


def _out(coords=None, size=(2, 127, 64), allocation=None, name="buf0"):
    return TensorArg(False, 0, DataFormats.SEN169_FP16, list(size),
                     coords or [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)],
                     {"hbm": BASE} if allocation is None else allocation, name=name)


def _tile(rows, cols, out=None, steps=((64,), (64,))):
    return OpSpec(op="add", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(rows), 1), c1: (sympy.Integer(cols), 1)},
                  args=[out or _out()], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[[c1], [c0]], tiled_steps=[list(s) for s in steps])


def _one(spec, outer, inner):
    """``spec`` at outer iteration ``outer`` and inner iteration ``inner``."""
    return LoopSpec(sympy.Integer(1), [LoopSpec(sympy.Integer(1), [spec], first=inner)],
                    first=outer)


def _gram(corner_rows):
    return [_one(_tile(64, 64), 0, 0), _one(_tile(64, 63), 0, 1),
            _one(_tile(63, 64), 1, 0), _one(_tile(corner_rows, 63), 1, 1)]


def test_the_unclipped_corner_tile_is_a_compile_error():
    with pytest.raises(AllocationBoundsError) as info:
        prove_in_allocation("sdsc_batchmatmul_1", _gram(64))
    # rows 64..127 of the last column block: 64 rows of 128 bytes from byte 24448 on
    assert str(info.value) == (
        "spyre_rules allocation check: kernel sdsc_batchmatmul_1, op buf0 (add): write of "
        "tensor buf0 touches bytes [57088, 65278), not proven inside its allocation "
        "[32640, 65152): device coordinate 1 (c0) takes values in [64, 127] over every "
        "iteration, outside [0, 127); it reaches 126 bytes past it")


def test_the_clipped_corner_tile_is_proven_tile_by_tile():
    bounds = prove_in_allocation("k", _gram(63))
    # an outer step is 64 rows (8192 bytes), an inner one a stick column (16256 bytes)
    assert [(b.low, b.end) for b in bounds] == [
        (BASE, BASE + 8192),
        (BASE + 16256, BASE + 16256 + 8190),
        (BASE + 8192, BASE + 8192 + 63 * 128),
        (BASE + 8192 + 16256, BASE + 8192 + 16256 + 62 * 128 + 126),
    ]
    # the corner ends at element (1, 126, 62): only the padded column 127 lies past it
    assert BASE + 8192 + 16256 + 62 * 128 + 126 == BASE + SIZE - 2
    assert {(b.tensor, b.access, b.allocation_start, b.allocation_end) for b in bounds} == {
        ("buf0", "write", BASE, BASE + SIZE)}


def test_a_loop_bounds_every_iteration():
    # two whole row tiles of 64 in one loop of count 2 overrun 127 rows by one row
    loop = LoopSpec(sympy.Integer(2), [LoopSpec(sympy.Integer(1), [_tile(64, 64)])])
    (bound,) = access_bounds("k", [loop])
    # in the first stick column the bytes stay inside the tensor (row 127 of column 0 is
    # row 0 of column 1): only the shifted coordinate shows the tile addresses another
    # element of the same tensor
    assert (bound.low, bound.end) == (BASE, BASE + 128 * 128)
    assert bound.problem == ("device coordinate 1 (c0) takes values in [0, 127] over every "
                             "iteration, outside [0, 127)")
    loop = LoopSpec(sympy.Integer(2), [LoopSpec(sympy.Integer(2), [_tile(64, 64)])])
    (bound,) = access_bounds("k", [loop])
    assert (bound.low, bound.end) == (BASE, BASE + 16256 + 128 * 128)
    assert bound.problem == ("device coordinate 1 (c0) takes values in [0, 127] over every "
                             "iteration, outside [0, 127); it reaches 128 bytes past it")
    # rows 0..126 in tiles of 64 and 63: proven
    loop = [LoopSpec(sympy.Integer(1), [LoopSpec(sympy.Integer(1), [_tile(64, 64)])]),
            LoopSpec(sympy.Integer(1), [LoopSpec(sympy.Integer(1), [_tile(63, 64)])], first=1)]
    assert [b.problem for b in access_bounds("k", loop)] == ["", ""]


def test_a_coordinate_outside_its_device_dim_is_refused():
    (bound,) = access_bounds("k", [_tile(128, 64)])
    assert bound.problem == "device coordinate 1 (c0) takes values in [0, 127], outside [0, 127)"
    assert (bound.low, bound.end) == (BASE, BASE + 128 * 128)


def test_the_memory_map_segment_narrows_the_allocation():
    # the TensorArg claims [2, 127, 64] but the graph gave buf0 only its first stick column
    segments = {"buf0": (BASE, BASE + SIZE // 2)}
    with pytest.raises(AllocationBoundsError, match=r"touches bytes \[32640, 65152\), not "
                       r"proven inside its allocation \[32640, 48896\): it reaches 16256 "
                       r"bytes past it"):
        prove_in_allocation("k", [_tile(127, 127)], segments)
    assert prove_in_allocation("k", [_tile(127, 127)], {"other": (0, 128)})[0].proven


def test_a_read_with_no_sound_bound_is_refused():
    arg = _out(coords=[sympy.Integer(0), sympy.sin(c0), c1], size=(1, 127, 64), name="x")
    arg.is_input = True
    spec = _tile(4, 4, out=arg)
    (bound,) = access_bounds("k", [spec])
    assert bound.message() == (
        "spyre_rules allocation check: kernel k, op x (add): read of tensor x not proven "
        "inside its allocation [32640, 48896): device coordinate 1 (sin(c0)) has no "
        "sound bound")


def test_an_access_with_no_allocation_is_refused():
    (bound,) = access_bounds("k", [_tile(4, 4, out=_out(allocation={}))])
    assert bound.problem == "it has no HBM or LX allocation ({})"


def test_an_lx_tensor_is_bounded_in_lx_and_does_not_move():
    arg = _out(allocation={"lx": 256})
    arg.per_tile_fixed = True
    loop = LoopSpec(sympy.Integer(2), [LoopSpec(sympy.Integer(2), [_tile(64, 64, out=arg)])])
    (bound,) = access_bounds("k", [loop], {"buf0": (0, 128)})  # an HBM segment: not LX's
    assert (bound.low, bound.end, bound.proven) == (256, 256 + 63 * 128 + 128, True)


# The key-block mask read of paged decode attention (issue 38; tests/serving/
# test_paged_attention_rewrite.py, "gqa 4, expand" at 16 KiB): a (2, 128) bool mask stored as
# two 64-element sticks per sequence, read at token ``c0 + 16*c4`` (slot c0 of page c4); the
# loop of count 2 moves the slots by 8 (16 bytes).  Bounded over the first tile, its
# ``Mod`` coordinate reaches 63 and the loop offset adds 16 bytes: "16 bytes past" a mask
# no tile reads past.  Tiles being rigid translations, the offsets at the shifted symbols
# bound it exactly.
c4 = sympy.Symbol("c4")
MASK_BASE = 265600


def _mask_read(coords):
    mask = TensorArg(True, 0, DataFormats.SEN169_FP16, [1, 1, 2, 2, 64], coords,
                     {"hbm": MASK_BASE}, name="buf2")
    spec = OpSpec(op="where", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(8), 1), c1: (sympy.Integer(2), 1),
                                   c4: (sympy.Integer(8), 1)},
                  args=[mask], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[[c0]], tiled_steps=[[8]])
    return [LoopSpec(sympy.Integer(2), [spec])]


def test_a_wrapped_coordinate_of_rigid_tiles_is_bounded_at_the_shifted_symbols():
    token = c0 + 16 * c4
    coords = [sympy.Integer(0), sympy.Integer(0), sympy.floor(token / 64), c1, sympy.Mod(token, 64)]
    (bound,) = prove_in_allocation("k", _mask_read(coords))
    assert (bound.low, bound.end) == (MASK_BASE, MASK_BASE + 512)


def test_tiles_that_are_not_rigid_keep_the_first_tiles_bound():
    # 16 slots per tile of four 16-token pages in one stick: the second tile's tokens wrap
    # to the stick's start, which no byte offset expresses, so only the loop's own offset
    # (16 elements) bounds it, and the last page's shifted tile lies past the mask
    token = c0 + 16 * c4
    mask = TensorArg(True, 0, DataFormats.SEN169_FP16, [1, 64], [sympy.Integer(0), sympy.Mod(token, 64)],
                     {"hbm": MASK_BASE}, name="buf2")
    spec = OpSpec(op="where", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(16), 1), c4: (sympy.Integer(4), 1)},
                  args=[mask], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[[c0]], tiled_steps=[[16]])
    with pytest.raises(AllocationBoundsError, match="it reaches 32 bytes past it"):
        prove_in_allocation("k", [LoopSpec(sympy.Integer(2), [spec])])
