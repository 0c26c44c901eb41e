"""``a & (b | c)`` is compiled as ``(a & b) | (a & c)``: the same set for every operand."""

from __future__ import annotations

import itertools

from spyre_rules.engine.compile import ExprCompiler
from spyre_rules.lang import ast as A

_SPAN = A.Span("t.rules", 1, 1, 1, 2)


class _Leaves(ExprCompiler):
    """Compiles a name-like leaf (a str) to a read of the env; the rest as usual."""

    def expr(self, e):  # type: ignore[override]
        if isinstance(e, str):
            return lambda env: env[e]
        return super().expr(e)


def _binary(op, left, right):
    return A.Binary(_SPAN, op, left, right)


def test_meet_of_union_is_the_set_expression() -> None:
    compiler = _Leaves({}, {}, None, None)  # type: ignore[arg-type]
    fn = compiler.expr(_binary("&", "a", _binary("|", "b", "c")))
    values = [frozenset(), frozenset({"x"}), frozenset({"x", "y"}), ["y", "z"], frozenset({"z"})]
    for a, b, c in itertools.product(values, repeat=3):
        got = fn({"a": a, "b": b, "c": c})
        assert type(got) is frozenset
        assert got == frozenset(a) & (frozenset(b) | frozenset(c))
