"""Softmax attention written over gathered pages (``cache[table].reshape(...)``, grouped heads,
``q @ k^T``, casts, scaling, a mask, ``softmax(-1)``, ``@ v``) is rewritten into key blocks
before Inductor (backend/paged_attention_rewrite.py) where its gathered pages overflow the limit
under automatic tiling: on the program under fallback='error' and span_check='error' the issue's
repro equals eager untiled (not rewritten: bitwise), at 64 KiB (its 64 KiB of pages fit: not
rewritten, the gathers tiled by tokens) and at 16 KiB, where the gathered pages overflow and each
gather is tiled over the key blocks inside its loop, a per-tile buffer.  Every variant is also checked on the rewritten graph run eagerly (fast), and near-misses
are left alone.  Numerical contract (docs/accumulation.md): float32 sums in another order and the
probabilities rounded to the value dtype before normalising rather than after, so a half-precision
output is within one epsilon of the dtype of eager's (absolute and relative: 1e-3 for fp16, as
test_paged_attention_tiling.py holds the hand-written form); fp32 within assert_close's default."""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config
from spyre_rules.backend.paged_attention_rewrite import (
    gathered_page_attention,
    rewrite_gathered_page_attention,
)
from test_paged_attention_tiling import paged_decode  # the issue's repro (issue 38)

B, D = 2, 64


