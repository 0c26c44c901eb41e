"""Exact span facts: the §3.3 checks, the docs/layout_model.md §6 numbers, and the safety cases."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest
import sympy

from spyre_rules.facts.spans import (
    DimSpan,
    SpanBound,
    coordinate_span_bound,
    coordinate_span_elems,
    coordinate_spans,
    input_per_core_span_bytes,
    per_core_span_bytes,
    tile_aware_inner_extent_elems,
)

h, l, r, c0, c1, c2, c3 = sympy.symbols("h l r c0 c1 c2 c3", integer=True, nonnegative=True)
Mod, floor = sympy.Mod, sympy.floor


def brute_span(coord, ranges):
    """True span by plain Python enumeration (independent of both modules under test)."""
    syms = sorted(coord.free_symbols, key=lambda s: s.name)
    points = itertools.product(*(range(ranges[s]) for s in syms))
    vals = [int(coord.xreplace(dict(zip(syms, map(sympy.Integer, p))))) for p in points]
    return max(vals) - min(vals) + 1


# --- docs/layout_model.md §3.3 checks ----------------------------------------------------


def test_floor_of_scaled_mod():
    # critical points {2047, 0, 5999} -> 4094, 0, 3806
    assert coordinate_span_elems(floor(2 * Mod(h, 2048)), {h: 6000}) == 4095


def test_two_mods_on_one_symbol_nested_moduli():
    # points {63, 127, 0, 199} -> 126, 190, 0, 78
    assert coordinate_span_bound(Mod(h, 64) + Mod(h, 128), {h: 200}) == SpanBound(191, True)


def test_mod_sum_is_evaluated_jointly_at_its_breakpoints():
    """Mod(h, 64) + Mod(h, 128) over [0, 100): each part's own extremes add to 163, but
    the whole term peaks at 134 (h = 99) and starts at 0: span 135, exact."""
    assert coordinate_span_bound(Mod(h, 64) + Mod(h, 128), {h: 100}) == SpanBound(135, True)
    assert brute_span(Mod(h, 64) + Mod(h, 128), {h: 100}) == 135


def test_piecewise_linear_bounds_equal_the_verifier_on_random_terms():
    """Random sums of constant multiples of h, Mod(h, M) and floor(h/M) (linear between
    multiples of the moduli): the joint breakpoint bound is exact, as the independent
    verifier measures it."""
    import random

    from spyre_rules.facts.verifier import verify_spans

    rng = random.Random(32)
    for _ in range(60):
        term = sympy.Integer(0)
        for _ in range(rng.randint(1, 3)):
            coeff = rng.choice([-3, -2, -1, 1, 1, 2, 3])
            m = rng.choice([2, 3, 5, 8, 16, 32, 64, 100, 128])
            term += coeff * rng.choice([Mod(h, m), floor(h / m), h])
        extent = rng.randint(1, 400)
        bound = coordinate_span_bound(term, {h: extent})
        true = verify_spans([1, 1], [term, 0], {h: extent}, 1).dims[0]
        assert bound is not None, term
        assert bound.elems == true.max_coord - true.min_coord + 1 == brute_span(term, {h: extent}), \
            (term, extent)
        assert bound.exact, term


def test_a_coefficient_inside_a_mod_stays_unknown_in_a_sum():
    # the fail-safe: a scaled dividend is never trusted, joined with a bare Mod or not
    assert coordinate_span_bound(Mod(h, 64) + Mod(3 * h, 128), {h: 100}) is None


def test_mod_with_scaled_dividend_is_unknown():
    # true max 63 at h=21; the critical point h=63 would say 61
    assert coordinate_span_elems(Mod(3 * h, 64), {h: 100}) is None


@pytest.mark.parametrize(
    "coord",
    [Mod(floor(h / 2), 64), Mod(h + l, 64), Mod(h, 64) + Mod(2 * h + 1, 64)],
)
def test_any_non_bare_mod_dividend_is_unknown(coord):
    assert coordinate_span_elems(coord, {h: 300, l: 300}) is None


def test_joint_coordinate_is_the_sum_of_both_terms():
    coord = floor(h / 2048) + 2 * Mod(l, 2048)
    # floor(5999/2048) = 2 and 2*2047 = 4094, reached independently
    assert coordinate_span_bound(coord, {h: 6000, l: 4096}) == SpanBound(2 + 4094 + 1, True)
    # l in [0, 1000): 2*999 = 1998
    assert coordinate_span_elems(coord, {h: 6000, l: 1000}) == 2 + 1998 + 1
    # per tile: h split 3 -> [0, 2000), floor(1999/2048) = 0
    assert coordinate_span_elems(coord, {h: 6000, l: 4096}, {h: 3}) == 4095


def test_two_mods_with_coprime_moduli_are_not_underestimated():
    # Mod(h,3)+Mod(h,5) peaks at 2+4 = 6 (h = 14); the §3.3 points {2, 4, 0, 99}
    # only reach 5, so the reference rule would answer 6.
    coord = Mod(h, 3) + Mod(h, 5)
    assert brute_span(coord, {h: 100}) == 7
    assert coordinate_span_bound(coord, {h: 100}) == SpanBound(7, True)
    # over [0, 10) the peaks never coincide (true max 5): the term is linear between
    # multiples of 3 and 5, so its breakpoints, evaluated jointly, give the true span
    bound = coordinate_span_bound(coord, {h: 10})
    assert brute_span(coord, {h: 10}) == 6
    assert bound == SpanBound(6, True)


def test_symbol_inside_and_outside_mod_is_bounded_not_underestimated():
    coord = h + Mod(h, 64)
    # true max 191 + 63 = 254; the §3.3 points {63, 0, 199} only reach 206
    assert brute_span(coord, {h: 200}) == 255
    assert coordinate_span_bound(coord, {h: 200}) == SpanBound(255, True)  # breakpoints, jointly


def test_mixed_direction_terms_are_sound():
    coord = h - floor(h / 2)  # = ceil(h/2): 0..5 over [0, 10)
    assert brute_span(coord, {h: 10}) == 6
    bound = coordinate_span_bound(coord, {h: 10})
    assert bound == SpanBound(6, True)  # linear between multiples of 2: breakpoints, jointly


@pytest.mark.parametrize(
    "coord, rng, expected",
    [
        (100 - h, 10, 10),
        (-3 * Mod(h, 64), 200, 3 * 63 + 1),
        (-floor(h / 4), 10, 3),
        (Mod(h, 2048), 1639, 1639),  # never wraps inside the range: monotone
        (h**2, 5, 17),
        (sympy.Max(h, 3), 10, 7),
    ],
)
def test_monotone_shapes_are_exact(coord, rng, expected):
    assert brute_span(coord, {h: rng}) == expected
    assert coordinate_span_bound(coord, {h: rng}) == SpanBound(expected, True)


def test_non_separable_coordinates_are_bounded_jointly():
    # "set the other symbols to 0" would give 1 and 9 here
    assert coordinate_span_bound(h * l, {h: 10, l: 10}) == SpanBound(82, True)
    assert coordinate_span_bound(floor((h + l) / 2), {h: 10, l: 10}) == SpanBound(10, True)
    assert brute_span(floor((h + l) / 2), {h: 10, l: 10}) == 10


def test_constant_coordinate_and_constant_offsets():
    assert coordinate_span_bound(0, {}) == SpanBound(1, True)
    assert coordinate_span_elems(sympy.Integer(7), {h: 5}) == 1
    assert coordinate_span_elems(h + 24, {h: 5}) == 5
    assert coordinate_span_elems(h, {h: 1}) == 1


# --- ranges, splits, inputs ----------------------------------------------------------


def test_missing_or_non_integer_or_empty_range_is_unknown():
    assert coordinate_span_elems(h + l, {h: 4}) is None
    assert coordinate_span_elems(h, {h: sympy.Symbol("s0")}) is None
    assert coordinate_span_elems(h, {h: 2.5}) is None
    assert coordinate_span_elems(h, {h: True}) is None
    assert coordinate_span_elems(h, {h: 0}) is None


def test_ranges_accept_sympy_integers_and_name_keys():
    assert coordinate_span_elems(h, {h: sympy.Integer(12)}) == 12
    assert coordinate_span_elems(h + l, {"h": 3, "l": 4}) == 6
    # a plain (assumption-free) symbol is a loop variable too: floor(x/1) folds
    x = sympy.Symbol("x")
    assert coordinate_span_bound(Mod(floor(x), 64), {x: 100}) == SpanBound(64, True)


def test_split_divides_the_range_exactly_once():
    # 5 divides 8195, but 1639 rows are no whole 64-row grains: tiles of 1664 (13 x 128),
    # the last one shorter (1539); 11 tiles of 745 likewise 768 (facts/tile_extent.py)
    assert coordinate_span_elems(c0, {c0: 8195}, {c0: 5}) == 1664
    assert coordinate_span_elems(c0, {c0: 8195}, {"c0": 5}) == 1664
    assert coordinate_span_elems(c0, {c0: 8192}, {c0: 4}) == 2048  # whole sticks: n / k
    # not divisible: tiles of 4224 (33 x 128), the last one shorter (3971)
    assert coordinate_span_elems(c0, {c0: 8195}, {c0: 2}) == 4224
    # 8194 tiles would leave the last empty -> no per-tile answer
    assert coordinate_span_elems(c0, {c0: 8195}, {c0: 8194}) is None
    # a split on a symbol the coordinate does not use changes nothing
    assert coordinate_span_elems(c0, {c0: 20, c1: 16}, {c1: 3}) == 20


@pytest.mark.parametrize("k", [0, -2, 1.5])
def test_split_count_must_be_positive_integer(k):
    with pytest.raises(ValueError, match="split count"):
        coordinate_span_elems(c0, {c0: 20}, {c0: k})


def test_torch_index_functions_are_understood():
    from torch.utils._sympy.functions import (
        CleanDiv,
        FloorDiv,
        Identity,
        ModularIndexing,
        PythonMod,
    )
    from torch.utils._sympy.functions import Mod as TorchMod

    assert coordinate_span_elems(FloorDiv(c1, 64), {c1: 4096}) == 64
    assert coordinate_span_elems(CleanDiv(c1, 64), {c1: 4096}) == 64
    assert coordinate_span_elems(ModularIndexing(c1, 1, 64), {c1: 4096}) == 64
    assert coordinate_span_elems(TorchMod(c1, 64) + PythonMod(c0, 8), {c1: 4096, c0: 4}) == 67
    assert coordinate_span_elems(Identity(c1), {c1: 5}) == 5
    # ModularIndexing(h, 2, 64) = Mod(floor(h/2), 64): not a bare dividend
    assert coordinate_span_elems(ModularIndexing(c1, 2, 64), {c1: 4096}) is None


def test_module_does_not_import_torch():
    code = (
        "import sys, sympy; import spyre_rules.spans as s; "
        "h = sympy.Symbol('h', integer=True, nonnegative=True); "
        "assert s.coordinate_span_elems(sympy.Mod(h, 64), {h: 100}) == 64; "
        "assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'verify_spans' in dir(s)"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_repeated_calls_agree():
    coord = floor(h / 2048) + 2 * Mod(l, 2048)
    first = [coordinate_span_elems(coord, {h: n, l: 4096}) for n in range(1, 50)]
    again = [coordinate_span_elems(coord, {h: n, l: 4096}) for n in range(1, 50)]
    assert first == again == [4095] * 49


# --- per-core span bytes: docs/layout_model.md §6 ---------------------------------------------

POINTWISE = [8195, 256, 1, 1, 64]
POINTWISE_COORDS = [c0, c1, 0, 0, c2]


def test_pointwise_8195_dim0_overflows_by_the_seed_number():
    ranges = {c0: 8195, c1: 256, c2: 64}
    assert per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 0, ranges, 2) == 268_533_760
    assert per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 1, ranges, 2) == 32_768


def test_pointwise_8195_per_tile():
    tile = [1639, 256, 1, 1, 64]
    per_tile = {c0: 1639, c1: 256, c2: 64}
    assert per_core_span_bytes(tile, POINTWISE_COORDS, 0, per_tile, 2) == 53_706_752
    # the same through a split of the full range
    full = {c0: 8195, c1: 256, c2: 64}
    assert per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 0, full, 2, {c0: 5}) == 1664 * 256 * 64 * 2
    assert per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 0, full, 2, {c0: 2}) == 4224 * 256 * 64 * 2
    assert per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 0, full, 2, {c0: 8194}) is None


SUM_INPUT = [20, 16, 1, 2, 64]
SUM_INPUT_COORDS = [c0, c1, 0, r, c2]
SUM_RANGES = {c0: 20, c1: 16, c2: 64, r: 2}


def test_reduction_input_tile_aware_span():
    assert tile_aware_inner_extent_elems(SUM_INPUT, SUM_INPUT_COORDS, 0, SUM_RANGES) == 2048
    assert input_per_core_span_bytes(SUM_INPUT, SUM_INPUT_COORDS, 0, SUM_RANGES, 2) == 81_920
    assert input_per_core_span_bytes(SUM_INPUT, SUM_INPUT_COORDS, 0, SUM_RANGES, 2, {c0: 10}) == 8_192
    assert input_per_core_span_bytes(SUM_INPUT, SUM_INPUT_COORDS, 1, SUM_RANGES, 2) == 4_096


def test_tile_aware_inner_extent_caps_and_constants():
    # inner c1 split 2 -> 8; the constant dim counts at full size (3); r and c2 full
    size = [20, 16, 3, 2, 64]
    assert tile_aware_inner_extent_elems(size, SUM_INPUT_COORDS, 0, SUM_RANGES, {c1: 2}) == 8 * 3 * 2 * 64
    # a coordinate spanning more than its dim is capped at the dim size
    assert tile_aware_inner_extent_elems([4, 8, 64], [c0, 2 * c1, c2], 0, {c0: 4, c1: 8, c2: 64}) == 8 * 64
    # the stick dim has nothing inside it
    assert tile_aware_inner_extent_elems(SUM_INPUT, SUM_INPUT_COORDS, 4, SUM_RANGES) == 1
    # an unknown inner span makes the whole extent unknown
    assert tile_aware_inner_extent_elems([4, 64, 64], [c0, Mod(3 * c1, 64), c2], 0, {c0: 4, c1: 64, c2: 64}) is None
    assert input_per_core_span_bytes([4, 64, 64], [c0, Mod(3 * c1, 64), c2], 0, {c0: 4, c1: 64, c2: 64}, 2) is None


def test_reduction_output_before_and_after_the_plan():
    out_coords = [c1, 0, c0, c2]
    assert per_core_span_bytes([16, 1, 20, 64], out_coords, 0, {c0: 20, c1: 16, c2: 64}, 2) == 40_960
    assert per_core_span_bytes([16, 1, 20, 64], out_coords, 2, {c0: 20, c1: 16, c2: 64}, 2) == 2_560
    # plan (0, 10): per-tile output layout [16, 1, 2, 64]
    assert per_core_span_bytes([16, 1, 2, 64], out_coords, 0, {c0: 2, c1: 16, c2: 64}, 2) == 4_096


def test_lm_head_restickified_weight():
    size, coords = [16, 64, 64], [floor(c0 / 64), c1, Mod(c0, 64)]
    ranges = {c0: 1024, c1: 64}
    assert per_core_span_bytes(size, coords, 0, ranges, 2) == 131_072
    assert per_core_span_bytes(size, coords, 1, ranges, 2) == 8_192
    for k, expected in [(2, 65_536), (4, 32_768), (16, 8_192)]:
        assert per_core_span_bytes(size, coords, 0, ranges, 2, {c0: k}) == expected


def test_multilevel_single_division_numbers():
    big = [4096, 4096, 1, 4096, 64]
    coords = [c1, c2, 0, c0, c3]
    ranges = {c0: 4096, c1: 4096, c2: 4096, c3: 64}
    assert per_core_span_bytes(big, coords, 0, ranges, 2) == 2**43
    assert per_core_span_bytes(big, coords, 1, ranges, 2) == 2**31
    assert per_core_span_bytes(big, coords, 3, ranges, 2) == 524_288
    # (64, 8) with scaled per-tile coordinates: 8*Mod(c1, 8) spans 57
    tile = [64, 512, 1, 4096, 64]
    scaled = [8 * Mod(c1, 8), c2, 0, 512 * c0 + floor(c1 / 8), c3]
    tile_ranges = {c0: 4096, c1: 64, c2: 512, c3: 64}
    assert per_core_span_bytes(tile, scaled, 0, tile_ranges, 2) == 15_300_820_992
    assert coordinate_span_elems(scaled[3], tile_ranges) == 512 * 4095 + 7 + 1


def test_other_seed_numbers():
    assert per_core_span_bytes([17, 16, 1, 1, 64], [c0, c1, 0, 0, c2], 0, {c0: 17, c1: 16, c2: 64}, 2) == 34_816
    coords = [floor(c1 / 64), c0, Mod(c1, 64)]
    assert per_core_span_bytes([769, 8192, 64], coords, 0, {c0: 8192, c1: 49159}, 2) == 806_354_944


def test_stick_dim_and_bad_arguments_raise():
    ranges = {c0: 8195, c1: 256, c2: 64}
    with pytest.raises(ValueError, match="stick"):
        per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 4, ranges, 2)
    with pytest.raises(ValueError, match="stick"):
        input_per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 4, ranges, 2)
    with pytest.raises(ValueError, match="device_dim"):
        per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 5, ranges, 2)
    with pytest.raises(ValueError, match="device_dim"):
        per_core_span_bytes(POINTWISE, POINTWISE_COORDS, -1, ranges, 2)
    with pytest.raises(ValueError, match="coordinates"):
        per_core_span_bytes(POINTWISE, POINTWISE_COORDS[:-1], 0, ranges, 2)
    with pytest.raises(ValueError, match="itemsize"):
        per_core_span_bytes(POINTWISE, POINTWISE_COORDS, 0, ranges, 0)
    with pytest.raises(ValueError, match="positive"):
        per_core_span_bytes([0, 64], [c0, c2], 0, ranges, 2)


def test_unknown_span_propagates_to_bytes():
    assert per_core_span_bytes([100, 64], [Mod(3 * h, 64), c2], 0, {h: 100, c2: 64}, 2) is None


def test_coordinate_spans_report():
    ranges = {c0: 8195, c1: 256, c2: 64}
    spans = coordinate_spans(POINTWISE, POINTWISE_COORDS, ranges, 2)
    assert spans == [
        DimSpan(0, c0, ("c0",), 8195, 16384, 268_533_760, True),
        DimSpan(1, c1, ("c1",), 256, 64, 32_768, True),
    ]
    unknown = coordinate_spans([100, 64], [Mod(3 * h, 64), c2], {h: 100, c2: 64}, 2)
    assert unknown == [DimSpan(0, Mod(3 * h, 64), ("h",), None, 64, None, False)]
    assert coordinate_spans([64], [c2], {c2: 64}, 2) == []


@pytest.mark.parametrize("offset", [0, 5, 31, 63, 64 * 7 + 3])
def test_a_tiles_shifted_mod_inside_one_period_is_exact(offset):
    """A loop tile's coordinate is Mod(s + offset, M).  Inside one period it does not wrap
    and spans the tile's range; the span check used to report the whole dim for it (a
    decode step's repeat_kv read, tiled one head per iteration, "at most 512 MiB")."""
    for r in (1, 2, 3):
        coord = Mod(h + offset, 64)
        wraps = (offset % 64) + r > 64
        bound = coordinate_span_bound(coord, {h: r})
        assert bound == (None if wraps else SpanBound(r, True)), (offset, r)
        if bound is not None:
            assert bound.elems == brute_span(coord, {h: r})
    assert coordinate_span_bound(floor((c1 + 4) / 4) * 3 + Mod(c1 + 4, 4), {c1: 1}) == SpanBound(1, True)
