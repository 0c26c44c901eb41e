"""Scheduler side of coarse tiling: ``CountedLoopSchedulerNode`` and the
post-fusion pass ``build_loop_scheduler_nodes`` (seed 003 layer 2, layout_model §5.4).

Importing this package registers ``build_loop_scheduler_nodes`` as the *first*
post-fusion pass: loop groups must be wrapped (and thereby made unfusable)
before any later node pass could merge nodes across group boundaries.
"""

from __future__ import annotations

from spyre_rules.scheduler.loops import (
    CountedLoopSchedulerNode,
    LoopGroupError,
    build_loop_scheduler_nodes,
)

__all__ = ["CountedLoopSchedulerNode", "LoopGroupError", "build_loop_scheduler_nodes"]


def _register() -> None:
    from spyre_rules.backend.post_fusion import POST_FUSION_PASSES

    if build_loop_scheduler_nodes in POST_FUSION_PASSES:
        POST_FUSION_PASSES.remove(build_loop_scheduler_nodes)
    POST_FUSION_PASSES.insert(0, build_loop_scheduler_nodes)


_register()
