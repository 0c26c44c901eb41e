"""Coordinates as native sympy over integer >= 0 symbols (the span and value-range facts).

Device coordinates come from Inductor index functions (``FloorDiv``,
``ModularIndexing``, ...) or from the wrapper source (sympy's own ``floor`` /
``Mod``).  Both fact modules that bound them (``facts/spans``, ``facts/value_range``)
first rewrite them into one native form, here, so a bound never depends on which
spelling codegen happened to hold.  torch's classes are recognised by class name, so
importing this module never imports torch.  Loop symbols are integers in ``[0, R)``,
so each is re-created with ``integer=True, nonnegative=True`` (sympy then folds
``floor(h/1)`` to ``h``).
"""

from __future__ import annotations

from functools import lru_cache

import sympy

__all__ = ["normalize"]



def _floor_div(a: sympy.Expr, b: sympy.Expr) -> sympy.Expr:
    return sympy.floor(a / b)


# torch.utils._sympy.functions classes, by name, as sympy-native rewrites.  Their
# Mod variants agree with sympy's Mod for non-negative dividends, and a Mod is only
# ever bounded when its dividend is a bare (non-negative) loop symbol.
_TORCH_REWRITES = {
    "FloorDiv": _floor_div,
    "CleanDiv": _floor_div,
    "CeilDiv": lambda a, b: sympy.ceiling(a / b),
    "ModularIndexing": lambda a, b, c: sympy.Mod(_floor_div(a, b), c),
    "Mod": sympy.Mod,
    "PythonMod": sympy.Mod,
    "Identity": lambda a: a,
    "PowByNatural": lambda a, b: a**b,
    "FloorToInt": sympy.floor,
    "CeilToInt": sympy.ceiling,
    "Min": sympy.Min,
    "Max": sympy.Max,
}


def _rewrite(expr: sympy.Basic) -> sympy.Basic:
    if not expr.args:
        return expr
    args = tuple(_rewrite(a) for a in expr.args)
    name = type(expr).__name__
    native = _TORCH_REWRITES.get(name)
    if native is not None and not _is_sympy_native(expr):
        return native(*args)
    if args == expr.args:
        return expr
    return expr.func(*args)


def _is_sympy_native(expr: sympy.Basic) -> bool:
    return type(expr).__module__.startswith("sympy.")


@lru_cache(maxsize=8192)
def normalize(expr: sympy.Expr) -> tuple[sympy.Expr, tuple[tuple[sympy.Symbol, sympy.Symbol], ...]]:
    """Native sympy form over integer >= 0 symbols, plus (canonical, original) pairs."""
    originals = sorted(expr.free_symbols, key=lambda s: (s.name, str(s.assumptions0)))
    names = [s.name for s in originals]
    if len(set(names)) == len(names):
        canon = {s: sympy.Symbol(s.name, integer=True, nonnegative=True) for s in originals}
        expr = expr.xreplace(canon)
    else:  # two distinct symbols share a name: keep them apart rather than merge them
        canon = {s: s for s in originals}
    native = _rewrite(expr)
    back = {c: o for o, c in canon.items()}
    ordered = sorted(native.free_symbols, key=lambda s: s.name)
    return native, tuple((c, back.get(c, c)) for c in ordered)
