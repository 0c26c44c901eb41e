"""Scheduler side of coarse tiling: ``CountedLoopSchedulerNode`` and the
post-fusion pass ``build_loop_scheduler_nodes`` (docs/layout_model.md §5.4).

``build_loop_scheduler_nodes`` is the first post-fusion pass
(``backend/pass_lists.py``): loop groups must be wrapped (and thereby made
unfusable) before any later node pass could merge nodes across group boundaries.
"""

from __future__ import annotations

from spyre_rules.scheduler.loops import (
    CountedLoopSchedulerNode,
    LoopGroupError,
    build_loop_scheduler_nodes,
)

__all__ = ["CountedLoopSchedulerNode", "LoopGroupError", "build_loop_scheduler_nodes"]

