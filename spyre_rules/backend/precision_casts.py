"""Keep a cast chain whose first cast rounds: eager rounds at every cast.

``x.half().to(torch.bfloat16)`` of a float32 ``x`` rounds to float16, then to
bfloat16; Inductor's joint-graph pass ``pointless_convert`` rewrites any float
``convert(convert(x, d1), d2)`` into ``convert(x, d2)``, dropping the float16
rounding (issue 29: ``layer_norm(x_fp16).to(bfloat16)`` differed from eager in
6% of its outputs, 1-ulp bfloat16 differences that a following matmul grows past
tolerance).  Inductor keeps such chains only under ``emulate_precision_casts``, a
global switch that also puts a cast pair into every pointwise op.  While we
compile (``lossy_casts_kept``), the pass's pattern entry refuses a chain whose
first cast can lose precision or range; a chain whose first cast is a lossless
widening (``fp16 -> fp32 -> bf16``) still folds, as it keeps every value.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["lossy_casts_kept", "first_cast_is_lossless"]

_ACTIVE = threading.local()

_PASS = "pointless_convert"


def _compiling() -> bool:
    return getattr(_ACTIVE, "depth", 0) > 0


def first_cast_is_lossless(src: torch.dtype, dst: torch.dtype) -> bool:
    """Every ``src`` value is a ``dst`` value (so converting to ``dst`` rounds nothing)."""
    if src == dst:
        return True
    if not (src.is_floating_point and dst.is_floating_point):
        return False
    a, b = torch.finfo(src), torch.finfo(dst)
    return b.eps <= a.eps and b.max >= a.max and b.tiny <= a.tiny and b.smallest_normal <= a.smallest_normal


def _keeps_rounding(match: Any) -> bool:
    arg, dtype1 = match.kwargs.get("arg"), match.kwargs.get("dtype1")
    value = arg.meta.get("val") if hasattr(arg, "meta") else None
    if not isinstance(value, torch.Tensor) or not isinstance(dtype1, torch.dtype):
        return False
    return not first_cast_is_lossless(value.dtype, dtype1)


def _guarded(check: Any) -> Any:
    def extra_check(match: Any) -> bool:
        if _compiling() and _keeps_rounding(match):
            return False
        return check(match)

    extra_check._spyre_rules_casts = True  # type: ignore[attr-defined]
    return extra_check


def _guard() -> int:
    """Wrap the pass's entries' checks (once); returns how many entries are guarded."""
    from torch._inductor.fx_passes import joint_graph

    guarded = 0
    for entries in joint_graph.patterns.patterns.values():
        for entry in entries:
            if getattr(getattr(entry, "handler", None), "__name__", "") != _PASS:
                continue
            if not getattr(entry.extra_check, "_spyre_rules_casts", False):
                entry.extra_check = _guarded(entry.extra_check)
            guarded += 1
    return guarded


@contextlib.contextmanager
def lossy_casts_kept() -> Iterator[None]:
    """While active, Inductor keeps every cast chain whose first cast rounds."""
    if not _guard():
        raise RuntimeError(f"Inductor's joint-graph pass {_PASS!r} was not found: the cast-chain "
                           "guard (backend/precision_casts.py) needs updating for this torch")
    _ACTIVE.depth = getattr(_ACTIVE, "depth", 0) + 1
    try:
        yield
    finally:
        _ACTIVE.depth -= 1
