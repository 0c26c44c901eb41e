"""Nested compile regions (backend/regions.py) on a small stack of identical blocks:
the block compiles once and runs for every call, equal to eager; a graph with
symbolic sizes, and a capture, see the regions inlined; a meta-device model is
planned without running."""

from __future__ import annotations

import json
import warnings

import torch

from spyre_rules import config
from spyre_rules.backend.capture import capture_operations
from spyre_rules.backend.regions import has_regions, inline_regions, splittable
from spyre_rules.commands.model_regions import marked_layers
from spyre_rules.executor.runtime import recent_kernels


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(x)))


class Stack(torch.nn.Module):
    def __init__(self, blocks: int = 3) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.first = torch.nn.Linear(8, 16)
        self.blocks = torch.nn.ModuleList([Block() for _ in range(blocks)])
        self.last = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first(x)
        for block in self.blocks:
            x = block(x)
        return self.last(x)


def _inputs(rows: int = 5) -> torch.Tensor:
    return torch.randn(rows, 8, generator=torch.Generator().manual_seed(1))


def _compiled(model, x, tmp_path, **options):
    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    with config.patch(fallback="error", span_check="error", dump_dir=str(tmp_path)), torch.no_grad(), \
            marked_layers(model):
        out = torch.compile(model, backend="spyre_rules", **options)(x)
    kernels = [k for k in recent_kernels() if k.serial > before]
    plans = [json.loads((p / "plan.json").read_text()) for p in sorted(tmp_path.iterdir())]
    return out, kernels, plans


def test_the_block_compiles_once_and_runs_three_times(tmp_path):
    model = Stack().eval()
    x = _inputs()
    with torch.no_grad():
        expected = model(x)
    out, kernels, plans = _compiled(model, x, tmp_path)
    assert (out - expected).abs().max().item() <= 1e-5
    assert [p["region"] for p in plans] == [
        {"kind": "between regions", "position": "before blocks.0"},
        {"kind": "region", "subgraph": "subgraph_0", "calls": 3, "shared_by": ["blocks.0", "blocks.1", "blocks.2"]},
        {"kind": "between regions", "position": "after blocks.2"},
    ]
    # the block's kernels ran three times, the first and last linear once
    assert sorted({k.calls for k in kernels}) == [1, 3]
    assert all(r.get("span_check", {}).get("status") in ("fits", "no generated access")
               for p in plans for r in p["ops"])


def test_a_meta_model_is_planned_without_running(tmp_path):
    with torch.device("meta"):
        model = Stack().eval()
    out, _, plans = _compiled(model, torch.empty(5, 8, device="meta"), tmp_path)
    assert out.device.type == "meta" and tuple(out.shape) == (5, 4)
    assert [p["region"]["kind"] for p in plans] == ["between regions", "region", "between regions"]
    assert plans[1]["region"]["calls"] == 3


def test_symbolic_sizes_inline_the_regions(tmp_path, monkeypatch):
    from spyre_rules.backend import regions

    inlined = []
    monkeypatch.setattr(regions, "inline_regions", lambda gm: inlined.append(gm) or inline_regions(gm))
    model = Stack().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = []
        for rows in (5, 7):
            x = _inputs(rows)
            with torch.no_grad():
                expected = model(x)
            torch._dynamo.reset() if rows == 5 else None
            with config.patch(fallback="error", dump_dir=str(tmp_path)), torch.no_grad(), marked_layers(model):
                outs.append((torch.compile(model, backend="spyre_rules", dynamic=True)(x), expected))
    for out, expected in outs:
        assert (out - expected).abs().max().item() <= 1e-5
    plans = [json.loads((p / "plan.json").read_text()) for p in sorted(tmp_path.iterdir())]
    assert plans and all("region" not in p for p in plans)  # one program per shape, of the whole graph
    assert len(inlined) == 1


def test_inlined_regions_compute_the_same_graph():
    model = Stack().eval()
    x = _inputs()
    graphs = []

    def keep(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return gm.forward

    torch._dynamo.reset()
    with torch.no_grad(), marked_layers(model):
        torch.compile(model, backend=keep)(x)
    (gm, example_inputs), = graphs
    assert has_regions(gm) and splittable(gm)
    # a call's whole result read by another op cannot be split there (a tuple between programs)
    call = next(n for n in gm.graph.nodes if n.target is torch.ops.higher_order.invoke_subgraph)
    with gm.graph.inserting_after(call):
        whole = gm.graph.call_function(len, (call,))
    assert not splittable(gm)
    gm.graph.erase_node(whole)
    with torch.no_grad():
        before = gm(*example_inputs)[0]
        inline_regions(gm)
        after = gm(*example_inputs)[0]
        expected = model(x)
    assert not has_regions(gm)
    assert not [n for n in gm.graph.nodes if n.op == "get_attr"]  # the subgraph is no longer read
    assert torch.equal(after, before) and torch.equal(after, expected)


def test_a_capture_sees_every_block_inlined():
    model = Stack().eval()
    x = _inputs()
    plain = capture_operations(model, x)
    with marked_layers(model):
        marked = capture_operations(model, x)
    assert len(marked) == len(plain) > 0
