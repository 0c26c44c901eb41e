"""``torch.eye`` with index ranges the program lays out (issue 41: Kimi-Linear).

ATen's reference decomposition of ``eye`` (``torch._refs.eye``) strength-reduces
its two ``arange``s to the smallest integer dtype that holds ``max(n, m)``: uint8
up to 255.  A Spyre stick layout has no uint8 (nor uint16), so Kimi-Linear's
chunked delta rule (``attn + torch.eye(chunk_size)``) was refused for its iota.
Here the ranges are int32 (int64 past its range): the ranges hold the same
integers and ``==`` compares them exactly, so the result is the same identity.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["eye_decompositions"]

aten = torch.ops.aten


def _eye(n: Any, m: Any = None, *, dtype: Any = None, layout: Any = torch.strided,
         device: Any = None, pin_memory: Any = False) -> Any:
    m = n if m is None else m
    if layout not in (torch.strided, None) or pin_memory \
            or not isinstance(n, int) or not isinstance(m, int):
        return NotImplemented
    range_dtype = torch.int32 if max(n, m) <= torch.iinfo(torch.int32).max else torch.int64
    rows = torch.arange(n, dtype=range_dtype, device=device)
    cols = torch.arange(m, dtype=range_dtype, device=device)
    return (rows.unsqueeze(-1) == cols).to(dtype or torch.get_default_dtype())


def eye_decompositions() -> dict[Any, Any]:
    return {aten.eye.default: _eye, aten.eye.m: _eye}
