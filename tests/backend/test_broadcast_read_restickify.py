"""A broadcast read stuck on a variable narrower than a stick (backend/stick_choice.py).

GatedDeltaNet's ``value * beta.unsqueeze(-1)``: value (1, 4, 128, 48) fp32 with the 4
heads outermost, beta (1, 128, 4) stuck on the heads, broadcast along value's stick.
At 64 KiB the output (96 KiB) must split its heads, and a tile of 2 heads cuts beta's
sticks.  Stuck on the heads instead (Mamba2's remedy, test_segment_sum_stick.py), the
output would pad each 4-head stick to 32: 8 times its bytes, and the chain after it
could not tile (OLMo-Hybrid).  Beta is restickified onto the tokens instead; the
output keeps its layout and the whole chain tiles by 2 heads x 2 token halves.
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config


def _value_times_beta(v, beta):
    return v.transpose(1, 2).contiguous() * beta.transpose(1, 2).unsqueeze(-1) + 1


def test_a_narrow_broadcast_read_is_restickified_and_the_chain_tiles(tmp_path):
    g = torch.Generator().manual_seed(0)
    v, beta = torch.randn(1, 128, 4, 48, generator=g), torch.rand(1, 128, 4, generator=g)
    with config.patch(max_span_bytes=64 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_value_times_beta, v, beta)
    assert torch.equal(compiled.output, _value_times_beta(v, beta))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    plans = {r["op"]: (r["kind"], r["levels"]) for r in records}
    assert plans == {"buf3": ("ReStickifyOpHBM", []),           # beta stuck on the tokens
                     "buf0": ("pointwise", [[1, 2], [2, 2]]),
                     "buf1": ("pointwise", [[1, 2], [2, 2]]),
                     "buf2": ("pointwise", [[1, 2], [2, 2]])}, plans
    layouts = {r["op"]: r["layout"]["device_size"] for r in records}
    assert layouts["buf3"] == [4, 4, 1, 32]          # heads outside the token sticks
    assert layouts["buf2"] == [4, 128, 2, 1, 32]     # the default layout: no padded heads
