"""Applying the engine's automatic groups: stamp their synthetic ``DimHint``s.

The engine decides (``engine.grouping.decide_groups`` returns the groups and one
``AutoHint`` per member and level) and writes nothing; this module is the one
place that writes that decision into the IR, as ``op.dim_hints``, so
``coarse_tile`` consumes automatic groups exactly like user hints
(docs/layout_model.md §5.1).  Synthetic hints are ``AutomaticDimHint``s
(a ``DimHint`` subclass), which is how ``has_user_hints`` tells them from a user's.

* ``apply_automatic_hints(operations, outcome)`` -- stamp the hints of ``outcome``;
* ``group_operations(operations)`` -- decide, then apply; returns the outcome;
* ``span_overflow_groups(operations)`` -- the same, returning only the groups.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spyre_rules.facts.hint_kinds import AUTO_HINT_DIM_NAMES
from spyre_rules.ir.dim_hint import AutomaticDimHint

__all__ = ["apply_automatic_hints", "group_operations", "span_overflow_groups"]


def apply_automatic_hints(operations: Sequence[Any], outcome: Any) -> None:
    """Give every member of an automatic group its synthetic hints (its levels,
    outermost first); other ops are left as they are."""
    for op in operations:
        hints = outcome.hints.get(op.get_name())
        if hints is not None:
            op.dim_hints = [AutomaticDimHint(list(AUTO_HINT_DIM_NAMES), h.split, h.loop_var,
                                             h.is_reduction, h.hint_id, h.host_dim) for h in hints]


def group_operations(operations: Sequence[Any], max_cores: int | None = None,
                     trace: list[Any] | None = None) -> Any:
    """``decide_groups`` (the engine's grouping decision), applied to ``operations``."""
    from spyre_rules.engine.grouping import decide_groups

    outcome = decide_groups(operations, max_cores, trace)
    apply_automatic_hints(operations, outcome)
    return outcome


def span_overflow_groups(operations: Sequence[Any], max_cores: int | None = None) -> list[Any]:
    """Coarse-tile groups for automatic span-overflow tiling, hints stamped
    (docs/architecture.md "Public names")."""
    return group_operations(operations, max_cores).groups
