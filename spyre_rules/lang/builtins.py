"""The builtin functions of the ``.rules`` language: one record each.

A record holds everything about one builtin: its name, the signature text the
diagnostics quote, its type rule (what arguments it takes, what it returns,
where it may be used) and its implementation.  The checker types a call from
the record (``lang/expressions.py``), the engine runs it from the same record
(``engine/compile.py``), so the two cannot disagree about which builtins exist
or what they take (docs/rules_language.md, "Builtins").

Implementations are plain Python on the language's runtime values (no torch,
no sympy import) so that ``spyre-rules check`` loads this module cheaply.  A
builtin that needs the planner (``legal_splits``, ``conforms``) is marked
``context``: the engine passes its evaluation context as the first argument.
An implementation that meets values it cannot work on raises
:class:`BuiltinError`; the engine adds the call's source position.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from spyre_rules.lang import types as T
from spyre_rules.lang.consts import int_text
from spyre_rules.lang.slotted import Frozen, frozen_init

__all__ = ["BUILTINS", "Builtin", "BuiltinError", "Collection", "Params", "SAME_LIST", "sort_key"]


class BuiltinError(Exception):
    """A builtin met values it cannot work on (``min`` of nothing, ``ceil_div`` by zero)."""

    def __init__(self, what: str) -> None:
        super().__init__(what)
        self.what = what


class Collection(Frozen):
    """One list-or-set argument whose elements must be ``elem`` (None: any type).

    ``or_ints``: two or more ``int`` arguments are accepted instead (``min``, ``max``).
    """

    __slots__ = _fields = ("elem", "or_ints")
    elem: T.Type | None
    or_ints: bool

    def __init__(self, elem: T.Type | None, or_ints: bool = False) -> None:
        frozen_init(self, elem, or_ints)


class Params(Frozen):
    """A fixed parameter list: ``(name, type spelling)``; a None name is quoted as
    "argument of `f`" in diagnostics, a named one as "argument `x` of `f`"."""

    __slots__ = _fields = ("params",)
    params: tuple[tuple[str | None, str], ...]

    def __init__(self, params: tuple[tuple[str | None, str], ...]) -> None:
        frozen_init(self, params)


#: result marker: a list of the collection argument's element type, which must be orderable
SAME_LIST = "list[T]"


class Builtin(Frozen):
    __slots__ = _fields = ("name", "signature", "args", "result", "run", "sections", "context")
    name: str
    signature: str                   # quoted in E021/E022 notes
    args: Collection | Params
    result: T.Type | str             # a type, or SAME_LIST
    run: Callable[..., Any]
    sections: tuple[str, ...] | None  # the section kinds it may be used in; None: any
    context: bool                    # ``run(context, *args)``: needs the planner

    def __init__(self, name: str, signature: str, args: Collection | Params, result: T.Type | str,
                 run: Callable[..., Any], sections: tuple[str, ...] | None = None, context: bool = False) -> None:
        frozen_init(self, name, signature, args, result, run, sections, context)

    def result_spelling(self) -> str:
        return self.result if isinstance(self.result, str) else str(self.result)


# ------------------------------------------------------------------ ordering

_DIGITS = re.compile(r"(\d+)")


def _natural(name: str) -> tuple:
    """``c2`` before ``c10``: digit runs compare as numbers."""
    return tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(name))


def sort_key(value: Any) -> Any:
    """A key that orders values of one orderable type as the language does
    (ints numerically, strings by text, symbols by natural name order, lists and
    tuples lexicographically).  A ``Sym`` is a sympy Symbol, recognised by its
    ``is_Symbol`` flag so that this module need not import sympy."""
    if getattr(type(value), "is_Symbol", False) is True:
        return _natural(value.name)
    if isinstance(value, (list, tuple)):
        return tuple(sort_key(v) for v in value)
    return value


# ------------------------------------------------------------ implementations


def _extreme(pick: Callable, name: str) -> Callable[..., int]:
    def run(*values: Any) -> int:
        if len(values) >= 2:
            return pick(values)
        (collection,) = values
        if not collection:
            raise BuiltinError(f"`{name}` of an empty collection")
        return pick(collection)
    return run


def _ceil_div(x: int, y: int) -> int:
    if y == 0:
        raise BuiltinError(f"`ceil_div({int_text(x)}, 0)`")
    return -(-x // y)


def _minmax_signature(name: str) -> str:
    return f"{name}(list[int] | set[int]) -> int, or {name}(int, int, ...) -> int"


_TABLE = (
    Builtin("len", "len(list[T] | set[T]) -> int", Collection(None), T.INT, len),
    Builtin("min", _minmax_signature("min"), Collection(T.INT, or_ints=True), T.INT, _extreme(min, "min")),
    Builtin("max", _minmax_signature("max"), Collection(T.INT, or_ints=True), T.INT, _extreme(max, "max")),
    Builtin("sum", "sum(list[int] | set[int]) -> int", Collection(T.INT), T.INT, sum),
    Builtin("product", "product(list[int] | set[int]) -> int", Collection(T.INT), T.INT, math.prod),
    Builtin("count", "count(list[bool]) -> int", Collection(T.BOOL), T.INT,
            lambda values: sum(1 for v in values if v)),
    Builtin("all", "all(list[bool]) -> bool", Collection(T.BOOL), T.BOOL, all),
    Builtin("any", "any(list[bool]) -> bool", Collection(T.BOOL), T.BOOL, any),
    Builtin("sorted", "sorted(list[T] | set[T]) -> list[T]", Collection(None), SAME_LIST,
            lambda values: sorted(values, key=sort_key)),
    Builtin("ceil_div", "ceil_div(int, int) -> int", Params(((None, "int"), (None, "int"))), T.INT, _ceil_div),
    Builtin("legal_splits", "legal_splits(op: Op, dim: int) -> list[int]", Params((("op", "Op"), ("dim", "int"))),
            T.ListT(T.INT), lambda ctx, op, dim: ctx.legal_splits(op, dim),
            sections=("candidates", "search", "validation", "grouping"), context=True),
    Builtin("conforms", "conforms(op: Op, tiling: Tiling) -> bool", Params((("op", "Op"), ("tiling", "Tiling"))),
            T.BOOL, lambda ctx, op, tiling: ctx.conforms(op, tiling),
            sections=("grouping",), context=True),
    # The product of a joint plan (grouping): its output is a per-tile buffer of a loop
    # it shares with its one point-for-point reader, whose read of it is that buffer.
    Builtin("loop_local_output", "loop_local_output(op: Op) -> bool", Params((("op", "Op"),)),
            T.BOOL, lambda ctx, op: ctx.loop_local_output(op),
            sections=("candidates", "validation", "grouping"), context=True),
    Builtin("loop_local_buffer", "loop_local_buffer(name: str) -> bool", Params((("name", "str"),)),
            T.BOOL, lambda ctx, name: ctx.loop_local_buffer(name),
            sections=("candidates", "validation", "grouping"), context=True),
)

#: name -> record, the only definition of the language's builtins
BUILTINS: dict[str, Builtin] = {b.name: b for b in _TABLE}
