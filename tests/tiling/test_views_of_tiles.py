"""Reads of a per-tile buffer through a view inside its loop: re-indexed exactly, or refused.

A transposed view of a tiled buffer (or a restickified copy read with the index of
the buffer it copies) arrives with the full buffer's strides; coarse tiling
rebuilds it per tile (``passes/tile_reads.py``).  Equal eager, spans verified;
a read that would reach another iteration's tile is refused before anything runs.
"""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from layout_cases import case, check  # noqa: E402
from tiling_helpers import explicit_groups, run_spyre  # noqa: E402

from spyre_rules.hints import spyre_hint  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.passes.coarse_tile import CoarseTileError  # noqa: E402

F16, F32 = torch.float16, torch.float32
C, U = "compact", "unrolled"


def transposed_view_nested(ka, kb):
    def fn(a, b):
        with spyre_hint(slices={"A": ka}):
            with spyre_hint(slices={"B": kb}):
                y = a + b
                return y.t() * 2.0
    return fn


def transposed_view_inner_dim(k):
    def fn(a, b):
        with spyre_hint(slices={"B": k}):
            y = a * b
            return y.t() - 1.0
    return fn


def restickify_tiled_on_inner_dim(k):
    def fn(x, s):
        xt = x.t().contiguous().t()
        with spyre_hint(slices={"B": k}):
            return xt + s[None, :]
    return fn


AB = ["A", "B"]


def _nested(a, b, ka, kb, dtype, mode, note=""):
    return case(transposed_view_nested(ka, kb), [(a, b), (a, b)], [AB, AB], dtype, mode, note)


def _inner(a, b, k, dtype, mode):
    return case(transposed_view_inner_dim(k), [(a, b), (a, b)], [AB, AB], dtype, mode)


def _restick(a, b, k, dtype, mode):
    return case(restickify_tiled_on_inner_dim(k), [(a, b), (b,)], [AB, ["B"]], dtype, mode)


@pytest.mark.parametrize("program, shapes, names, dtype, mode", [
    # transposed view of a tile in nested loops
    _nested(128, 256, 2, 2, F16, C, "-was-refused"),  # was refused: "cannot re-index a read ... through a view"
    _nested(128, 256, 2, 2, F32, U),
    _nested(128, 128, 2, 2, F16, U),
    _nested(64, 256, 2, 4, F32, C),
    # transposed view of a tile split on its inner dim
    _inner(64, 256, 2, F16, C),
    _inner(128, 128, 2, F32, U),
    _inner(64, 256, 4, F32, C),
    # restickify in a loop on the inner dim
    _restick(4, 128, 2, F16, C),
    _restick(64, 128, 2, F32, U),
    _restick(64, 256, 4, F16, U),
])
def test_views_of_tiles_equal_eager(program, shapes, names, dtype, mode):
    check(program, shapes, names, dtype, mode)


def _transposed_reader(x):
    y = x + 1.0
    return y.t() * 2.0


def test_nested_levels_reading_the_mirrored_tile_are_refused():
    """Level 0 tiles rows, level 1 columns: the transposed reader's tile (i, j) is the
    producer's tile (j, i), written in another iteration."""
    with explicit_groups(([0, 1, 2], [(2, [0]), (2, [1])])), pytest.raises(Exception) as info:
        run_spyre(_transposed_reader, torch.randn(64, 64))
    assert str(find_cause(info.value, CoarseTileError)) == (
        "coarse_tile: buf1 reads buf2 inside their loop at index t0 + 64*t1 of buf2's full "
        "buffer (host size [64, 64], per tile [32, 32]; t<i> walks dim i of one buf1 tile): "
        "one iteration of loop level 0 moves the read by 32 elements but the tile by 2048: "
        "the read would reach another iteration's tile"
    )


def test_each_per_tile_index_is_rebuilt_once_per_buffer(monkeypatch):
    """Inductor traces a reader's body again and again (the scheduler's read/write
    extraction, its partition's symbols, our proofs): each full-buffer index of a per-tile
    buffer is rebuilt and simplified once, then remembered (``TileBuffer.tile_index``)."""
    from spyre_rules.passes.tile_reads import TileBuffer

    built: list[tuple] = []
    rebuild = TileBuffer._tile_index

    def counted(self, index, ranges):
        built.append((self.name, index, None if ranges is None else frozenset(ranges.items())))
        return rebuild(self, index, ranges)

    monkeypatch.setattr(TileBuffer, "_tile_index", counted)
    check(*_nested(64, 256, 2, 4, F32, C).values)
    assert built and len(built) == len(set(built))
