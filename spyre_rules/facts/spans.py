"""Span facts for device coordinates (docs/layout_model.md §3.2-§3.3).

These functions *measure*; they never compare against a limit.  Every answer is
either ``None`` ("cannot be bounded soundly") or a bound that is never below the
true span over the given ranges.  An underestimate would let a planner accept a
tile whose per-core span overflows, so every place where the reference rule
(§3.3) can underestimate is replaced by a sound rule:

* **Per-symbol terms, Mod critical points.**  §3.3 evaluates a term containing
  ``Mod(s, M)`` at ``{min(R, M) - 1} ∪ {0, R - 1}``.  That is exact for a single
  Mod on the bare symbol, but not in general: ``Mod(h, 3) + Mod(h, 5)`` over
  ``[0, 100)`` peaks at 6 (h = 14), the critical points find only 5; and
  ``h + Mod(h, 64)`` over ``[0, 200)`` peaks at 254 (h = 191), the points find
  206.  We therefore bound every term by exact-rational interval arithmetic
  (always sound) and use the critical points only as *witnesses*: values the
  term really takes.  When the witnesses reach both interval ends the bound is
  exact; otherwise the (larger) interval bound is returned and flagged inexact.
* **Monotone terms.**  §3.3 assumes a Mod-free term is non-decreasing.  We prove
  monotonicity structurally (sums of like-directed parts, positive/negative
  constant factors, floor/ceiling, non-wrapping Mod, products of non-negative
  like-directed factors).  Proven monotone terms (either direction) are exact
  at the endpoints; anything else gets the sound interval bound.
* **Non-bare Mod.**  As the spec demands, a Mod whose dividend is not exactly a
  loop symbol (``Mod(3*h, 64)``, ``Mod(floor(h/2), 64)``, ``Mod(h + l, 64)``)
  makes the whole coordinate ``None``; nodes we cannot bound do the same.
* **Non-separable coordinates.**  §3.3 sums "coord with the other symbols set to
  0" per symbol, which underestimates ``h*l`` (0 + 0) or ``floor((h + l)/2)``.
  We split the coordinate into additive parts, merge parts that share symbols
  into components, and bound each component over the box of its symbols'
  ranges.  For the separable coordinates compute_coordinates produces this is
  the same per-symbol sum as §3.3.

Loop symbols are integers in ``[0, R)`` by definition, so symbols are re-created
with ``integer=True, nonnegative=True`` before analysis (letting sympy fold
``floor(h/1)`` to ``h``).  torch's Inductor index functions are recognised by
class name, so importing this module never imports torch.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

import sympy

from spyre_rules.facts.breakpoints import breakpoints as _breakpoints
from spyre_rules.facts.breakpoints import linear_periods as _linear_periods
from spyre_rules.facts.sympy_native import normalize as _normalize
from spyre_rules.facts.tile_extent import tile_extent

__all__ = [
    "DimSpan",
    "SpanBound",
    "coordinate_span_bound",
    "coordinate_span_elems",
    "coordinate_spans",
    "input_per_core_span_bytes",
    "per_core_span_bytes",
    "tile_aware_inner_extent_elems",
]

# Monotonicity tags: the expression is constant, non-decreasing in every
# symbol, non-increasing in every symbol, or not proven either (None).
_CONST, _INC, _DEC = 0, 1, -1


class _Unbounded(Exception):
    """The expression has no sound bound we can prove (maps to ``None``)."""


@dataclass(frozen=True)
class SpanBound:
    """A sound span bound and whether it is provably attained.

    ``exact`` lets reports distinguish "the access really spans this much" from
    "at most this much"; planners may only rely on the upper-bound reading.
    """

    elems: int
    exact: bool


@dataclass(frozen=True)
class DimSpan:
    """One non-stick, non-constant device dim of an access (for reports and rules)."""

    device_dim: int
    coord: sympy.Expr
    symbols: tuple[str, ...]
    span_elems: int | None
    stride_elems: int
    span_bytes: int | None
    exact: bool


# --------------------------------------------------------------------------------------
# Exact-rational interval arithmetic with monotonicity tags.  Expressions are
# compiled once into closures over plain ints/Fractions: bounds are asked for many
# range combinations of the same coordinate, and sympy arithmetic is slow.

Num = int | Fraction
Interval = tuple[Num, Num, int | None]
Box = Mapping[sympy.Symbol, tuple[int, int]]
IvFn = Callable[[Box], Interval]


def _num(e: sympy.Expr) -> Num:
    return int(e) if e.is_Integer else Fraction(int(e.p), int(e.q))


def _combine(dirs: set[int | None]) -> int | None:
    dirs.discard(_CONST)
    if not dirs:
        return _CONST
    if len(dirs) == 1:
        return next(iter(dirs))
    return None


def _add(vals: Sequence[Interval]) -> Interval:
    lo = sum(v[0] for v in vals)
    hi = sum(v[1] for v in vals)
    return lo, hi, (_CONST if lo == hi else _combine({v[2] for v in vals}))


def _mul2(a: Interval, b: Interval) -> Interval:
    (l1, h1, d1), (l2, h2, d2) = a, b
    if d1 == _CONST and d2 == _CONST:
        v = l1 * l2
        return v, v, _CONST
    if d2 == _CONST:
        (l1, h1, d1), (l2, h2, d2) = b, a
    if d1 == _CONST:  # constant factor l1 times a varying factor
        c = l1
        if c == 0:
            return 0, 0, _CONST
        if c > 0:
            return c * l2, c * h2, d2
        return c * h2, c * l2, (None if d2 is None else -d2)
    prods = (l1 * l2, l1 * h2, h1 * l2, h1 * h2)
    # a product of non-negative factors moving the same way moves that way too
    same = d1 == d2 and d1 is not None and l1 >= 0 and l2 >= 0
    return min(prods), max(prods), (d1 if same else None)


def _mul(vals: Sequence[Interval]) -> Interval:
    acc: Interval = (1, 1, _CONST)
    for v in vals:
        acc = _mul2(acc, v)
    return acc


def _symbol_iv(lo: int, hi: int) -> Interval:
    return lo, hi, (_CONST if lo == hi else _INC)


def _mod_iv(v: Interval, mod: int, bare: bool) -> Interval:
    """``Mod(a, mod)`` over ``a``'s interval.  Inside one period it is ``a`` shifted by a
    constant, so it keeps ``a``'s direction (a tile's ``Mod(s + offset, M)``).  Across a
    wrap only a bare symbol's residues are trusted (the §3.3 critical points); any
    other dividend (``Mod(3*h, 64)``) stays unknown."""
    lo, hi, d = v
    base = math.floor(Fraction(lo) / mod) * mod
    if base == math.floor(Fraction(hi) / mod) * mod:
        return lo - base, hi - base, (_CONST if lo == hi else d)
    if not bare:
        raise _Unbounded
    return 0, mod - 1, None


def _pow_iv(v: Interval, n: int) -> Interval:
    lo, hi, d = v
    if lo >= 0 or n % 2:  # x**n is increasing on x >= 0, and everywhere for odd n
        return lo**n, hi**n, d
    return (0 if hi >= 0 else hi**n), max(lo**n, hi**n), None


def _minmax(vals: Sequence[Interval], pick: Callable[..., Num]) -> Interval:
    lo, hi = pick(v[0] for v in vals), pick(v[1] for v in vals)
    return lo, hi, (_CONST if lo == hi else _combine({v[2] for v in vals}))


def _compile_iv(e: sympy.Expr) -> IvFn:
    """Closure giving a sound [lo, hi] of ``e`` over a box, tagged with a proven direction.

    Raises ``_Unbounded`` for nodes with no sound rule (structural: independent of the
    ranges); the closure raises it for a ``Mod`` of a non-symbol that wraps in its box.
    """
    if e.is_Rational:
        const = (_num(e),) * 2 + (_CONST,)
        return lambda box: const
    if e.is_Symbol:
        return lambda box: _symbol_iv(*box[e])
    if isinstance(e, sympy.Mod):
        a, m = e.args
        if not (m.is_Integer and int(m) > 0):
            raise _Unbounded
        f, mod, bare = _compile_iv(a), int(m), a.is_Symbol
        return lambda box: _mod_iv(f(box), mod, bare)
    if e.is_Pow:
        base, exp = e.args
        if not (exp.is_Integer and int(exp) >= 1):
            raise _Unbounded
        f, n = _compile_iv(base), int(exp)
        return lambda box: _pow_iv(f(box), n)
    fs = [_compile_iv(a) for a in e.args]
    if e.is_Add:
        return lambda box: _add([f(box) for f in fs])
    if e.is_Mul:
        return lambda box: _mul([f(box) for f in fs])
    if isinstance(e, (sympy.floor, sympy.ceiling)):
        (f,) = fs
        rnd = math.floor if isinstance(e, sympy.floor) else math.ceil
        return lambda box: (lambda v: (rnd(v[0]), rnd(v[1]), v[2]))(f(box))
    if isinstance(e, (sympy.Min, sympy.Max)):
        pick = min if isinstance(e, sympy.Min) else max
        return lambda box: _minmax([f(box) for f in fs], pick)
    raise _Unbounded


def _witness_points(moduli: frozenset[int], r: int) -> set[int]:
    """§3.3 critical points, plus each modulus's last wrap and the joint (lcm) wrap."""
    points = {0, r - 1}
    for m in moduli:
        points.add(min(r, m) - 1)
        if r >= m:
            points.add((r // m) * m - 1)
    return points


#: (symbols, interval function, Mod moduli, breakpoint periods of a piecewise-linear term)
_Component = tuple[tuple[sympy.Symbol, ...], IvFn, frozenset[int], frozenset[int] | None]

@lru_cache(maxsize=8192)
def _components(native: sympy.Expr) -> tuple[_Component, ...] | None:
    """Additive parts grouped so that no two groups share a symbol, compiled.

    ``None`` if some part has no sound interval rule.
    """
    groups: list[tuple[set[sympy.Symbol], list[sympy.Expr]]] = []
    for part in sympy.Add.make_args(native):
        syms = set(part.free_symbols)
        if not syms:
            continue  # constant offsets move the coordinate, not its span
        merged, rest = [part], []
        for group_syms, group_parts in groups:
            if group_syms & syms:
                syms |= group_syms
                merged.extend(group_parts)
            else:
                rest.append((group_syms, group_parts))
        groups = [*rest, (syms, merged)]
    out = []
    try:
        for syms, parts in groups:
            fs = [_compile_iv(p) for p in parts]
            moduli = {int(a.args[1]) for p in parts for a in p.atoms(sympy.Mod)}
            if moduli:
                moduli.add(math.lcm(*moduli))
            fn: IvFn = lambda box, fs=fs: _add([f(box) for f in fs])  # noqa: E731
            periods = _linear_periods(parts, next(iter(syms))) if len(syms) == 1 else None
            out.append((tuple(sorted(syms, key=lambda s: s.name)), fn, frozenset(moduli), periods))
    except _Unbounded:
        return None
    return tuple(out)


def _component_bound(component: _Component, ranges: Mapping[sympy.Symbol, int],
                     starts: Mapping[sympy.Symbol, int]) -> tuple[Num, Num, bool]:
    syms, fn, moduli, periods = component
    lo, hi, d = fn({s: (starts.get(s, 0), starts.get(s, 0) + ranges[s] - 1) for s in syms})
    if d is not None:
        return lo, hi, True
    if len(syms) != 1 or any(starts.get(s, 0) for s in syms):
        return lo, hi, False  # the interval bound: sound, exactness not shown
    (s,) = syms
    # A term linear between multiples of its periods (Mod(h, 64) + Mod(h, 128)) takes
    # its extremes at those breakpoints or the endpoints: evaluated jointly, the
    # whole term's exact range (the interval bound adds each part's own extremes).
    points = _breakpoints(periods, ranges[s]) if periods is not None else None
    if points is not None:
        seen = [fn({s: (p, p)})[0] for p in points]
        return min(seen), max(seen), True
    # witnesses are values the term really takes; reaching both ends proves exactness
    seen = [fn({s: (p, p)})[0] for p in _witness_points(moduli, ranges[s])]
    return lo, hi, (min(seen) == lo and max(seen) == hi)


@lru_cache(maxsize=65536)
def _bound_cached(native: sympy.Expr, ranges_items: tuple[tuple[sympy.Symbol, int], ...],
                  start_items: tuple[tuple[sympy.Symbol, int], ...] = ()) -> SpanBound | None:
    components = _components(native)
    if components is None:
        return None
    ranges, starts = dict(ranges_items), dict(start_items)
    lo_total = hi_total = 0
    exact = True
    try:
        for component in components:
            lo, hi, ex = _component_bound(component, ranges, starts)
            lo_total, hi_total, exact = lo_total + lo, hi_total + hi, exact and ex
    except _Unbounded:  # a Mod of a non-symbol that wraps in this box
        return None
    span = hi_total - lo_total + 1
    if Fraction(span).denominator != 1 or Fraction(lo_total).denominator != 1:
        return None  # not an integer-valued coordinate
    return SpanBound(int(span), exact)


# --------------------------------------------------------------------------------------
# Input checking.


def _as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def _lookup(mapping: Mapping[Any, Any] | None, sym: sympy.Symbol) -> Any:
    """Find ``sym`` by identity first, then by name (callers key by Symbol or str)."""
    if not mapping:
        return None
    if sym in mapping:
        return mapping[sym]
    for key, value in mapping.items():
        if (key.name if isinstance(key, sympy.Symbol) else key) == sym.name:
            return value
    return None


def _sympify(coord: Any) -> sympy.Expr:
    return sympy.sympify(coord, strict=True)


def _layout(device_size: Sequence[Any], coords: Sequence[Any]) -> tuple[int, ...]:
    sizes = tuple(_as_int(s) for s in device_size)
    if not sizes:
        raise ValueError("device_size is empty")
    if any(s is None or s < 1 for s in sizes):
        raise ValueError(f"device_size {list(device_size)} must hold positive integers")
    if len(coords) != len(sizes):
        raise ValueError(
            f"{len(coords)} coordinates for a {len(sizes)}-dim device_size {list(sizes)}"
        )
    return sizes


def _dim(device_dim: Any, ndim: int, *, allow_stick: bool) -> int:
    d = _as_int(device_dim)
    if d is None or not 0 <= d < ndim:
        raise ValueError(f"device_dim {device_dim!r} is not in [0, {ndim})")
    if d == ndim - 1 and not allow_stick:
        raise ValueError(
            f"device_dim {d} is the stick dim; the stick coordinate is never a span candidate"
        )
    return d


def _itemsize(itemsize: Any) -> int:
    n = _as_int(itemsize)
    if n is None or n < 1:
        raise ValueError(f"itemsize {itemsize!r} must be a positive integer")
    return n


# --------------------------------------------------------------------------------------
# Public facts.


def coordinate_span_bound(
    coord: Any,
    var_ranges: Mapping[Any, Any],
    split_by_symbol: Mapping[Any, Any] | None = None,
    tile_of_symbol: Mapping[Any, int] | None = None,
) -> SpanBound | None:
    """Sound span bound of one device coordinate, with an exactness flag.

    ``split_by_symbol`` maps a symbol to the number of tiles its range is cut
    into; the per-tile range is the tile extent ``ceil(R / k)`` (``tile_extent``:
    a shorter last tile is bounded by it).  ``k`` tiles that cannot all be
    non-empty give ``None``.  ``k < 1`` is a caller
    bug and raises ``ValueError``.  A free symbol with a missing, non-integer or
    empty (``< 1``) range gives ``None``.  ``tile_of_symbol`` measures tile ``t``
    of a split symbol, ``[t * T, (t + 1) * T)`` with ``T`` the tile extent, instead of tile 0.
    """
    native, pairs = _normalize(_sympify(coord))
    if not pairs:
        return SpanBound(1, True)
    items, starts = [], []
    for canon, orig in pairs:
        r = _as_int(_lookup(var_ranges, orig))
        if r is None or r < 1:
            return None
        raw_k = _lookup(split_by_symbol, orig)
        if raw_k is not None:
            k = _as_int(raw_k)
            if k is None or k < 1:
                raise ValueError(f"split count {raw_k!r} for {orig} must be a positive integer")
            r = tile_extent(r, k)
            if r is None:
                return None
            tile = _lookup(tile_of_symbol, orig)
            if tile:
                starts.append((canon, int(tile) * r))
        items.append((canon, r))
    return _bound_cached(native, tuple(items), tuple(starts))


def coordinate_span_elems(
    coord: Any,
    var_ranges: Mapping[Any, Any],
    split_by_symbol: Mapping[Any, Any] | None = None,
) -> int | None:
    """Conservative span (max - min + 1) of a coordinate over per-tile ranges (§3.3).

    ``None`` means "no sound bound", never "fits".  See ``coordinate_span_bound``
    for the split and range rules and the module docstring for where this is
    deliberately safer than the reference rule.
    """
    bound = coordinate_span_bound(coord, var_ranges, split_by_symbol)
    return None if bound is None else bound.elems


def per_core_span_bytes(
    device_size: Sequence[Any],
    coords: Sequence[Any],
    device_dim: int,
    var_ranges: Mapping[Any, Any],
    itemsize: int,
    split_by_symbol: Mapping[Any, Any] | None = None,
) -> int | None:
    """Output-side per-core span: span x prod(device_size[d+1:]) x itemsize.

    Inner dims count at full size because a write covers whole inner extents
    (docs/layout_model.md §3.2); outer dims choose separate base regions.
    """
    sizes = _layout(device_size, coords)
    d = _dim(device_dim, len(sizes), allow_stick=False)
    item = _itemsize(itemsize)
    span = coordinate_span_elems(coords[d], var_ranges, split_by_symbol)
    if span is None:
        return None
    return span * math.prod(sizes[d + 1 :]) * item


def tile_aware_inner_extent_elems(
    device_size: Sequence[Any],
    coords: Sequence[Any],
    device_dim: int,
    var_ranges: Mapping[Any, Any],
    split_by_symbol: Mapping[Any, Any] | None = None,
) -> int | None:
    """Elements one step of ``coords[device_dim]`` is multiplied by on the input side (§3.2).

    A read of a varying inner coordinate only covers that coordinate's (tiled)
    span, capped at the dim size; a constant inner coordinate counts at full
    size, as in the reference.  ``None`` if any varying inner span is unknown.
    Asking for the stick dim is allowed and gives 1 (nothing is inside it).
    """
    sizes = _layout(device_size, coords)
    d = _dim(device_dim, len(sizes), allow_stick=True)
    extent = 1
    for inner in range(d + 1, len(sizes)):
        coord = _sympify(coords[inner])
        if not coord.free_symbols:
            extent *= sizes[inner]
            continue
        span = coordinate_span_elems(coord, var_ranges, split_by_symbol)
        if span is None:
            return None
        extent *= min(span, sizes[inner])
    return extent


def input_per_core_span_bytes(
    device_size: Sequence[Any],
    coords: Sequence[Any],
    device_dim: int,
    var_ranges: Mapping[Any, Any],
    itemsize: int,
    split_by_symbol: Mapping[Any, Any] | None = None,
) -> int | None:
    """Input-side per-core span: span x tile-aware inner extent x itemsize (§3.2)."""
    sizes = _layout(device_size, coords)
    d = _dim(device_dim, len(sizes), allow_stick=False)
    item = _itemsize(itemsize)
    span = coordinate_span_elems(coords[d], var_ranges, split_by_symbol)
    if span is None:
        return None
    inner = tile_aware_inner_extent_elems(sizes, coords, d, var_ranges, split_by_symbol)
    if inner is None:
        return None
    return span * inner * item


def coordinate_spans(
    device_size: Sequence[Any],
    coords: Sequence[Any],
    var_ranges: Mapping[Any, Any],
    itemsize: int,
    split_by_symbol: Mapping[Any, Any] | None = None,
) -> list[DimSpan]:
    """Output-side span of every device dim a planner would consider (§3.2).

    The stick dim and constant coordinates are left out, as in the reference:
    neither can overflow by moving.
    """
    sizes = _layout(device_size, coords)
    item = _itemsize(itemsize)
    out: list[DimSpan] = []
    for d in range(len(sizes) - 1):
        coord = _sympify(coords[d])
        if not coord.free_symbols:
            continue
        bound = coordinate_span_bound(coord, var_ranges, split_by_symbol)
        stride = math.prod(sizes[d + 1 :])
        out.append(
            DimSpan(
                device_dim=d,
                coord=coord,
                symbols=tuple(sorted(s.name for s in coord.free_symbols)),
                span_elems=None if bound is None else bound.elems,
                stride_elems=stride,
                span_bytes=None if bound is None else bound.elems * stride * item,
                exact=bound is not None and bound.exact,
            )
        )
    return out
