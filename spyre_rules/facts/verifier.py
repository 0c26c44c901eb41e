"""Brute-force span verifier: the true per-core span of an access, by enumeration.

The planner's span facts (``spyre_rules.facts.spans``) are *bounds* derived by
reasoning about expressions.  This module shares no code or reasoning with them:
it evaluates every device coordinate at every point of the iteration space (in
bounded chunks, vectorised with torch) and reports what the access really
touches.  That independence is its whole value, so there is deliberately no
analytic fast path here: a bug in the bounds cannot be mirrored by a bug here.

Arithmetic is exact: each sub-expression is carried as an int64 numerator tensor
over a positive Python-int denominator, so ``floor(h/2048)`` never meets a float.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import sympy
import torch

from spyre_rules.errors import VerifierError

__all__ = ["DimTrueSpan", "SpanReport", "verify_spans"]

DEFAULT_MAX_POINTS = 2**26
DEFAULT_CHUNK_POINTS = 2**20

# A value is (numerator, denominator): numerator an int64 tensor or a Python int
# (a constant), denominator a positive Python int.
Value = tuple[Any, int]
Compiled = Callable[[Sequence[torch.Tensor]], Value]


@dataclass(frozen=True)
class DimTrueSpan:
    """What one device coordinate really does over the whole iteration space."""

    device_dim: int
    size: int
    is_stick: bool
    min_coord: int
    max_coord: int
    stride_elems: int
    itemsize: int

    @property
    def span_elems(self) -> int:
        return self.max_coord - self.min_coord + 1

    @property
    def span_bytes(self) -> int:
        return self.span_elems * self.stride_elems * self.itemsize

    @property
    def varies(self) -> bool:
        return self.max_coord > self.min_coord

    @property
    def in_bounds(self) -> bool:
        return 0 <= self.min_coord and self.max_coord < self.size


@dataclass(frozen=True)
class SpanReport:
    """True spans of one access; thresholds are the caller's business (``check``)."""

    device_size: tuple[int, ...]
    itemsize: int
    points: int
    dims: tuple[DimTrueSpan, ...]
    min_offset: int
    max_offset: int

    @property
    def total_span_elems(self) -> int:
        """Row-major device element offsets touched, first to last, inclusive."""
        return self.max_offset - self.min_offset + 1

    @property
    def total_span_bytes(self) -> int:
        return self.total_span_elems * self.itemsize

    @property
    def in_bounds(self) -> bool:
        return all(d.in_bounds for d in self.dims)

    @property
    def out_of_range_dims(self) -> list[DimTrueSpan]:
        """Dims whose coordinate leaves [0, size): a layout or indexing bug."""
        return [d for d in self.dims if not d.in_bounds]

    @property
    def candidate_dims(self) -> list[DimTrueSpan]:
        """Non-stick dims the access actually moves along.

        A coordinate that takes one value only picks a base address; charging it
        its full inner stride would flag e.g. a fixed row of a huge tensor whose
        access spans a few bytes, so such dims are not span candidates.
        """
        return [d for d in self.dims if not d.is_stick and d.varies]

    @property
    def max_dim_span_bytes(self) -> int:
        """Largest per-dim span over ``candidate_dims`` (0 when nothing moves)."""
        return max((d.span_bytes for d in self.candidate_dims), default=0)

    def check(self, limit_bytes: int) -> list[DimTrueSpan]:
        """Candidate dims whose true span exceeds ``limit_bytes`` (strictly)."""
        return [d for d in self.candidate_dims if d.span_bytes > limit_bytes]


# --------------------------------------------------------------------------------------
# sympy -> torch translation.


