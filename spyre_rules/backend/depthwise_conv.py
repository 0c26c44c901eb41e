"""A depthwise 1-D convolution as a sum of shifted slices the program runs (issue 41).

Mamba2 layers (Granite 4's GraniteMoeHybrid) run a causal ``conv1d`` with one filter
per channel (``groups == channels``) and a short kernel (4 taps); Inductor lowers
every convolution to an extern kernel.  For that form::

    out[b, c, t] = bias[c] + sum_j w[c, 0, j] * xpad[b, c, t * stride + j * dilation]

with ``xpad`` the input padded by ``padding`` zeros each side (a constant pad, which
the backend lowers as a concatenation).  We write it as ``K`` shifted strided slices
times their tap, added in tap order, then the bias: one Pointwise.  ATen's kernel
sums in its own order, so results agree within the usual tolerance, not bitwise.
Any other grouping of a 1-D convolution (ZAYA's grouped conv, a dense one, a channel
multiplier) is a sum of shifted matmuls (``grouped_conv.py``); a transposed or 2-D
convolution keeps the extern kernel and is refused by name.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.backend.grouped_conv import grouped_conv1d

__all__ = ["depthwise_conv_decompositions"]

aten = torch.ops.aten


def _convolution(x: Any, w: Any, bias: Any, stride: Any, padding: Any, dilation: Any,
                 transposed: bool, output_padding: Any, groups: int) -> Any:
    if transposed or x.dim() != 3 or w.dim() != 3 or len(stride) != 1 or len(padding) != 1 \
            or len(dilation) != 1:
        return NotImplemented
    channels = x.shape[1]
    (step,), (pad,), (spread,) = stride, padding, dilation
    if groups != channels or w.shape[0] != channels or w.shape[1] != 1:
        return grouped_conv1d(x, w, bias, step, pad, spread, groups)
    taps = w.shape[2]
    padded = aten.constant_pad_nd(x, [pad, pad], 0.0) if pad else x
    length = (padded.shape[2] - spread * (taps - 1) - 1) // step + 1
    if length <= 0:
        return NotImplemented
    out = None
    for j in range(taps):
        start = j * spread
        window = padded[:, :, start:start + (length - 1) * step + 1:step]
        term = window * w[:, 0, j:j + 1]  # [C, 1] against [B, C, L]
        out = term if out is None else out + term
    if bias is not None:
        out = out + bias.unsqueeze(-1)
    return out


def depthwise_conv_decompositions() -> dict[Any, Any]:
    return {aten.convolution.default: _convolution}
