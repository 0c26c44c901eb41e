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
from layout_cases import check  # noqa: E402

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


@pytest.mark.parametrize("m, n, k, dtype, mode", [
    (256, 64, 4, F16, C),  # the known first case
    (256, 64, 4, F32, U),
    (128, 128, 2, F16, U),
    (128, 64, 2, F32, C),
])
def test_scaled_transposed_copy(m, n, k, dtype, mode):
    check(scale_transposed_copy(k), [(m, n), (m,)], [["Mt", "Nt"], ["Mt"]], dtype, mode)


@pytest.mark.parametrize("a, b, k, dtype, mode", [
    (4, 64, 2, F16, C),
    (64, 64, 4, F32, C),
    (16, 128, 8, F16, U),
    (128, 64, 2, F32, U),
])
def test_transposed_copy_round_trip(a, b, k, dtype, mode):
    check(transposed_copy_round_trip(k), [(a, b)], [["A", "B"]], dtype, mode)


@pytest.mark.parametrize("a, b, k, dtype, mode", [
    (4, 64, 2, F32, C),
    (128, 64, 2, F16, U),
    (256, 128, 4, F16, C),
    (64, 64, 2, F32, U),
])
def test_restickify_inside_the_loop(a, b, k, dtype, mode):
    check(restickify_inside_loop(k), [(a, b), (a,)], [["A", "B"], ["A"]], dtype, mode)


@pytest.mark.parametrize("a, b, k, dtype, mode", [
    (64, 64, 2, F16, C),
    (128, 64, 2, F32, U),
    (256, 128, 4, F16, U),
    (256, 128, 4, F32, C),
])
def test_transposed_copy_read_as_is(a, b, k, dtype, mode):
    """The copy is read in its own (transposed) dim order, tiled on its stick dim."""
    check(transposed_copy_used_transposed(k), [(a, b), (b, a)],
          [["A", "B"], ["B", "A"]], dtype, mode)


@pytest.mark.parametrize("b, c, d, k, dtype, mode", [
    (2, 4, 64, 2, F16, C),  # the C3 case
    (4, 8, 64, 4, F32, U),
    (3, 8, 128, 2, F16, U),
    (4, 4, 64, 2, F32, C),
])
def test_transpose01_copy(b, c, d, k, dtype, mode):
    check(transpose01_copy(k), [(b, c, d)], [["B", "C", "D"]], dtype, mode)


@pytest.mark.parametrize("b, c, d, k, dtype, mode", [
    (2, 4, 64, 2, F16, U),
    (4, 8, 64, 4, F32, C),
])
def test_transpose01_copy_consumed_in_the_loop(b, c, d, k, dtype, mode):
    check(transpose01_copy_then_add(k), [(b, c, d), (c, b, d)],
          [["B", "C", "D"], ["C", "B", "D"]], dtype, mode)


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
