"""Decode attention over a paged KV cache (k_cache (num_blocks, block_size, kv_heads,
head_dim), a block table per sequence) under fallback='error' and span_check='error'.

``spyre_rules.paged_decode_attention`` (backend/paged_attention.py: key blocks, each block's
pages gathered inside the key loop, a softmax combine) plans at 64 KiB and at 16 KiB
(untiled: tests/serving/test_paged_decode_step.py), where the gathered pages (64 KiB) overflow: the gather is tiled over the key blocks
inside the key loop and its tile never reaches a full buffer; the result equals the same
function run eagerly, which equals softmax attention over the gathered pages within the
rounding of another order.

Softmax attention written over the gathered pages (``paged_decode`` below) is rewritten into
this form before Inductor where its gathered pages overflow the limit
(backend/paged_attention_rewrite.py; its own tests in test_paged_attention_rewrite.py).  At
64 KiB they fit and are left alone: the page gather tiles over the tokens of a page.  An
attention the rewrite does not recognise (heads repeated ``h % kv_heads``, not interleaved) is
refused at 16 KiB, naming the gather and why: its pages dim cannot be split (the block table's
row of page ids is one stick) and a split of the in-page tokens still writes its tile into the
whole gathered buffer."""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config, paged_decode_attention

B, H, KVH, D, BS, MB, NB = 2, 4, 2, 64, 16, 8, 32


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    b, h, d = q.shape
    _, bs, kvh, _ = k_cache.shape
    mb = block_table.shape[1]
    k = k_cache[block_table].reshape(b, mb * bs, kvh, d).permute(0, 2, 1, 3)
    v = v_cache[block_table].reshape(b, mb * bs, kvh, d).permute(0, 2, 1, 3)
    k, v = k.repeat_interleave(h // kvh, dim=1), v.repeat_interleave(h // kvh, dim=1)
    s = (q[:, :, None, :] @ k.transpose(-1, -2)).float() / d ** 0.5
    s = s.masked_fill(torch.arange(mb * bs)[None, None, None, :] >= seq_lens[:, None, None, None],
                      float("-inf"))
    return (s.softmax(-1).to(q.dtype) @ v)[:, :, 0]


def _inputs(heads=H, kv_heads=KVH, block=BS, pages=MB, blocks=NB, lens=(100, 77),
            dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(len(lens), heads, D, generator=g).to(dtype)
    kc = torch.randn(blocks, block, kv_heads, D, generator=g).to(dtype)
    vc = torch.randn(blocks, block, kv_heads, D, generator=g).to(dtype)
    table = torch.randperm(blocks, generator=g)[: len(lens) * pages].reshape(len(lens), pages)
    return q, kc, vc, table, torch.tensor(lens)


def _settings(limit, **extra):
    return dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                max_span_bytes=limit, **extra)


def _compiled(fn, inputs, limit, dump):
    torch._dynamo.reset()
    settings = _settings(limit, dump_dir=str(dump)) if limit else \
        dict(fallback="error", span_check="error", dump_dir=str(dump))
    with torch.no_grad(), config.patch(**settings):
        got = torch.compile(fn, backend="spyre_rules", fullgraph=True)(*inputs)
    records = json.loads(next(dump.glob("graph_*/plan.json")).read_text())["ops"]
    assert all(r["span_check"]["status"] == "fits" for r in records if r.get("span_check"))
    return got, records


def _gathers(records):
    return [r for r in records if "index.Tensor" in r["description"]]


@pytest.mark.parametrize("limit", [65536, 16384])  # untiled: test_paged_decode_step.py
def test_paged_decode_attention_tiles_the_key_blocks_and_equals_eager(tmp_path, limit):
    inputs = _inputs()
    want = paged_decode_attention(*inputs)
    got, records = _compiled(paged_decode_attention, inputs, limit, tmp_path)
    torch.testing.assert_close(got, want)  # float32 sums in another order, one rounding
    torch.testing.assert_close(got, paged_decode(*inputs), rtol=1e-3, atol=1e-3)
    gathers = _gathers(records)
    # each gather tiled over the key blocks (host dim 2, inside the kv heads)
    assert all(any(level[0] == 2 for level in g["levels"]) for g in gathers), gathers
    # no copy of a gathered tile into a full buffer
    assert not [r for r in records if "copy of the" in r["description"]]
    if limit == 16384:  # at 64 KiB the reduction's reads fit: it runs after the key loop
        _, flash = _key_loop(records)
        assert [g["levels"] for g in gathers] == [[[1, 2], [2, 16]], [[1, 2], [2, 16]]]
        # both gathers per-tile buffers of the one key loop
        assert all(g["loop"]["propagation"] == "loop-internal"
                   and g["loop"]["loop_group_id"][0] == flash["loop"]["loop_group_id"][0]
                   for g in gathers)
        assert flash["levels"] == [[2, 2], [0, 16]]  # kv heads, then key blocks (reduced)


def _key_loop(records):
    """The K gather and the softmax_values reduction: ONE loop (the same top-level loop
    group), the reduction's level over the key blocks carrying flash-decoding's running
    (acc, max, sum) accumulator, the K gather's tile a per-tile buffer of that loop."""
    (flash,) = [r for r in records if "softmax_values" in r["description"]]
    keys = next(g for g in _gathers(records) if g["loop"]["propagation"] == "loop-internal")
    assert keys["loop"]["loop_group_id"][0] == flash["loop"]["loop_group_id"][0]
    acc = flash["accumulator"]
    assert (acc["reduction"], acc["combine"]) == ("softmax_values", "online_softmax_combine")
    assert [f["role"] for f in acc["fields"]] == ["acc", "max", "sum"]
    assert flash["loop"]["loop_tiled_reduction_dims"][-1] == [0]  # the key blocks
    return keys, flash


@pytest.mark.parametrize("case", [
    # pages of 8, 4 query heads per kv head, a 1-token sequence (blocks 1-7 hold no valid key)
    dict(block=8, pages=16, heads=8, kv_heads=2, lens=(127, 1)),
    # pages of 32, bf16, no grouping, a full sequence
    dict(block=32, pages=4, blocks=16, heads=2, kv_heads=2, dtype=torch.bfloat16, lens=(97, 128)),
    # fp32, 2 query heads per kv head, odd lengths
    dict(dtype=torch.float32, heads=2, kv_heads=1, lens=(61, 101)),
])
def test_paged_decode_attention_at_16_kib_other_shapes(tmp_path, case):
    inputs = _inputs(**case)
    q, k_cache, _, table, _ = inputs
    assert table.numel() * k_cache[0].numel() * q.element_size() > 16384  # the gathered K pages
    want = paged_decode_attention(*inputs)
    got, records = _compiled(paged_decode_attention, inputs, 16384, tmp_path)
    torch.testing.assert_close(got, want)  # float32 sums in another order, one rounding
    reference = paged_decode(*inputs)
    tolerance = 2e-2 if case.get("dtype") is torch.bfloat16 else 1e-3
    torch.testing.assert_close(got, reference, rtol=tolerance, atol=tolerance)
    assert all(any(level[0] == 2 for level in g["levels"]) for g in _gathers(records))
    _key_loop(records)


def test_hand_written_paged_decode_at_64_kib_tiles_the_page_gather_and_equals_eager(tmp_path):
    # 64 KiB of gathered pages fit the limit: the rewrite leaves the graph alone (it applies
    # only where the gathered pages overflow) and the gathers tile over the in-page tokens
    inputs = _inputs()
    got, records = _compiled(paged_decode, inputs, 65536, tmp_path)
    torch.testing.assert_close(got, paged_decode(*inputs), rtol=1e-3, atol=1e-3)
    gathers = [(r["op"], r["levels"]) for r in _gathers(records)]
    assert gathers == [("buf3", [[2, 2]]), ("buf15", [[2, 2]])]  # K and V pages, by tokens


def not_interleaved(q, k_cache, v_cache, block_table, seq_lens):
    """``paged_decode`` with query head ``h`` reading kv head ``h % kv_heads``: not the
    rewrite's pattern, so its pages are gathered whole."""
    b, h, d = q.shape
    _, bs, kvh, _ = k_cache.shape
    mb = block_table.shape[1]
    k = k_cache[block_table].reshape(b, mb * bs, kvh, d).permute(0, 2, 1, 3)
    v = v_cache[block_table].reshape(b, mb * bs, kvh, d).permute(0, 2, 1, 3)
    k, v = k.repeat(1, h // kvh, 1, 1), v.repeat(1, h // kvh, 1, 1)
    s = (q[:, :, None, :] @ k.transpose(-1, -2)).float() / d ** 0.5
    s = s.masked_fill(torch.arange(mb * bs)[None, None, None, :] >= seq_lens[:, None, None, None],
                      float("-inf"))
    return (s.softmax(-1).to(q.dtype) @ v)[:, :, 0]


def test_attention_over_pages_not_rewritten_at_16_kib_is_refused_naming_the_op():
    inputs = _inputs()
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(**_settings(16384)), pytest.raises(Exception) as caught:
        torch.compile(not_interleaved, backend="spyre_rules", fullgraph=True)(*inputs)
    # the search widens to the batch dim too (limits.rules MAX_WIDENED_DIMS); the page
    # gather buf3 now tiles (the op's own write counts when its reads are measured), and
    # the repeat of the gathered keys has no tile that fits
    assert ("Cannot auto-tile buf4 (aten ops: permute.default, repeat.default, "
            "reshape.default): no combined split among host dims [1, 2, 0] keeps every span "
            "within 16384 bytes after trying 95 combinations (the last: the tiles of buf4 under "
            "split {0: 2, 1: 4, 2: 128} are not rigid translations of the first tile") \
        in str(caught.value)
