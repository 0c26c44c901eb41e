"""The ``collectives`` section, checker's half: its bounds and the ``cost`` that picks how a
collective step too large for one core's span is cut into chunks.

Its evaluation: ``spyre_rules/engine/collectives.py`` (docs/rules_language.md §6.7).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.sections.spec import SectionSpec, SectionState, bound_check, bounds_set_check

# Chunk counts tried along one host dim, fewest first, before the dim is given up.
BOUNDS = ("max_chunks",)
COST_BINDER = "Chunking"


def check_cost(checker: Any, item: A.CostItem, state: SectionState) -> None:
    isc = state.scope.child()
    b = checker.bind(isc, item.var, checker.vocab.parse_spelling(COST_BINDER), "binder")
    t = checker.expr(item.key, isc)
    if not T.orderable(t):
        checker.error("E025", "a `cost` key must be orderable (int, bool, str, Sym, or a tuple/list "
                      f"of those), found `{t}`", item.key.span)
    checker.unused([b])


SPEC = SectionSpec(
    "collectives", (A.LetItem, A.BoundItem, A.CostItem), (), {"collective": "str"},
    item_checks={A.BoundItem: bound_check("collectives", BOUNDS), A.CostItem: check_cost},
    required_items=((A.CostItem, "cost"),),
    finish=bounds_set_check("collectives", BOUNDS))
