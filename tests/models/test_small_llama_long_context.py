"""A 1-layer Llama at a KiB limit, executed (issue 33's reduced-scale must-show).

transformers' LlamaModel (hidden 256, 4 heads, 2 KV heads, seq 512, vocab 1000,
built from a LlamaConfig, no download) in fp16 at 128 KiB: the query's rotary
``cat`` (256 KiB) tiles by heads straight into the concatenation, the
grouped-query key repeat reads one head's keys per tile, SDPA's scores share one
loop with its softmax and P.V, and the causal mask is built before that loop.
It compiles with automatic tiling, ``fallback="error"`` and ``span_check="error"``,
no host step, equal to eager (the eager attention implementation does too: the
repro's ``_attn_implementation = "eager"``, not run here to keep the suite short).
"""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config

transformers = pytest.importorskip("transformers")

KiB = 1024


def test_small_llama_at_128_kib_equals_eager(tmp_path):
    cfg = transformers.LlamaConfig(hidden_size=256, intermediate_size=512, num_attention_heads=4,
                                   num_key_value_heads=2, num_hidden_layers=1, vocab_size=1000,
                                   max_position_embeddings=1024)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.LlamaModel(cfg).to(torch.float16).eval()
    ids = torch.randint(0, 1000, (1, 512), generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=128 * KiB,
                      fallback="error", span_check="error", dump_dir=str(tmp_path)), \
            torch.no_grad():
        got = torch.compile(model, backend="spyre_rules")(input_ids=ids, use_cache=False)
        want = model(input_ids=ids, use_cache=False)
    torch.testing.assert_close(got.last_hidden_state, want.last_hidden_state,
                               atol=2e-2, rtol=2e-2)
    (plan_file,) = tmp_path.glob("graph_*/plan.json")
    plan = json.loads(plan_file.read_text())
    assert plan["host_steps"] == {}
    ops = plan["ops"]
    statuses = {o["op"]: o["span_check"]["status"] for o in ops if "span_check" in o}
    # every access fits (ops nothing reads, the fills Inductor inlined into their readers,
    # are dropped before planning: every recorded op has code of its own)
    assert set(statuses.values()) == {"fits"}, statuses
    regions = [o for o in ops if o.get("writes_region_of")]
    tiled = [o for o in regions if o["decision"] == "plan"]
    # three cats: the rotary frequencies' and rotate_half of q and of k; only q's (4 heads,
    # 256 KiB) overflows, and its two regions tile (k's 2 heads span 128 KiB: they fit)
    assert len(regions) == 6 and len(tiled) == 2, [(o["op"], o["decision"]) for o in regions]
    assert all("slice" in o["description"] for o in tiled)
