"""Attention runs on the Spyre program: SDPA decomposed, explicit attention kept explicit.

``F.scaled_dot_product_attention`` reaches lowering as matmuls, a mask, softmax
and a matmul (``backend/attention.py``); a hand-written ``softmax(q @ k^T / s) @ v``
is not rewritten into the fused kernel by Inductor's attention fusion.  Every
case compiles with ``fallback="error"`` and must equal eager.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch._dynamo.utils import counters

from spyre_helpers import run_spyre

from spyre_rules.program.op_spec import LoopSpec
from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint

TOL = {torch.float16: dict(atol=2e-2, rtol=2e-2), torch.float32: dict(atol=1e-4, rtol=1e-4)}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=["fp32", "fp16"])
B, H, S, D = 1, 4, 16, 16


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


def _randn(*shape, dtype, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _qkv(dtype):
    return [_randn(B, H, S, D, dtype=dtype, seed=i) for i in range(3)]


def _float_mask(dtype):
    # a padding-style additive mask with one fully masked row (eager gives 0 there)
    mask = torch.zeros(B, 1, S, S)
    mask[..., 5:] = float("-inf")
    mask[..., 3, :] = float("-inf")
    return mask.to(dtype)


def _bool_mask(dtype):
    return torch.rand(B, 1, S, S, generator=torch.Generator().manual_seed(7)) > 0.3


SDPA_CASES = {
    "plain": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v), lambda dt: []),
    "causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
               lambda dt: []),
    "float_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                   _float_mask),
    "bool_mask": (lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
                  lambda dt: [_bool_mask(dt)]),
    "scale": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, scale=0.3),
              lambda dt: []),
}


def _assert_on_program(compiled):
    ops = [s.op for s in compiled.op_specs()]
    assert ops.count("batchmatmul") == 2, ops


@DTYPES
@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_sdpa_equals_eager(case, dtype):
    fn, extra = SDPA_CASES[case]
    xs = _qkv(dtype) + (extra(dtype) if case != "float_mask" else [extra(dtype)])
    compiled = run_spyre(fn, *xs)
    torch.testing.assert_close(compiled.output, fn(*xs), **TOL[dtype])
    _assert_on_program(compiled)


def test_math_backend_and_grouped_query_attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def math_sdpa(q, k, v):
        with sdpa_kernel(SDPBackend.MATH):
            return F.scaled_dot_product_attention(q, k, v)

    xs = _qkv(torch.float32)
    compiled = run_spyre(math_sdpa, *xs)
    torch.testing.assert_close(compiled.output, math_sdpa(*xs), **TOL[torch.float32])

    def gqa(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    q = _randn(B, 4, S, D, dtype=torch.float32, seed=0)
    k, v = (_randn(B, 2, S, D, dtype=torch.float32, seed=i) for i in (1, 2))
    compiled = run_spyre(gqa, q, k, v)
    torch.testing.assert_close(compiled.output, gqa(q, k, v), **TOL[torch.float32])


def _hand_attention(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


@DTYPES
def test_hand_written_attention_is_not_fused(dtype, monkeypatch):
    # Without the batch-keeping rewrite the 4-D matmuls reach Inductor as
    # expand/view/bmm, the exact shape its attention fusion matches.  The fusion
    # must not fire: the explicit ops are what we lower.
    import spyre_rules.backend.batch_matmul as batch_matmul

    monkeypatch.setattr(batch_matmul, "keep_matmul_batch", lambda gm: False)
    xs = _qkv(dtype)
    counters.clear()
    compiled = run_spyre(_hand_attention, *xs)
    assert counters["inductor"]["fuse_attention"] == 0
    torch.testing.assert_close(compiled.output, _hand_attention(*xs), **TOL[dtype])
    _assert_on_program(compiled)


def test_attention_fusion_still_fires_for_stock_inductor():
    # The guard is scoped to our compilations: stock Inductor keeps its rewrite.
    xs = _qkv(torch.float32)
    run_spyre(_hand_attention, *xs)  # registers and guards the patterns
    torch._dynamo.reset()
    counters.clear()
    with torch.no_grad():
        torch.compile(_hand_attention, backend="inductor")(*xs)
    assert counters["inductor"]["fuse_attention"] == 1


class _Block(nn.Module):
    """A pre-norm decoder block written with torch only (attention by hand)."""

    def __init__(self, dim=64, heads=4):
        super().__init__()
        self.heads = heads
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.out = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.up, self.down = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)

    def forward(self, x):
        b, s, e = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(e, dim=-1)
        q, k, v = (t.view(b, s, self.heads, e // self.heads).transpose(1, 2) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(e // self.heads)
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        attn = torch.softmax(scores.masked_fill(~causal, float("-inf")), dim=-1) @ v
        x = x + self.out(attn.transpose(1, 2).reshape(b, s, e))
        return x + self.down(torch.relu(self.up(self.norm2(x))))


@DTYPES
def test_two_block_transformer_equals_eager(dtype):
    torch.manual_seed(0)
    model = nn.Sequential(_Block(), _Block()).eval().to(dtype)
    x = _randn(1, S, 64, dtype=dtype, seed=3)
    with torch.no_grad():
        expected = model(x)
    compiled = run_spyre(model, x)
    torch.testing.assert_close(compiled.output, expected, **TOL[dtype])
    # per block: 2 attention + 4 linear products (a linear's bias add is a pointwise
    # op of the same origin: it rounds the wide product once, backend/matmul.py)
    products = [s for s in compiled.op_specs() if s.op == "batchmatmul" and s.is_reduction]
    assert len(products) == 2 * (2 + 4)


def _named_qkv(dtype):
    # the key/value sequence is another dim ("T") than the query's ("S")
    q, k, v = _qkv(dtype)
    for n, size in zip("BHSDT", (B, H, S, D, S)):
        declare_tensor_dim(n, size)
    name_tensor_dims(q, ["B", "H", "S", "D"])
    for t in (k, v):
        name_tensor_dims(t, ["B", "H", "T", "D"])
    return [q, k, v]


@DTYPES
@pytest.mark.parametrize(("kind", "dim"), [("sdpa_causal", "S"), ("hand", "H")])
def test_attention_tiled_by_a_manual_hint(kind, dim, dtype):
    def attention(q, k, v):
        with spyre_hint(slices={dim: 2}):
            if kind == "hand":
                return _hand_attention(q, k, v)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    xs = _named_qkv(dtype)
    compiled = run_spyre(attention, *xs)
    torch.testing.assert_close(compiled.output, attention(*xs), **TOL[dtype])
    loops = [i for k in compiled.kernels for i in k.specs if isinstance(i, LoopSpec)]
    assert loops and all(loop.count == 2 for loop in loops)


def test_sdpa_output_is_contiguous_for_a_following_view():
    """Torch's CPU flash decomposition returns (batch, seq, heads) memory order; a
    ``.view`` that eager accepts on the (contiguous) output must still compile."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(16, 2, 16, 16, generator=gen) for _ in range(3))

    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v).view(16, 2, 8, 32)

    run = run_spyre(f, q, k, v)
    torch.testing.assert_close(run.output, f(q, k, v), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["hand", "sdpa_causal"])
def test_attention_with_one_sequence_name_tiles_the_queries(kind, fresh_dims):
    """q, k and v all named "S" (as inside a model, where they come from one hidden
    state): the query dim keeps the name, every tile reads all keys."""
    def attention(q, k, v):
        with spyre_hint(slices={"S": 2}):
            if kind == "hand":
                return _hand_attention(q * 2, k * 2, v * 2)
            return F.scaled_dot_product_attention(q * 2, k * 2, v * 2, is_causal=True)

    q, k, v = _qkv(torch.float32)
    for n, size in zip("BHSD", (B, H, S, D)):
        declare_tensor_dim(n, size)
    for t in (q, k, v):
        name_tensor_dims(t, list("BHSD"))
    compiled = run_spyre(attention, q, k, v)
    torch.testing.assert_close(compiled.output, attention(q, k, v), **TOL[torch.float32])
    loops = [i for kern in compiled.kernels for i in kern.specs if isinstance(i, LoopSpec)]
    # k * 2 and v * 2 are read across tiles: the scores and p @ v start later loops
    assert [loop.count for loop in loops] == [2] * {"hand": 4, "sdpa_causal": 5}[kind]