def _heads(pages, b, h, mb, bs, kvh, d, grouping):
    """``(b, h, tokens, d)`` from the gathered pages, grouped-query heads spelled ``grouping``."""
    x = pages.view(b, -1, kvh, d).transpose(1, 2)
    if grouping == "repeat_interleave":
        return torch.repeat_interleave(x, h // kvh, dim=1)
    if grouping == "expand":   # transformers' repeat_kv
        return x[:, :, None, :, :].expand(b, kvh, h // kvh, mb * bs, d).reshape(b, h, mb * bs, d)
    return x.repeat(1, h // kvh, 1, 1)   # head h reads kv head h % kvh: not the pattern


def variant(grouping="repeat_interleave", scale="div_after_cast", mask="masked_fill",
            softmax_dim=-1):
    """Paged decode attention in one of several spellings (each an eager reference)."""

    def attention(q, k_cache, v_cache, block_table, seq_lens):
        b, h, d = q.shape
        _, bs, kvh, _ = k_cache.shape
        mb = block_table.shape[1]
        k = _heads(k_cache[block_table], b, h, mb, bs, kvh, d, grouping)
        v = _heads(v_cache[block_table], b, h, mb, bs, kvh, d, grouping)
        s = torch.matmul(q.unsqueeze(2), k.transpose(2, 3))
        if scale == "div_after_cast":
            s = s.float() / d ** 0.5
        elif scale == "mul_before_cast":
            s = (s * d ** -0.5).float()
        else:  # "mul_after_cast"
            s = s.float() * d ** -0.5
        position = torch.arange(mb * bs)
        keep = position[None, None, None, :] < seq_lens[:, None, None, None]
        if mask == "masked_fill":
            s = s.masked_fill(~keep, float("-inf"))
        elif mask == "where":
            s = torch.where(keep, s, float("-inf"))
        elif mask == "additive":   # a bias that varies with the head too (ALiBi-like) and -inf
            slope = torch.arange(1, h + 1, dtype=torch.float32)[None, :, None, None] / 64
            s = s + torch.where(keep, -slope * (seq_lens[:, None, None, None] - position), -torch.inf)
        p = torch.nn.functional.softmax(s, dim=softmax_dim).to(v.dtype)
        return torch.matmul(p, v)[:, :, 0]

    return attention


def _inputs(heads=4, kv_heads=2, block=16, pages=8, blocks=32, lens=(100, 77),
            dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(len(lens), heads, D, generator=g).to(dtype)
    kc = torch.randn(blocks, block, kv_heads, D, generator=g).to(dtype)
    vc = torch.randn(blocks, block, kv_heads, D, generator=g).to(dtype)
    table = torch.randperm(blocks, generator=g)[: len(lens) * pages].reshape(len(lens), pages)
    return q, kc, vc, table, torch.tensor(lens)


def assert_close_to_eager(got, want):
    half = want.dtype in (torch.float16, torch.bfloat16)
    eps = torch.finfo(want.dtype).eps
    torch.testing.assert_close(got, want, **(dict(rtol=eps, atol=eps) if half else {}))


def _rewritten_eagerly(fn, inputs):
    """(whether the rewrite applied, the rewritten graph's output run eagerly)."""
    applied = []

    def backend(gm, example_inputs):
        applied.append(rewrite_gathered_page_attention(gm))
        applied.append(sum(n.target is gathered_page_attention for n in gm.graph.nodes))
        return gm.forward

    torch._dynamo.reset()
    # the rewrite applies only where the gathered pages overflow under automatic tiling
    with torch.no_grad(), config.patch(max_span_bytes=1024, ignore_span_overflow_hints=False):
        out = torch.compile(fn, backend=backend, fullgraph=True)(*inputs)
    return applied, out


def _on_the_program(fn, inputs, limit, dump):
    torch._dynamo.reset()
    settings = dict(fallback="error", span_check="error", dump_dir=str(dump))
    if limit:
        settings.update(max_span_bytes=limit, ignore_span_overflow_hints=False)
    with torch.no_grad(), config.patch(**settings):
        got = torch.compile(fn, backend="spyre_rules", fullgraph=True)(*inputs)
    plan = json.loads(next(dump.glob("graph_*/plan.json")).read_text())
    assert plan["host_steps"] in ({}, [])
    records = plan["ops"]
    assert all(r["span_check"]["status"] == "fits" for r in records if r.get("span_check"))
    return got, plan


def _gathers(plan):
    return [r for r in plan["ops"] if "index.Tensor" in r["description"]]


def _assert_gathers_in_key_loops(plan, gathered_bytes):
    """Each page gather tiled over the key blocks (host dim 2, inside the kv heads), both
    inside the ONE key loop of the softmax_values reduction (its level over the key blocks
    carries flash-decoding's running (acc, max, sum)), each a per-tile buffer smaller than
    the gathered pages."""
    segments = {s["name"]: s["size_bytes"] for s in plan["memory_map"]["segments"]}
    gathers = _gathers(plan)
    assert len(gathers) == 2, gathers   # keys, values
    (flash,) = [r for r in plan["ops"] if "softmax_values" in r["description"]]
    assert flash["accumulator"]["combine"] == "online_softmax_combine"
    assert flash["loop"]["loop_tiled_reduction_dims"][-1] == [0]  # the key blocks
    for gather in gathers:
        assert any(level[0] == 2 for level in gather["levels"]), gather["levels"]
        assert gather["loop"]["propagation"] == "loop-internal", gather["loop"]
        assert gather["loop"]["loop_group_id"][0] == flash["loop"]["loop_group_id"][0]
        assert segments[gather["op"]] < gathered_bytes, (gather["op"], segments[gather["op"]])


@pytest.mark.parametrize("limit", [None, 65536, 16384])
def test_the_issue_repro_on_the_program_equals_eager(tmp_path, limit):
    inputs = _inputs()
    got, plan = _on_the_program(paged_decode, inputs, limit, tmp_path)
    assert_close_to_eager(got, paged_decode(*inputs))
    if limit is None:  # nothing overflows: not rewritten, eager's attention bitwise
        assert all(r["levels"] == [] for r in plan["ops"])
        assert torch.equal(got, paged_decode(*inputs))
    if limit == 16384:  # K and V pages: 2 kv heads x 16 blocks, one loop, as
        # paged_decode_attention's own (test_paged_attention_tiling.py)
        assert [g["levels"] for g in _gathers(plan)] == [[[1, 2], [2, 16]], [[1, 2], [2, 16]]]
    if limit == 65536:  # 64 KiB of gathered pages fit: not rewritten, tiled by tokens
        assert [g["levels"] for g in _gathers(plan)] == [[[2, 2]], [[2, 2]]]
    if limit == 16384:
        _assert_gathers_in_key_loops(plan, gathered_bytes=65536)


CASES = {
    "no mask": (dict(mask=None), dict(lens=(128, 128))),
    "gqa 1, repeat_interleave": (dict(), dict(heads=2, kv_heads=2)),
    "gqa 4, repeat_interleave": (dict(), dict(heads=8, kv_heads=2)),
    "gqa 1, expand": (dict(grouping="expand"), dict(heads=2, kv_heads=2)),
    "gqa 2, expand": (dict(grouping="expand"), dict()),
    "gqa 4, expand": (dict(grouping="expand"), dict(heads=8, kv_heads=2)),
    "multiply scale before the cast": (dict(scale="mul_before_cast"), dict()),
    "multiply scale after the cast": (dict(scale="mul_after_cast"), dict()),
    "where mask": (dict(mask="where"), dict()),
    "additive mask over heads": (dict(mask="additive"), dict()),
    "bf16": (dict(), dict(dtype=torch.bfloat16)),
    "fp32": (dict(), dict(dtype=torch.float32)),
    "block size 8": (dict(), dict(block=8, pages=16)),
    "block size 32": (dict(grouping="expand"), dict(block=32, pages=4, blocks=16)),
    "a 1-token sequence": (dict(), dict(lens=(1, 128))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_variants_are_rewritten_and_equal_eager(name):
    spelling, shapes = CASES[name]
    fn, inputs = variant(**spelling), _inputs(**shapes)
    applied, got = _rewritten_eagerly(fn, inputs)
    assert applied == [True, 1]
    assert_close_to_eager(got, fn(*inputs))


# bf16 and block size 8 on the program at 16 KiB: the shared core's own tests
# (test_paged_attention_tiling.py: the same key_block_attention); here eagerly, above
@pytest.mark.parametrize("name", ["gqa 4, expand", "fp32", "block size 32", "additive mask over heads"])
def test_variants_at_16_kib_tile_the_gathers_in_the_key_loop(tmp_path, name):
    spelling, shapes = CASES[name]
    fn, inputs = variant(**spelling), _inputs(**shapes)
    q, k_cache, _, table, _ = inputs
    gathered = table.numel() * k_cache[0].numel() * q.element_size()
    assert gathered > 16384
    got, plan = _on_the_program(fn, inputs, 16384, tmp_path)
    assert_close_to_eager(got, fn(*inputs))
    _assert_gathers_in_key_loops(plan, gathered)


def _scores_read_back(q, k_cache, v_cache, block_table, seq_lens):
    """The mask is a function of the scores themselves: not a per-key operand."""
    b, h, d = q.shape
    k = _heads(k_cache[block_table], b, h, *block_table.shape[1:], *k_cache.shape[1:3], d,
               "repeat_interleave")
    v = _heads(v_cache[block_table], b, h, *block_table.shape[1:], *k_cache.shape[1:3], d,
               "repeat_interleave")
    s = (q[:, :, None] @ k.transpose(-1, -2)).float()
    s = s.masked_fill(s < s.mean(-1, keepdim=True), float("-inf"))
    return (s.softmax(-1).to(q.dtype) @ v)[:, :, 0]


NEAR_MISSES = {
    "softmax over the heads": variant(softmax_dim=1, mask=None),
    "heads repeated, not interleaved": variant(grouping="repeat"),
    "a mask computed from the scores": _scores_read_back,
}


@pytest.mark.parametrize("name", list(NEAR_MISSES))
def test_near_misses_are_left_alone(name):
    fn, inputs = NEAR_MISSES[name], _inputs()
    applied, got = _rewritten_eagerly(fn, inputs)
    assert applied == [False, 0]
    torch.testing.assert_close(got, fn(*inputs), rtol=0, atol=0)


def test_a_near_miss_on_the_program_gives_eager_result(tmp_path):
    fn, inputs = NEAR_MISSES["softmax over the heads"], _inputs()
    got, plan = _on_the_program(fn, inputs, None, tmp_path)
    torch.testing.assert_close(got, fn(*inputs))
    # the pages gathered whole, (batch, pages, block_size, kv_heads, head_dim): not rewritten
    assert [g["layout"]["size"] for g in _gathers(plan)] == [[2, 8, 16, 2, 64]] * 2


def transformers_style(q, k_cache, v_cache, block_table, mask):
    """transformers' eager attention (repeat_kv, ``* scaling``, an additive fp16 mask,
    ``softmax(dtype=float32).to(q.dtype)``, dropout that does nothing) over gathered pages."""
    b, h, d = q.shape
    _, bs, kvh, _ = k_cache.shape
    tokens = block_table.shape[1] * bs
    k = k_cache[block_table].view(b, -1, kvh, d).transpose(1, 2)
    v = v_cache[block_table].view(b, -1, kvh, d).transpose(1, 2)
    k = k[:, :, None, :, :].expand(b, kvh, h // kvh, tokens, d).reshape(b, h, tokens, d)
    v = v[:, :, None, :, :].expand(b, kvh, h // kvh, tokens, d).reshape(b, h, tokens, d)
    w = torch.matmul(q.unsqueeze(2), k.transpose(2, 3)) * d ** -0.5
    w = w + mask
    w = torch.nn.functional.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
    w = torch.nn.functional.dropout(w, p=0.0, training=False)
    return torch.matmul(w, v).transpose(1, 2)


def test_transformers_eager_attention_spelling_is_rewritten():
    q, kc, vc, table, lens = _inputs()
    mask = torch.where(torch.arange(128)[None, None, None, :] < lens[:, None, None, None],
                       0.0, torch.finfo(torch.float16).min).half()   # (batch, 1, 1, keys)
    inputs = (q, kc, vc, table, mask)
    applied, got = _rewritten_eagerly(transformers_style, inputs)
    assert applied == [True, 1]
    assert_close_to_eager(got, transformers_style(*inputs))
