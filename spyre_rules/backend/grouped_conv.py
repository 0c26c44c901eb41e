"""A grouped (or dense) 1-D convolution as a sum of shifted matmuls (issue 41).

ZAYA's Compressed Convolutional Attention runs, after a depthwise conv1d
(``depthwise_conv.py``), a grouped one: ``groups`` = query plus key heads, each group
mixing its ``C_in / groups`` channels into ``C_out / groups`` with a short kernel
(2 taps).  Inductor lowers every convolution to an extern kernel.  With ``G`` groups,
``Ci = C_in / G`` and ``Co = C_out / G`` channels per group::

    out[b, g*Co + o, t] = bias[g*Co + o]
        + sum_j sum_i w[g*Co + o, i, j] * xpad[b, g*Ci + i, t * stride + j * dilation]

with ``xpad`` the input padded by ``padding`` zeros each side (a constant pad, which
the backend lowers as a concatenation).  Tap ``j`` is a batched matmul over the groups
of the weight's column ``j`` (``[G, Co, Ci]``) and the shifted strided slice of the
input (``[B, G, Ci, L]``, a view of its channels); the taps are added in tap order,
then the bias.  Half-precision inputs are widened to float32 first and the result
rounded once, as ATen's CPU kernel accumulates: the results differ from eager only by
float32 summation order (docs/accumulation.md), within the ops tests' tolerance.
``groups=1`` is a dense conv1d, the same formula with one group.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["grouped_conv1d"]

aten = torch.ops.aten


def grouped_conv1d(x: Any, w: Any, bias: Any, step: int, pad: int, spread: int,
                   groups: int) -> Any:
    """The conv1d's value, or ``NotImplemented`` for a form this does not cover."""
    batch, channels_in = x.shape[0], x.shape[1]
    channels_out, per_group_in, taps = w.shape
    if groups <= 0 or channels_in % groups or channels_out % groups \
            or per_group_in * groups != channels_in:
        return NotImplemented
    wanted = x.dtype
    accumulate = torch.promote_types(wanted, torch.float32)
    if not accumulate.is_floating_point:
        return NotImplemented
    padded = aten.constant_pad_nd(x, [pad, pad], 0.0) if pad else x
    length = (padded.shape[2] - spread * (taps - 1) - 1) // step + 1
    if length <= 0:
        return NotImplemented
    per_group_out = channels_out // groups
    weights = w.to(accumulate).view(groups, per_group_out, per_group_in, taps)
    out = None
    for j in range(taps):
        start = j * spread
        window = padded[:, :, start:start + (length - 1) * step + 1:step].to(accumulate)
        window = window.reshape(batch, groups, per_group_in, length)
        term = torch.matmul(weights[..., j], window)  # [G, Co, Ci] @ [B, G, Ci, L]
        out = term if out is None else out + term
    out = out.reshape(batch, channels_out, length)
    if bias is not None:
        out = out + bias.to(accumulate).unsqueeze(-1)
    return out if wanted == accumulate else out.to(wanted)
