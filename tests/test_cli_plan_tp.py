"""``spyre-rules plan MODEL --tp N``: one rank's shard planned on the meta device over a
fake process group of N ranks (commands/tp_plan.py), no real ranks.

One real-size case (Llama-3-70B, 8 ranks, sequence 32768, one layer): every access of
rank 0's shard fits 256 MiB, the all_reduces' 512 MiB buffers in chunks; the other
figures of the must-show are bench/bench_tp.py's.
"""

from __future__ import annotations

import json

import pytest

from spyre_rules.cli import main
from spyre_rules.commands import tp_plan

TINY = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3,
        "vocab_size": 512, "max_position_embeddings": 256}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_tiny_config_two_ranks_json(capsys, tiny_config):
    assert main(["plan", str(tiny_config), "--seq", "32", "--layers", "1", "--tp", "2",
                 "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"]
    assert report["tp"] == {
        "ranks": 2, "rank": 0, "backend": "fake",
        "split": {"num_attention_heads": [4, 2], "num_key_value_heads": [2, 1],
                  "intermediate_size": [256, 128], "vocab_size": [512, 256]},
        "styles": {"embedding_rowwise": 1, "colwise": 5, "rowwise": 2,
                   "colwise_gather_output": 1},
        # the embedding's and both row-parallel projections' all_reduce, the logits'
        # all_gather, each with its wait; nothing needs chunks at this size
        "collectives": {"all_reduce_": {"steps": 3, "chunked": 0},
                        "wait_tensor": {"steps": 4, "chunked": 0},
                        "all_gather_into_tensor": {"steps": 1, "chunked": 0}}}
    (graph,) = report["graphs"]
    # rank 0's shard: the q projection makes 2 of the 4 heads (2 x 32 columns)
    assert graph["host_steps"] == {}
    collectives = [r for r in graph["ops"] if r["kind"] == "collective step"]
    assert {r["span_check"]["status"] for r in collectives} == {"fits", "no generated access"}


def test_a_split_that_does_not_divide_is_a_usage_error(capsys, tiny_config):
    assert main(["plan", str(tiny_config), "--seq", "8", "--tp", "3"]) == 2
    assert "--tp 3 does not divide num_attention_heads = 4" in capsys.readouterr().err


def test_split_sizes_of_the_shipped_70b_configs():
    from spyre_rules.commands.model_plan import load_config

    assert tp_plan.split_sizes(load_config("Qwen2-72B")[1], 4) == {
        "num_attention_heads": [64, 16], "num_key_value_heads": [8, 2],
        "intermediate_size": [29568, 7392], "vocab_size": [152064, 38016]}


def test_llama_3_70b_eight_ranks_32768_fits(capsys):
    assert main(["plan", "Llama-3-70B", "--seq", "32768", "--layers", "1", "--tp", "8"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == ("tensor parallel: rank 0 of 8 (fake process group; every rank's shard has "
                      "these shapes): num_attention_heads 64 -> 8, num_key_value_heads 8 -> 1, "
                      "intermediate_size 28672 -> 3584, vocab_size 128256 -> 16032")
    # 32768 x 8192 fp16 = 512 MiB per all_reduce: 2 chunks of 16384 rows each
    assert out[2] == ("collective steps: all_reduce_ x3 (3 in chunks), wait_tensor x4, "
                      "all_gather_into_tensor x1 (1 in chunks)")
    assert any(line.startswith("span check: ") and ", 0 over the limit," in line for line in out)
    assert out[-1] == "OK: every access fits"


def test_a_qwen2_shard_with_biased_projections_plans_at_four_ranks(capsys, tmp_path):
    """Qwen2's q/k/v projections carry biases: column-parallel, each rank holds its
    columns' biases; 4 ranks of a tiny config plan with every access fitting."""
    path = tmp_path / "qwen2.json"
    path.write_text(json.dumps({**TINY, "model_type": "qwen2", "num_key_value_heads": 4}))
    assert main(["plan", str(path), "--seq", "16", "--layers", "1", "--tp", "4",
                 "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tp"]["split"]["num_key_value_heads"] == [4, 1]
    assert report["tp"]["collectives"]["all_reduce_"] == {"steps": 3, "chunked": 0}
    assert report["ok"] and report["overflows"] == [] and report["unsupported"] == []


@pytest.mark.parametrize("paged", [False, True], ids=["static", "paged"])
def test_a_decode_step_of_one_ranks_shard_plans_against_its_share_of_the_cache(
        capsys, tiny_config, paged):
    """--tp with --decode: the shard's attention holds 1 of the 2 key/value heads, so the
    cache it decodes against holds one head (a cache of the whole model's heads would not
    fit the shard's attention), and the collectives sit in the decode program."""
    cache = ["--paged", "--block-size", "16"] if paged else []
    assert main(["plan", str(tiny_config), "--decode", "--context", "64", "--layers", "1", "--tp", "2",
                 *cache, "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["decode"] and report["paged"] is paged
    assert report["tp"]["split"]["num_key_value_heads"] == [2, 1]
    assert report["tp"]["collectives"] == {
        "all_reduce_": {"steps": 3, "chunked": 0}, "wait_tensor": {"steps": 4, "chunked": 0},
        "all_gather_into_tensor": {"steps": 1, "chunked": 0}}
    (graph,) = report["graphs"]
    assert graph["host_steps"] == {}
    # the K and the V write into the one-head cache (head dim 32); the other two
    # index_put_ are the vocabulary-parallel embedding's masking
    writes = [r["layout"]["size"] for r in graph["ops"]
              if "index_put_" in r["description"] and r["layout"]["size"][-1] == 32]
    assert writes == ([[64, 1, 32]] * 2 if paged else [[1, 1, 64, 32]] * 2)
