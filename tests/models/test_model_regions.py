"""Identical layers compiled once (backend/regions.py): a model whose decoder layer
is marked with ``torch.compiler.nested_compile_region`` compiles the layer's graph
once and runs that one program for every layer; the result equals eager within
the tolerance of the whole-graph compile, under fallback='error' and
span_check='error', with automatic tiling on.

Against the whole graph compiled at once, every op makes the same decision; what
differs is only where a layer ends: an op of the next part that joined a loop
group of the layer before it (tiling propagation across the boundary) runs
untiled in its own graph, and the copy of that loop's tile into a full buffer is
no longer needed."""

from __future__ import annotations

import collections
import re

import pytest
import torch

import model_zoo
from model_helpers import TOLERANCE, compile_model
from spyre_rules.commands.model_regions import layer_classes, marked_layers

pytest.importorskip("transformers")

KiB = 1024
AUTO = {"ignore_span_overflow_hints": False, "max_span_bytes": 16 * KiB}


def _signature(record: dict) -> tuple:
    return (record["kind"], record.get("decision"), re.sub(r"buf\d+", "buf", record["description"]),
            (record.get("span_check") or {}).get("status"))


def _ops(run, weighted: bool) -> collections.Counter:
    """Each op's (kind, decision, description, span check) and its levels, an op of
    a shared layer program counted once per layer when ``weighted``."""
    found: collections.Counter = collections.Counter()
    for plan in run.plans:
        calls = (plan.get("region") or {}).get("calls", 1) if weighted else 1
        for record in plan["ops"]:
            found[(*_signature(record), str(record.get("levels")))] += calls
    return found


@pytest.fixture(scope="module", params=["llama"])
def runs(request):
    model = model_zoo.LastHidden(model_zoo.build(request.param, "sdpa", torch.float32))
    whole = compile_model(model, (model_zoo.input_ids(),), **AUTO)
    with marked_layers(model) as classes:
        regions = compile_model(model, (model_zoo.input_ids(),), **AUTO)
    return request.param, classes, whole, regions


def test_the_layer_compiles_once_and_runs_for_every_layer(runs):
    name, classes, whole, regions = runs
    assert [c.__name__ for c in classes] == [{"llama": "LlamaDecoderLayer", "gpt2": "GPT2Block"}[name]]
    paths = {"llama": "model.layers", "gpt2": "model.h"}[name]
    assert [p.get("region") for p in regions.plans] == [
        {"kind": "between regions", "position": f"before {paths}.0"},
        {"kind": "region", "subgraph": "subgraph_0", "calls": 2, "shared_by": [f"{paths}.0", f"{paths}.1"]},
        {"kind": "between regions", "position": f"after {paths}.1"},
    ]
    # the layer program's kernels ran once per layer, the others once
    layer_kernels = sum(1 for k in regions.kernels if k.calls == model_zoo.LAYERS)
    assert layer_kernels > 0 and all(k.calls in (1, model_zoo.LAYERS) for k in regions.kernels)
    assert [p.get("region") for p in whole.plans] == [None]


def test_equal_to_eager_within_the_whole_graph_tolerance(runs):
    _, _, whole, regions = runs
    assert whole.max_error <= TOLERANCE[torch.float32]
    assert regions.max_error <= TOLERANCE[torch.float32]
    assert regions.messages == whole.messages == []
    assert regions.out_of_bounds_accesses() == []
    assert regions.direct_accesses_over_the_limit() == []


def test_every_op_decides_as_in_the_whole_graph(runs):
    name, _, whole, regions = runs
    decisions = collections.Counter()
    for plan in regions.plans:
        calls = (plan.get("region") or {}).get("calls", 1)
        for record in plan["ops"]:
            decisions[_signature(record)] += calls
    expected = collections.Counter(_signature(r) for plan in whole.plans for r in plan["ops"])
    copies = {k: v for k, v in (expected - decisions).items()}
    # only the copies of a boundary loop's tile into a full buffer are gone
    assert all(kind == "copy" and "copy of the buf tile into a full buffer" in text
               for kind, _, text, _ in copies), copies
    assert decisions - expected == collections.Counter()
    # the levels differ only for the ops that joined a loop across a layer boundary
    moved = _ops(whole, weighted=False) - _ops(regions, weighted=True)
    joined = {("llama", "pointwise"): 1, ("llama", "reduction:sum"): 1, ("llama", "copy"): 1,
              ("gpt2", "reduction:sum"): 3, ("gpt2", "copy"): 3}
    assert {(name, op[0]): n for op, n in moved.items()} == {k: v for k, v in joined.items() if k[0] == name}
    assert all(op[1] != "plan" for op in moved if op[0] != "copy")  # they had joined a loop, unplanned


def test_the_mark_is_taken_off_after():
    from transformers.models.llama import modeling_llama

    before = modeling_llama.LlamaDecoderLayer.__dict__["forward"]
    model = model_zoo.build("llama")
    with marked_layers(model):
        assert modeling_llama.LlamaDecoderLayer.forward is not before
    assert modeling_llama.LlamaDecoderLayer.__dict__["forward"] is before


def test_a_single_layer_or_a_list_of_mixed_classes_is_not_marked():
    one = torch.nn.ModuleList([torch.nn.Linear(2, 2)])
    mixed = torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.ReLU(), torch.nn.Linear(2, 2)])
    no_params = torch.nn.ModuleList([torch.nn.ReLU(), torch.nn.ReLU()])
    assert layer_classes(torch.nn.ModuleDict({"a": one, "b": mixed, "c": no_params})) == []
    # a list inside a repeated block belongs to the block
    block = torch.nn.Sequential(torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]))
    outer = torch.nn.ModuleList([block, torch.nn.Sequential(
        torch.nn.ModuleList([torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)]))])
    assert layer_classes(outer) == [torch.nn.Sequential]
