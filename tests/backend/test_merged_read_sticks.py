"""A read whose stick-dim coordinate merges the split symbol with others (rules/planner.rules
``input_sticks_whole``, ``facts.access.read_host_tile_extent``).

qwen3_next's gate ``z`` [1, S, 16, 256] is reshaped to rows of half a head, [S * 32, 128], for
RMSNormGated: a row's parity picks the half of z's stick dim.  The stick check used to divide
z's stick dim by the split count (256 / 32 = 8 elements, "cuts sticks") and refused every
count between 5 and 511, so no split fit 64 KiB.  Measured on the read's coordinate, 128 rows
(4 tokens) reach all of it.
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config


def _gate(z):
    return -z.reshape(-1, 128)


def test_rows_of_half_a_head_tile_at_64_kib(tmp_path):
    z = torch.randn(1, 64, 16, 256, generator=torch.Generator().manual_seed(0))
    with config.patch(max_span_bytes=64 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_gate, z)
    assert torch.equal(compiled.output, _gate(z))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    assert {r["op"]: r["levels"] for r in records} == {"buf0": [[0, 16], [1, 4]]}


def _rotary_half(q):
    """cohere's interleaved rotate_half on [1, S, heads * 32]: odd and even columns."""
    x = q.view(1, 128, 4, 32).transpose(1, 2)
    return torch.stack([-x[..., 1::2], x[..., ::2]], dim=-1).flatten(-2)


def test_a_strided_read_claims_whole_sticks_per_tile_of_heads(tmp_path):
    """``x[..., 1::2]`` reads column ``32 h + 2 i + 1``: a tile of ``t`` heads reaches
    ``32 t - 1`` values (not whole sticks) but its tiles start ``32 t`` apart, so splitting
    the heads cuts no stick.  Measured as the reach alone, every split of the heads was
    refused and cohere's rotary was ('Cannot auto-tile buf0 (aten ops: neg.default, ...)')."""
    q = torch.randn(1, 128, 128, generator=torch.Generator().manual_seed(0))
    with config.patch(max_span_bytes=16 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_rotary_half, q)
    assert torch.equal(compiled.output, _rotary_half(q))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    # the odd and even halves and their interleave each split 4 heads x 16 token tiles
    assert {r["op"]: r["levels"] for r in records if r["levels"]} == {
        "buf0": [[1, 4], [2, 16]], "buf1": [[1, 4], [2, 16]], "buf2": [[1, 4], [2, 16]]}
