"""The ``legality`` section, checker's half: ``reject`` guards, then ``splits`` (and at most
one ``otherwise splits`` right after it, E044), then ``require`` conditions per split count
(E038 keeps that order).

Its evaluation: ``spyre_rules/engine/legality.py`` (docs/rules_language.md §6.3).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.scope import where
from spyre_rules.lang.sections.spec import SectionSpec, SectionState, is_fallback

# state.seen key of the first `otherwise splits` item (the plain one is keyed by its class)
_FALLBACK = "otherwise splits"


def check_order(checker: Any, item: Any, state: SectionState) -> None:
    splits_seen = A.SplitsItem in state.seen
    if isinstance(item, A.Decision) and splits_seen:
        checker.error("E038", "`reject` guards of a legality section come before `splits`", item.action.span)
    elif isinstance(item, A.Require) and not splits_seen:
        checker.error("E038", "`require` conditions of a legality section come after `splits`", item.span)
    elif is_fallback(item):
        _place_fallback(checker, item, state)


def _place_fallback(checker: Any, item: A.SplitsItem, state: SectionState) -> None:
    """At most one `otherwise splits`, right after the plain `splits`, binding its variable."""
    first = state.seen.get(_FALLBACK)
    plain = state.previous if isinstance(state.previous, A.SplitsItem) and not state.previous.fallback else None
    if first is not None:
        checker.error("E044", "a second `otherwise splits` item in this section", item.span,
                      f"note: the first is at {where(first)}")
        return
    state.seen[_FALLBACK] = item.span
    if plain is None:
        at = state.seen.get(A.SplitsItem)
        checker.error("E044", "`otherwise splits` comes right after the `splits` item whose counts it falls back "
                      "from", item.span, f"note: the `splits` item is at {where(at)}" if at is not None else "")
    elif plain.var.name != item.var.name:
        checker.error("E044", f"`otherwise splits` binds `{item.var.name}`, `splits` binds `{plain.var.name}`: "
                      f"the fallback counts are values of the same split variable", item.var.span,
                      f"help: write `otherwise splits {plain.var.name} in ...;`")


def check_splits(checker: Any, item: A.SplitsItem, state: SectionState) -> None:
    placed = is_fallback(item) and isinstance(state.previous, A.SplitsItem) and not state.previous.fallback
    # a well-placed fallback sees what the plain `splits` saw: not its split variable
    scope = state.scope.parent if placed and state.scope.parent is not None else state.scope
    t = checker.expr(item.source, scope)
    what = "`otherwise splits`" if item.fallback else "`splits`"
    elem = checker.iter_elem(t, item.source, f"{what} source")
    if elem not in (T.INT, T.ERROR, T.ANY):
        checker.error("E022", f"{what} enumerates split counts (int), found `{t}`", item.source.span)
    if item.fallback:
        return  # its counts bind the plain `splits` variable
    # the split variable scopes every later item
    state.scope = state.scope.child()
    state.unused.append(checker.bind(state.scope, item.var, T.INT, "splits"))


SPEC = SectionSpec(
    "legality", (A.LetItem, A.Decision, A.SplitsItem, A.Require), ("reject",),
    {"op": "Op", "dim": "int"}, first_match=True,
    item_checks={A.SplitsItem: check_splits},
    required_items=((A.SplitsItem, "splits"),),
    order_check=check_order)
