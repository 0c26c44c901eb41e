"""A Llama-style decoder layer written with torch only.

``x -> x + attention(rms_norm(x)) -> h + mlp(rms_norm(h))`` where attention is
causal multi-head self-attention with rotary position embeddings (rotate-half
form: slice, neg, cat) and the MLP is SiLU-gated (``down(silu(gate(x)) * up(x))``).
Attention is written out (``softmax(q @ k^T * scale + mask) @ v``), not through
``scaled_dot_product_attention``; the causal mask and the rotary tables are
built once at construction (buffers), so the traced graph holds only the layer.

``lm_block(x, *weights)`` is the same layer as a function of its weights (what
``spyre-rules explain lm_block`` plans); ``LMBlock`` holds them as parameters
(what ``spyre-rules demo --model lm_block`` compiles).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["LMBlock", "lm_block", "lm_block_example", "lm_block_shapes", "rotary_tables"]

EPS = 1e-6


def rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    variance = x.pow(2).mean(-1, keepdim=True)
    return x * torch.rsqrt(variance + EPS) * weight


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def rotary_tables(seq: int, head_dim: int, base: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` of shape (seq, head_dim), the rotate-half layout."""
    inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    angles = torch.outer(torch.arange(seq, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def causal_mask(seq: int) -> torch.Tensor:
    """(seq, seq): 0 on and below the diagonal, a large negative value above it."""
    return torch.triu(torch.full((seq, seq), -1e4), diagonal=1)


def lm_block(
    x: torch.Tensor, norm1: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
    wo: torch.Tensor, norm2: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor,
    w_down: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, mask: torch.Tensor,
    heads: int = 4,
) -> torch.Tensor:
    """One decoder layer on ``x`` (batch, seq, dim); weights as in ``nn.Linear``."""
    batch, seq, dim = x.shape
    head_dim = dim // heads
    h = rms_norm(x, norm1)

    def split_heads(t: torch.Tensor) -> torch.Tensor:
        return t.view(batch, seq, heads, head_dim).transpose(1, 2)

    q = split_heads(nn.functional.linear(h, wq))
    k = split_heads(nn.functional.linear(h, wk))
    v = split_heads(nn.functional.linear(h, wv))
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(head_dim)) + mask
    attn = torch.matmul(torch.softmax(scores, dim=-1), v)
    attn = attn.transpose(1, 2).reshape(batch, seq, dim)
    x = x + nn.functional.linear(attn, wo)
    h = rms_norm(x, norm2)
    gated = nn.functional.silu(nn.functional.linear(h, w_gate)) * nn.functional.linear(h, w_up)
    return x + nn.functional.linear(gated, w_down)


def lm_block_shapes(batch: int = 1, seq: int = 16, dim: int = 64, hidden: int = 128,
                    heads: int = 4) -> tuple[tuple[int, ...], ...]:
    """Shapes of ``lm_block``'s tensor arguments, in order."""
    head_dim = dim // heads
    return ((batch, seq, dim), (dim,), (dim, dim), (dim, dim), (dim, dim), (dim, dim), (dim,),
            (hidden, dim), (hidden, dim), (dim, hidden), (seq, head_dim), (seq, head_dim),
            (seq, seq))


class LMBlock(nn.Module):
    def __init__(self, seq: int = 16, dim: int = 64, hidden: int = 128, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.q = nn.Linear(dim, dim, bias=False)
        self.k = nn.Linear(dim, dim, bias=False)
        self.v = nn.Linear(dim, dim, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.norm2 = nn.Parameter(1.0 + 0.1 * torch.randn(dim))
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)
        cos, sin = rotary_tables(seq, dim // heads)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        self.register_buffer("mask", causal_mask(seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return lm_block(
            x, self.norm1, self.q.weight, self.k.weight, self.v.weight, self.o.weight,
            self.norm2, self.gate.weight, self.up.weight, self.down.weight,
            self.cos, self.sin, self.mask, heads=self.heads,
        )


def lm_block_example(
    batch: int = 1, seq: int = 16, dim: int = 64, hidden: int = 128, heads: int = 4,
    dtype: torch.dtype = torch.float32, seed: int = 0,
) -> tuple[LMBlock, tuple[torch.Tensor]]:
    """``(model, (x,))`` with deterministic weights and input."""
    torch.manual_seed(seed)
    model = LMBlock(seq, dim, hidden, heads).to(dtype).eval()
    x = torch.randn(batch, seq, dim, dtype=dtype)
    return model, (x,)
