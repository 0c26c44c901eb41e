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
from dataclasses import dataclass, field
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.scope import Binding, Scope


@dataclass
class SectionState:
    """What the checker knows while it walks one section's items in order."""

    scope: Scope                     # scope of the next item (an item may replace it)
    unused: list[Binding] = field(default_factory=list)   # reported if never read (W002)
    seen: dict[type, A.Span] = field(default_factory=dict)  # items a section has once
    names: dict[str, A.Ident] = field(default_factory=dict)  # names set once (search bounds)


#: ``check(checker, item, state)``: the checker is ``lang/checker.py``'s (typed ``Any``
#: here because the checker imports this module)
ItemCheck = Callable[[Any, Any, SectionState], None]


@dataclass(frozen=True)
class SectionSpec:
    kind: str
    items: tuple            # allowed item classes
    actions: tuple = ()     # allowed decision actions
    bindings: dict = field(default_factory=dict)  # name -> type spelling, visible to every item
    first_match: bool = False
    # the kind's own items: item class -> its check (the shared items are checker.py's)
    item_checks: dict[type, ItemCheck] = field(default_factory=dict)
    # items the section must contain, exactly once: (item class, word)
    required_items: tuple[tuple[type, str], ...] = ()
    # extra names a decision's guard and message see
    decision_bindings: dict = field(default_factory=dict)
    # called before each allowed item is checked (where an item may stand)
    order_check: ItemCheck | None = None
    # called after the last item (what the whole section must set)
    finish: Callable[[Any, A.Section, SectionState], None] | None = None


EMIT_TYPE = "Candidate"  # what a candidates generator emits (validation reads it too)

ITEM_WORD = {
    A.LetItem: "let", A.Decision: "decision", A.Require: "require", A.Generator: "generator",
    A.SplitsItem: "splits", A.BoundItem: "bound", A.OrderItem: "order", A.RequiredItem: "required",
    A.CostItem: "cost", A.ExhaustedItem: "exhausted",
}

# Types the language itself needs from the prelude: name -> "extern type" | "record" | "extern record".
REQUIRED_TYPES = {
    "Op": "extern type", "Sym": "extern type", "Tiling": "extern type",
    "Candidate": "record", "DimGroup": "extern record", "Combo": "extern record",
    "Plan": "extern record", "Run": "extern record", "Carry": "extern record",
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
