"""Evaluation of constant expressions (``const`` values, ``bound`` values,
guards made only of literals and constants).

A constant expression uses literals (numbers with optional units, strings,
booleans, tuples, lists, sets), other constants and operators; no config, no
facts, no bindings.  Evaluation runs only on expressions that already type-check.

Every integer a constant expression produces (literal, operand or result) must
fit in a signed 64-bit integer (:data:`MAX_INT_BITS`); a larger one stops the
evaluation with a :class:`ConstError`, so no computation ever grows without
bound (the language has no other operation that makes values larger).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A


class NotConstant(Exception):
    """The expression reads something that is only known when the rules run."""


class ConstError(Exception):
    """Evaluation failed (e.g. division by zero)."""

    def __init__(self, message: str, span: A.Span, code: str = "E035") -> None:
        super().__init__(message)
        self.message = message
        self.span = span
        self.code = code


UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}

NO_VALUE = object()  # what the checker's const_fold returns for an expression that is not constant

MAX_INT_BITS = 63  # |value| < 2**63
INT_LIMIT_TEXT = "2**63 - 1"


def fits(value: Any) -> bool:
    """Whether an int is within the language's constant range (non-ints: true)."""
    return not isinstance(value, int) or value.bit_length() <= MAX_INT_BITS


def int_text(value: int) -> str:
    """An int as text, abbreviated when it is too long to print in a message
    (``str()`` refuses ints over 4,300 digits)."""
    if value.bit_length() <= 1000:
        return str(value)
    digits = int(value.bit_length() * 0.30103) + 1
    return f"{'-' if value < 0 else ''}(an integer of about {digits} digits)"


def show_value(value: Any) -> str:
    """A constant's value as a message shows it (long ones clipped)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value[:60]}..."' if len(value) > 60 else f'"{value}"'
    if isinstance(value, int):
        return int_text(value)
    text = repr(value)
    return text[:60] + "..." if len(text) > 60 else text


def _checked(value: Any, e: A.Expr) -> Any:
    if not fits(value):
        raise ConstError(f"the value is out of range (integers lie within +/-({INT_LIMIT_TEXT}))", e.span, "E042")
    return value


def evaluate(e: A.Expr, lookup: Callable[[A.Name], Any]) -> Any:
    if isinstance(e, A.Num):
        factor = UNITS.get(e.unit.name, 1) if e.unit is not None else 1
        return _checked(e.digits * factor, e)
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
        return (not v) if e.op == "not" else _checked(-v, e)
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
            return _checked(left - right, e)
        if op == "+":
            return _checked(left + right, e)
        if op == "*":
            return _checked(left * right, e)
        if op == "//":
            return left // right
        if op == "%":
            return left % right
    except TypeError:  # ill-typed; the type checker has reported it
        raise NotConstant(e) from None
    raise NotConstant(e)
