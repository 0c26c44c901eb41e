"""Per-tile views: the numbers of docs/layout_model.md §6 (SD = single division) and the verifier.

Every coordinate the facts report is also enumerated by the independent
verifier (``spyre_rules.spans.verify_spans``): the fact's bound must never be
below the true span, and equals it where the bound is exact (all §6 cases).
Input reads are checked over *every* tile (tile ``t`` reads ``s + t * R/k``),
output views over the per-tile buffer the tiled kernel writes.
"""

from __future__ import annotations

import itertools
import math
import time

import pytest
import sympy
import torch
import torch.nn.functional as F

import spyre_rules
from spyre_rules.facts import op_facts as facts
from spyre_rules.facts.per_tile import (
    CannotRebuild,
    tile_access_coords,
    output_coords,
    per_tile_layout,
    per_tile_output,
    split_by_symbol,
)
from spyre_rules.facts.records import FactError, tiling_key
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.layout import SpyreTensorLayout, contiguous_strides, generic_stick_layout
from spyre_rules.layout import DataFormat
from spyre_rules.spans import coordinate_span_elems, verify_spans

FP16 = torch.float16


def _sym(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


# --------------------------------------------------------------------------- verifier helpers


def true_span(coord, ranges, tiles=None) -> int:
    """Largest true span of ``coord`` over every tile, by enumeration.

    ``tiles`` maps a tiled symbol to its split ``k``: the symbol then ranges over
    ``T = tile_extent(R, k)`` values starting at ``t * T`` for each tile ``t``, the
    last tile clipped at ``R`` (what the program runs).
    """
    coord = sympy.sympify(coord)
    syms = sorted(coord.free_symbols, key=str)
    if not syms:
        return 1
    tiles = {s: k for s, k in (tiles or {}).items() if s in coord.free_symbols}
    per = {s: tile_extent(ranges[s], tiles.get(s, 1)) for s in syms}
    tiled = sorted(tiles, key=str)
    worst = 0
    for starts in itertools.product(*(range(tiles[s]) for s in tiled)):
        shifted = coord.subs({s: s + t * per[s] for s, t in zip(tiled, starts)})
        clipped = dict(per)
        clipped.update({s: min(per[s], ranges[s] - t * per[s]) for s, t in zip(tiled, starts)})
        report = verify_spans([1], [shifted], clipped, 1)
        worst = max(worst, report.dims[0].span_elems)
    return worst


def check_output(records, view) -> None:
    ds = view.device_layout.device_size
    ranges = view.range_map
    for rec, coord in zip(records, view.coords, strict=True):
        true = true_span(coord, ranges)
        assert rec.span_elems is not None and rec.span_elems >= true
        assert rec.span_elems == true  # every §6 coordinate is bounded exactly
        assert rec.span_bytes == true * math.prod(ds[rec.dim + 1 :]) * view.itemsize


def check_input(records, coords, ds, ranges, tiles, itemsize) -> None:
    trues = [true_span(c, ranges, tiles) for c in coords]
    for rec, true in zip(records, trues, strict=True):
        assert rec.span_elems is not None and rec.span_elems >= true
        # a step of this coordinate moves the address over the whole inner extent
        inner = math.prod(ds[rec.dim + 1 :])
        assert rec.inner_elems >= inner
        assert rec.span_bytes >= true * inner * itemsize
        assert (rec.span_elems, rec.inner_elems) == (true, inner)


def read_check(op, read, tiling) -> list:
    """read_coords of ``read`` under ``tiling``, checked against the verifier."""
    of = facts.op_facts(op)
    dep = of.dep_of(read)
    records = facts.read_coords(op, read, tiling)
    coords = [sympy.sympify(r.expr, locals={s.name: s for s in dep.ranges}) for r in records]
    tiles = split_by_symbol(of.symbol_dims, tiling)
    check_input(records, coords, read.layout.device_layout.device_size, dep.ranges, tiles,
                read.layout.dtype.itemsize)
    return records


def by_dim(records) -> dict:
    return {r.dim: r for r in records}


# --------------------------------------------------------------------------- captures


@pytest.fixture(scope="module")
def big_add():
    """docs/layout_model.md §6.1: ``x + y`` on (1, 8195, 256, 64) fp16 (nothing executes on device)."""
    x = torch.empty(1, 8195, 256, 64, dtype=FP16)
    start = time.perf_counter()
    ops = spyre_rules.capture_operations(lambda a, b: a + b, x, torch.empty_like(x))
    assert time.perf_counter() - start < 60
    return ops


@pytest.fixture(scope="module")
def sum0():
    """docs/layout_model.md §6.2: ``x.sum(dim=0)``, x (2, 20, 16, 64)."""
    return spyre_rules.capture_operations(lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))


