"""A decode step against a paged KV cache (commands/paged_cache.py: a transformers Cache
whose update writes the new token into the flat cache with index_copy_ and gathers the
sequence's pages) on the program under fallback='error': logits equal eager's and the
flat caches equal eager's bitwise, the step compiled once for several tokens."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM

from spyre_rules import config
from spyre_rules.commands.paged_cache import PAGED_ATTENTION, PagedCache, paged_call_kwargs

BATCH, BLOCK, PAGES = 2, 16, 4  # two sequences of 4 pages of 16 tokens


def _cache(seed):
    g = torch.Generator().manual_seed(seed)
    pools = [(torch.randn(BATCH * PAGES * BLOCK, 2, 64, generator=g),
              torch.randn(BATCH * PAGES * BLOCK, 2, 64, generator=g))]
    table = torch.randperm(BATCH * PAGES, generator=g).reshape(BATCH, PAGES)
    return PagedCache(pools, BLOCK, table, torch.zeros(BATCH, dtype=torch.long), 0)


def _steps(model, cache, tokens):
    out = []
    for position, token in zip((40, 41, 42), tokens):
        page, offset = divmod(position, BLOCK)
        cache.slots = cache.block_table[:, page] * BLOCK + offset
        cache.seq_length = position
        logits = model(input_ids=token, cache=cache, use_cache=True,
                       cache_position=torch.tensor([position])).logits
        out.append(logits)
    return out


def test_paged_decode_steps_equal_eager_on_the_program():
    cfg = AutoConfig.for_model("llama", hidden_size=256, intermediate_size=512,
                               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                               vocab_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    tokens = [torch.tensor([[3], [7]]), torch.tensor([[11], [5]]), torch.tensor([[2], [9]])]
    want_cache, got_cache = _cache(1), _cache(1)
    with torch.no_grad():
        want = _steps(model, want_cache, tokens)
        torch._dynamo.reset()
        with config.patch(fallback="error"):
            got = _steps(torch.compile(model, backend="spyre_rules"), got_cache, tokens)
    for have, expect in zip(got, want):
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-4)
    for have, expect in zip(got_cache.layers, want_cache.layers):
        assert torch.equal(have.keys, expect.keys) and torch.equal(have.values, expect.values)


def _block_steps(model, cache, tokens):
    out = []
    for position, token in zip((40, 41, 42), tokens):
        page, offset = divmod(position, BLOCK)
        cache.slots = cache.block_table[:, page] * BLOCK + offset
        cache.seq_length = position
        lens = torch.full((BATCH,), position + 1)
        logits = model(input_ids=token, cache=cache, use_cache=True,
                       cache_position=torch.tensor([position]),
                       **paged_call_kwargs(cache, lens)).logits
        out.append(logits)
    return out


def test_paged_decode_steps_with_key_block_attention_equal_eager_on_the_program():
    # attention="blocks": the model's attention is paged_decode_attention over the pools
    cfg = AutoConfig.for_model("llama", hidden_size=256, intermediate_size=512,
                               num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                               vocab_size=64, max_position_embeddings=128)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    tokens = [torch.tensor([[3], [7]]), torch.tensor([[11], [5]]), torch.tensor([[2], [9]])]
    gathered = _cache(1)
    with torch.no_grad():
        reference = _steps(model, gathered, tokens)  # the model's own attention, gathered pages
    model.set_attn_implementation(PAGED_ATTENTION)
    want_cache, got_cache = _cache(1), _cache(1)
    want_cache.attention = got_cache.attention = "blocks"
    with torch.no_grad():
        want = _block_steps(model, want_cache, tokens)
        torch._dynamo.reset()
        with config.patch(fallback="error"):
            got = _block_steps(torch.compile(model, backend="spyre_rules"), got_cache, tokens)
    for have, expect, model_own in zip(got, want, reference):
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(expect, model_own, rtol=1e-4, atol=1e-4)
    for have, expect, model_own in zip(got_cache.layers, want_cache.layers, gathered.layers):
        assert torch.equal(have.keys, expect.keys) and torch.equal(have.values, expect.values)
        assert torch.equal(expect.keys, model_own.keys)


def _windowed_config(model_type, window):
    extra = {"use_sliding_window": window is not None, "max_window_layers": 0} \
        if model_type == "qwen2" else {}
    return AutoConfig.for_model(model_type, hidden_size=256, intermediate_size=512,
                                num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                vocab_size=64, max_position_embeddings=128, sliding_window=window,
                                **extra)


@pytest.mark.parametrize("model_type", ["mistral", "qwen2"])
def test_key_block_attention_keeps_a_sliding_window(model_type):
    # eager only: the blocks-mode attention equals the model's own over the gathered pages,
    # whose mask keeps the last 24 keys (Mistral: every layer; Qwen2: use_sliding_window)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(_windowed_config(model_type, 24)).eval()
    unwindowed = AutoModelForCausalLM.from_config(_windowed_config(model_type, None)).eval()
    unwindowed.load_state_dict(model.state_dict())
    tokens = [torch.tensor([[3], [7]]), torch.tensor([[11], [5]]), torch.tensor([[2], [9]])]
    with torch.no_grad():
        reference = _steps(model, _cache(1), tokens)
        assert not torch.allclose(_steps(unwindowed, _cache(1), tokens)[0], reference[0], atol=1e-3)
        model.set_attn_implementation(PAGED_ATTENTION)
        blocks = _cache(1)
        blocks.attention = "blocks"
        got = _block_steps(model, blocks, tokens)
    for have, expect in zip(got, reference):
        torch.testing.assert_close(have, expect, rtol=1e-4, atol=1e-4)
