"""In-place writes tiled when their access overflows (issue 38): a KV cache's write
(index_copy_, index_put_, index_add_) stores tile by tile into the cache's own buffer
(never a copy), along the dims it covers whole (heads, batch), under span_check='error'
and fallback='error'; the caller's cache equals eager's bitwise, call after call."""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config

B, KV_HEADS, LENGTH, HEAD_DIM = 2, 4, 64, 64


def copy_write(cache, pos, new):
    cache.index_copy_(2, pos, new)
    return cache.sum(2)


def put_write(cache, pos, new):
    cache[:, :, pos] = new
    return cache.sum(2)


def add_write(cache, pos, new):
    cache.index_add_(2, pos, new)
    return cache.sum(2)


def flat_write(cache, slots, new):  # a paged cache's flat (blocks * block_size, heads, dim)
    cache.index_copy_(0, slots, new)
    return cache.sum(0)


def _plans(dump):
    records = json.loads(next(dump.glob("graph_*/plan.json")).read_text())["ops"]
    return {r["op"]: (r["decision"], r["levels"], r["span_check"]["status"]) for r in records}


@pytest.mark.parametrize("fn", [copy_write, put_write, add_write], ids=lambda f: f.__name__)
def test_a_static_cache_write_tiles_over_heads_into_the_cache(fn, tmp_path):
    torch.manual_seed(0)
    cache = torch.randn(B, KV_HEADS, LENGTH, HEAD_DIM).half()
    expected_cache = cache.clone()
    torch._dynamo.reset()
    settings = dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                    max_span_bytes=16384, dump_dir=str(tmp_path))
    with torch.no_grad(), config.patch(**settings):
        compiled = torch.compile(fn, backend="spyre_rules", fullgraph=True)
        for position in (7, 63, 0):
            pos, new = torch.tensor([position]), torch.randn(B, KV_HEADS, 1, HEAD_DIM).half()
            got = compiled(cache, pos, new)
            want = fn(expected_cache, pos, new)
            assert torch.equal(cache, expected_cache), position
            torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-2)
    # the write's heads coordinate spans 4 x 16 KiB of the cache: one head per tile,
    # each written in place (the cache is 64 KiB, one head 16 KiB)
    assert _plans(tmp_path)["buf0"] == ("plan", [[1, 4]], "fits")
    wrapper = next(tmp_path.glob("graph_*/wrapper.py")).read_text()
    assert "'in_place': {'op': 'buf0', 'of': 'arg0_1', 'write_through': True}" in wrapper
    assert "clone" not in wrapper  # no copy of the cache, before or after


def test_a_paged_cache_write_tiles_over_heads_into_the_flat_cache(tmp_path):
    torch.manual_seed(1)
    cache = torch.randn(512, 2, 64).half()  # 32 blocks of 16 tokens, 2 KV heads
    expected_cache = cache.clone()
    slots, new = torch.tensor([5, 300]), torch.randn(2, 2, 64).half()
    torch._dynamo.reset()
    settings = dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                    max_span_bytes=65536, dump_dir=str(tmp_path))
    with torch.no_grad(), config.patch(**settings):
        got = torch.compile(flat_write, backend="spyre_rules", fullgraph=True)(cache, slots, new)
    want = flat_write(expected_cache, slots, new)
    assert torch.equal(cache, expected_cache)
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-2)
    assert _plans(tmp_path)["buf0"] == ("plan", [[1, 2]], "fits")


def test_a_write_whose_indexed_rows_overflow_is_refused_naming_it():
    cache, slots, new = torch.zeros(512, 64).half(), torch.tensor([3, 9]), torch.ones(2, 64).half()
    torch._dynamo.reset()
    settings = dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                    max_span_bytes=16384)
    with torch.no_grad(), config.patch(**settings), pytest.raises(Exception) as caught:
        torch.compile(flat_write, backend="spyre_rules", fullgraph=True)(cache, slots, new)
    assert ("Cannot auto-tile buf0 (aten ops: index_put_.default): no split brings its in-place "
            "write under the limit of 16384 bytes (rows written in place (any index may pick any "
            "row of the target): device dim 1 (tmp0) spans 65536 bytes)") in str(caught.value)