@pytest.fixture(scope="module")
def lm_head():
    """docs/layout_model.md §6.3: ``F.linear(x[2,64], W[1024,64])`` -> restickify of W + batchmatmul."""
    return spyre_rules.capture_operations(
        lambda x, w: F.linear(x, w), torch.randn(2, 64, dtype=FP16), torch.randn(1024, 64, dtype=FP16)
    )


# --------------------------------------------------------------------------- §6.1 x + y


def test_big_add_output_span_untiled_and_tiled(big_add):
    (op,) = big_add
    with big_add.graph_context(0):
        untiled = by_dim(facts.output_coords(op, {}))
        assert untiled[0].expr == "d0" and untiled[0].span_elems == 8195
        assert untiled[0].inner_elems == 16384
        assert untiled[0].span_bytes == 268_533_760 == untiled[0].total_bytes
        assert untiled[1].span_bytes == 32_768
        assert [untiled[d].expr for d in range(5)] == ["d0", "d1", "0", "0", "d2"]
        assert untiled[4].is_stick and untiled[0].stick_elems == 64

        # 5 divides 8195, but 1639 rows are no whole 64-row grains: 4 tiles of 1664 rows
        # (13 x 128) and a last one of 1539 (facts/tile_extent.py)
        view = facts.op_facts(op).output_view({1: 5})
        assert view and view.rebuilt
        assert view.host_size == (1, 1664, 256, 64)
        assert view.device_layout.device_size == (1664, 256, 1, 1, 64)
        assert view.device_layout.stride_map == (16384, 64, -1, -1, 1)
        tiled = facts.output_coords(op, {1: 5})
        assert by_dim(tiled)[0].span_bytes == 54_525_952  # SD: 1664 * 16384 * 2
        check_output(tiled, view)
        # the input reads keep the full buffers, d0's range divided once
        for read in facts.input_reads(op):
            recs = by_dim(read_check(op, read, {1: 5}))
            assert recs[0].span_bytes == 54_525_952
            assert recs[0].total_bytes == 268_533_760


def test_big_add_remainder_split_measures_the_whole_tile(big_add):
    (op,) = big_add
    with big_add.graph_context(0):
        # 3 tiles of 8195 rows: 2816 rows (22 x 128), the last 2563 (facts/tile_extent.py)
        (rows,) = [c for c in facts.output_coords(op, {1: 3}) if c.expr == "d0"]
        assert rows.span_elems == 2816
        # 8194 tiles of 8195 rows would be tiles of 2: the last would be empty
        assert not facts.has_output_coords(op, {1: 8194})
        assert facts.output_coords(op, {1: 8194}) == []
        assert "leaves an empty tile" in facts.op_facts(op).output_view({1: 8194}).reason
        assert facts.has_output_coords(op, {1: 5}) and facts.has_output_coords(op, {})


# --------------------------------------------------------------------------- §6.2 sum(dim=0)


def test_sum_output_and_input_spans(sum0):
    (op,) = sum0
    with sum0.graph_context(0):
        out = by_dim(facts.output_coords(op, {}))
        assert [out[d].expr for d in range(4)] == ["d1", "0", "d0", "d2"]
        assert out[0].span_bytes == 40_960 and out[2].span_bytes == 2_560
        assert facts.layout(op).device_layout.device_size == (16, 1, 20, 64)

        view = facts.op_facts(op).output_view({0: 10})
        assert view.device_layout.device_size == (16, 1, 2, 64)
        tiled = facts.output_coords(op, {0: 10})
        assert by_dim(tiled)[0].span_bytes == 4_096
        check_output(tiled, view)

        (read,) = facts.input_reads(op)
        untiled = by_dim(read_check(op, read, {}))
        assert [untiled[d].expr for d in range(5)] == ["d0", "d1", "0", "d3", "d2"]
        assert untiled[0].inner_elems == 2_048 and untiled[0].span_bytes == 81_920
        assert untiled[1].span_bytes == 4_096
        assert by_dim(read_check(op, read, {0: 10}))[0].span_bytes == 8_192
        # a reduction symbol is never divided, whatever the tiling says about output dims
        assert by_dim(read_check(op, read, {1: 2}))[3].span_elems == 2


# --------------------------------------------------------------------------- §6.3 LM head


