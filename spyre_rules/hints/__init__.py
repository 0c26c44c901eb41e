"""User hints for coarse tiling: ``spyre_hint``, named dims, ``op.dim_hints``.

* ``api``        -- ``spyre_hint`` (nestable, Dynamo-traceable), ``declare_tensor_dim``,
  ``name_tensor_dims``, ``bind_input_dim_names`` (the backend's input binding);
* ``named_dims`` -- propagates dim names from inputs and ``named_dims=`` to every op;
* ``assign``     -- the ``assign_dim_hints`` pre-scheduling pass (``DimHint``) and
  ``hints_to_coarse_tile_groups``;
* ``automatic``  -- applies the engine's automatic groups: ``group_operations``,
  ``span_overflow_groups`` (the synthetic hints the engine decided, stamped).

Importing this package registers ``assign_dim_hints`` at the pre-scheduling seam
(it is idempotent per graph, so an explicit call from the pipeline as well is
harmless).  It must run before the automatic planner and coarse tiling.
"""

from __future__ import annotations

from spyre_rules.hints.api import (
    bind_input_dim_names,
    bound_input_dim_names,
    clear_tensor_dims,
    declare_tensor_dim,
    declared_tensor_dims,
    name_tensor_dims,
    spyre_hint,
    tensor_dim_names,
)
from spyre_rules.hints.assign import DimHint, assign_dim_hints, hints_to_coarse_tile_groups
from spyre_rules.hints.automatic import apply_automatic_hints, group_operations, span_overflow_groups
from spyre_rules.hints.errors import HintError

__all__ = [
    "DimHint",
    "HintError",
    "apply_automatic_hints",
    "assign_dim_hints",
    "bind_input_dim_names",
    "bound_input_dim_names",
    "clear_tensor_dims",
    "declare_tensor_dim",
    "declared_tensor_dims",
    "group_operations",
    "hints_to_coarse_tile_groups",
    "name_tensor_dims",
    "span_overflow_groups",
    "spyre_hint",
    "tensor_dim_names",
]


def _register() -> None:
    """Register the pass and keep it first: hints must be stamped before any planner
    (which skips ops with ``dim_hints``) or coarse tiling runs, whatever the import order."""
    from spyre_rules.backend.pre_scheduling import (
        PRE_SCHEDULING_PASSES,
        register_pre_scheduling_pass,
    )

    register_pre_scheduling_pass(assign_dim_hints)
    PRE_SCHEDULING_PASSES.remove(assign_dim_hints)
    PRE_SCHEDULING_PASSES.insert(0, assign_dim_hints)


_register()
