"""Concatenation: each input op writes its own region of the one output buffer.

On CPU Inductor lowers ``cat`` to a ``ConcatKernel`` (no computation of its own)
whose inputs are realized *into* it: each input becomes a ComputedBuffer with a
``NonOwningLayout``, a strided view of the concatenation's storage at the input's
offset, so its store index is already an index of that storage.  We keep that
shape (docs/layout_model.md, "Concatenation"): the concatenation buffer gets a
Spyre layout and an HBM allocation like any buffer, and each region op is an
OpSpec whose store TensorArg addresses the concatenation buffer, its device
coordinates derived from the store index with the concatenation's layout.  The
regions are disjoint, every TensorArg is an ordinary dense access, and the span
check covers each one.  No copy op is added.
"""

from __future__ import annotations

from typing import Any

from torch._inductor import ir

__all__ = ["region_base", "region_bases", "region_offset"]


def region_base(op: Any) -> str | None:
    """The buffer an op with a NonOwningLayout writes into (None: it owns its buffer)."""
    layout = getattr(op, "layout", None)
    if not isinstance(layout, ir.NonOwningLayout):
        return None
    return layout.view.get_name()


def region_offset(op: Any) -> Any:
    """Storage offset of the op's region in the concatenation buffer.

    Inductor puts it in the wrapper's ``reinterpret_tensor`` of the region, not
    in the op's store index (which is relative to the region)."""
    return op.layout.view.get_layout().offset


def region_bases(graph: Any) -> dict[str, str]:
    """Region op name -> concatenation buffer name, for every ConcatKernel input."""
    concats = {op.get_name() for op in graph.operations if isinstance(op, ir.ConcatKernel)}
    out = {}
    for op in graph.operations:
        base = region_base(op)
        if base is not None and base in concats:
            out[op.get_name()] = base
    return out
