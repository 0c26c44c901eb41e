"""SDPA's decomposition (``backend/attention.py``) computes ATen's math path.

``_math_attention`` writes ``aten._scaled_dot_product_attention_math`` out op for
op, with its two products as ``batchmatmul`` over the real ``[N, H]`` batch and a
causal mask built ``[1, 1, L, S]``, so that the scores keep heads outermost
(issue 33).  Run eagerly, it must give ATen's bits, for every option the
decomposition handles: causal, float mask, scale (negative too), grouped-query
heads, fp16 and fp32.
"""

from __future__ import annotations

import pytest
import torch

from spyre_rules.backend.attention import _math_attention

aten = torch.ops.aten


def _inputs(dtype, heads=4, kv_heads=4, lq=8, lk=8):
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, heads, lq, 16, generator=g).to(dtype)
    k = torch.randn(2, kv_heads, lk, 16, generator=g).to(dtype)
    v = torch.randn(2, kv_heads, lk, 16, generator=g).to(dtype)
    return q, k, v


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("case", [
    dict(), dict(is_causal=True), dict(scale=0.3), dict(scale=-0.3), dict(mask=True),
    dict(kv_heads=2), dict(kv_heads=1, is_causal=True), dict(lq=8, lk=12, is_causal=True),
    # grouped decode: one query row, a mask per query head or one for all heads
    dict(kv_heads=2, lq=1, lk=12, mask="heads"), dict(kv_heads=1, lq=1, lk=12, mask=True),
])
def test_math_attention_equals_atens(dtype, case):
    case = dict(case)
    q, k, v = _inputs(dtype, kv_heads=case.pop("kv_heads", 4), lq=case.pop("lq", 8),
                      lk=case.pop("lk", 8))
    mask = None
    kind = case.pop("mask", False)
    if kind:
        shape = (2, q.size(1), q.size(-2), k.size(-2)) if kind == "heads" else (q.size(-2), k.size(-2))
        mask = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    causal, scale = case.pop("is_causal", False), case.pop("scale", None)
    want, want_attn = aten._scaled_dot_product_attention_math(
        q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=k.size(1) != q.size(1))
    got, got_attn = _math_attention(q, k, v, causal, mask, scale)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    torch.testing.assert_close(got_attn, want_attn, atol=0, rtol=0)
