"""Property tests: the span bounds against the brute-force verifier.

The bound must never be below the true span (an underestimate lets an unsafe
tile through), must equal it whenever it claims to be exact, and must be exact
for single-symbol monotone coordinates.  Runs derandomised and database-less so
CI sees the same examples every time.
"""

from __future__ import annotations

import sympy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spyre_rules.facts.spans import (
    coordinate_span_bound,
    coordinate_span_elems,
    per_core_span_bytes,
)
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.facts.verifier import verify_spans

SYMS = sympy.symbols("s0 s1 s2", integer=True, nonnegative=True)
Mod, floor = sympy.Mod, sympy.floor

CI = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

coef = st.integers(-3, 6)
pos = st.integers(0, 6)


def true_span(coord, ranges) -> int:
    return verify_spans([1, 1], [coord, 0], ranges, 1).dims[0].span_elems


@st.composite
def ranges_for(draw, nsyms: int):
    return {s: draw(st.integers(1, 40)) for s in SYMS[:nsyms]}


@st.composite
def term(draw, s):
    """One shape compute_coordinates produces, with signs the planner never sees."""
    kind = draw(st.sampled_from(["affine", "floor", "mod", "floor_mod"]))
    if kind == "affine":
        return draw(coef) * s
    if kind == "floor":
        b = draw(st.integers(1, 9))
        return floor((draw(coef) * s + draw(st.integers(0, b - 1))) / b)
    m = draw(st.integers(1, 40))
    if kind == "mod":
        return draw(coef) * Mod(s, m)
    return draw(coef) * floor(draw(pos) * Mod(s, m) / draw(st.integers(1, 9)))


@st.composite
def separable_coordinate(draw):
    nsyms = draw(st.integers(1, 3))
    ranges = draw(ranges_for(nsyms))
    parts = [draw(term(draw(st.sampled_from(SYMS[:nsyms])))) for _ in range(draw(st.integers(1, 4)))]
    return draw(st.integers(-5, 5)) + sympy.Add(*parts), ranges


@CI
@given(separable_coordinate())
def test_bound_is_never_below_the_true_span(case):
    coord, ranges = case
    bound = coordinate_span_bound(coord, ranges)
    assert bound is not None  # only bare-symbol Mods and supported nodes here
    truth = true_span(coord, ranges)
    assert bound.elems >= truth
    if bound.exact:
        assert bound.elems == truth


@st.composite
def monotone_coordinate(draw):
    s = SYMS[0]
    ranges = {s: draw(st.integers(1, 200))}
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            parts.append(draw(pos) * s)
        else:
            b = draw(st.integers(1, 9))
            parts.append(floor((draw(pos) * s + draw(st.integers(0, b - 1))) / b))
    sign = draw(st.sampled_from([1, -1]))
    return draw(st.integers(-5, 5)) + sign * sympy.Add(*parts), ranges


@CI
@given(monotone_coordinate())
def test_bound_is_exact_for_single_symbol_monotone_coordinates(case):
    coord, ranges = case
    bound = coordinate_span_bound(coord, ranges)
    assert bound is not None and bound.exact
    assert bound.elems == true_span(coord, ranges)


@st.composite
def wild_coordinate(draw):
    """Anything the verifier evaluates: products, floors of sums, scaled Mods."""
    nsyms = draw(st.integers(1, 3))
    ranges = draw(ranges_for(nsyms))
    leaves = st.sampled_from(SYMS[:nsyms]) | st.integers(-4, 6).map(sympy.Integer)

    def extend(children):
        return st.one_of(
            st.tuples(children, children).map(lambda ab: ab[0] + ab[1]),
            st.tuples(children, children).map(lambda ab: ab[0] * ab[1]),
            st.tuples(children, st.integers(1, 9)).map(lambda ab: floor(ab[0] / ab[1])),
            st.tuples(children, st.integers(1, 30)).map(lambda ab: Mod(ab[0], ab[1])),
            st.tuples(children, st.integers(0, 10)).map(lambda ab: sympy.Max(ab[0], ab[1])),
        )

    coord = draw(st.recursive(leaves, extend, max_leaves=6))
    return coord, ranges


@CI
@given(wild_coordinate())
def test_bound_is_unknown_or_sound_for_any_coordinate(case):
    coord, ranges = case
    bound = coordinate_span_bound(coord, ranges)
    if bound is None:
        return
    truth = true_span(coord, ranges)
    assert bound.elems >= truth
    if bound.exact:
        assert bound.elems == truth


@CI
@given(separable_coordinate(), st.data())
def test_split_bounds_the_per_tile_range(case, data):
    coord, ranges = case
    s = data.draw(st.sampled_from(sorted(ranges, key=str)))
    k = data.draw(st.integers(1, 4))
    full = {**ranges, s: ranges[s] * k}
    split = coordinate_span_elems(coord, full, {s: k})
    # k divides the range: tiles of n / k, or whole-stick tiles and a shorter last one when n / k
    # would cut sticks (facts/tile_extent.py); never shorter than n / k
    tile = tile_extent(full[s], k)
    assert tile >= ranges[s]
    assert split == coordinate_span_elems(coord, {**ranges, s: tile})
    if tile == ranges[s]:
        assert split == coordinate_span_elems(coord, ranges)
    assert split >= true_span(coord, ranges)
    if k > 1 and s in coord.free_symbols:
        # a remainder split measures its whole tile, never less than the exact split's
        longer = ranges[s] * k + 1
        tile = tile_extent(longer, k)
        remainder = coordinate_span_elems(coord, {**ranges, s: longer}, {s: k})
        if tile is None:  # the last of k tiles would be empty: no per-tile answer
            assert remainder is None
        else:
            assert remainder == coordinate_span_elems(coord, {**ranges, s: tile})
            assert remainder >= split


@CI
@given(st.lists(separable_coordinate(), min_size=2, max_size=3), st.sampled_from([1, 2, 4]))
def test_per_core_bytes_cover_the_verified_dim_spans(cases, itemsize):
    coords = [sympy.Integer(0)] * len(cases) + [SYMS[0]]
    ranges = {s: 1 for s in SYMS}
    for d, (coord, rng) in enumerate(cases):
        coords[d] = coord
        for s, r in rng.items():
            ranges[s] = max(ranges[s], r)
    ranges[SYMS[0]] = max(ranges[SYMS[0]], 2)
    device_size = [50] * len(cases) + [64]
    report = verify_spans(device_size, coords, ranges, itemsize)
    for dim in report.dims[:-1]:
        bound = per_core_span_bytes(device_size, coords, dim.device_dim, ranges, itemsize)
        assert bound >= dim.span_bytes
