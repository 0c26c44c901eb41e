"""Evaluation of constant expressions (``const`` values, ``bound`` values,
guards made only of literals and constants).

A constant expression uses literals (numbers with optional units, strings,
booleans, tuples, lists, sets), other constants and operators; no config, no
facts, no bindings.  Evaluation runs only on expressions that already type-check.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections import UNITS


class NotConstant(Exception):
    """The expression reads something that is only known when the rules run."""


class ConstError(Exception):
    """Evaluation failed (e.g. division by zero)."""

    def __init__(self, message: str, span: A.Span) -> None:
        super().__init__(message)
        self.message = message
        self.span = span


def evaluate(e: A.Expr, lookup: Callable[[A.Name], Any]) -> Any:
    if isinstance(e, A.Num):
        factor = UNITS.get(e.unit.name, 1) if e.unit is not None else 1
        return e.digits * factor
    if isinstance(e, A.Str):
        return e.value
    if isinstance(e, A.Bool):
        return e.value
    if isinstance(e, A.Name):
        return lookup(e)
    if isinstance(e, A.TupleExpr):
        return tuple(evaluate(i, lookup) for i in e.items)
    if isinstance(e, A.ListExpr):
        return [evaluate(i, lookup) for i in e.items]
    if isinstance(e, A.SetExpr):
        return frozenset(evaluate(i, lookup) for i in e.items)
    if isinstance(e, A.Unary):
        v = evaluate(e.operand, lookup)
        return (not v) if e.op == "not" else -v
    if isinstance(e, A.Binary):
        return _binary(e, lookup)
    raise NotConstant(e)


def _binary(e: A.Binary, lookup) -> Any:
    op = e.op
    left = evaluate(e.left, lookup)
    if op == "and":
        return left and evaluate(e.right, lookup)
    if op == "or":
        return left or evaluate(e.right, lookup)
    right = evaluate(e.right, lookup)
    try:
        if op in ("//", "%") and right == 0:
            raise ConstError(f"division by zero in `{op}`", e.span)
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        if op == "<":
            return left < right
        if op == "<=":
            return left <= right
        if op == ">":
            return left > right
        if op == ">=":
            return left >= right
        if op == "in":
            return left in right
        if op == "not in":
            return left not in right
        if op == "subset":
            return frozenset(left) <= frozenset(right)
        if op == "|":
            return frozenset(left) | frozenset(right)
        if op == "&":
            return frozenset(left) & frozenset(right)
        if op == "-":
            return left - right
        if op == "+":
            return left + right
        if op == "*":
            return left * right
        if op == "//":
            return left // right
        if op == "%":
            return left % right
    except TypeError:  # ill-typed; the type checker has reported it
        raise NotConstant(e) from None
    raise NotConstant(e)
