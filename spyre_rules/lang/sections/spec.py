"""What every section kind's record holds, and the language's fixed vocabulary.

A :class:`SectionSpec` is the checker's half of one section kind: which items
it may contain, its decisions and implicit bindings, and the checks of the
items only that kind has (``lang/sections/<kind>.py`` builds each one).  The
items every kind may contain (``let``, decisions, ``require``) are checked by
``checker.py``.  Binding types are names of prelude types (``Op``,
``Tiling``...); ``int`` etc. are primitives.  No torch, no lark.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import consts
from spyre_rules.lang import types as T
from spyre_rules.lang.scope import Binding, Scope, where
from spyre_rules.lang.slotted import Frozen, Plain, frozen_init


class SectionState(Plain):
    """What the checker knows while it walks one section's items in order."""

    __slots__ = _fields = ("scope", "unused", "seen", "names", "previous")
    scope: Scope                     # scope of the next item (an item may replace it)
    unused: list[Binding]            # reported if never read (W002)
    seen: dict[Any, A.Span]          # items a section has once, by class (a section's checks may add marks)
    names: dict[str, A.Ident]        # names set once (search bounds)
    previous: Any                    # the last item checked (a section's checks may place an item after it)

    def __init__(self, scope: Scope, unused: list[Binding] | None = None, seen: dict[Any, A.Span] | None = None,
                 names: dict[str, A.Ident] | None = None, previous: Any = None) -> None:
        self.scope = scope
        self.unused = [] if unused is None else unused
        self.seen = {} if seen is None else seen
        self.names = {} if names is None else names
        self.previous = previous


#: ``check(checker, item, state)``: the checker is ``lang/checker.py``'s (typed ``Any``
#: here because the checker imports this module)
ItemCheck = Callable[[Any, Any, SectionState], None]


class SectionSpec(Frozen):
    __slots__ = _fields = ("kind", "items", "actions", "bindings", "first_match", "item_checks",
                           "required_items", "decision_bindings", "order_check", "finish")
    kind: str
    items: tuple            # allowed item classes
    actions: tuple          # allowed decision actions
    bindings: dict          # name -> type spelling, visible to every item
    first_match: bool
    # the kind's own items: item class -> its check (the shared items are checker.py's)
    item_checks: dict[type, ItemCheck]
    # items the section must contain, exactly once: (item class, word)
    required_items: tuple[tuple[type, str], ...]
    # extra names a decision's guard and message see
    decision_bindings: dict
    # called before each allowed item is checked (where an item may stand)
    order_check: ItemCheck | None
    # called after the last item (what the whole section must set)
    finish: Callable[[Any, A.Section, SectionState], None] | None

    def __init__(self, kind: str, items: tuple, actions: tuple = (), bindings: dict | None = None,
                 first_match: bool = False, item_checks: dict[type, ItemCheck] | None = None,
                 required_items: tuple[tuple[type, str], ...] = (), decision_bindings: dict | None = None,
                 order_check: ItemCheck | None = None,
                 finish: Callable[[Any, A.Section, SectionState], None] | None = None) -> None:
        frozen_init(self, kind, items, actions, {} if bindings is None else bindings, first_match,
                    {} if item_checks is None else item_checks, required_items,
                    {} if decision_bindings is None else decision_bindings, order_check, finish)


EMIT_TYPE = "Candidate"  # what a candidates generator emits (validation reads it too)

ITEM_WORD = {
    A.LetItem: "let", A.Decision: "decision", A.Require: "require", A.Generator: "generator",
    A.SplitsItem: "splits", A.BoundItem: "bound", A.OrderItem: "order", A.RequiredItem: "required",
    A.CostItem: "cost", A.ExhaustedItem: "exhausted",
}

def is_fallback(item: Any) -> bool:
    """``otherwise splits``: a ``splits`` item giving the fallback split counts."""
    return isinstance(item, A.SplitsItem) and item.fallback


def item_word(item: Any) -> str:
    """The item's keyword as diagnostics name it."""
    return "otherwise splits" if is_fallback(item) else ITEM_WORD[type(item)]


# Types the language itself needs from the prelude: name -> "extern type" | "record" | "extern record".
REQUIRED_TYPES = {
    "Op": "extern type", "Sym": "extern type", "Tiling": "extern type",
    "Candidate": "record", "DimGroup": "extern record", "Combo": "extern record",
    "Plan": "extern record", "Run": "extern record", "Carry": "extern record",
    "Chunking": "extern record",
}
# Fields the engine reads from records the rules build.
REQUIRED_FIELDS = {
    "Candidate": {"host_dim": "int", "span_bytes": "int", "reason": "str", "source": "str"},
}


def and_list(words: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def with_article(word: str) -> str:
    """`word` with its indefinite article ("an `order`", "a `search`")."""
    return ("an " if word.strip("`")[:1] in "aeiou" else "a ") + word


def bound_check(kind: str, bounds: tuple[str, ...], optional: tuple[str, ...] = ()) -> ItemCheck:
    """The check of a ``bound NAME = CONST;`` item of a ``kind`` section whose bounds are
    ``bounds`` (each must be set) and ``optional``: a known name, set once, to a positive
    integer constant (recorded in ``checker.resolved.bounds``)."""
    known = bounds + optional

    def check(checker: Any, item: A.BoundItem, state: SectionState) -> None:
        name = item.name.name
        seen = state.names
        if name not in known:
            checker.error("E034", f"unknown {kind} bound `{name}` (bounds: {', '.join(known)})",
                          item.name.span, checker.suggest(name, known))
        elif name in seen:
            checker.error("E016", f"bound `{name}` is already set", item.name.span,
                          f"note: first set at {where(seen[name].span)}")
            return
        else:
            seen[name] = item.name
        before = len(checker.diags)
        t = checker.expr(item.value, state.scope)
        if len(checker.diags) > before:
            return
        value = checker.const_fold(item.value)
        if value is consts.NO_VALUE:
            checker.error("E033", f"bound `{name}` must be a constant positive integer (literals and constants only)",
                          item.value.span)
        elif t != T.INT or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            checker.error("E033", f"bound `{name}` must be a positive integer, found {consts.show_value(value)}",
                          item.value.span)
        else:
            checker.resolved.bounds[name] = value

    return check


def bounds_set_check(kind: str, bounds: tuple[str, ...]) -> Callable[[Any, A.Section, SectionState], None]:
    """A ``finish`` check: the ``kind`` section sets every bound of ``bounds``."""

    def check(checker: Any, sec: A.Section, state: SectionState) -> None:
        unset = [f"`{name}`" for name in bounds if name not in state.names]
        if unset:
            checker.error("E034", f"the {kind} section does not set bound{'s' if len(unset) > 1 else ''} "
                          + and_list(unset), sec.kind.span)

    return check
