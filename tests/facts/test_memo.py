"""Measurements memoised on values (``facts.memo``) are shared across equal accesses
and never leak one access's name or layout into another's answer."""

from __future__ import annotations

import sympy
import torch

from spyre_rules.engine import veto
from spyre_rules.facts import memo, per_tile
from spyre_rules.facts.op_cache import clear_cache
from spyre_rules.facts.tiled_layout import fixed_tiled_layout

FP16 = torch.float16


def _sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def test_equal_accesses_share_one_measurement_and_keep_their_own_buffer_name():
    clear_cache()
    d0, d1 = _sym("d0"), _sym("d1")
    index, ranges, splits = 256 * d0 + d1, {d0: 4, d1: 256}, {d1: 2}
    first = per_tile.tile_access_coords("a", fixed_tiled_layout("cpu", FP16, [4, 256]), FP16,
                                        index, ranges, splits)
    hits = per_tile._tile_access_coords.cache_info().hits
    second = per_tile.tile_access_coords("b", fixed_tiled_layout("cpu", FP16, [4, 256]), FP16,
                                         index, ranges, splits)
    assert per_tile._tile_access_coords.cache_info().hits == hits + 1
    assert {r.buffer for r in first} == {"a"} and {r.buffer for r in second} == {"b"}
    assert [r.expr for r in first] == [r.expr for r in second] == ["floor(d1/64)", "d0", "Mod(d1, 64)"]
    assert first[0].span_elems == 2


def test_a_layout_with_other_values_is_measured_anew():
    clear_cache()
    d0, d1 = _sym("d0"), _sym("d1")
    ranges = {d0: 4, d1: 256}
    rows = per_tile.tile_access_coords("x", fixed_tiled_layout("cpu", FP16, [4, 256]), FP16,
                                       256 * d0 + d1, ranges, {})
    # the same index over a transposed buffer (stride (1, 4)): other coordinates
    cols = per_tile.tile_access_coords("x", fixed_tiled_layout("cpu", FP16, [4, 256], [1, 4]),
                                       FP16, 256 * d0 + d1, ranges, {})
    assert [r.expr for r in rows] != [r.expr for r in cols]


def test_clear_cache_forgets_every_memo():
    d0 = _sym("d0")
    per_tile.tile_access_coords("x", fixed_tiled_layout("cpu", FP16, [256]), FP16, d0, {d0: 256}, {})
    assert per_tile._tile_access_coords.cache_info().currsize > 0
    clear_cache()
    assert per_tile._tile_access_coords.cache_info().currsize == 0
    assert all(m.cache_info().currsize == 0 for m in memo._MEMOS)


def test_the_veto_names_each_access_in_its_own_problems():
    clear_cache()
    c0, c1 = _sym("c0"), _sym("c1")
    coords = [c0, c1, sympy.Integer(0)]
    args = ([64, 64, 64], coords, {c0: 64, c1: 64}, 2, 1024, {})
    a = veto._check("read of a", *args)
    b = veto._check("read of b", *args)
    assert a == ["read of a: device dim 0 (c0) spans 524288 bytes > 1024",
                 "read of a: device dim 1 (c1) spans 8192 bytes > 1024"]
    assert b == [p.replace("read of a", "read of b") for p in a]
