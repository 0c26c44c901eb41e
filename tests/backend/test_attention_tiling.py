"""Attention tiles automatically in one counted loop (issue 33, item 1).

The scores' batchmatmul opens a run over heads and query blocks; its scale, the
softmax (max, subtract, exp, sum, divide, casts) and the P.V batchmatmul join it
tile by tile, the run's split refined to the finest any of them needs (the fp32
softmax needs twice the query blocks of the fp16 scores).  k's restickify, which
has no query dim, keeps a loop of its own before it.  Every case compiles with
``span_check="error"`` and ``fallback="error"`` and must equal eager.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.program.op_spec import LoopSpec, OpSpec

KiB = 1024
TOL = dict(atol=2e-2, rtol=2e-2)


def _auto(limit):
    return config.patch(ignore_span_overflow_hints=False, max_span_bytes=limit, span_check="error")


def _qkv(s, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(1, 4, s, 64, generator=gen).half() for _ in range(3)]


def _explicit(q, k, v):
    return torch.softmax(((q @ k.transpose(-1, -2)) * 0.125).float(), dim=-1).to(q.dtype) @ v


def _loops(compiled):
    return [item for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]


def _ops(item):
    if isinstance(item, OpSpec):
        return [item.op]
    return [name for inner in item.body for name in _ops(inner)]


def _counts(loop):
    counts = [int(loop.count)]
    inner = [i for i in loop.body if isinstance(i, LoopSpec)]
    return counts + (_counts(inner[0]) if len(inner) == 1 and len(loop.body) == 1 else [])


def test_explicit_attention_shares_one_loop():
    """(1, 4, 128, 64) fp16 at 32 KiB: every head's fp32 scores (64 KiB) overflow.
    Both batchmatmuls, the scale and the whole softmax run in one loop of 4 heads x 2
    query blocks; k's restickify runs in a loop of its own first."""
    q, k, v = _qkv(128)
    with _auto(32 * KiB):
        compiled = run_spyre(_explicit, q, k, v)
    torch.testing.assert_close(compiled.output, _explicit(q, k, v), **TOL)
    loops = _loops(compiled)
    assert [_counts(loop) for loop in loops] == [[4], [4, 2]]
    body = _ops(loops[1])
    assert body.count("batchmatmul") == 2
    assert {"max", "sum"} <= set(body)


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _sdpa_causal(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


#: The issue-scale loops (issue 33): SDPA's fp32 q, k and v casts (k restickified) tile by
#: heads before the attention loop (hoisted: they read nothing of it); the causal mask's
#: compare and where, built [1, 1, L, S], get loops of their own before it too; QK^T, the
#: mask add, the safe softmax and P.V share one loop of 4 heads x S / 64 query blocks.
SDPA_LOOPS = {
    (_sdpa, 512): [[4], [4], [4, 8]],
    (_sdpa_causal, 512): [[4], [4], [8], [4], [4, 8]],
    (_sdpa, 1024): [[4], [4], [4, 16]],
    (_sdpa_causal, 1024): [[4], [8], [16], [4], [4, 16]],
    (_explicit, 1024): [[2], [4, 16]],
}


@pytest.mark.parametrize("fn, s", list(SDPA_LOOPS), ids=lambda v: getattr(v, "__name__", v))
def test_attention_at_the_issue_scale(fn, s):
    """(1, 4, S, 64) fp16, S = 512 at 128 KiB and 1024 at 256 KiB (issue 33): two heads'
    keys fit, their scores do not.  SDPA (causal too) and explicit attention compile
    with automatic tiling, ``span_check="error"`` and ``fallback="error"``, equal eager."""
    q, k, v = _qkv(s, seed=1)
    with _auto(s // 4 * KiB):
        compiled = run_spyre(fn, q, k, v)
    torch.testing.assert_close(compiled.output, fn(q, k, v), **TOL)
    loops = _loops(compiled)
    assert [_counts(loop) for loop in loops] == SDPA_LOOPS[(fn, s)]
    body = _ops(loops[-1])
    assert body.count("batchmatmul") == 2 and {"max", "sum", "exp"} <= set(body)


def test_reduction_tile_of_one_row_equals_eager():
    """x.float().sum(-1) on (1, 4, 64, 512) at 128 KiB: every head's fp32 rows span
    128 KiB, so each tile of the sum keeps one head (extent 1): its loop symbol is
    kept and every tile reads its own head."""
    x = torch.randn(1, 4, 64, 512, generator=torch.Generator().manual_seed(2)).half()

    def row_sum(x):
        return x.float().sum(-1)

    with _auto(128 * KiB):
        compiled = run_spyre(row_sum, x)
    torch.testing.assert_close(compiled.output, row_sum(x), atol=1e-3, rtol=1e-4)
    assert [_counts(loop) for loop in _loops(compiled)] == [[4]]


def test_finer_consumer_refines_the_run():
    """c = x + 1 needs 5 tiles; c.float() * 2 needs 10 (4-byte elements): the run
    becomes one loop of 10 for both."""
    x = torch.randn(1, 20, 16, 64, generator=torch.Generator().manual_seed(3)).half()

    def f(x):
        c = x + 1
        return c, c.float() * 2

    with _auto(8 * KiB):
        compiled = run_spyre(f, x)
    for got, want in zip(compiled.output, f(x)):
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    assert [_counts(loop) for loop in _loops(compiled)] == [[10]]


def test_consumer_of_a_closed_group_reads_its_full_buffer():
    """c * 3 reads c after the unplanned slice closed c's loop: it reads c's full
    buffer in a loop of its own, equal to eager."""
    x = torch.randn(1, 20, 16, 64, generator=torch.Generator().manual_seed(4)).half()

    def f(x):
        c = x + 1
        return c[:, :1] * 2, c * 3

    with _auto(8 * KiB):
        compiled = run_spyre(f, x)
    for got, want in zip(compiled.output, f(x)):
        torch.testing.assert_close(got, want, atol=1e-3, rtol=1e-3)
    assert [_counts(loop) for loop in _loops(compiled)] == [[5], [5]]


def test_explicit_attention_at_the_issue_scale():
    """(1, 4, 512, 64) fp16 at 128 KiB (issue 33): one loop of 4 heads x 8 query blocks."""
    q, k, v = _qkv(512, seed=5)
    with _auto(128 * KiB):
        compiled = run_spyre(_explicit, q, k, v)
    torch.testing.assert_close(compiled.output, _explicit(q, k, v), **TOL)
    assert [_counts(loop) for loop in _loops(compiled)] == [[2], [4, 8]]


def _masks(s):
    gen = torch.Generator().manual_seed(3)
    return {
        "float_1_1": (torch.randn(1, 1, s, s, generator=gen) * 2).half(),
        "bool_1_1": torch.rand(1, 1, s, s, generator=gen) > 0.3,
        "float_per_head": (torch.randn(1, 4, s, s, generator=gen) * 2).half(),
        "float_2d": (torch.randn(s, s, generator=gen) * 2).half(),
        "bool_2d": torch.rand(s, s, generator=gen) > 0.3,
    }


@pytest.mark.parametrize("mask", ["float_1_1", "bool_1_1", "float_per_head", "float_2d", "bool_2d"])
def test_sdpa_with_a_mask_at_the_issue_scale(mask):
    """SDPA with the 4-D masks models pass ([B, 1, L, S] float or bool, a per-head float
    mask) on (1, 4, 512, 64) fp16 at 128 KiB: the mask's rows are outermost like the
    scores', so the mask add joins the attention loop tile by tile; equal eager.  A 2-D
    [L, S] mask (its own layout keeps every row inside each column stick) is copied 4-D
    first (``backend/attention.py``, ``_rows_outermost``), in a loop of its own."""
    q, k, v = _qkv(512, seed=2)
    m = _masks(512)[mask]

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    with _auto(128 * KiB):
        compiled = run_spyre(fn, q, k, v, m)
    torch.testing.assert_close(compiled.output, fn(q, k, v, m), **TOL)
    (attention,) = [loop for loop in _loops(compiled) if _ops(loop).count("batchmatmul") == 2]
    assert _counts(attention) == [4, 8]
