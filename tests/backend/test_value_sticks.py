"""A small read with nowhere to move its stick goes through a copy with one value a
stick (backend/value_sticks.py, docs/layout_model.md §1.3).

gpt_oss's attention sinks ``[H]`` are broadcast over the rows into the last column of
``cat([scores, sinks], -1)``: ``[1, 4, 128, 129]`` fp32, 80 KiB a head, so at 64 KiB the
region writing the sinks must split the heads one by one, while one stick holds all 4
sinks.  Before, no split was legal (``Cannot auto-tile buf1 (aten ops: cat.default,
expand.default, reshape.default): no combined split among host dims [1, 2] ...``).
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.facts.layout_facts import NO_STICK_DIM, within_stick_dim
from spyre_rules.facts.stick_layout import generic_stick_layout
from spyre_rules.facts.tiled_layout import FixedTiledLayout


def _softmax_with_sinks(scores, sinks):
    # transformers' gpt_oss eager_attention_forward
    s = sinks.reshape(1, -1, 1, 1).expand(scores.shape[0], -1, scores.shape[-2], -1)
    combined = torch.cat([scores, s], dim=-1)
    combined = combined - combined.max(dim=-1, keepdim=True).values
    return torch.softmax(combined, dim=-1)[..., :-1]


def _inputs():
    g = torch.Generator().manual_seed(0)
    return torch.randn(1, 4, 128, 128, generator=g), torch.randn(4, generator=g)


def test_the_sinks_are_read_one_value_a_stick(tmp_path):
    scores, sinks = _inputs()
    untiled = run_spyre(_softmax_with_sinks, scores, sinks).output
    with config.patch(max_span_bytes=64 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_softmax_with_sinks, scores, sinks)
    # no reduction level: every tile computes what the untiled program does, bit for bit;
    # against eager, the executor's exp and sum order (float32 rounding)
    assert torch.equal(compiled.output, untiled)
    torch.testing.assert_close(compiled.output, _softmax_with_sinks(scores, sinks),
                               atol=1e-6, rtol=1e-5)
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    copies = [r for r in records if r["kind"] == "ReStickifyStageHBM"]
    assert [(r["levels"], r["layout"]["device_size"], r["layout"]["stride_map"])
            for r in copies] == [([], [1, 4, 32], [-1, 1, -1])]   # a stick per sink
    region = next(r for r in records if r.get("writes_region_of") and r["op"] == "buf1")
    assert region["levels"] == [[1, 4], [2, 2]]   # one head, half the rows a tile


def test_untiled_the_sinks_are_read_as_they_are(tmp_path):
    scores, sinks = _inputs()
    with config.patch(dump_dir=str(tmp_path)):
        compiled = run_spyre(_softmax_with_sinks, scores, sinks)
    torch.testing.assert_close(compiled.output, _softmax_with_sinks(scores, sinks),
                               atol=1e-6, rtol=1e-5)
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    assert not [r for r in records if r["kind"].startswith("ReStickify")]


def test_no_host_dim_is_inside_a_stick_of_one_value():
    sparse = FixedTiledLayout("cpu", torch.float32, [4], [1], device_layout=generic_stick_layout(
        [4], [1], torch.float32, [0, -1]))
    dense = FixedTiledLayout("cpu", torch.float32, [4], [1], device_layout=generic_stick_layout(
        [4], [1], torch.float32))
    assert (within_stick_dim(sparse), within_stick_dim(dense)) == (NO_STICK_DIM, 0)
