"""facts/value_range.py: a sound [lo, hi] of a device coordinate over a box of symbol values.

Exact answers for the coordinates codegen emits, ``None`` where no sound rule is
known, and never an interval that misses a value the coordinate takes (checked by
enumeration over small boxes)."""

from __future__ import annotations

import itertools

import pytest
import sympy
from torch.utils._sympy.functions import FloorDiv, ModularIndexing

from spyre_rules.facts.value_range import value_range

c0, c1 = sympy.symbols("c0 c1")
floor, Mod = sympy.floor, sympy.Mod


@pytest.mark.parametrize("coord,box,expected", [
    (c0, {c0: (0, 126)}, (0, 126)),
    (floor(c1 / 64), {c1: (0, 126)}, (0, 1)),
    (Mod(c1, 64), {c1: (0, 126)}, (0, 63)),           # wraps: the whole residue range
    (Mod(c1, 64), {c1: (64, 126)}, (0, 62)),          # no wrap: exact
    (Mod(c1 + 1, 64), {c1: (0, 62)}, (1, 63)),        # a pad's shifted stick position
    (Mod(c1 + 1, 64), {c1: (0, 63)}, (0, 63)),
    (floor(c1 / 64 + sympy.Rational(1, 64)), {c1: (0, 63)}, (0, 1)),
    (floor(c1 / 64) + 1, {c1: (0, 63)}, (1, 1)),
    (2 * c0 + c1 - 3, {c0: (0, 4), c1: (1, 2)}, (-2, 7)),
    (sympy.Integer(5), {}, (5, 5)),
    (FloorDiv(c0, 8), {"c0": (0, 63)}, (0, 7)),       # torch's index functions, by name
    (ModularIndexing(c0, 4, 8), {c0: (0, 255)}, (0, 7)),
    (sympy.ceiling(c0 / 3), {c0: (1, 7)}, (1, 3)),
    (sympy.Min(c0, 3), {c0: (0, 9)}, (0, 3)),
])
def test_exact_ranges(coord, box, expected):
    assert value_range(coord, box) == expected


@pytest.mark.parametrize("coord,box", [
    (c0 + c1, {c0: (0, 3)}),                  # c1 has no range
    (sympy.sin(c0), {c0: (0, 3)}),            # no sound rule for the node
    (Mod(c0, c1), {c0: (0, 3), c1: (1, 4)}),  # a symbolic modulus
    (c0, {c0: (3, 2)}),                       # an empty range
])
def test_unbounded_is_none(coord, box):
    assert value_range(coord, box) is None


@pytest.mark.parametrize("coord", [
    floor(c0 / 64) * 127 + c1, Mod(c0 + 3 * c1, 5), c0 - 64 * floor(c0 / 64),
    floor((c0 + c1) / 7) - Mod(c1, 3), (c0 - 2) * (c1 - 3),
])
def test_every_value_lies_in_the_range(coord):
    box = {c0: (0, 20), c1: (2, 9)}
    lo, hi = value_range(coord, box)
    values = [int(coord.subs({c0: a, c1: b}))
              for a, b in itertools.product(range(0, 21), range(2, 10))]
    assert lo <= min(values) and max(values) <= hi
