"""Evaluate index/coordinate expressions on integer index grids (vectorised).

Expressions are sympy over iteration symbols (``c0, c1, ...``); the environment
maps each symbol *name* to an int64 tensor (broadcastable grids) or a Python
int.  Integer semantics are exact: ``floor(a/b)`` of a rational argument is
computed as an integer floor division of the numerator by the common
denominator, never through floats.

Each expression is compiled once into a closure tree (cached by expression),
so a program's coordinates are not re-parsed per chunk.  Inductor's own index
functions (FloorDiv, ModularIndexing, ...) are first rewritten into floor/Mod
(``facts.coordinates.to_plain_sympy``).

This module is the vocabulary of index expressions: the recorder
(``codegen/recorder.py``) compiles every ``index_expr`` it records here and refuses the
op, by name, when that fails, so an expression the executor cannot evaluate never
reaches it (a reflect pad's ``Abs`` used to fail only when the program ran).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from typing import Any

import sympy
import torch

from spyre_rules.facts.coordinates import to_plain_sympy

__all__ = ["ExprEvalError", "compile_expr", "evaluate"]

Env = Mapping[str, Any]
Fn = Callable[[Env], Any]


class ExprEvalError(ValueError):
    """An expression uses a construct the executor cannot evaluate (names it)."""


def _floor_div(a: Any, b: int) -> Any:
    if isinstance(a, torch.Tensor):
        return torch.div(a, b, rounding_mode="floor")
    return a // b


def _mod(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.remainder(a, b)
    return a % b


def _minimum(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.minimum(torch.as_tensor(a), torch.as_tensor(b))
    return min(a, b)


def _maximum(a: Any, b: Any) -> Any:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return torch.maximum(torch.as_tensor(a), torch.as_tensor(b))
    return max(a, b)


def _abs(a: Any) -> Any:
    return torch.abs(a) if isinstance(a, torch.Tensor) else abs(a)


def _where(c: Any, a: Any, b: Any) -> Any:
    if isinstance(c, torch.Tensor):
        return torch.where(c, torch.as_tensor(a), torch.as_tensor(b))
    return a if c else b


def _denominator(expr: sympy.Expr) -> int:
    """LCM of the denominators of the rational coefficients of ``expr``'s terms."""
    den = 1
    for term in sympy.Add.make_args(sympy.expand(expr)):
        coeff, _ = term.as_coeff_Mul()
        if isinstance(coeff, sympy.Rational):
            den = math.lcm(den, int(coeff.q))
        elif not coeff.is_Integer:
            raise ExprEvalError(f"coefficient {coeff} in {expr} is not rational")
    return den


def _fold(fn: Callable[[Any, Any], Any], parts: list[Fn]) -> Fn:
    def run(env: Env) -> Any:
        value = parts[0](env)
        for p in parts[1:]:
            value = fn(value, p(env))
        return value

    return run


_RELATIONS = {
    sympy.StrictLessThan: lambda a, b: a < b,
    sympy.LessThan: lambda a, b: a <= b,
    sympy.StrictGreaterThan: lambda a, b: a > b,
    sympy.GreaterThan: lambda a, b: a >= b,
    sympy.Equality: lambda a, b: a == b,
    sympy.Unequality: lambda a, b: a != b,
}


def _compile(expr: sympy.Basic) -> Fn:
    if expr.is_Integer:
        value = int(expr)
        return lambda env: value
    if expr is sympy.true or expr is sympy.false:
        flag = bool(expr)
        return lambda env: flag
    if isinstance(expr, sympy.Symbol):
        name = expr.name
        return lambda env: env[name]
    if isinstance(expr, (sympy.floor, sympy.ceiling)):
        arg = expr.args[0]
        den = _denominator(arg)
        numerator = _compile(sympy.expand(arg * den))
        if isinstance(expr, sympy.floor):
            return lambda env: _floor_div(numerator(env), den)
        return lambda env: -_floor_div(-numerator(env), den)
    if isinstance(expr, sympy.Add):
        return _fold(lambda a, b: a + b, [_compile(a) for a in expr.args])
    if isinstance(expr, sympy.Mul):
        coeff, _ = expr.as_coeff_Mul()
        if not coeff.is_Integer:
            raise ExprEvalError(f"non-integer product {expr} outside floor()")
        return _fold(lambda a, b: a * b, [_compile(a) for a in expr.args])
    if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) >= 0:
        base, exp = _compile(expr.base), int(expr.exp)
        return lambda env: base(env) ** exp
    if isinstance(expr, sympy.Mod):
        a, b = _compile(expr.args[0]), _compile(expr.args[1])
        return lambda env: _mod(a(env), b(env))
    if isinstance(expr, sympy.Abs):  # exact on integers (a reflect pad's index)
        inner_abs = _compile(expr.args[0])
        return lambda env: _abs(inner_abs(env))
    if isinstance(expr, sympy.Min):
        return _fold(_minimum, [_compile(a) for a in expr.args])
    if isinstance(expr, sympy.Max):
        return _fold(_maximum, [_compile(a) for a in expr.args])
    if type(expr) in _RELATIONS:
        rel = _RELATIONS[type(expr)]
        a, b = _compile(expr.args[0]), _compile(expr.args[1])
        return lambda env: rel(a(env), b(env))
    if isinstance(expr, sympy.And):
        return _fold(lambda a, b: a & b, [_compile(a) for a in expr.args])
    if isinstance(expr, sympy.Or):
        return _fold(lambda a, b: a | b, [_compile(a) for a in expr.args])
    if isinstance(expr, sympy.Not):
        inner = _compile(expr.args[0])

        def negate(env: Env) -> Any:
            value = inner(env)
            return ~value if isinstance(value, torch.Tensor) else not value

        return negate
    if isinstance(expr, sympy.Piecewise):
        pieces = [(_compile(e), _compile(c)) for e, c in expr.args]

        def piecewise(env: Env) -> Any:
            value = pieces[-1][0](env)
            for e, c in reversed(pieces[:-1]):
                value = _where(c(env), e(env), value)
            return value

        return piecewise
    raise ExprEvalError(f"cannot evaluate {type(expr).__name__} in index expression {expr}")


@functools.lru_cache(maxsize=4096)
def compile_expr(expr: sympy.Basic) -> Fn:
    return _compile(to_plain_sympy(expr))


def evaluate(expr: Any, env: Env) -> Any:
    if isinstance(expr, int):
        return expr
    return compile_expr(sympy.sympify(expr))(env)