def test_lm_head_restickify_and_bmm_read(lm_head):
    restick, bmm = lm_head
    with lm_head.graph_context(0):
        assert facts.is_pointwise(restick) and facts.is_batch_matmul(bmm)
        dl = facts.layout(restick).device_layout
        assert (dl.device_size, dl.stride_map) == ((16, 64, 64), (4096, 1, 64))
        own = by_dim(facts.output_coords(restick, {}))
        assert [own[d].expr for d in range(3)] == ["floor(d0/64)", "d1", "Mod(d0, 64)"]
        assert own[0].span_bytes == 131_072 and own[1].span_bytes == 8_192
        for k in (2, 4, 8, 16):  # SD: 131072 / k
            view = facts.op_facts(restick).output_view({0: k})
            recs = facts.output_coords(restick, {0: k})
            assert by_dim(recs)[0].span_bytes == 131_072 // k
            check_output(recs, view)
        assert facts.op_facts(restick).output_view({0: 4}).device_layout.device_size == (4, 64, 64)

        assert facts.reduction_symbols(bmm) == {_sym("d2")}
        (k_sym,) = facts.reduction_symbols(bmm)
        read = next(r for r in facts.input_reads(bmm) if r.buffer == restick.get_name())
        recs = by_dim(read_check(bmm, read, {}))
        assert [recs[d].expr for d in range(3)] == ["floor(d1/64)", "d2", "Mod(d1, 64)"]
        assert recs[1].symbols == {k_sym}
        assert recs[0].span_bytes == 131_072
        for k in (2, 4, 8, 16):
            assert by_dim(read_check(bmm, read, {1: k}))[0].span_bytes == 131_072 // k


# --------------------------------------------------------------------------- synthetic views


def _contiguous_view(sizes, tiling, dtype=FP16):
    strides = contiguous_strides(sizes)
    stl = generic_stick_layout(sizes, strides, dtype)
    syms = [_sym(f"d{i}") if n > 1 else sympy.Integer(0) for i, n in enumerate(sizes)]
    index = sum((v * s for v, s, n in zip(syms, strides, sizes) if n > 1), sympy.Integer(0))
    ranges = {v: n for v, n in zip(syms, sizes) if n > 1}
    return per_tile_output(
        host_size=sizes, host_stride=strides, offset=0, device_layout=stl, dtype=dtype,
        position_vars=syms, write_index=index, write_ranges=ranges, tiling=tiling,
    ), syms


def test_multi_level_view_uses_per_tile_index():
    """§6.4 SD: the real tiled op addresses [c1, c2, 0, c0, c3] on the per-tile layout."""
    view, (d0, d1, d2, d3) = _contiguous_view([4096, 4096, 4096, 64], {1: 64, 2: 8})
    assert view.device_layout.device_size == (64, 512, 1, 4096, 64)
    assert view.device_layout.stride_map == (32768, 64, 64, 2097152, 1)
    assert list(view.coords) == [d1, d2, 0, d0, d3]
    recs = by_dim(output_coords("buf0", view))
    assert recs[0].span_bytes == 2**34  # 64 * (512 * 4096 * 64) * 2: not span-safe
    assert recs[1].span_bytes == 512 * 4096 * 64 * 2
    check_output(list(recs.values()), view)


def test_untiled_view_keeps_the_original_layout():
    view, _ = _contiguous_view([1, 20, 16, 64], {1: 1})
    assert view and not view.rebuilt and view.tiling == ()
    assert view.device_layout.stride_map == (1024, 64, 64, -1, 1)


@pytest.mark.parametrize(
    ("sizes", "tiling", "device_size"),
    [
        ([1024, 4096], {0: 2, 1: 4}, (16, 512, 64)),  # docs/layout_model.md §2.2 per-tile [512, 1024]
        ([20, 16, 64], {0: 10}, (16, 1, 2, 64)),
        ([1, 20, 16, 64], {1: 5}, (4, 16, 1, 1, 64)),
    ],
)
def test_per_tile_layouts(sizes, tiling, device_size):
    stl = generic_stick_layout(sizes, contiguous_strides(sizes), FP16)
    got = per_tile_layout(sizes, contiguous_strides(sizes), stl, tiling)
    assert got and got[2].device_size == device_size


