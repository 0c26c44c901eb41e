"""A max / min reduction read straight from a strided view of device memory.

The general path reduces the contiguous tensor it gathers; reading the strided
view instead reduces the same values in another order.  For max and min the
*value* does not depend on the order, and two equal floats have the same bits,
with three exceptions: ``+0.0 == -0.0`` (which zero wins depends on the order),
NaN (which payload propagates depends on the order) and subnormals (with
flush-to-zero / denormals-are-zero on, a subnormal compares equal to zero).  So
the view's result is used only when every output element is a normal or
infinite float: ``|out| >= finfo.tiny`` is false exactly for zeros, subnormals
and NaN.  Otherwise the caller reduces the contiguous copy, as the general path
does (docs/architecture.md, "Loads as views before a reduction").
"""

from __future__ import annotations

import torch

__all__ = ["extremum_of_view"]


def extremum_of_view(kind: str, view: torch.Tensor, n_red: int) -> torch.Tensor | None:
    """``amax``/``amin`` of ``view`` over its trailing ``n_red`` axes, or None when
    some result's bits could depend on the order (a zero, subnormal or NaN)."""
    fn = torch.amax if kind == "max" else torch.amin
    rank = view.dim()
    # outermost memory axis first: slices of it combine elementwise, a streaming pass
    dims = sorted(range(rank - n_red, rank), key=lambda d: -view.stride(d))
    out = view
    for d in dims:
        out = fn(out, d, keepdim=True)
    out = out.reshape(view.shape[:rank - n_red])
    tiny = torch.finfo(out.dtype).tiny
    if not bool((out.abs() >= tiny).all()):
        return None
    return out
