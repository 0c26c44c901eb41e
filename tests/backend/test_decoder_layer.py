"""A Llama-style decoder layer written with torch only runs on the Spyre program.

Rotary embeddings from arange-based frequencies (``cat`` regions), grouped-query
causal SDPA (decomposed), RMSNorm in fp32 and a SiLU-gated MLP, compiled with
``fallback="error"``: equal to eager in fp32 and fp16.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from spyre_helpers import run_spyre

TOL = {torch.float16: dict(atol=2e-2, rtol=2e-2), torch.float32: dict(atol=1e-4, rtol=1e-4)}


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class RMSNorm(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        var = x.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (x.float() * torch.rsqrt(var + 1e-6)).to(x.dtype)


class DecoderLayer(nn.Module):
    def __init__(self, dim=64, heads=4, kv_heads=2, hidden=128):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        kv = kv_heads * self.head_dim
        self.q, self.o = nn.Linear(dim, dim, bias=False), nn.Linear(dim, dim, bias=False)
        self.k, self.v = nn.Linear(dim, kv, bias=False), nn.Linear(dim, kv, bias=False)
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        b, s, e = x.shape
        d = self.head_dim
        inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
        freqs = torch.arange(s, dtype=torch.float32)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        h = self.norm1(x)
        q = self.q(h).view(b, s, self.heads, d).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, d).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(attn.transpose(1, 2).reshape(b, s, e))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
def test_llama_style_layer_equals_eager(dtype):
    torch.manual_seed(0)
    layer = DecoderLayer().eval().to(dtype)
    x = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(1)).to(dtype)
    with torch.no_grad():
        expected = layer(x)
    compiled = run_spyre(layer, x)
    torch.testing.assert_close(compiled.output, expected, **TOL[dtype])
    ops = [s.op for s in compiled.op_specs()]
    assert ops.count("batchmatmul") == 2 + 7  # attention + q, k, v, o, gate, up, down
