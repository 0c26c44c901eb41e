"""``spyre-rules plan``: a model config on the meta device, planned at a serving shape.

Each compile is a real one (Dynamo, Inductor, planner, codegen, span check) of a
model that has no weights; the shapes are small or the layers few so that the
file stays quick.
"""

from __future__ import annotations

import json

import pytest

from spyre_rules.cli import main
from spyre_rules.commands import model_plan

TINY = {"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
        "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 3,
        "vocab_size": 512, "max_position_embeddings": 256}


@pytest.fixture
def tiny_config(tmp_path):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(TINY))
    return path


def test_shipped_configs_hold_the_published_numbers():
    assert model_plan.shipped_configs() == ["Granite-3-8B", "Llama-3-70B", "Llama-3-8B",
                                            "Mistral-7B", "Qwen2-72B", "Qwen2-7B"]
    label, llama = model_plan.load_config("Llama-3-8B")
    assert label == "Llama-3-8B"
    assert {k: llama[k] for k in ("model_type", "hidden_size", "intermediate_size",
                                  "num_attention_heads", "num_key_value_heads",
                                  "num_hidden_layers", "vocab_size")} == {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "vocab_size": 128256}


def test_shipped_config_text_fits(capsys):
    """Llama-3-8B's real dims and vocabulary, one layer and the LM head, a short
    sequence: every access fits 256 MiB, the 1 GB embedding table's gathered read too:
    the planner splits the hidden dim 4 ways (64 sticks x 128256 rows x 128 bytes ->
    250.5 MiB); the LM head's restickified weight and its matmul share a 4 x 4 loop."""
    assert main(["plan", "Llama-3-8B", "--seq", "64", "--layers", "1"]) == 0
    captured = capsys.readouterr()
    out = captured.out.splitlines()
    assert out[0] == ("model Llama-3-8B (llama, 1 layers, float16): batch 1, seq 64; limit "
                      "268435456 bytes (256.0 MiB), automatic tiling on, nothing executed")
    (embedding,) = [line for line in out if line.startswith("  buf0 ")]
    assert embedding.split()[2] == "plan" and "(2,4)" in embedding and "250.5 fits" in embedding
    # 117: the three iotas and the full Inductor inlines into their readers are dead, dropped
    # before planning (they were recorded as "no generated access": 123); grouped attention
    # reads each key/value head in place (its copy per query head was 2 ops: 119)
    assert "span check: 117 ops checked, 0 over the limit, 0 indirect reads deferred " \
           "(not enforced)" in out
    assert "  g1.0: tiles [4, 4], buf121, buf112" in out
    assert not any(line.startswith("deferred indirect reads") for line in out)
    assert out[-1] == "OK: every access fits"
    assert "building Llama-3-8B on the meta device" in captured.err  # progress on stderr


