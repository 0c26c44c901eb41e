"""Host coordinates keep the carry between index terms (class W5/C2 of the correctness issue)."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st
from sympy import Mod, floor

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates, safe_mod
from spyre_rules.facts.stick_layout import contiguous_strides

c0, c1, c2, c3 = sympy.symbols("c0:4", integer=True, nonnegative=True)
CS = [c0, c1, c2, c3]


def _brute(sizes, strides, offset):
    """Host coordinates of storage ``offset``, largest stride first."""
    out = [0] * len(sizes)
    for d in sorted(range(len(sizes)), key=lambda d: -strides[d]):
        if sizes[d] > 1:
            out[d], offset = divmod(offset, strides[d])
    assert offset == 0
    return out


def _check(sizes, strides, index, ranges):
    coords = host_coordinates(sizes, strides, index, ranges)
    syms = list(ranges)
    for values in itertools.product(*(range(ranges[s]) for s in syms)):
        env = {s: sympy.Integer(v) for s, v in zip(syms, values)}  # exact, no floats
        got = [int(c.xreplace(env)) for c in coords]
        assert got == _brute(sizes, strides, int(index.xreplace(env))), (index, coords, values)
    return coords


def test_view_rows_straddling_source_rows_carry():
    # x.view(3, 2) of a (2, 3) buffer: the old terms gave c1 + Mod(2*c0, 3), which reaches 3.
    coords = _check([2, 3], [3, 1], 2 * c0 + c1, {c0: 3, c1: 2})
    assert coords == [floor((2 * c0 + c1) / 3), Mod(2 * c0 + c1, 3)]


def test_terms_that_cannot_carry_stay_separate():
    coords = _check([4, 64], [64, 1], 64 * c0 + c1, {c0: 4, c1: 64})
    assert coords == [c0, c1]
    assert _check([8, 3, 5], [15, 5, 1], 15 * c0 + c1, {c0: 8, c1: 15}) == [
        c0, floor(c1 / 5), Mod(c1, 5)]


def test_a_step_between_strides_sends_its_residue_down():
    # Every fourth element of a (2, 3) buffer: offsets 0 and 4 = (0, 0) and (1, 1).
    _check([2, 3], [3, 1], 4 * c0, {c0: 2})


def test_floor_and_mod_of_sums_are_bounded_terms():
    # Inductor's read of a permuted input through a merged view.
    index = 2 * Mod(4 * c0 + c1, 6) + 12 * floor(c0 / 3) + Mod(floor((4 * c0 + c1) / 6), 2)
    _check([3, 6, 2], [12, 2, 1], index, {c0: 9, c1: 4})


def test_overlapping_view_is_refused():
    with pytest.raises(CoordinateError, match=re.escape(
            "host view of size [4, 4] stride [2, 1] overlaps itself")):
        host_coordinates([4, 4], [2, 1], 2 * c0 + c1, {c0: 4, c1: 4})


def test_misaligned_index_is_refused():
    with pytest.raises(CoordinateError, match="is not a multiple of the smallest stride"):
        host_coordinates([4, 4], [8, 2], 8 * c0 + c1, {c0: 4, c1: 7})


@pytest.mark.parametrize("k, a, q", [(4, 35, 28), (2, 35, 64), (4, 8, 8), (4, 6, 12), (3, 10, 6)])
def test_safe_mod_of_a_scaled_mod(k, a, q):
    # sympy 1.14 turns Mod(4*Mod(x, 35), 28) into 4*Mod(Mod(x, 35)**2, 7).
    x = sympy.Symbol("x", integer=True, nonnegative=True)
    expr = safe_mod(k * Mod(x, a), q)
    assert all(int(expr.xreplace({x: sympy.Integer(v)})) == (k * (v % a)) % q
               for v in range(300)), expr


@st.composite
def reshapes(draw):
    """A contiguous source shape and a view of it as another shape (flat index)."""
    src = draw(st.lists(st.integers(1, 9), min_size=1, max_size=3))
    numel = math.prod(src)
    factors = [f for f in range(2, numel + 1) if numel % f == 0]
    tgt, rest = [], numel
    while rest > 1 and len(tgt) < 3:
        f = draw(st.sampled_from([f for f in factors if rest % f == 0]))
        tgt.append(f)
        rest //= f
    if rest > 1:
        tgt.append(rest)
    return src, tgt


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(reshapes())
def test_any_reshape_of_a_contiguous_buffer_is_exact(case):
    src, tgt = case
    stride = contiguous_strides(tgt)
    dims = [d for d, n in enumerate(tgt) if n > 1]
    index = sum((CS[i] * stride[d] for i, d in enumerate(dims)), sympy.Integer(0))
    ranges = {CS[i]: tgt[d] for i, d in enumerate(dims)}
    _check(src, list(contiguous_strides(src)), index, ranges)
