"""``spyre-rules plan MODEL --decode --context N``: one decode step against a KV cache of N
tokens on the meta device (the model's own StaticCache, or --paged), planned like the prefill
(the same report, JSON and exit codes)."""

from __future__ import annotations

import json

import pytest

from spyre_rules.cli import main

#: head_dim 64 (one stick): a tile of heads never cuts a stick of the projections
TINY = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
        "vocab_size": 64, "max_position_embeddings": 256}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_static_decode_tiles_the_cache_writes_at_a_small_limit(capsys, tiny_config):
    """Batch 2 against a 256-token cache: each K/V cache is (2, 2, 256, 64) fp16, 128 KiB,
    heads outermost on the device; at 64 KiB each write runs one head per iteration,
    in place."""
    assert main(["plan", str(tiny_config), "--decode", "--context", "256", "--batch", "2",
                 "--max-span-bytes", "65536"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"model {tiny_config} (llama, 1 layers, float16): decode, batch 2, context "
                      "256 (static cache); limit 65536 bytes (0.1 MiB), automatic tiling on, "
                      "nothing executed")
    writes = [line for line in out if "index_put_" in line]
    assert writes == [
        "  buf40   pointwise    plan        index_put_.default           (1,2)          g1         0.1 fits",
        "  buf66   pointwise    plan        index_put_.default, permute. (1,2)          g4         0.1 fits",
    ]
    assert "  g1: tiles [2], buf40" in out and "  g4: tiles [2], buf66" in out
    assert out[-2:] == ["span check: 105 ops checked, 0 over the limit, 0 indirect reads "
                        "deferred (not enforced)", "OK: every access fits"]


def test_paged_decode_json(capsys, tiny_config):
    assert main(["plan", str(tiny_config), "--decode", "--context", "64", "--batch", "2",
                 "--paged", "--block-size", "16", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert {k: report[k] for k in ("decode", "context", "seq", "batch", "paged", "block_size",
                                   "ok", "overflows", "unsupported")} == {
        "decode": True, "context": 64, "seq": 1, "batch": 2, "paged": True, "block_size": 16,
        "ok": True, "overflows": [], "unsupported": []}
    (graph,) = report["graphs"]
    ops = {r["description"].split(" (aten ops: ")[1].split(",")[0].rstrip(")") for r in graph["ops"]}
    assert {"index_put_.default", "index.Tensor"} <= ops  # the page write and the page gather
    assert not graph["host_steps"]


@pytest.mark.parametrize(("argv", "message"), [
    (["plan", "Llama-3-8B", "--decode"], "--decode needs --context"),
    (["plan", "Llama-3-8B", "--context", "64"], "--context and --paged plan a decode step: add --decode"),
    (["plan", "Llama-3-8B", "--seq", "8", "--paged"], "--context and --paged plan a decode step: add --decode"),
    (["plan", "Llama-3-8B", "--decode", "--context", "64", "--seq", "8"],
     "--seq is the prefill's; a decode step takes --context"),
    (["plan", "Llama-3-8B", "--decode", "--context", "0"], "--context must be positive, not 0"),
    (["plan", "Llama-3-8B", "--decode", "--context", "100", "--paged"],
     "--context 100 is not a whole number of blocks of 16"),
])
def test_decode_usage_errors_exit_2(capsys, argv, message):
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == f"spyre-rules plan: error: {message}"


@pytest.mark.parametrize("cache", ["static", "paged"])
def test_real_size_decode_batch_16_against_32768_tokens_fits(capsys, cache):
    """Llama-3-8B's K/V caches at batch 16 x 32768 are 1 GiB each, heads outermost on the
    device (the static (16, 8, 32768, 128) cache and the paged flat (16 * 32768, 8, 128)
    one alike): each cache write is tiled 4 ways over heads, 256 MiB per tile, in place,
    and no accepted plan's access overflows; no host step (fallback='error').  The paged
    step's attention is paged_decode_attention: each page gather (1 GiB of pages) is tiled
    over the kv heads (256 MiB of pages per tile) inside ONE loop with the cache writes, the
    scores and the softmax_values reduction that reads them: at this size no tile of key
    blocks is needed (the cost order takes the fewest trips), so the reduction has no level
    over the keys and its accumulator is not used (tests/serving: at 16 KiB it is)."""
    paged = ["--paged", "--block-size", "16"] if cache == "paged" else []
    assert main(["plan", "Llama-3-8B", "--decode", "--context", "32768", "--batch", "16",
                 "--layers", "1", "--format", "json", *paged]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["overflows"], report["unsupported"]) == (True, [], [])
    (graph,) = report["graphs"]
    writes = [(r["levels"], r["span_check"]["max_span_bytes"]) for r in graph["ops"]
              if r["description"].startswith(f"{r['op']} (aten ops: index_put_")]
    assert writes == [([[1, 4]], 268435456)] * 2
    assert not graph["host_steps"]
    if cache == "paged":
        gathers = [r for r in graph["ops"] if "index.Tensor" in r["description"]]
        assert [g["levels"] for g in gathers] == [[[1, 4]]] * 2
        (flash,) = [r for r in graph["ops"] if "softmax_values" in r["description"]]
        (loop,) = [group["ops"] for group in graph["loop_groups"] if flash["op"] in group["ops"]]
        assert all(g["op"] in loop for g in gathers), (loop, gathers)


FALCON = {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 4,
          "num_hidden_layers": 1, "vocab_size": 512, "multi_query": True, "parallel_attn": True,
          "new_decoder_architecture": False, "bias": False, "alibi": False}


@pytest.mark.parametrize(("extra", "heads"), [
    ({}, 1),                                                    # multi-query: one kv head
    ({"multi_query": False, "num_kv_heads": 2}, 2),             # its own kv heads
    ({"new_decoder_architecture": True, "num_kv_heads": 2}, 4),  # keys cached per query head
])
def test_a_falcon_cache_holds_the_kv_heads_its_attention_writes(extra, heads):
    from transformers import AutoConfig, AutoModelForCausalLM

    from spyre_rules.commands.decode_plan import cache_kv_heads

    config = AutoConfig.for_model(**{**FALCON, **extra})
    assert cache_kv_heads(config) == heads
    # what FalconAttention hands its cache, on the meta device
    import torch

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    attention = model.transformer.h[0].self_attention
    written = attention.num_heads if attention.new_decoder_architecture else attention.num_kv_heads
    assert written == heads


@pytest.mark.parametrize(("config", "paged"), [(FALCON, False), (FALCON, True),
                                               ({**TINY, "model_type": "gemma", "head_dim": 64}, True)],
                         ids=["falcon-static", "falcon-paged", "gemma-paged"])
def test_other_architectures_plan_a_decode_step(capsys, tmp_path, config, paged):
    # Falcon's own attention reads the gathered pages; Gemma's runs as paged_decode_attention
    path = tmp_path / "model.json"
    path.write_text(json.dumps(config))
    cache = ["--paged", "--block-size", "16"] if paged else []
    assert main(["plan", str(path), "--decode", "--context", "64", "--batch", "2",
                 "--format", "json", *cache]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["ok"], report["overflows"], report["unsupported"]) == (True, [], [])
    (graph,) = report["graphs"]
    assert not graph["host_steps"]
    gathers = [r["description"] for r in graph["ops"] if "index.Tensor" in r["description"]]
    if paged:
        blocks = [g for g in gathers if "permute" in g]  # the key-block gathers
        assert len(blocks) == (0 if config["model_type"] == "falcon" else 2), gathers