def test_cannot_rebuild_reasons():
    stl = generic_stick_layout([20, 64], [64, 1], FP16)
    assert "not a dim" in per_tile_layout([20, 64], [64, 1], stl, {2: 2}).reason
    assert "leaves an empty tile" in per_tile_layout([20, 64], [64, 1], stl, {0: 6}).reason
    assert per_tile_layout([20, 64], [64, 1], stl, {0: 3})[0] == (8, 64)  # tiles 8, 8, 4
    assert "not a dense permutation" in per_tile_layout([20, 64], [1, 40], stl, {0: 2}).reason
    assert "not static" in per_tile_layout([sympy.Symbol("s"), 64], [64, 1], stl, {0: 2}).reason
    odd = SpyreTensorLayout((10, 64), (7, 1), DataFormat.SEN169_FP16)
    failed = per_tile_layout([20, 64], [64, 1], odd, {0: 2})
    assert isinstance(failed, CannotRebuild) and "reconstruction failed" in failed.reason
    assert not failed  # falsy: never mistaken for a view

    d0, d1 = _sym("d0"), _sym("d1")
    wrong = per_tile_output(
        host_size=[20, 64], host_stride=[64, 1], offset=0, device_layout=stl, dtype=FP16,
        position_vars=[d0, d1], write_index=64 * d1 + d0, write_ranges={d0: 20, d1: 64},
        tiling={0: 2},
    )
    assert "not the layout's indexer" in wrong.reason


def test_tiling_key_normalises_and_refuses_garbage():
    assert tiling_key({1: 5, 0: 1}) == ((1, 5),) == tiling_key([(1, 5)])
    assert tiling_key(None) == () == tiling_key({})
    assert tiling_key({sympy.Integer(2): sympy.Integer(4)}) == ((2, 4),)
    for bad in ({0: 0}, {0: 1.5}, {"a": 2}, 7):
        with pytest.raises(FactError):
            tiling_key(bad)


def test_misaligned_input_split_is_bounded_over_every_tile():
    """A tile of 40 on ``floor(d1/64)`` (3 tiles of 120, no tiling in whole sticks
    exists): tile 0 spans 1 value, tile 1 spans 2.

    Bounding only ``[0, R/k)`` (the reference) would report 1; the fact measures
    every tile of a coordinate whose shift is not invariant and keeps the largest, 2.
    """
    d0, d1 = _sym("d0"), _sym("d1")
    stl = generic_stick_layout([4, 120], [120, 1], FP16)  # [2, 4, 64] / [64, 120, 1]
    index, ranges, tiles = 120 * d0 + d1, {d0: 4, d1: 120}, {d1: 3}
    recs = tile_access_coords("x", stl, FP16, index, ranges, tiles)
    coords = [sympy.floor(d1 / 64), d0, sympy.Mod(d1, 64)]
    assert [r.expr for r in recs] == [str(c) for c in coords]
    assert coordinate_span_elems(coords[0], ranges, tiles) == 1  # tile 0 only
    assert true_span(coords[0], ranges, tiles) == 2
    assert recs[0].span_elems == 2 and recs[2].span_elems == 64
    for rec, coord in zip(recs, coords):
        assert rec.span_elems >= true_span(coord, ranges, tiles)
    # stick-aligned tiles keep the tight per-tile bound
    aligned = tile_access_coords("x", generic_stick_layout([4, 256], [256, 1], FP16),
                           FP16, 256 * d0 + d1, {d0: 4, d1: 256}, {d1: 2})
    assert aligned[0].span_elems == 2 == true_span(sympy.floor(d1 / 64), {d1: 256}, {d1: 2})


@pytest.mark.parametrize("coord, r, k", [
    ("floor(h/2)", 4, 4), ("Mod(h, 2)", 4, 4), ("Mod(h, 2)", 4, 2), ("floor(h/2)", 8, 2),
    ("Mod(h, 64)", 150, 3), ("floor(h/64)", 120, 3), ("floor(h/64)", 150, 3), ("floor(h/3) + Mod(h, 3)", 12, 4),
    ("Mod(h, 4)", 24, 6),
])
def test_tiles_of_a_moving_coordinate_are_measured_one_by_one(coord, r, k):
    """A coordinate whose shift by one tile is not a constant (a grouped-query read's
    ``floor(h/2)`` / ``Mod(h, 2)`` of the head split one per tile) is measured tile by
    tile: never below any tile's true span, and exact for these (the largest tile's)."""
    from spyre_rules.facts.per_tile import _split_span
    from spyre_rules.facts.spans import coordinate_span_bound

    h = _sym("h")
    expr = sympy.sympify(coord, locals={"h": h})
    assert _split_span(expr, {h: r}, {h: k}) == true_span(expr, {h: r}, {h: k})
    step = tile_extent(r, k)
    for t in range(k):  # each tile's own bound is sound for that tile
        values = {int(expr.subs(h, v)) for v in range(t * step, min(r, (t + 1) * step))}
        bound = coordinate_span_bound(expr, {h: r}, {h: k}, {h: t})
        assert bound.elems >= max(values) - min(values) + 1
