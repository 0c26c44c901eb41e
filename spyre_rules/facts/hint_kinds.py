"""Which dim hints an op carries: a user's, or the ones automatic grouping stamped.

``has_user_hints`` is a ``@fact`` (declared in ``rules/prelude.rules``); the
rules decide what a user hint means ("manual hints win").
"""

from __future__ import annotations

from typing import Any

from spyre_rules.facts.registry import Op, fact
from spyre_rules.ir.dim_hint import AutomaticDimHint

__all__ = ["AUTO_HINT_DIM_NAMES", "has_user_hints", "is_auto_hint"]

#: The label (``DimHint.dim_names``) of the hints automatic grouping stamps; only a
#: label: an automatic hint is told from a user's by its type (``AutomaticDimHint``).
AUTO_HINT_DIM_NAMES = ("_span_overflow",)


def is_auto_hint(hint: Any) -> bool:
    """Whether a DimHint was stamped by automatic span-overflow grouping."""
    return isinstance(hint, AutomaticDimHint)


@fact
def has_user_hints(op: Op) -> bool:
    """The op carries dim hints a user wrote (hints the automatic grouping stamped
    do not count, so planning an op again after grouping sees the same op)."""
    return any(not is_auto_hint(h) for h in (getattr(op, "dim_hints", None) or ()))
