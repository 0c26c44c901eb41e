"""The ``search`` section, checker's half: its bounds, the ``order`` / ``required`` / ``cost``
binders, ``reject`` guards (which also see ``dims``) and the ``exhausted`` message.

Its evaluation: ``spyre_rules/engine/search.py`` (docs/rules_language.md §6.4).
"""

from __future__ import annotations

from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.sections.spec import SectionSpec, SectionState, bound_check, bounds_set_check
# The knobs of the search algorithm (each must be a positive integer constant).
BOUNDS = ("max_splits_per_dim", "max_combos", "keep_smallest_splits", "split_window_radius")
# Knobs a policy may leave unset: widen_to_dims (unset: no widening) -- when no
# combination of the scan's dims fits, the op's other output host dims join the
# search, up to this many dims in all (docs/rules_language.md §6.4).
OPTIONAL_BOUNDS = ("widen_to_dims",)

# What the engine hands the `reject` guards and `exhausted` (docs/rules_language.md §6.4):
# the ordered dims and their candidate groups, and text made from the rules' own
# outputs so that a refusal can name the accesses and the failing requirements.
DECISION_BINDINGS = {
    "dims": "list[int]",
    "groups": "list[DimGroup]",
    # the dims among them the search chooses a split for: more than one legal count that
    # no read floor rules out (a dim the floors force to one count is fixed; engine/span_floor.py)
    "open_dims": "list[int]",
    # the candidates' accesses on the dims with no legal split above 1
    "unshrunk": "str",
    # per such dim, the legality guard or each failing requirement with the counts it refused
    "refusals": "str",
    # the accesses of candidates whose coordinate an indirect symbol drives (gathered rows)
    "gathered": "str",
}
EXHAUSTED_BINDINGS = {
    "dims": "list[int]",
    "tried": "int",
    "combinations": "str",   # "1 combination", "3 combinations"
    "last_failure": "str",   # why the last combination tried was not accepted
}
ORDER_BINDER = "DimGroup"
REQUIRED_BINDER = "DimGroup"
COST_BINDER = "Combo"


def check_key(checker: Any, item: A.OrderItem | A.CostItem, state: SectionState) -> None:
    binder = ORDER_BINDER if isinstance(item, A.OrderItem) else COST_BINDER
    isc = state.scope.child()
    b = checker.bind(isc, item.var, checker.vocab.parse_spelling(binder), "binder")
    t = checker.expr(item.key, isc)
    what = "an `order` key" if isinstance(item, A.OrderItem) else "a `cost` key"
    if not T.orderable(t):
        checker.error("E025", f"{what} must be orderable (int, bool, str, Sym, or a tuple/list of "
                      f"those), found `{t}`", item.key.span)
    checker.unused([b])


def check_required(checker: Any, item: A.RequiredItem, state: SectionState) -> None:
    isc = state.scope.child()
    b = checker.bind(isc, item.var, checker.vocab.parse_spelling(REQUIRED_BINDER), "binder")
    t = checker.expr(item.value, isc)
    checker.expect(t, T.INT, item.value, "the `required` split count")
    checker.unused([b])


def check_exhausted(checker: Any, item: A.ExhaustedItem, state: SectionState) -> None:
    checker.message(item.message, checker.extend(state.scope, EXHAUSTED_BINDINGS))


SPEC = SectionSpec(
    "search", (A.LetItem, A.Decision, A.BoundItem, A.OrderItem, A.RequiredItem, A.CostItem,
               A.ExhaustedItem), ("reject",), {"op": "Op"}, first_match=True,
    item_checks={A.BoundItem: bound_check("search", BOUNDS, OPTIONAL_BOUNDS), A.OrderItem: check_key, A.CostItem: check_key,
                 A.RequiredItem: check_required, A.ExhaustedItem: check_exhausted},
    required_items=((A.OrderItem, "order"), (A.RequiredItem, "required"), (A.CostItem, "cost"),
                    (A.ExhaustedItem, "exhausted")),
    decision_bindings=DECISION_BINDINGS,
    finish=bounds_set_check("search", BOUNDS))
