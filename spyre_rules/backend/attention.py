"""Scaled dot-product attention as ops we lower (matmul, scale, mask, softmax).

Two routes lead to the fused attention kernel, which Inductor keeps as an extern
fallback on CPU (``aten._scaled_dot_product_flash_attention_for_cpu``) and which
therefore has no Spyre lowering:

* ``F.scaled_dot_product_attention`` dispatches to it.  Inductor leaves its
  decomposition out of the table on purpose; we put it back
  (``attention_decompositions``).  It is ATen's math path
  (``_scaled_dot_product_attention_math``): ``q*sqrt(s) @ (k*sqrt(s))^T``, the
  mask added (float) or applied (bool, causal), softmax, a fully masked row set
  to 0 as eager does, ``@ v``; fp16 is computed in fp32 and cast back, as the
  fused kernel accumulates.  What reaches lowering is matmuls, pointwise ops
  and reductions.
* Inductor's joint-graph pattern matcher (``fx_passes/fuse_attention.py``)
  rewrites hand-written ``softmax(q @ k^T / s) @ v`` into that kernel.  For our
  backend the rewrite buys nothing and would turn an explicit program into one
  we then decompose back in a different order, so ``explicit_attention_kept``
  makes those pattern entries never match while we compile.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import torch

__all__ = ["attention_decompositions", "explicit_attention_kept", "SDPA_FUSION_PREFIX"]

aten = torch.ops.aten

#: Name prefix of Inductor's attention-fusion pattern entries (``_sfdp_pattern_N_...``).
SDPA_FUSION_PREFIX = "_sfdp_pattern"

_ACTIVE = threading.local()


def attention_decompositions() -> dict[Any, Any]:
    from torch._decomp import decomposition_table

    op = aten._scaled_dot_product_flash_attention_for_cpu.default
    decompose = decomposition_table[op]

    def contiguous_output(*args: Any, **kwargs: Any) -> Any:
        # Torch's decomposition returns the output in the kernel's (batch, seq, heads)
        # memory order, but the op's meta (what Dynamo traced a later ``.view`` with)
        # and eager return it contiguous: keep that contract.
        out, *rest = decompose(*args, **kwargs)
        return (out.contiguous(), *rest)

    return {op: contiguous_output}


def _compiling() -> bool:
    return getattr(_ACTIVE, "depth", 0) > 0


def _guarded(check: Any) -> Any:
    def extra_check(match: Any) -> bool:
        return not _compiling() and check(match)

    extra_check._spyre_rules_guard = True  # type: ignore[attr-defined]
    return extra_check


def _guard_attention_fusions() -> None:
    """Wrap each attention-fusion entry's check so it refuses while we compile.

    Wrapping (rather than removing entries) survives a second registration and
    needs no restore: outside our compilations the wrapped check is unchanged.
    """
    from torch._inductor.fx_passes import joint_graph

    for entries in joint_graph.patterns.patterns.values():
        for entry in entries:
            name = getattr(entry, "pattern_name", None) or ""
            if name.startswith(SDPA_FUSION_PREFIX) and \
                    not getattr(entry.extra_check, "_spyre_rules_guard", False):
                entry.extra_check = _guarded(entry.extra_check)


@contextlib.contextmanager
def explicit_attention_kept() -> Iterator[None]:
    """While active, Inductor's attention fusion leaves explicit attention alone."""
    from torch._inductor.fx_passes import joint_graph

    original = joint_graph.lazy_init

    def lazy_init(*args: Any, **kwargs: Any) -> Any:
        # Patterns are registered lazily, on the first compilation in the process.
        result = original(*args, **kwargs)
        _guard_attention_fusions()
        return result

    _ACTIVE.depth = getattr(_ACTIVE, "depth", 0) + 1
    joint_graph.lazy_init = lazy_init
    try:
        yield
    finally:
        joint_graph.lazy_init = original
        _ACTIVE.depth -= 1
