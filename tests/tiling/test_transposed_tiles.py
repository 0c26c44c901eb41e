"""Tiles of transposed buffers (issue classes W2 and C3): equal eager, spans verified.

Splits stay below the dim size and keep whole sticks on every stick dim they cut
(per-tile extent 1 and partial sticks are other issue classes, W1 and R1).

A ``.t().contiguous()`` copy (or a restickify coarse tiling keeps inside the
loop) has a buffer whose memory order is not its dim order.  Its per-tile
buffer must keep that memory order, and its per-tile device layout must follow
it, or the tile is written transposed to how the next op of the loop reads it.
"""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from layout_cases import case, check  # noqa: E402

from spyre_rules.hints import spyre_hint  # noqa: E402


def scale_transposed_copy(k):
    def fn(x, scale):
        with spyre_hint(slices={"Mt": k}):
            xt = x.t().contiguous().t()
            return xt * scale[:, None]
    return fn


def transposed_copy_round_trip(k):
    def fn(x):
        with spyre_hint(slices={"A": k}):
            return x.t().contiguous().t()
    return fn


def restickify_inside_loop(k):
    def fn(x, s):
        xt = x.t().contiguous().t()
        with spyre_hint(slices={"A": k}):
            return xt + s[:, None]
    return fn


def transposed_copy_used_transposed(k):
    def fn(x, y):
        with spyre_hint(slices={"A": k}):
            return x.t().contiguous() * 2.0 + y
    return fn


def transpose01_copy(k):
    def fn(x):
        with spyre_hint(slices={"C": k}):
            return x.transpose(0, 1).contiguous() * 2.0
    return fn


def transpose01_copy_then_add(k):
    def fn(x, y):
        with spyre_hint(slices={"C": k}):
            return x.transpose(0, 1).contiguous() + y
    return fn


F16, F32 = torch.float16, torch.float32
C, U = "compact", "unrolled"


def _sc(m, n, k, dtype, mode, note=""):
    return case(scale_transposed_copy(k), [(m, n), (m,)], [["Mt", "Nt"], ["Mt"]], dtype, mode, note)


def _rt(a, b, k, dtype, mode):
    return case(transposed_copy_round_trip(k), [(a, b)], [["A", "B"]], dtype, mode)


def _rs(a, b, k, dtype, mode):
    return case(restickify_inside_loop(k), [(a, b), (a,)], [["A", "B"], ["A"]], dtype, mode)


def _as_is(a, b, k, dtype, mode):
    # the copy is read in its own (transposed) dim order, tiled on its stick dim
    return case(transposed_copy_used_transposed(k), [(a, b), (b, a)],
                 [["A", "B"], ["B", "A"]], dtype, mode)


def _t01(b, c, d, k, dtype, mode, note=""):
    return case(transpose01_copy(k), [(b, c, d)], [["B", "C", "D"]], dtype, mode, note)


def _t01_add(b, c, d, k, dtype, mode):
    return case(transpose01_copy_then_add(k), [(b, c, d), (c, b, d)],
                 [["B", "C", "D"], ["C", "B", "D"]], dtype, mode)


@pytest.mark.parametrize("program, shapes, names, dtype, mode", [
    _sc(256, 64, 4, F16, C, "-known-first-case"),  # the known first case
    _sc(256, 64, 4, F32, U),
    _sc(128, 128, 2, F16, U),
    _sc(128, 64, 2, F32, C),
    _rt(4, 64, 2, F16, C),
    _rt(64, 64, 4, F32, C),
    _rt(16, 128, 8, F16, U),
    _rt(128, 64, 2, F32, U),
    _rs(4, 64, 2, F32, C),
    _rs(128, 64, 2, F16, U),
    _rs(256, 128, 4, F16, C),
    _rs(64, 64, 2, F32, U),
    _as_is(64, 64, 2, F16, C),
    _as_is(128, 64, 2, F32, U),
    _as_is(256, 128, 4, F16, U),
    _as_is(256, 128, 4, F32, C),
    _t01(2, 4, 64, 2, F16, C, "-c3"),  # the C3 case
    _t01(4, 8, 64, 4, F32, U),
    _t01(3, 8, 128, 2, F16, U),
    _t01(4, 4, 64, 2, F32, C),
    _t01_add(2, 4, 64, 2, F16, U),
    _t01_add(4, 8, 64, 4, F32, C),
])
def test_transposed_tiles_equal_eager(program, shapes, names, dtype, mode):
    check(program, shapes, names, dtype, mode)


def test_per_tile_layout_of_a_transposed_copy_keeps_its_memory_order(capture):
    """The ``.contiguous()`` copy of ``x.t()`` (host [64, 4], strides [1, 64]: stuck on its
    dim 1) tiled on dim 1 by 2: its tile keeps dim 0 innermost in memory."""
    from spyre_rules.passes.coarse_tile import coarse_tile

    ops = capture(lambda x: x.t().contiguous() * 2.0, torch.randn(4, 64, dtype=torch.float16))
    copy = next(op for op in ops if [int(s) for s in op.layout.stride] == [1, 64])
    assert [int(s) for s in copy.layout.size] == [64, 4]
    assert copy.layout.device_layout.stride_map == (4096, 1, 64)
    coarse_tile(ops, [([copy], 2, [1])])
    assert [int(s) for s in copy.layout.size] == [64, 2]
    assert [int(s) for s in copy.layout.stride] == [1, 64]  # was [2, 1]: written transposed
    dl = copy.layout.device_layout
    assert (dl.device_size, dl.stride_map) == ((1, 64, 64), (4096, 1, 64))
