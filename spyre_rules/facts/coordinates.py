"""Device (and host) coordinates of an Inductor index: facts only.

Spec: ``docs/layout_model.md`` §1.4 (``compute_coordinates``).  Given a tensor's
dims as ``(size, stride)`` pairs -- a SpyreTensorLayout's ``device_size`` /
``stride_map`` or a host view's ``size`` / ``stride`` -- and a flat element index
over Inductor loop variables, return one sympy expression per dim such that the
index equals ``sum(coord[d] * stride[d])``.  Span analysis reads these coordinates,
so a coordinate that is not exact must never be returned: anything this module
cannot decompose raises :class:`CoordinateError` naming the index and the reason.

Generalisation of §1.4 (the reference's "repeat var" rule): every additive piece of
the index is ``coeff * g`` where ``g`` is a loop var or a nest of ``floor(./b)`` and
``Mod(., m)`` around one; such a ``g`` takes exactly the values ``0..G-1``, so it is
treated as its own term ``(g, coeff, coeff*G)``.  For a plain var this is the
reference's ``(v, step, step*R)``, for ``coeff*Mod(v, M)`` with ``M < R`` it is the
reference's ``(Mod, coeff, coeff*M)``.  Treating terms independently is exact only
when their contributions to a dim can never carry into the next one, which holds
for the indices this is applied to on the device side (the forward map and the
per-tile indexer: each term walks one host dim).

Host views (``host_coordinates``) get an exact descent instead: an index of a view
whose rows straddle source rows (``x.view(3, 2)`` of a ``(2, 3)`` buffer reads
``2*c0 + c1``) has terms that carry, so terms whose residues may carry are summed
before they are divided (see :func:`_host_coordinates`).  ``access_coordinates``
composes that with the forward map.

No torch import: Inductor's ``FloorDiv`` / ``ModularIndexing`` / ``PythonMod`` /
``Identity`` are recognised by class name and rewritten into plain sympy.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import sympy

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.records import as_int as _as_int
from spyre_rules.facts.records import by_str

__all__ = [
    "access_coordinates",
    "device_coordinates",
    "forward_coordinates",
    "host_coordinates",
    "index_term_extents",
    "safe_mod",
    "safe_substitute",
    "to_plain_sympy",
]

_INF = math.inf


# --------------------------------------------------------------------------- index rewriting


def to_plain_sympy(expr: Any) -> sympy.Expr:
    """Rewrite Inductor's sympy functions into floor/Mod so one algebra applies.

    ``ModularIndexing(a, b, c)`` becomes ``Mod(floor(a/b), c)`` and ``FloorDiv(a, b)``
    becomes ``floor(a/b)``; these agree on the non-negative integers indices live on.
    """
    expr = sympy.sympify(expr)
    if not expr.args:
        return expr
    args = [to_plain_sympy(a) for a in expr.args]
    name = type(expr).__name__
    if name in ("FloorDiv", "CleanDiv") and len(args) == 2:
        return sympy.floor(args[0] / args[1])
    if name == "ModularIndexing" and len(args) == 3:
        return safe_mod(sympy.floor(args[0] / args[1]), args[2])
    if name in ("PythonMod", "Mod") and len(args) == 2:
        return safe_mod(args[0], args[1])
    if name == "Identity" and len(args) == 1:
        return args[0]
    return expr.func(*args)


# --------------------------------------------------------------------------- pieces




def _positive_int(value: sympy.Expr) -> int | None:
    v = _as_int(value)
    return v if v is not None and v > 0 else None


def _extent(expr: sympy.Expr, ranges: Mapping[sympy.Symbol, int]) -> tuple[sympy.Expr, int] | None:
    """``(g, G)`` when ``expr`` takes exactly the values ``0..G-1`` as its var ranges.

    Also simplifies ``Mod(g, m)`` with ``m >= G`` to ``g`` and ``floor(g/b)`` with
    ``b >= G`` to 0, which the loop ranges make exact.
    """
    if isinstance(expr, sympy.Symbol):
        if expr in ranges:
            return expr, ranges[expr]
        return None
    if isinstance(expr, sympy.floor):
        coeff, inner = expr.args[0].as_coeff_Mul()
        if not isinstance(coeff, sympy.Rational) or coeff.p != 1 or coeff.q < 1:
            return None
        sub = _extent(inner, ranges)
        if sub is None:
            return None
        g, extent = sub
        b = int(coeff.q)
        if b == 1:
            return g, extent
        new_extent = -(-extent // b)
        if new_extent == 1:
            return sympy.Integer(0), 1
        return sympy.floor(g / b), new_extent
    if isinstance(expr, sympy.Mod):
        modulus = _positive_int(expr.args[1])
        if modulus is None:
            return None
        sub = _extent(expr.args[0], ranges)
        if sub is None:
            return None
        g, extent = sub
        if modulus >= extent:
            return g, extent
        return sympy.Mod(g, modulus), modulus
    return None


def _max_value(expr: sympy.Expr, ranges: Mapping[sympy.Symbol, int]) -> Fraction | None:
    """An upper bound of a non-negative floor/Mod/sum expression of loop vars (None: not one)."""
    if isinstance(expr, sympy.Symbol):
        return Fraction(ranges[expr] - 1) if expr in ranges else None
    if expr.is_Rational:
        return Fraction(int(expr.p), int(expr.q)) if expr >= 0 else None
    parts = [_max_value(a, ranges) for a in expr.args]
    if any(p is None for p in parts):
        return None
    if isinstance(expr, sympy.Add):
        return sum(parts, Fraction(0))
    if isinstance(expr, sympy.Mul):
        return math.prod(parts, start=Fraction(1))
    if isinstance(expr, sympy.floor):
        return Fraction(math.floor(parts[0]))
    if isinstance(expr, sympy.Mod) and expr.args[1].is_Integer and expr.args[1] > 0:
        return min(parts[0], Fraction(int(expr.args[1]) - 1))
    return None


class _Shown:
    """``str(index)`` computed only when a message shows it: printing a sympy
    index costs more than deriving its coordinates, and only errors print it."""

    __slots__ = ("_index", "_text")

    def __init__(self, index: Any) -> None:
        self._index = index
        self._text: str | None = None

    def __str__(self) -> str:
        if self._text is None:
            self._text = str(self._index)
        return self._text

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _terms(
    index: Any,
    var_ranges: Mapping[Any, Any],
    bounded: bool = False,
) -> tuple[list[tuple[sympy.Expr, int, float | int]], dict[sympy.Symbol, sympy.Symbol], _Shown]:
    """Split an index into ``(value, step, limit)`` terms over canonical loop symbols.

    A term's value takes exactly the values ``0..limit/step - 1``.  With ``bounded``
    a floor or Mod of a sum of loop vars (what Inductor emits for a view of a
    permuted or sliced buffer) is also a term, with ``limit = step * (max + 1)``
    an upper bound only: the exact host descent needs no more than that.
    """
    try:
        expr = to_plain_sympy(index)
    except (sympy.SympifyError, TypeError) as exc:
        raise CoordinateError(f"index {index!r} is not a sympy expression: {exc}") from None
    shown = _Shown(index)

    def fail(reason: str) -> CoordinateError:
        return CoordinateError(f"cannot derive coordinates of index {shown}: {reason}")

    # Loop vars with range > 1 become integer, non-negative symbols so that sympy can
    # simplify floor/Mod exactly; size-1 vars are fixed at 0 (their coordinate is 0).
    canon: dict[sympy.Symbol, sympy.Symbol] = {}
    back: dict[sympy.Symbol, sympy.Symbol] = {}
    ranges: dict[sympy.Symbol, int] = {}
    zeros: dict[sympy.Symbol, sympy.Integer] = {}
    for sym in sorted(expr.free_symbols, key=by_str):
        if sym not in var_ranges:
            continue  # not a loop var: its pieces are skipped below
        rng = _as_int(var_ranges[sym])
        if rng is None:
            raise fail(f"range of {sym} is {var_ranges[sym]!r}, not an integer")
        if rng <= 1:
            zeros[sym] = sympy.Integer(0)
            continue
        if sym.is_integer and sym.is_nonnegative:
            new = sym
        else:
            new = sympy.Dummy(sym.name, integer=True, nonnegative=True)
        canon[sym] = new
        back[new] = sym
        ranges[new] = rng
    expr = safe_substitute(expr, {**zeros, **canon})
    expr = sympy.expand_mul(expr, deep=False)

    terms: list[tuple[sympy.Expr, int, float | int]] = []
    constant = 0
    for piece in sympy.Add.make_args(expr):
        coeff, rest = piece.as_coeff_Mul()
        if rest == 1 or rest.is_Number:
            value = coeff * rest
            if not value.is_Integer:
                raise fail(f"constant offset {value} is not an integer")
            constant += int(value)
            continue
        loop_syms = rest.free_symbols & ranges.keys()
        if not loop_syms:
            continue  # only non-loop symbols: not a loop-driven term (§1.4)
        shown_piece = piece.xreplace(back)
        if not coeff.is_Integer or coeff <= 0:
            raise fail(f"term {shown_piece} has coefficient {coeff}, not a positive integer")
        if rest.free_symbols - ranges.keys():
            raise fail(f"term {shown_piece} mixes loop vars with non-loop symbols")
        ext = _extent(rest, ranges)
        if ext is None and bounded and isinstance(rest, (sympy.floor, sympy.Mod)):
            top = _max_value(rest, ranges)
            ext = None if top is None else (rest, int(top) + 1)
        if ext is None:
            raise fail(
                f"term {shown_piece} is not coeff * (var | floor(var/b) | Mod(var, m), nested)"
            )
        g, extent = ext
        if extent > 1:
            step = int(coeff)
            terms.append((g, step, step * extent))
    if constant < 0:
        raise fail(f"constant offset {constant} is negative")
    if constant > 0:
        terms.insert(0, (sympy.Integer(constant), 1, _INF))
    return terms, back, shown


def index_term_extents(index: Any, var_ranges: Mapping[Any, Any]) -> list[tuple[int, int]]:
    """``(step, limit)`` of every loop-driven term of ``index`` (its constant offset
    left out): the term takes the values ``0, step, ..., limit - step``."""
    terms, _, _ = _terms(index, var_ranges, bounded=True)
    return [(int(step), int(limit)) for _, step, limit in terms if limit != _INF]


# --------------------------------------------------------------------------- the algorithm


def _coordinates(
    sizes: Sequence[int],
    strides: Sequence[int],
    index: Any,
    var_ranges: Mapping[Any, Any],
) -> list[sympy.Expr]:
    # Planner passes ask for the same (layout, dep) many times; sympy work is the cost.
    try:
        key = (tuple(sizes), tuple(strides), sympy.sympify(index), tuple(var_ranges.items()))
        hash(key)
    except (TypeError, sympy.SympifyError):
        return list(_coordinates_uncached(sizes, strides, index, var_ranges))
    return list(_coordinates_cached(key))


@functools.lru_cache(maxsize=8192)
def _coordinates_cached(key: tuple[Any, ...]) -> tuple[sympy.Expr, ...]:
    sizes, strides, index, items = key
    return _coordinates_uncached(sizes, strides, index, dict(items))


def _coordinates_uncached(
    sizes: Sequence[int],
    strides: Sequence[int],
    index: Any,
    var_ranges: Mapping[Any, Any],
) -> tuple[sympy.Expr, ...]:
    terms, back, shown = _terms(index, var_ranges)
    n = len(sizes)
    live = [d for d in range(n) if sizes[d] > 1 and strides[d] > 0]
    next_stride: list[float | int] = []
    for i in range(n):
        bigger = [strides[j] for j in range(n) if strides[j] > strides[i] and sizes[j] > 1]
        next_stride.append(min(bigger) if bigger else _INF)

    coords: list[sympy.Expr] = [sympy.Integer(0)] * n

    def add(d: int, value: sympy.Expr, step: int, limit: float | int) -> None:
        moved = value * step
        if next_stride[d] < limit:
            moved = safe_mod(moved, next_stride[d])
        coords[d] = coords[d] + sympy.floor(moved / strides[d])

    for value, step, limit in terms:
        primary = None
        hit = []
        for d in live:
            st = strides[d]
            if st <= step and (primary is None or st > strides[primary]):
                primary = d
            if step < st < limit:
                hit.append(d)
        if primary is None and not hit:
            raise CoordinateError(
                f"cannot derive coordinates of index {shown}: term {value.xreplace(back)} "
                f"(step {step}) lands on no dim of size {list(sizes)} stride {list(strides)}"
            )
        for d in hit:
            add(d, value, step, limit)
        if primary is not None:
            add(primary, value, step, limit)
    return tuple(safe_substitute(c, back) for c in coords)


def _layout_of(layout: Any) -> Any:
    stl = getattr(layout, "device_layout", layout)
    if not (hasattr(stl, "device_size") and hasattr(stl, "stride_map")):
        raise CoordinateError(
            f"{layout!r} is neither a SpyreTensorLayout nor has a .device_layout holding one"
        )
    return stl


def device_coordinates(layout: Any, index: Any, var_ranges: Mapping[Any, Any]) -> list[sympy.Expr]:
    """Device coordinates of ``index`` in ``layout`` (a SpyreTensorLayout or a
    FixedTiledLayout): one expression per device dim, the last one within the stick."""
    stl = _layout_of(layout)
    return _coordinates(list(stl.device_size), list(stl.stride_map), index, var_ranges)


def host_coordinates(
    host_size: Sequence[Any],
    host_stride: Sequence[Any],
    index: Any,
    var_ranges: Mapping[Any, Any],
) -> list[sympy.Expr]:
    """Host coordinates of ``index`` in a strided host view (same algorithm as §1.4)."""
    sizes = [_as_int(s) for s in host_size]
    strides = [_as_int(s) for s in host_stride]
    if len(sizes) != len(strides):
        raise CoordinateError(
            f"host_size {list(host_size)} and host_stride {list(host_stride)} differ in length"
        )
    for what, vals, raw in (("host_size", sizes, host_size), ("host_stride", strides, host_stride)):
        for i, v in enumerate(vals):
            if v is None or v < 0:
                raise CoordinateError(
                    f"{what}[{i}] = {list(raw)[i]!r} is not a non-negative integer "
                    f"(in {what} {list(raw)!r})"
                )
    # One index reaches this from many facts (symbol dims, read host coords, alignment)
    # and every op of a chain shares it; the sympy descent is the planner's top cost.
    try:
        key = (tuple(sizes), tuple(strides), sympy.sympify(index), tuple(var_ranges.items()))
        hash(key)
    except (TypeError, sympy.SympifyError):
        return _host_coordinates(sizes, strides, index, var_ranges)
    return list(_host_coordinates_cached(key))


@functools.lru_cache(maxsize=8192)
def _host_coordinates_cached(key: tuple[Any, ...]) -> tuple[sympy.Expr, ...]:
    sizes, strides, index, items = key
    return tuple(_host_coordinates(sizes, strides, index, dict(items)))


def clear_caches() -> None:
    """Forget memoised coordinates (benchmarks measuring cold caches; tests)."""
    _coordinates_cached.cache_clear()
    _host_coordinates_cached.cache_clear()
    forward_coordinates.cache_clear()


# --------------------------------------------------------------------------- host views: exact descent


def safe_mod(p: sympy.Expr, q: Any) -> sympy.Expr:
    """``Mod(p, q)`` for non-negative integer ``p``, never built in the shape sympy gets wrong.

    sympy 1.14 rewrites ``Mod(k*Mod(x, a), q)`` wrongly (``Mod(4*Mod(x, 35), 28)``
    becomes ``4*Mod(Mod(x, 35)**2, 7)``).  A product with a Mod factor is therefore
    reduced by hand: the common factor ``g = gcd(k, q)`` comes out
    (``g*Mod((k/g)*m, q/g)``), and what is left with a coefficient ``> 1`` is
    written ``p - q*floor(p/q)``.
    """
    q = sympy.sympify(q)
    if not (isinstance(p, sympy.Mul) and any(isinstance(f, sympy.Mod) for f in p.args)):
        return sympy.Mod(p, q)
    coeff, rest = p.as_coeff_Mul()
    qi = _as_int(q)
    if coeff.is_Integer and qi is not None and coeff > 1:
        g = math.gcd(int(coeff), qi)
        if g > 1:
            return g * safe_mod((coeff // g) * rest, qi // g)
    if coeff == 1 and isinstance(rest, sympy.Mod):
        return sympy.Mod(rest, q)
    return p - q * sympy.floor(p / q)


def safe_substitute(expr: sympy.Expr, mapping: Mapping[Any, sympy.Expr]) -> sympy.Expr:
    """``expr.xreplace(mapping)`` rebuilding every Mod with :func:`safe_mod`."""
    if expr in mapping:
        return mapping[expr]
    if not expr.args:
        return expr
    args = [safe_substitute(a, mapping) for a in expr.args]
    if expr.func is sympy.Mod:
        return safe_mod(*args)
    return expr.func(*args)


@dataclasses.dataclass(frozen=True)
class _Group:
    """Index terms decomposed as one value (so carries between them are kept):
    every value is a multiple of ``grain`` and at most ``hi``."""

    value: sympy.Expr
    hi: int
    grain: int

    def residue_bound(self, s: int) -> int:
        """An upper bound of ``value mod s``."""
        if self.grain % s == 0:
            return 0
        return min(self.hi, s - math.gcd(self.grain, s))


def _merge(groups: list[_Group]) -> _Group:
    return _Group(
        value=sympy.Add(*(g.value for g in groups)),
        hi=sum(g.hi for g in groups),
        grain=functools.reduce(math.gcd, (g.grain for g in groups)),
    )


def _host_coordinates(
    sizes: Sequence[int], strides: Sequence[int], index: Any, var_ranges: Mapping[Any, Any]
) -> list[sympy.Expr]:
    """Host coordinates of a flat storage index in a non-overlapping strided view.

    The exact decomposition divides by the live strides from the largest down:
    ``coord = floor(rest / s)``, ``rest = Mod(rest, s)`` (exact for every element of
    a view whose strides do not overlap).  The index's additive terms are carried
    through separately while their residues provably cannot carry into the next
    digit (the sum of their residue bounds stays below the stride); otherwise the
    terms that may carry are summed into one group first, so ``x.view(3, 2)`` of
    a ``(2, 3)`` buffer gets ``floor((2*c0 + c1)/3)`` and ``Mod(2*c0 + c1, 3)``,
    never the carry-less ``c1 + Mod(2*c0, 3)`` that can reach 3.
    """
    terms, back, shown = _terms(index, var_ranges, bounded=True)
    n = len(sizes)
    live = sorted((d for d in range(n) if sizes[d] > 1 and strides[d] > 0),
                  key=lambda d: strides[d])
    for lower, upper in zip(live, live[1:]):
        if strides[upper] < strides[lower] * sizes[lower]:
            raise CoordinateError(
                f"cannot derive coordinates of index {shown}: host view of size {list(sizes)} "
                f"stride {list(strides)} overlaps itself (dim {upper} stride {strides[upper]} "
                f"< dim {lower} extent {strides[lower] * sizes[lower]})"
            )
    groups = []
    for value, step, limit in terms:
        if limit == _INF:  # the constant offset
            c = int(value)
            groups.append(_Group(sympy.Integer(c), c, c))
        else:
            groups.append(_Group(value * step, int(limit) - step, step))

    coords: list[sympy.Expr] = [sympy.Integer(0)] * n
    for d in reversed(live):
        s = strides[d]
        carrying = [g for g in groups if g.residue_bound(s) > 0]
        if len(carrying) > 1 and sum(g.residue_bound(s) for g in carrying) > s - 1:
            groups = [g for g in groups if g not in carrying] + [_merge(carrying)]
        digit = sympy.Integer(0)
        rest = []
        for g in groups:
            if g.hi < s:
                rest.append(g)
                continue
            digit += sympy.floor(g.value / s)
            if g.grain % s:
                rest.append(_Group(safe_mod(g.value, s), min(g.hi, s - 1), math.gcd(g.grain, s)))
        coords[d] = digit
        groups = rest
    groups = [g for g in groups if g.hi > 0]
    if groups:
        left = " + ".join(str(g.value.xreplace(back)) for g in groups)
        raise CoordinateError(
            f"cannot derive coordinates of index {shown}: {left} is not a multiple of the "
            f"smallest stride of host view size {list(sizes)} stride {list(strides)}"
        )
    return [safe_substitute(c, back) for c in coords]


# --------------------------------------------------------------------------- accesses of a buffer


@functools.lru_cache(maxsize=1024)
def forward_coordinates(
    layout: Any, host_size: tuple[int, ...], host_stride: tuple[int, ...]
) -> tuple[list[sympy.Expr], list[sympy.Symbol]]:
    """Device coordinates as functions of host dim variables ``h0, h1, ...``.

    Each ``h_k`` walks exactly one host dim, so §1.4 decomposes the generic
    index ``sum(h_k * stride_k)`` exactly even when the stick dim is padded.
    """
    syms = [sympy.Symbol(f"h{d}", integer=True, nonnegative=True) for d in range(len(host_size))]
    index = sum((s * st for s, st in zip(syms, host_stride)), sympy.Integer(0))
    return device_coordinates(layout, index, dict(zip(syms, host_size))), syms


def access_coordinates(
    layout: Any,
    host_size: Sequence[Any],
    host_stride: Sequence[Any],
    host_offset: Any,
    index: Any,
    var_ranges: Mapping[Any, Any],
) -> list[sympy.Expr]:
    """Device coordinates of the element a buffer access reads or writes.

    Applying §1.4 straight to a flat index against the device ``stride_map`` is
    inexact when one loop variable walks several host dims across a *padded*
    stick (a flattening view ``x.view(-1)`` of a ``[5, 37]`` fp32 buffer read as
    ``c0`` gives ``Mod(c0, 32)`` instead of ``Mod(Mod(c0, 37), 32)``): the device
    strides 32 (stick tile) and 37 (row) are not a mixed radix.  So compose two
    exact steps: host coordinates of the index in the buffer's host view (nothing
    is padded there), then the layout's forward map from host dims to device
    coordinates.  For ordinary accesses both routes give the same expressions.
    ``index`` is an offset into the buffer's storage (Inductor's load/store
    indices); ``host_offset`` is the layout's storage offset.
    """
    size = tuple(_as_int(s) for s in host_size)
    stride = tuple(_as_int(s) for s in host_stride)
    if any(v is None for v in size + stride) or _as_int(host_offset) is None:
        raise CoordinateError(
            f"access of a buffer with non-static size {list(host_size)}, stride "
            f"{list(host_stride)} or offset {host_offset!r}"
        )
    local = to_plain_sympy(sympy.sympify(index)) - int(host_offset)
    host = host_coordinates(size, stride, local, var_ranges)
    forward, syms = forward_coordinates(_layout_of(layout), size, stride)
    mapping = dict(zip(syms, host))
    bounds = {s: int(r) for s, r in var_ranges.items() if _as_int(r) is not None}
    return [_within_ranges(safe_substitute(c, mapping), bounds) for c in forward]


def _within_ranges(expr: sympy.Expr, ranges: Mapping[Any, int]) -> sympy.Expr:
    """``expr`` with every ``Mod(g, m)`` whose ``g`` stays below ``m`` written ``g`` and
    every ``floor(g)`` whose ``g`` stays below 1 written 0, over ``ranges``.

    The forward map divides a host dim over the device dims it spans across its
    whole size (a layout merging host dims splits one at the merge); an access
    walking less of that dim (a concatenation region, a slice) never reaches the
    split, and its coordinates say so: exact, and their per-tile shifts constant.
    """
    if not expr.has(sympy.Mod, sympy.floor):
        return expr
    args = [_within_ranges(a, ranges) for a in expr.args]
    if isinstance(expr, sympy.Mod) and args[1].is_Integer and args[1] > 0:
        top = _max_value(args[0], ranges)
        return args[0] if top is not None and top < int(args[1]) else safe_mod(*args)
    if isinstance(expr, sympy.floor):
        top = _max_value(args[0], ranges)
        if top is not None and top < 1:
            return sympy.Integer(0)
    return expr.func(*args)
