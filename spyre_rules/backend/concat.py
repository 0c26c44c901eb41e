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

A constant pad is a concatenation too (``pad_decompositions``): ``F.pad(x, (1, 3))``
is ``cat([full(1), x, full(3)], -1)``, one dim at a time, a negative pad a
slice.  Inductor's own pad lowering is one op whose loads of ``x`` sit under a
mask and read at ``index - 1``: an access that leaves the buffer on the masked
lanes, which a Spyre program cannot describe as a dense access.
"""

from __future__ import annotations

from typing import Any

import torch
from torch._inductor import ir

__all__ = ["pad_decompositions", "region_base", "region_bases", "region_offset"]

aten = torch.ops.aten


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


def _constant_pad_as_cat(x: torch.Tensor, pad: list[int], value: Any = 0) -> torch.Tensor:
    out, fresh = x, False
    for i in range(len(pad) // 2):
        d = x.dim() - 1 - i  # pad pairs run from the last dim backwards
        left, right = int(pad[2 * i]), int(pad[2 * i + 1])
        if left < 0:
            out = out.narrow(d, -left, out.shape[d] + left)
            left = 0
        if right < 0:
            out = out.narrow(d, 0, out.shape[d] + right)
            right = 0
        parts = []
        for width, is_left in ((left, True), (right, False)):
            if width:
                shape = list(out.shape)
                shape[d] = width
                fill = torch.full(shape, value, dtype=out.dtype, device=out.device)
                parts.append((is_left, fill))
        if parts:
            pieces = [p for left_side, p in parts if left_side] + [out] + \
                     [p for left_side, p in parts if not left_side]
            out, fresh = torch.cat(pieces, d), True
    # the result never aliases x (a pure crop is a view of it)
    return out if fresh else out.clone()


def pad_decompositions() -> dict[Any, Any]:
    return {aten.constant_pad_nd.default: _constant_pad_as_cat}
