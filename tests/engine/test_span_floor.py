"""The search skips combinations that leave a read over the limit whatever else they split.

A read coordinate one symbol drives affinely takes at least a tile's extent of values,
each moving over the buffer's whole inner extent (``engine/span_floor.py``).
"""

from __future__ import annotations

from types import SimpleNamespace

import sympy

from spyre_rules.engine.span_floor import ReadFloor, below_floor, read_floors

d0, d1 = sympy.Symbol("d0", integer=True), sympy.Symbol("d1", integer=True)


def _cand(host_dim, expr, symbols, span_elems, inner_elems, itemsize=4, source="input:buf0",
          stick=False):
    coord = SimpleNamespace(expr=expr, symbols=frozenset(symbols), span_elems=span_elems,
                            inner_elems=inner_elems, is_stick=stick,
                            span_bytes=span_elems * inner_elems * itemsize)
    return ("input_span", SimpleNamespace(host_dim=host_dim, coord=coord, source=source))


def test_affine_reads_of_one_symbol_have_a_floor():
    found = [_cand(2, "d1", {d1}, 128, 4194304),             # one head: 16 MiB
             _cand(1, "256*d0 + 3", {d0}, 32513, 16384)]
    floors = read_floors(found, {1: 128, 2: 128}.get)
    assert floors == [ReadFloor(((1, 128, 256),), 65536), ReadFloor(((2, 128, 1),), 16777216)]


def test_no_floor_for_writes_sticks_non_affine_reads_or_unmapped_symbols():
    found = [_cand(1, "d0", {d0}, 128, 8388608, source="output"),
             _cand(1, "d0", {d0}, 4, 32, stick=True),
             _cand(1, "256*d0 + d1", {d0, d1}, 32768, 16384),
             _cand(1, "(d0//2)", {d0}, 64, 16384),
             _cand(1, "d0**2", {d0}, 64, 16384)]
    assert read_floors(found, {1: 128}.get) == []   # several symbols: only with dim_of


def test_several_symbols_need_the_dims_they_walk():
    found = [_cand(1, "256*d0 + d1", {d0, d1}, 32768, 16384)]
    assert read_floors(found, {1: 128, 2: 256}.get, {"d0": 1}.get) == []   # d1 walks no dim
    assert read_floors(found, {1: 128, 2: 256}.get, {"d0": 1, "d1": 2}.get) == [
        ReadFloor(((1, 128, 256), (2, 256, 1)), 65536)]


def test_a_combination_below_a_floor_cannot_fit():
    limit = 256 * 2 ** 20
    floors = [ReadFloor(((2, 128, 1),), 16 * 2 ** 20)]   # 16 MiB per head, 128 heads
    assert below_floor(floors, [1, 2], [16, 4], limit)       # 32 heads: 512 MiB
    assert below_floor(floors, [1], [16], limit)             # heads whole: 2 GiB
    assert not below_floor(floors, [1, 2], [16, 8], limit)   # 16 heads: 256 MiB
    assert not below_floor([], [1], [2], limit)


def test_one_value_per_tile_spans_nothing():
    # a tile of one row picks the row's base address: validation measures no span
    assert not below_floor([ReadFloor(((0, 8, 1),), 128)], [0], [8], 64)
    assert below_floor([ReadFloor(((0, 8, 1),), 128)], [0], [4], 64)
