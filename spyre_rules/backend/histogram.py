"""``histc`` as a counting reduction the program runs, bin for bin ATen's (issue 41).

Inductor lowers ``aten.histc`` to an ATen fallback kernel.  The grouped experts
count their tokens per expert with ``histc(expert_ids.float(), bins=E, min=0,
max=E-1)``; we decompose ``histc`` into one Reduction over the elements:
``hist[b] = sum_s (lower_b <= x_s <= upper_b)``.

The bounds reproduce ATen's CPU binning exactly, for any float32 or float64 input,
not only integer-valued ones.  ATen puts an element ``x`` with ``min <= x <= max``
into bin ``trunc(((x - min) * bins) / (max - min))`` (that bin minus one when it is
``bins``), evaluated in the input's dtype, and drops every other element (NaN
included).  Each step of that formula is monotone in ``x``, so each bin is a
contiguous range of floating-point values; we find its first value by bisection over
the dtype's ordered values, evaluating the same formula in the same dtype with numpy,
at compile time.  The program then only compares: no division whose rounding
Inductor might change (it turns a division by a constant into a multiplication by
its reciprocal).

Refused by name (the ATen fallback stays, a host step under ``fallback='eager'``):
``min == max`` (ATen then bins between the data's own minimum and maximum) and
dtypes other than float32 and float64 (ATen's CPU kernel takes no integers; half
precision rounds each step differently).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["histogram_decompositions", "histc_bin_bounds"]

aten = torch.ops.aten

#: dtype -> (numpy scalar type, the unsigned integer type of the same width)
_EXACT = {torch.float32: (np.float32, np.uint32), torch.float64: (np.float64, np.uint64)}


def _sign_bit(utype: Any) -> int:
    return 1 << (8 * np.dtype(utype).itemsize - 1)


def _ordered_key(value: Any, utype: Any) -> int:
    """An integer that orders the floats as their values (-0.0 just below +0.0)."""
    bits = int(np.array(value).view(utype))
    sign = _sign_bit(utype)
    return -(bits - sign) - 1 if bits & sign else bits


def _from_key(key: int, ftype: Any, utype: Any) -> Any:
    bits = key if key >= 0 else (-(key + 1)) | _sign_bit(utype)
    return np.array(bits, dtype=utype).view(ftype)[()]


def _aten_bin(x: Any, low: Any, high: Any, bins: int, ftype: Any) -> int:
    """The bin ATen's CPU histc puts ``x`` in (low <= x <= high), in dtype ``ftype``."""
    with np.errstate(all="ignore"):
        position = ((x - low) * ftype(bins)) / (high - low)
    index = int(position) if np.isfinite(position) else bins
    return bins - 1 if index >= bins else index


def histc_bin_bounds(bins: int, min_value: float, max_value: float,
                     dtype: torch.dtype) -> list[tuple[Any, Any]] | None:
    """Per bin, the least and greatest value ATen's CPU histc counts in it (an empty
    bin's least is above its greatest).  None: ``dtype`` is not binned exactly here."""
    if dtype not in _EXACT:
        return None
    ftype, utype = _EXACT[dtype]
    low, high = ftype(min_value), ftype(max_value)
    if not low < high:
        return None
    low_key, high_key = _ordered_key(low, utype), _ordered_key(high, utype)
    firsts = []
    for b in range(bins):
        lo, hi = low_key, high_key + 1  # the first key whose bin is >= b, high_key + 1 if none
        while lo < hi:
            mid = (lo + hi) // 2
            if _aten_bin(_from_key(mid, ftype, utype), low, high, bins, ftype) >= b:
                hi = mid
            else:
                lo = mid + 1
        firsts.append(lo)
    lasts = [nxt - 1 for nxt in firsts[1:]] + [high_key]
    return [(_from_key(first, ftype, utype), _from_key(last, ftype, utype))
            for first, last in zip(firsts, lasts)]


def _histc(x: Any, bins: int = 100, min: float = 0, max: float = 0) -> Any:
    bounds = histc_bin_bounds(bins, min, max, x.dtype)
    if bounds is None:
        return NotImplemented
    lower = torch.tensor([float(lo) for lo, _ in bounds], dtype=x.dtype, device=x.device)
    upper = torch.tensor([float(hi) for _, hi in bounds], dtype=x.dtype, device=x.device)
    values = x.reshape(-1).unsqueeze(0)  # [1, numel]
    inside = (values >= lower.unsqueeze(-1)) & (values <= upper.unsqueeze(-1))  # [bins, numel]
    return inside.sum(-1).to(x.dtype)


def histogram_decompositions() -> dict[Any, Any]:
    return {aten.histc.default: _histc}
