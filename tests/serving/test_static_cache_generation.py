"""Greedy generation with transformers' StaticCache on the program (fallback='error').

The cache is a graph input the decode step writes in place (``index_copy_`` of the new
token's keys and values): the write is a kernel storing into the cache's device segment
and copying just the written elements to the caller's tensor (backend/in_place.py,
executor/write_through.py).  The prefill and the decode step compile once each; every
token, and the cache contents after generation, equal eager's.
"""

from __future__ import annotations

from unittest.mock import patch

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, StaticCache

from spyre_rules import config
from spyre_rules.executor import runtime
from spyre_rules.executor.runtime import recent_kernels
from spyre_rules.program.op_spec import iter_op_specs

NEW_TOKENS = 32
PROMPT = 12


def _model(arch: str):
    extra = {"llama": {}, "qwen2": {}, "mistral": {"sliding_window": None}}[arch]
    cfg = AutoConfig.for_model(arch, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, vocab_size=320,
                               max_position_embeddings=128, **extra)
    torch.manual_seed(0)
    return cfg, AutoModelForCausalLM.from_config(cfg).eval()


def _generate(cfg, forward, prompt):
    cache = StaticCache(config=cfg, max_cache_len=64)
    logits = forward(input_ids=prompt, cache=cache,
                     cache_position=torch.arange(prompt.shape[1])).logits
    tokens = [logits[:, -1].argmax(-1)]
    for i in range(NEW_TOKENS - 1):
        logits = forward(input_ids=tokens[-1][:, None], cache=cache,
                         cache_position=torch.tensor([prompt.shape[1] + i])).logits
        tokens.append(logits[:, -1].argmax(-1))
    return torch.stack(tokens, 1), cache


def _cache_tensors(cache):
    return [t for layer in cache.layers for t in (layer.keys, layer.values)]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_static_cache_greedy_generation_equals_eager_on_the_program(arch):
    cfg, model = _model(arch)
    prompt = torch.randint(0, 300, (2, PROMPT), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, want_cache = _generate(cfg, model, prompt)
        torch._dynamo.reset()
        before = max((k.serial for k in recent_kernels()), default=-1)
        stickified = []
        original = runtime.write_host_tensor

        def counting(memory, p, tensor, who):
            stickified.append((id(memory), p.name))
            return original(memory, p, tensor, who)

        with config.patch(fallback="error"), patch.object(runtime, "write_host_tensor", counting):
            compiled = torch.compile(model, backend="spyre_rules")
            got, got_cache = _generate(cfg, compiled, prompt)
    assert torch.equal(got, want)
    for have, expect in zip(_cache_tensors(got_cache), _cache_tensors(want_cache)):
        torch.testing.assert_close(have, expect, rtol=1e-5, atol=1e-5)
    decode = [k for k in recent_kernels() if k.serial > before and k.calls == NEW_TOKENS - 1]
    assert len({id(k.device) for k in decode}) == 1  # one program runs every decode step
    # each layer's K and V cache write (and a layer's int64 step counter) writes its
    # graph input in place, on the program
    writes = sorted(spec.op for k in decode if k.write_through for spec in iter_op_specs(k.specs))
    assert writes == ["copy_"] * 2 + ["index_put_"] * 4
    # the caches stay in device memory: each program (prefill, decode) stickifies each
    # cache once, at its first call; every later decode step finds it resident
    caches = {p.name for k in decode if k.write_through for p in k.write_through.values()
              if len(p.host_size) == 4}
    assert len(caches) == 4
    counts = [stickified.count(key) for key in set(stickified) if key[1] in caches]
    assert counts == [1] * 8

