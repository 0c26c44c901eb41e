"""Structured accesses: device coordinates that make a strided view of memory.

A TensorArg's element offset is ``sum_d coord_d * device_stride_d``.  When every
coordinate is a sum of terms ``a*c``, ``a*floor(c/k)`` and ``a*Mod(c, k)`` of
iteration symbols ``c`` (integer ``a``, ``k > 0``, one ``k`` per symbol per arg),
the offset is *separable*: ``const + sum_c F_c(c)`` with
``F_c(c) = slope*c + step*floor(c/k)``.  Over a range of ``c`` that is a whole
number of ``k``-runs, ``c = q*k + r`` and ``F_c`` is affine in ``(q, r)``; inside
one ``k``-run it is affine in ``c``.  So a block of the iteration space is a
union of a few boxes (``pieces``), each an ``as_strided`` view of the memory's
typed element view; loads copy those views into the same contiguous tensor the
general gather would build, stores copy the value into them.  Anything else
(indirect or odd coordinates, negative strides, overlapping stores) is ``None``
here and stays on the general gather/scatter path of ``evaluate``.

Bounds are checked once per block from each coordinate's exact minimum and
maximum over the block (corners of the affine pieces): the caller takes the
general path, which raises the exact error, whenever this check would fail.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import sympy
import torch

from spyre_rules.facts.coordinates import to_plain_sympy

__all__ = ["FORCE_GENERAL", "Box", "Plan", "Structure", "analyse", "copy_in", "copy_into", "copy_out",
           "direct_view", "plan"]

#: Take the general gather/scatter path for every access (tests compare both paths).
FORCE_GENERAL = False

#: Symbol name -> ``(axis, start, stop)`` of a ranged symbol, ``(axis, start, stop, k)`` of
#: a symbol split over axes ``axis`` and ``axis + 1`` (``c = start + q*k + r``), or its
#: single index.
Box = dict[str, Any]


@dataclass(frozen=True)
class _Fn:
    """``g(c) = lin*c + fl*floor(c/k) + md*Mod(c, k)`` of one symbol in one coordinate."""

    lin: int = 0
    fl: int = 0
    md: int = 0

    def at(self, c: int, k: int) -> int:
        return self.lin * c + self.fl * (c // k) + self.md * (c % k)


def _terms(expr: Any) -> tuple[int, dict[str, tuple[_Fn, int]]] | None:
    """``(const, {symbol: (g, k)})`` of one coordinate, or None if not structured."""
    expr = sympy.expand(to_plain_sympy(expr))
    const = 0
    parts: dict[str, list[int]] = {}  # name -> [lin, fl, md, k]
    for term in sympy.Add.make_args(expr):
        coeff, rest = term.as_coeff_Mul()
        if not coeff.is_Integer:
            return None
        a = int(coeff)
        if rest == 1:
            const += a
            continue
        if isinstance(rest, sympy.Symbol):
            name, slot, k = rest.name, 0, None
        elif isinstance(rest, sympy.floor):
            inv, sym = rest.args[0].as_coeff_Mul()
            if not (isinstance(sym, sympy.Symbol) and inv.is_Rational and inv.p == 1 and inv.q > 1):
                return None
            name, slot, k = sym.name, 1, int(inv.q)
        elif isinstance(rest, sympy.Mod):
            sym, mod = rest.args
            if not (isinstance(sym, sympy.Symbol) and mod.is_Integer and int(mod) > 0):
                return None
            name, slot, k = sym.name, 2, int(mod)
        else:
            return None
        entry = parts.setdefault(name, [0, 0, 0, 0])
        if k is not None:
            if entry[3] not in (0, k):
                return None
            entry[3] = k
        entry[slot] += a
    return const, {n: (_Fn(lin, fl, md), k or 1) for n, (lin, fl, md, k) in parts.items()}


@dataclass(frozen=True)
class Piece:
    """A sub-range ``[lo, hi)`` of one symbol as fine dims ``(size, coefficients per coord)``."""

    lo: int
    hi: int
    dims: tuple[tuple[int, tuple[int, ...]], ...]
    origin: tuple[int, ...]  # every coordinate's term at ``lo``


class Structure:
    """The separable form of one TensorArg's device coordinates."""

    def __init__(self, const: list[int], fns: dict[str, list[_Fn]], ks: dict[str, int],
                 strides: list[int]) -> None:
        self.const = const  # per coordinate
        self.fns = fns  # symbol -> its term in every coordinate
        self.ks = ks
        self.strides = strides
        self.symbols = set(fns)
        self.names = tuple(sorted(fns))
        self._injective: dict[tuple, bool] = {}
        #: ``plan`` cache: (rank, the block's entry per symbol) -> Plan (base 0) or None
        self.plans: dict[tuple, Plan | None] = {}

    def pieces(self, name: str, lo: int, hi: int) -> list[Piece]:
        """``[lo, hi)`` of ``name`` cut into pieces affine in their fine dims."""
        fns, k = self.fns[name], self.ks[name]
        run = tuple(f.lin + f.md for f in fns)  # slope inside one k-run
        whole = tuple(f.lin * k + f.fl for f in fns)  # slope per whole k-run
        out = []
        cuts = [lo]
        if k > 1:
            first = min(hi, -(-lo // k) * k)
            last = max(first, hi // k * k)
            cuts += [c for c in (first, last) if lo < c < hi]
        cuts.append(hi)
        for a, b in zip(cuts, cuts[1:]):
            if b <= a:
                continue
            origin = tuple(f.at(a, k) for f in fns)
            if k > 1 and a % k == 0 and b - a >= k and (b - a) % k == 0:
                dims = ((b - a) // k, whole), (k, run)
            else:
                dims = ((b - a, run),)
            out.append(Piece(a, b, dims, origin))
        return out

    def address_stride(self, coeffs: tuple[int, ...]) -> int:
        return sum(c * s for c, s in zip(coeffs, self.strides))

    def strides_ok(self) -> bool:
        """as_strided needs non-negative strides for every piece kind."""
        for name, fns in self.fns.items():
            k = self.ks[name]
            kinds = [tuple(f.lin + f.md for f in fns)]
            if k > 1:
                kinds.append(tuple(f.lin * k + f.fl for f in fns))
            if any(self.address_stride(c) < 0 for c in kinds):
                return False
        return True

    def injective(self, ranges: dict[str, int]) -> bool:
        """No two points of the whole space share an address (stores only)."""
        key = tuple(sorted((n, ranges[n]) for n in self.fns))
        if key not in self._injective:
            self._injective[key] = self._no_overlap(ranges)
        return self._injective[key]

    def _no_overlap(self, ranges: dict[str, int]) -> bool:
        dims = []
        for name, fns in self.fns.items():
            r, k = ranges[name], self.ks[name]
            run = self.address_stride(tuple(f.lin + f.md for f in fns))
            if k > 1 and r > k:
                dims.append((-(-r // k), self.address_stride(tuple(f.lin * k + f.fl for f in fns))))
                dims.append((k, run))
            else:
                dims.append((r, run))
        reach = 0
        for size, stride in sorted((d for d in dims if d[0] > 1), key=lambda d: d[1]):
            if stride <= reach:
                return False
            reach += (size - 1) * stride
        return True


def analyse(coordinates: list[Any], strides: list[int]) -> Structure | None:
    const: list[int] = []
    fns: dict[str, list[_Fn]] = {}
    ks: dict[str, int] = {}
    n = len(coordinates)
    for d, expr in enumerate(coordinates):
        parsed = _terms(expr)
        if parsed is None:
            return None
        c, terms = parsed
        const.append(c)
        for name, (fn, k) in terms.items():
            if k > 1 and ks.get(name, k) not in (1, k):
                return None
            # a plain term (k = 1) ignores k: lin*c is the same for every k
            ks[name] = max(k, ks.get(name, 1))
            fns.setdefault(name, [_Fn()] * n)[d] = fn
    structure = Structure(const, fns, ks, strides)
    return structure if structure.strides_ok() else None


class Plan:
    """The views of one structured access over one block (``None`` when off limits).

    View offsets count from the arg's origin; ``base`` is the origin's element index
    (allocation + loop offset), so one plan serves every loop iteration and call:
    ``at`` moves only the base.  ``steps`` are the non-empty views with a slice of
    ``None`` where the view covers the whole block (nothing to index per copy)."""

    __slots__ = ("shape", "views", "low", "high", "base", "steps", "shape_tuple")

    def __init__(self, shape: list[int], views: list[tuple[tuple[slice, ...], list[int],
                                                           list[int], list[int], int]],
                 low: list[int], high: list[int], base: int = 0) -> None:
        self.shape = shape
        self.views = views  # (out slices, fine shape, view sizes, view strides, element offset)
        self.low = low
        self.high = high
        self.base = base
        self.shape_tuple = tuple(shape)
        self.steps = tuple((None if _covers(slices, shape) else slices, fine, sizes, strides, offset)
                           for slices, fine, sizes, strides, offset in views
                           if math.prod(sizes) != 0)

    def at(self, base: int) -> Plan:
        moved = Plan.__new__(Plan)
        moved.shape, moved.views, moved.low, moved.high = self.shape, self.views, self.low, self.high
        moved.steps, moved.shape_tuple, moved.base = self.steps, self.shape_tuple, base
        return moved


def _covers(slices: tuple[slice, ...], shape: list[int]) -> bool:
    """The slices select every element of ``shape`` (indexing with them is a no-op)."""
    return all(s.step in (None, 1) and (s.start or 0) == 0 and (s.stop is None or s.stop >= n)
               for s, n in zip(slices, shape))


def _symbol_pieces(structure: Structure, name: str, where: tuple) -> list[Piece] | None:
    """The pieces of one ranged symbol; a *split* symbol (``(axis, start, stop, k)``, its
    range on two axes ``q, r`` with ``c = start + q*k + r``) is one piece of two dims."""
    pieces = structure.pieces(name, where[1], where[2])
    if len(where) == 3:
        return pieces or None
    k = where[3]
    if len(pieces) != 1:
        return None
    piece = pieces[0]
    dims = piece.dims
    if len(dims) == 1:  # linear in the symbol: its one dim splits into (n / k, k)
        size, coeffs = dims[0]
        dims = ((size // k, tuple(c * k for c in coeffs)), (k, coeffs))
    if dims[1][0] != k or dims[0][0] * k != where[2] - where[1]:
        return None
    return [Piece(piece.lo, piece.hi, dims, piece.origin)]


def plan(structure: Structure, box: Box, rank: int, base: int) -> Plan | None:
    """Views of the block ``box`` (``base``: element index of the arg's origin), and every
    coordinate's exact min/max over it; None if a symbol is unknown.  Cached per
    structure, block and rank (the same blocks recur every call and loop iteration)."""
    key = (rank, tuple(map(box.get, structure.names)))
    hit = structure.plans.get(key, False)
    if hit is False:
        if len(structure.plans) >= _PLANS_PER_STRUCTURE:
            structure.plans.clear()
        hit = structure.plans[key] = _plan(structure, box, rank)
    return None if hit is None else hit.at(base)


#: Plans kept per structure (a loop's blocks, a reduction's chunks: a handful each).
_PLANS_PER_STRUCTURE = 256


def _plan(structure: Structure, box: Box, rank: int) -> Plan | None:
    const = list(structure.const)
    ranged = []
    for name in structure.symbols:
        where = box.get(name)
        if where is None:
            return None
        if isinstance(where, tuple):
            ranged.append((where, name))
            continue
        k = structure.ks[name]
        for d, f in enumerate(structure.fns[name]):
            const[d] += f.at(where, k)
    ranged.sort()
    low, high = list(const), list(const)
    per_symbol = []
    for where, name in ranged:
        pieces = _symbol_pieces(structure, name, where)
        if pieces is None:
            return None
        per_symbol.append((where, pieces))
        for d in range(len(const)):
            lows, highs = [], []
            for p in pieces:
                spread = [(size - 1) * coeffs[d] for size, coeffs in p.dims]
                lows.append(p.origin[d] + sum(min(0, s) for s in spread))
                highs.append(p.origin[d] + sum(max(0, s) for s in spread))
            low[d] += min(lows)
            high[d] += max(highs)
    shape = [1] * rank if ranged else []
    for where, _ in ranged:
        if len(where) == 4:
            shape[where[0]], shape[where[0] + 1] = (where[2] - where[1]) // where[3], where[3]
        else:
            shape[where[0]] = where[2] - where[1]
    offset0 = sum(c * s for c, s in zip(const, structure.strides))
    views = []
    for combo in itertools.product(*(pieces for _, pieces in per_symbol)):
        slices: list[slice] = [slice(None)] * len(shape)
        fine: list[int] = []
        sizes: list[int] = []
        strides: list[int] = []
        offset = offset0
        placed = {where[0]: (piece, where) for piece, (where, _) in zip(combo, per_symbol)}
        axis = 0
        while axis < len(shape):
            if axis not in placed:
                fine.append(1)
                sizes.append(1)
                strides.append(0)
                axis += 1
                continue
            piece, where = placed[axis]
            if len(where) == 3:
                slices[axis] = slice(piece.lo - where[1], piece.hi - where[1])
            offset += structure.address_stride(piece.origin)
            for size, coeffs in piece.dims:
                fine.append(size)
                sizes.append(size)
                strides.append(structure.address_stride(coeffs))
            axis += len(where) - 2  # a split symbol fills two axes with its two dims
        views.append((tuple(slices), fine, sizes, strides, offset))
    return Plan(shape, views, low, high)


def direct_view(memory_view: torch.Tensor, p: Plan) -> torch.Tensor | None:
    """The plan's points as one strided view of memory (no copy), when one view covers
    the block in the block's own shape; else None."""
    if len(p.views) != 1:
        return None
    _, fine, sizes, strides, offset = p.views[0]
    if fine != p.shape or math.prod(sizes) == 0:
        return None
    return memory_view.as_strided(sizes, strides, memory_view.storage_offset() + p.base + offset)


def copy_in(memory_view: torch.Tensor, p: Plan, dtype: torch.dtype | None = None) -> torch.Tensor:
    """The contiguous tensor of the plan's points, read through its views
    (``memory_view``: a flat, contiguous element view; offsets count from its start),
    converted to ``dtype`` on the way (callers pass only exact widenings)."""
    out = torch.empty(p.shape, dtype=dtype or memory_view.dtype)
    copy_into(memory_view, p, out)
    return out


def copy_into(memory_view: torch.Tensor, p: Plan, out: torch.Tensor) -> None:
    """Read the plan's points into ``out`` (shape ``p.shape``, any strides; its dtype
    only an exact widening of the memory's)."""
    start = memory_view.storage_offset() + p.base  # as_strided offsets count from the storage
    for slices, fine, sizes, strides, offset in p.steps:
        target = out if slices is None else out[slices]
        target.view(fine).copy_(memory_view.as_strided(sizes, strides, start + offset))


def copy_out(memory_view: torch.Tensor, p: Plan, value: torch.Tensor) -> None:
    """Write ``value`` (broadcast to the plan's shape) through the plan's views."""
    # a block of single indices is one point: its value may carry unit axes
    if value.shape != p.shape_tuple:
        value = value.expand(p.shape) if p.shape else value.reshape(())
    if value.untyped_storage().data_ptr() == memory_view.untyped_storage().data_ptr():
        value = value.clone()  # a load's view of memory: read it all before writing
    start = memory_view.storage_offset() + p.base
    for slices, fine, sizes, strides, offset in p.steps:
        source = value if slices is None else value[slices]
        memory_view.as_strided(sizes, strides, start + offset).copy_(source.view(fine))
