"""Grouped-query attention runs grouped: no key/value copy per query head (issue 38).

Falcon's multi-query attention (one key/value head broadcast to every query head, no
``enable_gqa``) and transformers' ``repeat_kv`` before SDPA (every masked decode step)
both reached the program with the key and value copied once per query head: the
program wrote a ``[N, H, S, E]`` float32 copy of each.  ``backend/grouped_attention.py``
hands SDPA the unrepeated heads and ``attention._grouped_attention`` reads each
key/value head in place for its query heads.  Every case compiles with
``fallback="error"`` and equals eager; no op writes more than the float32 key itself.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.backend.grouped_attention import grouped_kv_heads, grouped_kv_products

TOL = dict(atol=2e-2, rtol=2e-2)
KiB = 1024
N, H, S, E = 2, 8, 256, 64


def _randn(*shape, seed):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)).half()


def _repeat_kv(x, n_rep):
    # transformers.integrations.sdpa_attention.repeat_kv
    batch, kv, slen, dim = x.shape
    return x[:, :, None, :, :].expand(batch, kv, n_rep, slen, dim).reshape(batch, kv * n_rep, slen, dim)


def multi_query(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)  # one k/v head, broadcast


def repeated_with_mask(q, k, v, mask):
    rep = q.size(1) // k.size(1)
    return F.scaled_dot_product_attention(q, _repeat_kv(k, rep), _repeat_kv(v, rep), attn_mask=mask)


def _inputs(kv_heads, with_mask):
    xs = [_randn(N, H, 1, E, seed=0), _randn(N, kv_heads, S, E, seed=1), _randn(N, kv_heads, S, E, seed=2)]
    if with_mask:
        mask = torch.zeros(N, 1, 1, S, dtype=torch.float16)
        mask[0, ..., 200:] = float("-inf")  # a static cache's unwritten slots
        xs.append(mask)
    return xs


def _written_bytes(compiled):
    return max(a.size_in_bytes for s in compiled.op_specs() for a in s.args if not a.is_input)


CASES = {"multi_query": (multi_query, 1, False), "repeat_kv": (repeated_with_mask, 2, True)}


@pytest.mark.parametrize("limit", [None, 64 * KiB], ids=["untiled", "64KiB"])
@pytest.mark.parametrize("case", list(CASES))
def test_grouped_decode_equals_eager_without_a_copy_per_query_head(case, limit):
    fn, kv_heads, with_mask = CASES[case]
    xs = _inputs(kv_heads, with_mask)
    patch = {} if limit is None else dict(ignore_span_overflow_hints=False, max_span_bytes=limit,
                                          span_check="error")
    with config.patch(**patch):
        compiled = run_spyre(fn, *xs)
    torch.testing.assert_close(compiled.output, fn(*xs), **TOL)
    assert [s.op for s in compiled.op_specs() if s.op == "batchmatmul" and s.is_reduction]
    # the float32 key is the largest tensor written; its copy per query head was H / KV x that
    assert _written_bytes(compiled) <= N * kv_heads * S * E * 4


def _dynamo_graph(fn, *xs):
    graphs = []

    def capture(gm, inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=capture)(*xs)
    (gm,) = graphs
    return gm


def test_repeat_kv_is_undone_before_the_call():
    xs = _inputs(2, True)
    gm = _dynamo_graph(repeated_with_mask, *xs)
    assert grouped_kv_heads(gm)
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function"
               and n.target is torch._C._nn.scaled_dot_product_attention]
    assert call.kwargs["enable_gqa"] is True
    for arg in call.args[1:3]:
        assert arg.op == "call_method" and arg.target == "squeeze"
        assert list(arg.meta["example_value"].shape) == [N, 2, S, E]
    assert not [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "expand"]
    torch.testing.assert_close(gm(*xs)[0], repeated_with_mask(*xs), atol=1e-3, rtol=1e-3)


def test_broadcast_single_head_becomes_grouped_and_other_calls_stay():
    gm = _dynamo_graph(multi_query, *_inputs(1, False))
    assert grouped_kv_heads(gm)
    (call,) = [n for n in gm.graph.nodes if n.op == "call_function"
               and n.target is torch._C._nn.scaled_dot_product_attention]
    assert call.kwargs["enable_gqa"] is True
    # equal heads: nothing to group
    same = [_randn(N, H, 4, E, seed=i) for i in range(3)]
    assert not grouped_kv_heads(_dynamo_graph(multi_query, *same))


def eager_attention(q, k, v, mask):
    # transformers.models.llama.modeling_llama.eager_attention_forward (no dropout)
    rep = q.size(1) // k.size(1)
    key, value = _repeat_kv(k, rep), _repeat_kv(v, rep)
    w = torch.matmul(q, key.transpose(2, 3)) * q.size(-1) ** -0.5 + mask
    w = torch.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(w, value)


@pytest.mark.parametrize("rows", [1, 16], ids=["decode", "prefill"])
def test_hand_written_attention_multiplies_the_unrepeated_heads(rows):
    q, k, v, mask = _inputs(2, True)
    q = _randn(N, H, rows, E, seed=3)
    gm = _dynamo_graph(eager_attention, q, k, v, mask)
    want = eager_attention(q, k, v, mask)
    assert grouped_kv_products(gm)
    assert not [n for n in gm.graph.nodes if n.op == "call_method" and n.target == "expand"]
    products = [n for n in gm.graph.nodes if n.target is torch.matmul]
    assert [list(n.meta["example_value"].shape) for n in products] == [
        [N, 2, H // 2, rows, S], [N, 2, H // 2, rows, E]]
    # the same dot products; CPU kernels may sum a broadcast operand's in another order
    torch.testing.assert_close(gm(q, k, v, mask)[0], want, atol=1e-3, rtol=1e-3)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=64 * KiB, span_check="error"):
        compiled = run_spyre(eager_attention, q, k, v, mask)
    torch.testing.assert_close(compiled.output, want, atol=1e-3, rtol=1e-3)
    # no op writes a copy of the key per query head (H / KV x the fp16 key)
    assert _written_bytes(compiled) < N * H * S * E * 2


def test_a_product_with_other_heads_is_left_alone():
    q, k, v, mask = _inputs(2, True)
    def repeated_by_tile(q, k, v, mask):   # head h reads kv head h % KV: not grouped
        return torch.matmul(q, k.repeat(1, 4, 1, 1).transpose(2, 3))
    assert not grouped_kv_products(_dynamo_graph(repeated_by_tile, q, k, v, mask))
