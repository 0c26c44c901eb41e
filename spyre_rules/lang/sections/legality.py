"""The ``legality`` section, checker's half: ``reject`` guards, then ``splits``, then ``require``
conditions per split count (E038 keeps that order).

Its evaluation: ``spyre_rules/engine/legality.py`` (docs/rules_language.md §6.3).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.sections.spec import SectionSpec, SectionState

def check_order(checker: Any, item: Any, state: SectionState) -> None:
    splits_seen = A.SplitsItem in state.seen
    if isinstance(item, A.Decision) and splits_seen:
        checker.error("E038", "`reject` guards of a legality section come before `splits`", item.action.span)
    elif isinstance(item, A.Require) and not splits_seen:
        checker.error("E038", "`require` conditions of a legality section come after `splits`", item.span)


def check_splits(checker: Any, item: A.SplitsItem, state: SectionState) -> None:
    t = checker.expr(item.source, state.scope)
    elem = checker.iter_elem(t, item.source, "`splits` source")
    if elem not in (T.INT, T.ERROR, T.ANY):
        checker.error("E022", f"`splits` enumerates split counts (int), found `{t}`", item.source.span)
    # the split variable scopes every later item
    state.scope = state.scope.child()
    state.unused.append(checker.bind(state.scope, item.var, T.INT, "splits"))


SPEC = SectionSpec(
    "legality", (A.LetItem, A.Decision, A.SplitsItem, A.Require), ("reject",),
    {"op": "Op", "dim": "int"}, first_match=True,
    item_checks={A.SplitsItem: check_splits},
    required_items=((A.SplitsItem, "splits"),),
    order_check=check_order)
