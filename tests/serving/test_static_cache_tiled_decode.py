"""Decode steps of a small Llama against a StaticCache at a 64 KiB span limit, run on the
program (fallback='error', span_check='error'): each layer's K and V cache (2, 2, 256, 64)
fp16 is 128 KiB, so every cache write is tiled over heads and stored in place, tile by
tile, into the cache the caller holds.  Logits, and the caches after three steps, equal
eager's (V bitwise; K within the rotary embedding's fp16 rounding: one ulp in one row,
the same untiled)."""

from __future__ import annotations

import json

import torch
from transformers import AutoConfig, AutoModelForCausalLM, StaticCache

from spyre_rules import config


def _model():
    cfg = AutoConfig.for_model("llama", hidden_size=256, intermediate_size=512,
                               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                               vocab_size=64, max_position_embeddings=256)
    torch.manual_seed(0)
    return cfg, AutoModelForCausalLM.from_config(cfg).half().eval()


def _cache(cfg):
    cache = StaticCache(config=cfg, max_cache_len=256)
    cache.early_initialization(2, 2, 64, torch.float16, torch.device("cpu"))
    g = torch.Generator().manual_seed(3)
    for layer in cache.layers:  # as after a prefill of 200 tokens
        layer.keys.copy_(torch.randn(layer.keys.shape, generator=g).half())
        layer.values.copy_(torch.randn(layer.values.shape, generator=g).half())
        layer.cumulative_length.fill_(200)
    return cache


def _steps(model, cache):
    out = []
    for i, token in enumerate(([[3], [7]], [[11], [5]], [[2], [9]])):
        out.append(model(input_ids=torch.tensor(token), cache=cache, use_cache=True,
                         cache_position=torch.tensor([200 + i])).logits)
    return out


def test_static_cache_decode_with_tiled_cache_writes_equals_eager(tmp_path):
    cfg, model = _model()
    want_cache, got_cache = _cache(cfg), _cache(cfg)
    settings = dict(fallback="error", span_check="error", ignore_span_overflow_hints=False,
                    max_span_bytes=65536, dump_dir=str(tmp_path))
    with torch.no_grad():
        want = _steps(model, want_cache)
        torch._dynamo.reset()
        with config.patch(**settings):
            got = _steps(torch.compile(model, backend="spyre_rules"), got_cache)
    for have, expect in zip(got, want):
        torch.testing.assert_close(have, expect, rtol=1e-3, atol=1e-3)
    for have, expect in zip(got_cache.layers, want_cache.layers):
        # V is stored as projected: bitwise.  K passes the rotary embedding, whose fp16
        # rounding the program may take one ulp apart from eager's (the logits' tolerance);
        # every row the steps did not write is untouched, bitwise.
        assert torch.equal(have.values, expect.values)
        written = slice(200, 203)
        torch.testing.assert_close(have.keys[:, :, written], expect.keys[:, :, written],
                                   rtol=1e-3, atol=1e-3)
        have.keys[:, :, written] = expect.keys[:, :, written]
        assert torch.equal(have.keys, expect.keys)
    records = [r for p in tmp_path.glob("graph_*/plan.json")
               for r in json.loads(p.read_text())["ops"]]
    writes = [r["levels"] for r in records if "index_put_" in r["description"]]
    assert writes == [[[1, 2]], [[1, 2]]]  # K and V, one head per iteration