def _floordiv(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.div(torch.as_tensor(a), b, rounding_mode="floor")
    return a // b


def _check_divisor(b: Any, expr: sympy.Basic) -> None:
    zero = bool((b == 0).any()) if isinstance(b, torch.Tensor) else b == 0
    if zero:
        raise VerifierError(f"division by zero while evaluating {expr}")


def _common(values: Sequence[Value]) -> tuple[list[Any], int]:
    den = math.lcm(*(d for _, d in values))
    return [n * (den // d) for n, d in values], den


def _py_remainder(a: Any, b: Any) -> Any:
    """Python (sign of divisor) modulo, as sympy.Mod and torch's PythonMod define it."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.remainder(torch.as_tensor(a), b)
    return a % b


def _c_remainder(a: Any, b: Any) -> Any:
    """C (sign of dividend) modulo, as torch's sympy ``Mod`` function defines it."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.fmod(torch.as_tensor(a), b)
    r = abs(a) % abs(b)
    return r if a >= 0 else -r


def _kind(expr: sympy.Basic) -> str:
    """Classify a node before touching its arguments, so errors name the outer node."""
    name = type(expr).__name__
    if expr.is_Add:
        return "add"
    if expr.is_Mul:
        return "mul"
    if expr.is_Pow or name == "PowByNatural":
        exp = expr.args[1]
        if not (exp.is_Integer and exp >= 0):
            raise VerifierError(f"unsupported expression node {name} with exponent {exp} in {expr}")
        return "pow"
    if isinstance(expr, sympy.floor) or name == "FloorToInt":
        return "floor"
    if isinstance(expr, sympy.ceiling) or name == "CeilToInt":
        return "ceiling"
    if isinstance(expr, sympy.Mod) or name == "PythonMod":
        return "pymod"
    kind = _TORCH_KINDS.get(name)
    if kind is None:
        raise VerifierError(f"unsupported expression node {name} in {expr}")
    return kind


# torch.utils._sympy.functions classes, recognised by name.  Its ``Mod`` has C
# (truncating) semantics, unlike sympy's and its own ``PythonMod``.
_TORCH_KINDS = {
    "FloorDiv": "floordiv",
    "CleanDiv": "floordiv",
    "CeilDiv": "ceildiv",
    "Mod": "cmod",
    "ModularIndexing": "modindex",
    "Identity": "identity",
    "Min": "min",
    "Max": "max",
}


def _compile(expr: sympy.Basic, slots: Mapping[sympy.Symbol, int]) -> Compiled:
    """Turn ``expr`` into a function of the per-symbol index tensors."""
    if expr.is_Integer:
        v = int(expr)
        return lambda env: (v, 1)
    if expr.is_Rational:
        p, q = int(expr.p), int(expr.q)
        return lambda env: (p, q)
    if expr.is_Symbol:
        i = slots[expr]
        return lambda env: (env[i], 1)
    kind = _kind(expr)
    if kind == "pow":
        return _power(_compile(expr.args[0], slots), int(expr.args[1]))
    args = [_compile(a, slots) for a in expr.args]
    if kind == "add":
        def add(env: Sequence[torch.Tensor]) -> Value:
            nums, den = _common([f(env) for f in args])
            total = nums[0]
            for n in nums[1:]:
                total = total + n
            return total, den
        return add
    if kind == "mul":
        def mul(env: Sequence[torch.Tensor]) -> Value:
            num, den = 1, 1
            for f in args:
                n, d = f(env)
                num, den = num * n, den * d
            return num, den
        return mul
    if kind in ("floor", "ceiling"):
        return _rounded(args[0], ceil=kind == "ceiling")
    if kind in ("floordiv", "ceildiv"):
        return _div(args[0], args[1], expr, ceil=kind == "ceildiv")
    if kind == "pymod":
        return _mod(args[0], args[1], expr, _py_remainder)
    if kind == "cmod":
        return _mod(args[0], args[1], expr, _c_remainder)
    if kind == "modindex":
        inner = _div(args[0], args[1], expr, ceil=False)
        return _mod(inner, args[2], expr, _py_remainder)
    if kind == "identity":
        return args[0]
    return _minmax(args, smallest=kind == "min")


def _power(base: Compiled, n: int) -> Compiled:
    def power(env: Sequence[torch.Tensor]) -> Value:
        b, d = base(env)
        num, den = 1, 1
        for _ in range(n):
            num, den = num * b, den * d
        return num, den
    return power


def _rounded(arg: Compiled, *, ceil: bool) -> Compiled:
    def rounded(env: Sequence[torch.Tensor]) -> Value:
        n, d = arg(env)
        if d == 1:
            return n, 1
        return (-_floordiv(-n, d) if ceil else _floordiv(n, d)), 1
    return rounded


def _div(a: Compiled, b: Compiled, expr: sympy.Basic, *, ceil: bool) -> Compiled:
    def div(env: Sequence[torch.Tensor]) -> Value:
        (na, da), (nb, db) = a(env), b(env)
        top, bottom = na * db, da * nb
        _check_divisor(bottom, expr)
        return (-_floordiv(-top, bottom) if ceil else _floordiv(top, bottom)), 1
    return div


def _mod(a: Compiled, b: Compiled, expr: sympy.Basic, rem: Callable[[Any, Any], Any]) -> Compiled:
    def mod(env: Sequence[torch.Tensor]) -> Value:
        (na, nb), den = _common([a(env), b(env)])
        _check_divisor(nb, expr)
        return rem(na, nb), den
    return mod


def _minmax(args: Sequence[Compiled], *, smallest: bool) -> Compiled:
    def minmax(env: Sequence[torch.Tensor]) -> Value:
        nums, den = _common([f(env) for f in args])
        if not any(isinstance(n, torch.Tensor) for n in nums):
            return (min(nums) if smallest else max(nums)), den
        pick = torch.minimum if smallest else torch.maximum
        out = torch.as_tensor(nums[0], dtype=torch.int64)
        for n in nums[1:]:
            out = pick(out, torch.as_tensor(n, dtype=torch.int64))
        return out, den
    return minmax


# --------------------------------------------------------------------------------------
# Enumeration.


def _positive_int(value: Any, what: Any) -> int:
    """``what``: the name, or a callable giving it (printing sympy costs; only errors print)."""
    if type(value) is int and value >= 1:
        return value
    if callable(what):
        what = what()
    if isinstance(value, bool):
        raise VerifierError(f"{what} must be a positive integer, got {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise VerifierError(f"{what} must be a positive integer, got {value!r}") from None
    if n < 1:
        raise VerifierError(f"{what} must be a positive integer, got {value!r}")
    return n


def _range_of(var_ranges: Mapping[Any, Any], sym: sympy.Symbol) -> int:
    if sym in var_ranges:
        raw = var_ranges[sym]
    else:
        matches = [v for k, v in var_ranges.items() if str(k) == sym.name]
        if not matches:
            raise VerifierError(f"no range given for symbol {sym}")
        raw = matches[0]
    return _positive_int(raw, lambda: f"range of {sym}")


def _integral(value: Value, dim: int, coord: sympy.Expr) -> Any:
    num, den = value
    if den == 1:
        return num
    bad = bool((num % den != 0).any()) if isinstance(num, torch.Tensor) else num % den != 0
    if bad:
        raise VerifierError(f"device coordinate {dim} ({coord}) takes non-integer values")
    return _floordiv(num, den)


def _extremes(x: Any) -> tuple[int, int]:
    if isinstance(x, torch.Tensor):
        return int(x.min()), int(x.max())
    return int(x), int(x)


def verify_spans(
    device_size: Sequence[Any],
    coords: Sequence[Any],
    var_ranges: Mapping[Any, Any],
    itemsize: int,
    *,
    max_points: int = DEFAULT_MAX_POINTS,
    chunk_points: int = DEFAULT_CHUNK_POINTS,
) -> SpanReport:
    """Enumerate the iteration space and report every device dim's true span.

    Only symbols that occur in ``coords`` are enumerated (others cannot move any
    coordinate); each must have a positive integer range.  A space of more than
    ``max_points`` points is refused rather than sampled: a sampled "true" span
    would not be one.  ``chunk_points`` bounds peak memory.
    """
    sizes = tuple(_positive_int(s, "device_size entry") for s in device_size)
    if not sizes:
        raise VerifierError("device_size is empty")
    if len(coords) != len(sizes):
        raise VerifierError(f"{len(coords)} coordinates for a {len(sizes)}-dim device_size {list(sizes)}")
    item = _positive_int(itemsize, "itemsize")
    max_points = _positive_int(max_points, "max_points")
    chunk_points = _positive_int(chunk_points, "chunk_points")
    try:
        exprs = [sympy.sympify(c, strict=True) for c in coords]
    except sympy.SympifyError as exc:
        raise VerifierError(f"coordinate is not a sympy expression: {exc}") from None

    symbols = sorted(set().union(*(e.free_symbols for e in exprs)), key=lambda s: (s.name, id(s)))
    ranges = [_range_of(var_ranges, s) for s in symbols]
    points = math.prod(ranges)
    if points > max_points:
        shape = " x ".join(f"{s}:{r}" for s, r in zip(symbols, ranges))
        raise VerifierError(
            f"iteration space of {points} points ({shape}) exceeds max_points={max_points}; "
            "refusing to enumerate"
        )
    slots = {s: i for i, s in enumerate(symbols)}
    compiled = [_compile(e, slots) for e in exprs]
    strides = [math.prod(sizes[d + 1 :]) for d in range(len(sizes))]
    # mixed-radix place value of each symbol in the flat index (last symbol fastest)
    radix = [math.prod(ranges[i + 1 :]) for i in range(len(ranges))]

    lo = [None] * len(sizes)
    hi = [None] * len(sizes)
    off_lo = off_hi = None
    for start in range(0, points, chunk_points):
        flat = torch.arange(start, min(points, start + chunk_points), dtype=torch.int64)
        env = [(flat // radix[i]) % ranges[i] for i in range(len(symbols))]
        offset: Any = 0
        for d, fn in enumerate(compiled):
            value = _integral(fn(env), d, exprs[d])
            mn, mx = _extremes(value)
            lo[d] = mn if lo[d] is None else min(lo[d], mn)
            hi[d] = mx if hi[d] is None else max(hi[d], mx)
            offset = offset + value * strides[d]
        mn, mx = _extremes(offset)
        off_lo = mn if off_lo is None else min(off_lo, mn)
        off_hi = mx if off_hi is None else max(off_hi, mx)

    dims = tuple(
        DimTrueSpan(
            device_dim=d,
            size=sizes[d],
            is_stick=d == len(sizes) - 1,
            min_coord=lo[d],
            max_coord=hi[d],
            stride_elems=strides[d],
            itemsize=item,
        )
        for d in range(len(sizes))
    )
    return SpanReport(
        device_size=sizes,
        itemsize=item,
        points=points,
        dims=dims,
        min_offset=off_lo,
        max_offset=off_hi,
    )
