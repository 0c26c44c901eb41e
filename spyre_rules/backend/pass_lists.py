"""The ordered pass lists of the pipeline, declared in one place.

``backend/`` is the composition root: it alone names the passes of the lower
layers and the order they run in.  No pass registers itself on import.

Pre-scheduling (``fn(graph)``), run by ``pre_scheduling.run_pre_scheduling_passes``
after the support check, layouts, restickify and the plan records and before
memory planning:

1. ``assign_dim_hints``   -- stamps user ``dim_hints`` on ops; first, because the
   automatic planner skips ops that carry user hints and coarse tiling reads them;
2. ``coarse_tiling_pass`` -- user-hint and automatic groups -> coarse_tile +
   tiling propagation, then the scratchpad planner (``passes/pipeline.py``).
   A capture (``capture_operations``) skips it: the captured ops are those the
   planners see, hints stamped and nothing tiled (:data:`SKIPPED_BY_CAPTURE`).

Post-fusion (``fn(nodes) -> nodes``), run by ``post_fusion.RulesPostFusionPass``:

1. ``build_loop_scheduler_nodes`` -- wraps each loop group into one
   ``CountedLoopSchedulerNode``; first, so that no later node pass could merge
   nodes across group boundaries.

The lists are plain lists so that a test or a bench can add or swap a pass for
its duration (``register_pre_scheduling_pass``, then remove it in ``finally``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.hints import assign_dim_hints
from spyre_rules.passes.pipeline import coarse_tiling_pass
from spyre_rules.scheduler import build_loop_scheduler_nodes

__all__ = [
    "POST_FUSION_PASSES",
    "PRE_SCHEDULING_PASSES",
    "SKIPPED_BY_CAPTURE",
    "register_post_fusion_pass",
    "register_pre_scheduling_pass",
]

PreSchedulingPass = Callable[[Any], None]
PostFusionPass = Callable[[list[Any]], list[Any]]

PRE_SCHEDULING_PASSES: list[PreSchedulingPass] = [assign_dim_hints, coarse_tiling_pass]

#: Pre-scheduling passes a capture does not run (callers of ``capture_operations``
#: run ``passes.pipeline.run_pipeline`` on the captured graph themselves).
SKIPPED_BY_CAPTURE: tuple[PreSchedulingPass, ...] = (coarse_tiling_pass,)

POST_FUSION_PASSES: list[PostFusionPass] = [build_loop_scheduler_nodes]


def register_pre_scheduling_pass(fn: PreSchedulingPass) -> PreSchedulingPass:
    """Append ``fn`` to the pre-scheduling passes (idempotent)."""
    if fn not in PRE_SCHEDULING_PASSES:
        PRE_SCHEDULING_PASSES.append(fn)
    return fn


def register_post_fusion_pass(fn: PostFusionPass) -> PostFusionPass:
    """Append ``fn`` to the post-fusion passes (idempotent)."""
    if fn not in POST_FUSION_PASSES:
        POST_FUSION_PASSES.append(fn)
    return fn
