"""Remainder tiles: extents with no stick-safe exact divisor (issue 33).

Granite-3-8B's vocabulary of 49155 words is 769 fp16 sticks, the last holding 3
words, and no exact split of it keeps sticks whole.  The policy then tries the
counts whose tiles all stay non-empty (``otherwise splits k in tile_counts(n)``):
``k`` tiles of the tile extent (``facts/tile_extent.py``) and a shorter last one,
which codegen runs as a peeled last iteration -- ``LoopSpec(count=N-1)`` over the
whole tiles, then ``LoopSpec(count=1, first=N-1)`` over the last tile's range
with the whole tile's step (docs/layout_model.md §4.5, §5.2).  Every case compiles
with ``span_check="error"`` and ``fallback="error"`` and equals eager.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.program.op_spec import LoopSpec, OpSpec, iter_op_specs

KiB = 1024
TOL = dict(atol=2e-2, rtol=2e-2)


def _auto(limit):
    return config.patch(ignore_span_overflow_hints=False, max_span_bytes=limit, span_check="error")


def _top_loops(compiled):
    return [item for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]


def _shape(loop):
    """``(first, count, inner shapes)`` of a loop nest."""
    return (loop.first, int(loop.count),
            [_shape(i) for i in loop.body if isinstance(i, LoopSpec)])


def _ranges(spec):
    return {str(s): int(r) for s, (r, _) in spec.iteration_space.items()}


def test_pointwise_stick_dim_with_a_partial_last_stick():
    """x + 1 on (2, 190) fp16 at 256 B: 190 elements are 2 sticks and 62; 2 tiles
    would cut a stick (95), so 3 tiles of 64 run, the last one 62 elements."""
    x = torch.randn(2, 190).half()
    with _auto(256):
        compiled = run_spyre(lambda t: t + 1, x)
    assert torch.equal(compiled.output, x + 1)
    (whole, last) = _top_loops(compiled)
    assert _shape(whole) == (0, 2, []) and _shape(last) == (2, 1, [])
    (main,) = whole.body
    (tail,) = last.body
    assert _ranges(main) == {"c0": 2, "c1": 64}
    assert _ranges(tail) == {"c0": 2, "c1": 62}
    assert main.tiled_steps is None and tail.tiled_steps == [[64]]


def test_fp32_stick_dim_remainder():
    """x * 2 on (3, 70) fp32 at 384 B: a fp32 stick is 32 elements; 70 = 2 sticks
    and 6, every exact split cuts a stick, so 3 tiles of 32 run, the last 6."""
    x = torch.randn(3, 70)
    with _auto(384):
        compiled = run_spyre(lambda t: t * 2, x)
    assert torch.equal(compiled.output, x * 2)
    (whole, last) = _top_loops(compiled)
    assert _shape(whole) == (0, 2, []) and _shape(last) == (2, 1, [])
    assert _ranges(last.body[0]) == {"c0": 3, "c1": 6}


def _lm_head(rows, hidden, vocab, limit, seed, scale):
    """F.linear(x[rows, hidden], W[vocab, hidden]) fp16 compiled at ``limit``, checked
    equal to eager; its top-level loops."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, hidden, generator=gen).half()
    w = (torch.randn(vocab, hidden, generator=gen) * scale).half()
    with _auto(limit):
        compiled = run_spyre(F.linear, x, w)
    torch.testing.assert_close(compiled.output, F.linear(x, w), **TOL)
    return _top_loops(compiled)


def test_lm_head_vocabulary_with_no_stick_divisor():
    """F.linear(x[64, 256], W[1000, 256]) fp16 at 32 KiB: the restickified weight
    [256, 1000] (16 sticks of vocabulary, the last 40 words) and the logits tile by
    16 vocabulary blocks, the weight's k in 4 accumulated blocks inside: 15 whole
    blocks of 64 words, then one of 40."""
    (whole, last) = _lm_head(64, 256, 1000, 32 * KiB, seed=0, scale=0.05)
    assert _shape(whole) == (0, 15, [(0, 4, [])])
    assert _shape(last) == (15, 1, [(0, 4, [])])
    ranges = {spec.op: _ranges(spec) for spec in iter_op_specs(last.body)}
    assert ranges["ReStickifyOpHBM"] == {"c0": 40, "c1": 64}
    assert ranges["batchmatmul"] == {"c0": 64, "c1": 40, "c2": 64}
    assert ranges["acc_init"] == ranges["acc_finalize"] == {"c0": 64, "c1": 40}


def test_prime_vocabulary_lm_head():
    """GPT-2's vocabulary 50257 is prime (786 sticks, the last 17 words): the LM head
    of a 64-wide hidden state at 1 MiB takes 7 tiles of 7296 words (57 x 128), the
    last 6481, its restickify and batchmatmul in one loop, and equals eager."""
    (whole, last) = _lm_head(8, 64, 50257, 1024 * KiB, seed=1, scale=0.1)
    assert _shape(whole) == (0, 6, []) and _shape(last) == (6, 1, [])
    assert [(s.op, _ranges(s)) for s in last.body] == [
        ("ReStickifyOpHBM", {"c0": 6481, "c1": 64}),
        ("batchmatmul", {"c0": 8, "c1": 6481, "c2": 64}),
    ]
    assert [_ranges(s)["c0"] for s in whole.body] == [7296, 8]


@pytest.mark.parametrize("unroll", [False, True])
def test_unrolled_remainder_equals_the_loop(unroll):
    """The peeled last tile unrolls like any loop (``unroll_loops``): same result."""
    x = torch.randn(2, 190).half()
    with _auto(256), config.patch(unroll_loops=unroll):
        compiled = run_spyre(lambda t: t.exp(), x)
    torch.testing.assert_close(compiled.output, x.exp(), atol=0, rtol=0)
    loops = _top_loops(compiled)
    if unroll:
        assert loops == [] and len([s for k in compiled.kernels for s in k.specs
                                    if isinstance(s, OpSpec)]) == 3
    else:
        assert [(loop.first, int(loop.count)) for loop in loops] == [(0, 2), (2, 1)]


@pytest.mark.parametrize("reduce", ["sum", "amax"])
def test_reduction_dim_with_a_partial_last_stick(reduce):
    """x.sum(-1) / x.amax(-1) on (4, 100) fp32 at 1 KiB: the read spans 4 column sticks
    (2 KiB) and only a split of the reduced dim shrinks it.  Exact splits cut its
    32-element sticks (2 x 50, 4 x 25), so a reduction level of 2 tiles runs: 64
    columns, then a peeled last tile of 36, both combined into one accumulator
    (Mamba2's 129 chunk states at 32768 tokens: 64, 64, 1).  max is bitwise; sum
    differs from ATen's order within fp32 rounding and equals the 64 + 36 split."""
    x = torch.randn(4, 100, generator=torch.Generator().manual_seed(3))
    fn = lambda t: getattr(t, reduce)(dim=-1)  # noqa: E731
    with _auto(KiB), config.patch(fallback="error"):
        compiled = run_spyre(fn, x)
    whole, last = _top_loops(compiled)
    assert _shape(whole) == (0, 1, []) and _shape(last) == (1, 1, [])
    assert [_ranges(s) for s in whole.body + last.body] == [{"c0": 4, "c1": 64},
                                                          {"c0": 4, "c1": 36}]
    if reduce == "amax":
        assert torch.equal(compiled.output, fn(x))
    else:
        assert torch.equal(compiled.output, x[:, :64].sum(-1) + x[:, 64:].sum(-1))
        torch.testing.assert_close(compiled.output, fn(x), atol=1e-5, rtol=1e-5)
