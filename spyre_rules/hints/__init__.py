"""User hints for coarse tiling: ``spyre_hint``, named dims, ``op.dim_hints``.

* ``api``        -- ``spyre_hint`` (nestable, Dynamo-traceable), ``declare_tensor_dim``,
  ``name_tensor_dims``, ``bind_input_dim_names`` (the backend's input binding);
* ``named_dims`` -- propagates dim names from inputs and ``named_dims=`` to every op;
* ``assign``     -- the ``assign_dim_hints`` pre-scheduling pass (``DimHint``) and
  ``hints_to_coarse_tile_groups``;
* ``automatic``  -- applies the engine's automatic groups: ``group_operations``,
  ``span_overflow_groups`` (the synthetic hints the engine decided, stamped).

``assign_dim_hints`` is the first pre-scheduling pass (``backend/pass_lists.py``):
it must run before the automatic planner and coarse tiling.  It is idempotent
per graph, so an explicit call from the pipeline as well is harmless.
"""

from __future__ import annotations

from spyre_rules.hints.api import (
    bind_dim_sizes,
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
    "bind_dim_sizes",
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

