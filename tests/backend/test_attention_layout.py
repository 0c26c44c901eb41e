"""The decomposed SDPA keeps the fused kernel's output layout (``empty_like(query)``).

ATen's math decomposition of ``_scaled_dot_product_flash_attention_for_cpu``
returns its output permuted; Dynamo traces user code against the fused kernel's
meta strides, so a ``view`` of the attention output (fuzz program 9:147:
``sdpa(q, k, v).view(16, 2, 8, 32)``) failed to compile although eager runs it.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def attention_then_view(q, k, v):
    return F.scaled_dot_product_attention(q, k, v).view(16, 2, 8, 32) * 2


def heads_from_sequence_major(x, k, v):
    # q in the layout a transformer builds: [B, S, H, D] storage, transposed to [B, H, S, D].
    q = x.view(2, 16, 4, 8).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v)
    return out.transpose(1, 2).reshape(2, 16, 32)


def test_view_of_the_attention_output_compiles_and_equals_eager():
    q, k, v = (_randn(16, 2, 16, 16, seed=s) for s in range(3))
    compiled = run_spyre(attention_then_view, q, k, v)
    assert torch.allclose(compiled.output, attention_then_view(q, k, v), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("transpose_back", [False, True])
def test_attention_on_a_transposed_query_equals_eager(transpose_back):
    x = _randn(2, 16, 32, seed=0)
    k, v = (_randn(2, 4, 16, 8, seed=s) for s in (1, 2))
    if transpose_back:
        fn = heads_from_sequence_major
    else:
        def fn(x, k, v):
            return F.scaled_dot_product_attention(x.view(2, 16, 4, 8).transpose(1, 2), k, v) + 1
    compiled = run_spyre(fn, x, k, v)
    assert torch.allclose(compiled.output, fn(x, k, v), atol=1e-4, rtol=1e-4)