def test_config_file_json_records_and_layers_override(capsys, tiny_config, tmp_path):
    out_dir = tmp_path / "artifacts"
    assert main(["plan", str(tiny_config), "--seq", "32", "--layers", "1", "--batch", "2",
                 "--format", "json", "--out", str(out_dir)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["layers"], report["batch"], report["seq"], report["ok"]) == (1, 2, 32, True)
    (graph,) = report["graphs"]
    assert (out_dir / "graph_0" / "plan.json").exists()
    assert json.loads((out_dir / "graph_0" / "plan.json").read_text())["ops"] == graph["ops"]
    assert {r["span_check"]["status"] for r in graph["ops"]} <= {"fits", "no generated access"}


def test_a_limit_too_small_exits_1_naming_the_ops(capsys, tiny_config):
    assert main(["plan", str(tiny_config), "--seq", "64", "--layers", "1",
                 "--max-span-bytes", "128", "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert not report["ok"]
    named = report["overflows"] + report["unsupported"]
    assert named and all(name.startswith("buf") for name in named)


@pytest.mark.parametrize(("argv", "message"), [
    (["plan", "no-such-model", "--seq", "8"], "'no-such-model' is neither a config JSON file "
                                              "nor a shipped config (shipped: Granite-3-8B, "
                                              "Llama-3-70B, Llama-3-8B, Mistral-7B, Qwen2-72B, "
                                              "Qwen2-7B)"),
    (["plan", "Llama-3-8B", "--seq", "0"], "--seq must be positive, not 0"),
    (["plan", "Llama-3-8B", "--seq", "8", "--layers", "-1"], "--layers must be positive, not -1"),
    (["plan", "Llama-3-8B"], "--seq is required"),
    (["plan", "--seq", "8"], "MODEL is required"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_config_files_exit_2(capsys, tmp_path):
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    assert main(["plan", str(broken), "--seq", "8"]) == 2
    assert f"cannot read {broken}" in capsys.readouterr().err
    no_type = tmp_path / "no_type.json"
    no_type.write_text(json.dumps({"hidden_size": 64}))
    assert main(["plan", str(no_type), "--seq", "8"]) == 2
    assert 'not a transformers config (no "model_type")' in capsys.readouterr().err
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"model_type": "no_such_architecture"}))
    assert main(["plan", str(unknown), "--seq", "8"]) == 2
    assert "transformers refuses the config" in capsys.readouterr().err


def test_list(capsys):
    assert main(["plan", "--list"]) == 0
    assert capsys.readouterr().out.split() == model_plan.shipped_configs()


def test_a_compile_error_prints_its_whole_cause_chain(capsys, tiny_config, monkeypatch):
    """Dynamo's wrapper says only ``backend='spyre_rules' raised:`` on its first line:
    the plan names every cause under it (issue 41: the Mixtral-8x7B plan printed
    nothing else)."""
    from spyre_rules.backend import meta_device

    def failing(gm, example_inputs):
        try:
            raise ValueError("the real cause")
        except ValueError as exc:
            raise RuntimeError("retargeting failed") from exc

    monkeypatch.setattr(meta_device, "retarget", failing)
    assert main(["plan", str(tiny_config), "--seq", "8", "--layers", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2:] == [
        "compile error: BackendCompilerFailed: backend='spyre_rules' raised: RuntimeError: "
        "retargeting failed <- ValueError: the real cause",
        "FAILED",
    ]


TINY_MIXTRAL = {"model_type": "mixtral", "hidden_size": 64, "intermediate_size": 128,
                "num_attention_heads": 4, "num_key_value_heads": 2, "num_hidden_layers": 1,
                "num_local_experts": 4, "num_experts_per_tok": 2, "vocab_size": 256}


def test_an_experts_config_is_planned_past_the_meta_devices_integer_histc(capsys, tmp_path):
    """transformers' grouped experts call histc on integer ids off the CPU; the meta graph
    is compiled as the CPU graph, whose histc takes their float values
    (backend/meta_device.py): the plan is made, every access fits (the router's topk, the
    sort, histc and the grouped matmuls lower to the program: issue 41)."""
    path = tmp_path / "mixtral.json"
    path.write_text(json.dumps(TINY_MIXTRAL))
    assert main(["plan", str(path), "--seq", "16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == "OK: every access fits"


TINY_FALCON = {"model_type": "falcon", "hidden_size": 256, "num_attention_heads": 4,
               "num_hidden_layers": 1, "vocab_size": 512, "multi_query": True,
               "parallel_attn": True, "new_decoder_architecture": False, "bias": False,
               "alibi": False}


def test_falcon_plans_on_the_meta_device(capsys, tmp_path):
    """Falcon indexes with a Python list (``fused_qkv[..., [-2], :]``): Dynamo's fake mode
    refused the meta index tensor that makes (issue 41; with backend='eager' too); the
    plan lets it convert such meta tensors (model_plan._meta_constants_faked)."""
    path = tmp_path / "falcon.json"
    path.write_text(json.dumps(TINY_FALCON))
    assert main(["plan", str(path), "--seq", "64"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "OK: every access fits"
    from torch._subclasses.fake_tensor import fake_tensor_tls

    assert fake_tensor_tls.allow_non_fake_inputs_override is None  # restored


def _content(report) -> "collections.Counter":
    """Every op's kind, decision, aten ops, levels and span check, an op of a layer
    program counted once per layer sharing it (buffer names differ between graphs)."""
    import collections
    import re

    found = collections.Counter()
    for graph in report["graphs"]:
        calls = (graph.get("region") or {}).get("calls", 1)
        for r in graph["ops"]:
            found[(r["kind"], r.get("decision"), re.sub(r"buf\d+", "buf", r["description"]),
                   str(r.get("levels")), (r.get("span_check") or {}).get("status"))] += calls
    return found


def test_two_layers_share_one_program_and_plan_as_the_whole_graph(capsys, tiny_config):
    """The decoder layers compile once (backend/regions.py); every op of every layer is
    covered by that program's plan and span check, and the plan's content is the whole
    graph's, op for op."""
    assert main(["plan", str(tiny_config), "--seq", "32", "--layers", "2", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] and report["reuse_layers"]
    assert [g["region"] for g in report["graphs"]] == [
        {"kind": "between regions", "position": "before model.layers.0"},
        {"kind": "region", "subgraph": "subgraph_0", "calls": 2, "shared_by": ["model.layers.0", "model.layers.1"]},
        {"kind": "between regions", "position": "after model.layers.1"},
    ]
    assert main(["plan", str(tiny_config), "--seq", "32", "--layers", "2", "--format", "json",
                 "--whole-graph"]) == 0
    whole = json.loads(capsys.readouterr().out)
    assert whole["ok"] and not whole["reuse_layers"] and [g["region"] for g in whole["graphs"]] == [None]
    # the same content but for one origin: the attention mask's expand, made before the
    # layers, is named in each layer's `where` only when both are in one graph
    where = ("pointwise", "no plan", "buf (aten ops: {}where.self)", "[]", "fits")
    shared, alone = _content(report), _content(whole)
    assert alone - shared == {tuple(x.format("expand.default, ") for x in where): 2}
    assert shared - alone == {tuple(x.format("") for x in where): 2}
    from spyre_rules.commands.plan import text_report

    out = text_report(report).splitlines()
    assert [line.split(":")[0] for line in out if line.startswith("graph_")] == [
        "graph_0 (28 ops; the ops before model.layers.0)",
        "graph_1 (76 ops; one program for 2 layers",
        "graph_2 (11 ops; the ops after model.layers.1)"]
    assert "2 layers share the program of graph_1: planned and span-checked once, run once per layer" in out
