"""The values a device coordinate can take over a box of symbol values: a sound [lo, hi].

The span facts (``facts/spans``) measure how far a coordinate moves; the
in-allocation proof (``codegen/in_allocation``) needs where it sits: the least and
greatest value over every point of the box.  The answer is exact-rational interval
arithmetic, which never lies inside the true range (it may be wider: correlated
terms such as ``c - 64*floor(c/64)`` are bounded term by term).  ``None`` means no
sound bound is known for some node; callers treat that as unproven, never as fine.

Unlike the span facts, a ``Mod`` of any dividend is bounded here: with a positive
integer modulus its value lies in ``[0, m)`` whatever the dividend (sympy's ``Mod``
takes the sign of the modulus), and exactly ``dividend - m*q`` when the dividend's
interval does not cross a multiple of ``m``.  A shifted tile's coordinates
(``Mod(c1 + 64, 64)``) and a pad's (``Mod(c1 + 1, 64)``) are such Mods.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Mapping

import sympy

from spyre_rules.facts.sympy_native import normalize

__all__ = ["value_range"]

Num = int | Fraction
Interval = tuple[Num, Num]


class _Unbounded(Exception):
    """A node with no sound interval rule."""


def _mul(a: Interval, b: Interval) -> Interval:
    corners = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
    return min(corners), max(corners)


def _mod(a: Interval, m: int, integer: bool) -> Interval:
    q = math.floor(Fraction(a[0]) / m)
    if math.floor(Fraction(a[1]) / m) == q:  # no wrap inside the box
        return a[0] - q * m, a[1] - q * m
    return 0, (m - 1 if integer else m)


def _interval(e: sympy.Expr, box: Mapping[sympy.Symbol, Interval]) -> Interval:
    if e.is_Rational:
        v = int(e) if e.is_Integer else Fraction(int(e.p), int(e.q))
        return v, v
    if e.is_Symbol:
        if e not in box:
            raise _Unbounded
        return box[e]
    if isinstance(e, sympy.Mod):
        a, m = e.args
        if not (m.is_Integer and int(m) > 0):
            raise _Unbounded
        return _mod(_interval(a, box), int(m), bool(a.is_integer))
    if e.is_Pow:
        base, exp = e.args
        if not (exp.is_Integer and int(exp) >= 1):
            raise _Unbounded
        acc, b = (1, 1), _interval(base, box)
        for _ in range(int(exp)):
            acc = _mul(acc, b)
        return acc
    parts = [_interval(a, box) for a in e.args]
    if e.is_Add:
        return sum(p[0] for p in parts), sum(p[1] for p in parts)
    if e.is_Mul:
        acc = (1, 1)
        for p in parts:
            acc = _mul(acc, p)
        return acc
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        (p,) = parts
        rnd: Callable[[Any], int] = math.floor if isinstance(e, sympy.floor) else math.ceil
        return rnd(p[0]), rnd(p[1])
    if isinstance(e, (sympy.Min, sympy.Max)):
        pick = min if isinstance(e, sympy.Min) else max
        return pick(p[0] for p in parts), pick(p[1] for p in parts)
    raise _Unbounded


def value_range(coord: Any, box: Mapping[Any, tuple[int, int]]) -> tuple[int, int] | None:
    """Sound ``(lo, hi)`` of the integer coordinate ``coord`` over every point with each
    symbol ``s`` in ``box[s] = (lo_s, hi_s)`` (inclusive; keyed by Symbol or name);
    ``None`` if a symbol has no range or a node has no sound rule."""
    native, pairs = normalize(sympy.sympify(coord))
    by_name = {(k.name if isinstance(k, sympy.Symbol) else str(k)): v for k, v in box.items()}
    canon_box: dict[sympy.Symbol, Interval] = {}
    for canon, orig in pairs:
        found = box.get(orig, by_name.get(orig.name))
        if found is None or int(found[0]) > int(found[1]):
            return None
        canon_box[canon] = (int(found[0]), int(found[1]))
    try:
        lo, hi = _interval(native, canon_box)
    except _Unbounded:
        return None
    # an integer-valued coordinate lies between the integers inside the interval
    return math.ceil(lo), math.floor(hi)
