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
  and reductions.  ``_math_attention`` writes that path out op for op (the
  ATen trace), except that its two products are ``spyre_rules.batchmatmul``
  over the real ``[N, H]`` batch: ATen's ``matmul`` merges it into a 3-D
  ``bmm`` whose ``[N*H, L, S]`` scores have the generic stick layout of a 3-D
  tensor, heads inside each query row, so one query row of every head is a
  single span and no split of heads or query blocks keeps a softmax read small
  (issue 33); the 4-D scores keep heads outermost, as explicit attention's do.
* Inductor's joint-graph pattern matcher (``fx_passes/fuse_attention.py``)
  rewrites hand-written ``softmax(q @ k^T / s) @ v`` into that kernel.  For our
  backend the rewrite buys nothing and would turn an explicit program into one
  we then decompose back in a different order, so ``explicit_attention_kept``
  makes those pattern entries never match while we compile.
"""

from __future__ import annotations

import contextlib
import math
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
    reference = decomposition_table[op]

    def flash_attention_for_cpu_as_math(query: Any, key: Any, value: Any, dropout_p: float = 0.0,
                                        is_causal: bool = False, *, attn_mask: Any = None,
                                        scale: float | None = None) -> Any:
        if dropout_p != 0.0 or query.dim() != 4 or key.dim() != 4 or value.dim() != 4 \
                or query.size(1) % key.size(1) or query.size(1) % value.size(1):
            # ATen's own checks raise with its messages
            return reference(query, key, value, dropout_p, is_causal, attn_mask=attn_mask, scale=scale)
        output, attn = _math_attention(query, key, value, is_causal, attn_mask, scale)
        return _in_memory_order_of(query, output), attn

    return {op: flash_attention_for_cpu_as_math}


def _math_attention(query: Any, key: Any, value: Any, is_causal: bool, attn_mask: Any,
                    scale: float | None) -> tuple[Any, Any]:
    """``aten._scaled_dot_product_attention_math`` as ATen traces it, products kept 4-D."""
    from spyre_rules.backend.batch_matmul import batchmatmul

    origin = query.dtype
    wide = origin in (torch.float16, torch.bfloat16)
    q, k, v = ((t.to(torch.float32) if wide else t) for t in (query, key, value))
    negative = scale is not None and scale < 0
    factor = math.sqrt(abs(scale) if negative else scale if scale is not None else 1 / math.sqrt(q.size(-1)))
    q = q * (-factor if negative else factor)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set "
                               "when is_causal=True")
        attn_mask = _causal_mask(q.size(-2), k.size(-2), q.dtype, q.device)
    heads, kv_heads = q.size(-3), k.size(-3)
    if kv_heads != heads:
        # grouped: query head h attends with key/value head h // R, never a copy of
        # the key/value repeated R times (``_grouped``)
        return _grouped_attention(q, k, v, attn_mask, factor, origin)
    batch = list(torch.broadcast_shapes(q.shape[:-2], k.shape[:-2]))
    kt = k.transpose(-2, -1) * factor
    scores = batchmatmul(q.expand(*batch, *q.shape[-2:]), kt.expand(*batch, *kt.shape[-2:]))
    if attn_mask is not None:
        scores = scores + _rows_outermost(attn_mask)
    attn = aten._safe_softmax.default(scores, -1)
    batch = list(torch.broadcast_shapes(attn.shape[:-2], v.shape[:-2]))
    output = batchmatmul(attn.expand(*batch, *attn.shape[-2:]), v.expand(*batch, *v.shape[-2:]))
    return output.to(origin), attn.to(origin)


def _rows_outermost(mask: Any) -> Any:
    """A mask of rank below 4 (``[L, S]``, ``[N, L, S]``) as a 4-D copy.

    Its own layout would keep every query row inside each column stick (the
    generic stick layout of a 2-D ``[L, S]`` tensor is ``[S / stick, L, stick]``,
    ``_causal_mask``), so a query block of the scores would read the whole mask and
    the mask add could not share the attention loop.  The copy is laid out 4-D,
    rows outermost like the scores'; the copy itself tiles by rows and sticks.
    """
    if mask.dim() >= 4:
        return mask
    return mask.reshape((1,) * (4 - mask.dim()) + tuple(mask.shape)).clone()


def _causal_mask(rows: int, cols: int, dtype: Any, device: Any) -> Any:
    """ATen's ``where(ones(L, S).tril(), 0, -inf)``, built as ``[1, 1, L, S]``.

    The values are the same (``tril`` keeps column ``j <= i``); the shape is not: a
    2-D ``[L, S]`` tensor has the generic stick layout ``[S / stick, L, stick]``, every
    query row inside each column stick, so a query block of the scores reads the
    mask's whole height and no split of it fits (issue 33).  As ``[1, 1, L, S]`` its
    rows are outermost, like the scores' it is added to.
    """
    i = torch.arange(rows, device=device).view(1, 1, rows, 1)
    j = torch.arange(cols, device=device).view(1, 1, 1, cols)
    return torch.where(i >= j, torch.scalar_tensor(0.0, dtype=dtype, device=device),
                       torch.scalar_tensor(-math.inf, dtype=dtype, device=device))


def _grouped_attention(q: Any, k: Any, v: Any, attn_mask: Any, factor: float,
                       origin: Any) -> tuple[Any, Any]:
    """Grouped-query attention with each query head next to its key/value head.

    ATen repeats each key/value head for its ``R = H / KV`` query heads (a copy of
    the key and of the value, ``R`` times each, at every decode step).  Here the
    query is viewed ``[N, KV, R, L, E]`` and the key/value ``[N, KV, 1, S, E]`` are
    broadcast over ``R`` into ``batchmatmul`` (an expand is read in place, its batch
    index ignored), the mask viewed to match; the scores ``[N, KV, R, L, S]`` are the
    same elements, each the same float32 dot product, softmaxed over the last dim, and
    the outputs are viewed back ``[N, H, L, E]``.
    """
    from spyre_rules.backend.batch_matmul import batchmatmul

    (n,) = torch.broadcast_shapes(q.shape[:1], k.shape[:1], v.shape[:1])
    _, heads, rows, e = q.shape
    kv_heads, cols = k.size(-3), k.size(-2)
    repeats = heads // kv_heads
    q5 = q.unflatten(1, (kv_heads, repeats)).expand(n, kv_heads, repeats, rows, e)
    kt = (k.transpose(-2, -1) * factor).unsqueeze(2)
    # [N, KV, R, L, S]: the same elements as ATen's scores, each the same dot product
    scores = batchmatmul(q5, kt.expand(n, kv_heads, repeats, e, cols))
    if attn_mask is not None:
        mask = _rows_outermost(attn_mask)
        mask = mask.unflatten(1, (kv_heads, repeats)) if mask.size(1) == heads else mask.unsqueeze(1)
        scores = scores + mask
    attn = aten._safe_softmax.default(scores, -1)
    v5 = v.unsqueeze(2).expand(n, kv_heads, repeats, cols, v.size(-1))
    output = batchmatmul(attn, v5)
    return output.flatten(1, 2).to(origin), attn.flatten(1, 2).to(origin)


def _in_memory_order_of(like: Any, value: Any) -> Any:
    """``value`` laid out as ``torch.empty_like(like)`` would be.

    ATen's decomposition returns its output permuted (``[L, N, H, E]`` storage), but
    the fused kernel and its meta function return ``empty_like(query)``: a view that
    Dynamo traced against the meta strides (``sdpa(...).view(...)``) must still hold.
    Out of place (a permuted ``contiguous``), because decompositions run after
    functionalization.
    """
    order = sorted(range(like.dim()), key=lambda d: -like.stride(d))  # outermost first
    inverse = sorted(range(like.dim()), key=lambda d: order[d])
    return value.permute(order).contiguous().permute(inverse)


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
