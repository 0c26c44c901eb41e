"""The lowering of ``spyre_rules::name_dims`` (``name_tensor_dims`` inside compiled code).

The op is the identity.  Its lowering returns the tensor's own buffer and records
the names on it (``graph_state(graph).named_buffers``), where the hint pass
(``hints/named_dims.py``) starts propagating from, like from a named graph input.
Names are per host dim of a buffer, so a tensor that is a view of a buffer with
another shape (a transpose, a slice) is first copied into a buffer of its own
(one pointwise copy op) and the copy is named.
"""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules.backend.lowering_table import lowerings_swapped, register_on_every_overload
from spyre_rules.hints.api import decode_dim_names
from spyre_rules.ir.graph_state import graph_state

__all__ = ["name_dims_lowerings"]


def _own_buffer(x: Any) -> Any:
    """``x`` realized as a whole buffer (``x`` itself when it already is one)."""
    if isinstance(x, ir.TensorBox) and isinstance(x.data, ir.StorageBox):
        x.realize()
        buffer = x.data.data
        if list(buffer.get_size()) == list(x.get_size()):
            return x
    return ir.ExternKernel.copy_input(x)


def _lower_name_dims(x: Any, names: str) -> Any:
    x = _own_buffer(x)
    graph_state(V.graph).named_buffers[x.get_name()] = decode_dim_names(names)
    return x


def name_dims_lowerings() -> contextlib.AbstractContextManager[None]:
    """Swap the ``name_dims`` lowering into Inductor's table; restore it after."""
    table: dict[Any, Any] = {}
    register_on_every_overload(torch.ops.spyre_rules.name_dims, _lower_name_dims, table)
    return lowerings_swapped(table)
