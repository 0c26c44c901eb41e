"""Where a single-symbol term linear between multiples of its moduli takes its extremes.

``Mod(h, 64) + Mod(h, 128)``, ``h - floor(h/2)``: each part is linear in ``h`` on every
``[kM, (k+1)M)``, so the whole term is linear between consecutive multiples of any of
its moduli and takes its extremes on both sides of them or at the endpoints.  The
span facts (``facts/spans.py``) evaluate the term at these points jointly: the exact
range, where adding each part's own extremes overestimates.  Measures nothing itself.
"""

from __future__ import annotations

from collections.abc import Sequence

import sympy

__all__ = ["MAX_BREAKPOINTS", "breakpoints", "linear_periods"]

#: breakpoints evaluated jointly per piecewise-linear term; beyond, the interval bound stands
MAX_BREAKPOINTS = 4096


def linear_periods(parts: Sequence[sympy.Expr], s: sympy.Symbol) -> frozenset[int] | None:
    """The periods M of a term in ``s`` that is linear between multiples of its moduli:
    every part is a constant times ``s``, ``Mod(s, M)`` or ``floor(s/M)`` (each of
    those is linear in ``s`` on every ``[kM, (k+1)M)``).  None for anything else --
    a product of varying factors, a non-bare Mod dividend (which makes the whole
    coordinate unbounded anyway), a Min/Max."""
    periods: set[int] = set()
    for part in parts:
        _, atom = part.as_coeff_Mul()
        if atom == s:
            continue
        if isinstance(atom, sympy.Mod) and atom.args[0] == s and atom.args[1].is_Integer:
            periods.add(int(atom.args[1]))
            continue
        if isinstance(atom, sympy.floor):
            (arg,) = atom.args
            c, rest = arg.as_coeff_Mul()
            if rest == s and c.is_Rational and c > 0 and c.p == 1:
                periods.add(int(c.q))
                continue
        return None
    return frozenset(m for m in periods if m > 0)


def breakpoints(periods: frozenset[int], r: int) -> set[int] | None:
    """Both sides of every multiple of each period inside ``[0, r)``, and the endpoints:
    where a term linear between them takes its extremes."""
    if sum(2 * ((r - 1) // m) for m in periods) > MAX_BREAKPOINTS:
        return None
    points = {0, r - 1}
    for m in periods:
        for k in range(m, r, m):
            points.update((k - 1, k))
    return points
