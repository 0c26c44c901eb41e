"""A 1-layer Granite whose vocabulary has no stick-safe divisor, executed (issue 33).

Granite-3-8B's vocabulary 49155 is 769 fp16 sticks, the last holding 3 words; this
reduced model keeps the property with 1003 words (15 sticks and 43 words).  At
128 KiB its restickified LM-head weight [128, 1003] (256 KiB) must split the
vocabulary, and every exact split cuts a stick: the LM head tiles with a remainder
(2 tiles of 512 words, the last 491, docs/layout_model.md §4.5), its restickify and
batchmatmul in one loop with the k reduction inside.  It compiles with automatic
tiling, ``fallback="error"`` and ``span_check="error"``, equal to eager.
"""

from __future__ import annotations

import json

import pytest
import torch

from spyre_rules import config

transformers = pytest.importorskip("transformers")

KiB = 1024


def test_small_granite_lm_head_tiles_with_a_remainder(tmp_path):
    cfg = transformers.GraniteConfig(
        hidden_size=128, intermediate_size=256, num_attention_heads=2, num_key_value_heads=1,
        num_hidden_layers=1, vocab_size=1003, max_position_embeddings=256, logits_scaling=8.0,
        embedding_multiplier=12.0, residual_multiplier=0.22, attention_multiplier=0.0078125)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    model = transformers.GraniteForCausalLM(cfg).to(torch.float16).eval()
    ids = torch.randint(0, 1003, (1, 64), generator=torch.Generator().manual_seed(1))
    torch._dynamo.reset()
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=128 * KiB,
                      fallback="error", span_check="error", dump_dir=str(tmp_path)), \
            torch.no_grad():
        got = torch.compile(model, backend="spyre_rules")(input_ids=ids, use_cache=False)
        want = model(input_ids=ids, use_cache=False)
    assert got.logits.shape == (1, 64, 1003)
    torch.testing.assert_close(got.logits, want.logits, atol=2e-2, rtol=2e-2)
    (plan_file,) = tmp_path.glob("graph_*/plan.json")
    plan = json.loads(plan_file.read_text())
    assert plan["host_steps"] == {}
    ops = plan["ops"]
    assert {o["span_check"]["status"] for o in ops if "span_check" in o} == {"fits"}
    remainders = {o["kind"]: (o["loop"]["loop_count"], o["loop"]["loop_last_tiles"])
                  for o in ops if (o.get("loop") or {}).get("loop_last_tiles")}
    assert remainders == {
        "ReStickifyOpHBM": ([2, 2], [[{"dim": 0, "tile": 512, "last": 491}], []]),
        "reduction:batchmatmul": ([2, 2], [[{"dim": 2, "tile": 512, "last": 491}], []]),
    }
