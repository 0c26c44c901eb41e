"""Compiling without running: ``capture_operations`` and meta-device models.

A capture hands Dynamo outputs made from shapes; a model whose parameters and
inputs live on the meta device compiles (plan, codegen, span check, dump) and
returns meta outputs.  Neither runs a kernel nor the captured graph.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.nn.functional as F

import spyre_rules
from spyre_rules import config
from spyre_rules.executor import runtime
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint
from spyre_rules.program.op_spec import LoopSpec


def _embed_then_double(ids, w):
    h = F.embedding(ids, w)
    torch._dynamo.graph_break()
    return (h * 2).sum(-1)


def test_capture_never_runs_the_graph_and_continues_after_a_graph_break():
    # Eager raises on these ids (out of the table): the capture must not run the graph.
    ids, w = torch.full((2, 8), 1000), torch.randn(16, 64)
    with pytest.raises(IndexError):
        _embed_then_double(ids, w)
    ops = spyre_rules.capture_operations(_embed_then_double, ids, w)
    assert len(ops.graphs) == 2  # the second graph was traced from the first's made-up output
    assert [[int(s) for s in op.layout.size] for op in ops][-1] == [2, 8]


def test_capture_of_meta_inputs():
    ids, w = torch.zeros(2, 8, dtype=torch.long, device="meta"), torch.empty(16, 64, device="meta")
    ops = spyre_rules.capture_operations(_embed_then_double, ids, w)
    assert len(ops.graphs) == 2
    assert [[int(s) for s in op.layout.size] for op in ops] == [[2, 8, 64], [2, 8, 64], [2, 8]]


@pytest.fixture
def no_kernel_runs(monkeypatch):
    """Any Spyre kernel or host step that runs fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a kernel ran")

    monkeypatch.setattr(runtime.ProgramKernel, "run", refuse)
    monkeypatch.setattr(runtime, "rules_to_host", refuse)
    monkeypatch.setattr(runtime, "rules_to_device", refuse)
    torch._dynamo.reset()
    before = max((k.serial for k in runtime.recent_kernels()), default=-1)
    yield lambda: [k for k in runtime.recent_kernels() if k.serial > before]
    torch._dynamo.reset()


def _tiny_llama(layers=1):
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                      num_key_value_heads=2, num_hidden_layers=layers, vocab_size=512,
                      max_position_embeddings=256)
    with torch.device("meta"):
        return LlamaModel(cfg).to(torch.float16).eval()


def _graph_dirs(root):
    return sorted(p for p in root.iterdir() if p.is_dir())


def test_meta_model_compiles_without_running(no_kernel_runs, tmp_path):
    model = _tiny_llama()
    ids = torch.zeros(1, 64, dtype=torch.long, device="meta")
    with config.patch(ignore_span_overflow_hints=False, fallback="error", span_check="error",
                      dump_dir=str(tmp_path)), torch.no_grad():
        out = torch.compile(model, backend="spyre_rules")(input_ids=ids, use_cache=False)
    hidden = out.last_hidden_state
    assert (hidden.device.type, tuple(hidden.shape), hidden.dtype) == (
        "meta", (1, 64, 128), torch.float16)
    kernels = no_kernel_runs()
    assert kernels and all(k.calls == 0 for k in kernels)
    (graph,) = _graph_dirs(tmp_path)
    plan = json.loads((graph / "plan.json").read_text())
    checked = [r["span_check"] for r in plan["ops"]]
    assert {c["status"] for c in checked} <= {"fits", "no generated access"}
    assert any(c["status"] == "fits" for c in checked)
    assert len(list(graph.glob("*/bundle.mlir"))) == len(kernels)


def test_meta_inputs_with_a_hint_plan_tile_loops(no_kernel_runs, fresh_dims):
    declare_tensor_dim("A", 64)
    x = torch.empty(64, 128, device="meta")
    name_tensor_dims(x, ["A", None])

    def double(x):
        with spyre_hint(slices={"A": 4}):
            return x * 2.0

    with config.patch(fallback="error"), torch.no_grad():
        out = torch.compile(double, backend="spyre_rules")(x)
    assert (out.device.type, tuple(out.shape)) == ("meta", (64, 128))
    loops = [i for k in no_kernel_runs() for i in k.specs if isinstance(i, LoopSpec)]
    assert [loop.count for loop in loops] == [4]


def test_meta_op_without_lowering_is_still_an_error(no_kernel_runs):
    x = torch.empty(3, 4, device="meta")
    with config.patch(fallback="error"), torch.no_grad(), pytest.raises(
            Exception, match=r"cummax.* has no Spyre lowering"):
        torch.compile(lambda x: torch.cummax(x, 0).values + 1, backend="spyre_rules")(x)


def test_meta_fallback_eager_returns_meta_outputs_and_warns(no_kernel_runs):
    x = torch.empty(3, 4, device="meta")
    with config.patch(fallback="eager"), torch.no_grad(), pytest.warns(
            UserWarning, match="cummax"):
        out = torch.compile(lambda x: torch.cummax(x, 0).values + 1, backend="spyre_rules")(x)
    assert (out.device.type, tuple(out.shape)) == ("meta", (3, 4))


def test_llama3_8b_shaped_two_layers_at_8k_compile_on_meta(no_kernel_runs, tmp_path):
    """The real dims and vocabulary of Llama-3-8B, two layers, fp16, the real 256 MiB
    limit, automatic tiling: the compiled call returns a meta last_hidden_state and
    every graph leaves its plan.json; whether every access fits is the planner's
    answer, recorded per op (span check) or as the graph's refusal."""
    from transformers import LlamaConfig, LlamaModel

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                      num_key_value_heads=8, num_hidden_layers=2, vocab_size=128256,
                      max_position_embeddings=8192, rope_theta=500000.0, use_cache=False)
    with torch.device("meta"):
        model = LlamaModel(cfg).to(torch.float16).eval()
    ids = torch.zeros(1, 8192, dtype=torch.long, device="meta")
    with config.patch(ignore_span_overflow_hints=False, span_check="warn", fallback="eager",
                      dump_dir=str(tmp_path)), torch.no_grad(), warnings.catch_warnings():
        # a refused graph or an overflow warns; the answer is read from plan.json below
        warnings.simplefilter("ignore")
        hidden = torch.compile(model, backend="spyre_rules")(input_ids=ids).last_hidden_state
    assert (hidden.device.type, tuple(hidden.shape), hidden.dtype) == (
        "meta", (1, 8192, 4096), torch.float16)
    assert all(k.calls == 0 for k in no_kernel_runs())
    graphs = _graph_dirs(tmp_path)
    assert graphs
    for graph in graphs:
        ops = json.loads((graph / "plan.json").read_text())["ops"]
        # per layer: q, k, v, o, gate, up, down projections and the two attention matmuls
        assert sum(r["kind"] == "reduction:batchmatmul" for r in ops) == 2 * 9
        assert all("span_check" in r or "graph_error" in r for r in ops)
