"""Decode attention over a paged KV cache (k_cache (num_blocks, block_size, kv_heads,
head_dim), a block table per sequence), written in plain PyTorch, with automatic tiling
under fallback='error' and span_check='error'.

At 64 KiB the page gather (128 KiB of gathered pages) tiles over the tokens of a page and
every reader tiles over heads: equal to eager.  At 16 KiB it is refused, naming the gather
and why: its pages dim cannot be split (the block table's row of page ids is one stick) and
a split of the in-page tokens still writes its tile into the whole gathered buffer, whose
page coordinate spans 64 KiB.  Gathering each key block inside the attention's key loop
(a per-tile intermediate, flash-decoding) is not built."""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config

B, H, KVH, D, BS, MB, NB = 2, 4, 2, 64, 16, 8, 32


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    k = k_cache[block_table].reshape(B, MB * BS, KVH, D).permute(0, 2, 1, 3)
    v = v_cache[block_table].reshape(B, MB * BS, KVH, D).permute(0, 2, 1, 3)
    k, v = k.repeat_interleave(H // KVH, dim=1), v.repeat_interleave(H // KVH, dim=1)
    s = (q[:, :, None, :] @ k.transpose(-1, -2)).float() / D ** 0.5
    s = s.masked_fill(torch.arange(MB * BS)[None, None, None, :] >= seq_lens[:, None, None, None],
                      float("-inf"))
    return (s.softmax(-1).to(q.dtype) @ v)[:, :, 0]


def _inputs():
    torch.manual_seed(0)
    q = torch.randn(B, H, D).half()
    kc, vc = torch.randn(NB, BS, KVH, D).half(), torch.randn(NB, BS, KVH, D).half()
    return q, kc, vc, torch.randperm(NB)[: B * MB].reshape(B, MB), torch.tensor([100, 77])


def _settings(limit, **extra):
    return dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                max_span_bytes=limit, **extra)


def test_paged_decode_at_64_kib_tiles_the_page_gather_and_equals_eager(tmp_path):
    inputs = _inputs()
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(**_settings(65536, dump_dir=str(tmp_path))):
        got = torch.compile(paged_decode, backend="spyre_rules", fullgraph=True)(*inputs)
    torch.testing.assert_close(got, paged_decode(*inputs), rtol=1e-3, atol=1e-3)
    records = json.loads(next(tmp_path.glob("graph_*/plan.json")).read_text())["ops"]
    gathers = [(r["op"], r["levels"]) for r in records if "index.Tensor" in r["description"]]
    assert gathers == [("buf3", [[2, 2]]), ("buf15", [[2, 2]])]  # K and V pages, by tokens
    assert all(r["span_check"]["status"] == "fits" for r in records if r.get("span_check"))


def test_paged_decode_at_16_kib_refuses_the_page_gather_naming_it():
    inputs = _inputs()
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(**_settings(16384)), pytest.raises(Exception) as caught:
        torch.compile(paged_decode, backend="spyre_rules", fullgraph=True)(*inputs)
    # the search widens to the batch dim too (limits.rules MAX_WIDENED_DIMS): no tile fits
    assert ("Cannot auto-tile buf3 (aten ops: index.Tensor): no combined split among host dims "
            "[2, 1, 0] keeps every span within 16384 bytes after trying 13 combinations (the "
            "last: writing tile {0: 2, 2: 16} of buf3 into its full output buffer spans more "
            "than 16384 bytes)") in str(caught.value)
