"""Grouping and tile_groups do a fixed amount of work per op on a long chain.

Counted, not timed: on chains of 20, 40 and 60 overflowing ops (one run, one loop)
the number of calls of an inner function grows by the same amount for every 20
ops -- its second difference is 0.  A copy of the run per op (grouping's run
members as a frozenset; tile_reads swapping every per-tile buffer's layout of the
loop for each reader, when it is checked and each time its body is traced) makes
it grow quadratically.
"""

from __future__ import annotations

import collections
import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch._inductor import ir  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402

import spyre_rules  # noqa: E402
from spyre_rules import config  # noqa: E402
from spyre_rules.passes import tile_reads  # noqa: E402
from spyre_rules.passes.pipeline import collect_groups  # noqa: E402
from spyre_rules.passes.tiling_propagation import tile_groups  # noqa: E402
from linear_growth import SIZES, assert_linear, chain  # noqa: E402

def _counts(n_ops: int, monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    """Calls of ``Buffer.get_name`` in grouping and in tile_groups, and per-tile layouts
    swapped by tile_reads (tile_groups plus one later trace of every op's body)."""
    x = torch.randn(4, 64, 128, dtype=torch.float16)  # 64 KiB per buffer
    ops = spyre_rules.capture_operations(chain(n_ops), x)
    graph = ops.graphs[0]
    calls: collections.Counter = collections.Counter()
    get_name = ir.Buffer.get_name
    full_layouts = tile_reads._full_layouts

    def counted_get_name(self):
        calls["get_name"] += 1
        return get_name(self)

    def counted_full_layouts(tiles, reader):
        calls["swapped"] += sum(1 for t in tiles.values() if t.op is not reader)
        return full_layouts(tiles, reader)

    monkeypatch.setattr(ir.Buffer, "get_name", counted_get_name)
    monkeypatch.setattr(tile_reads, "_full_layouts", counted_full_layouts)
    with config.patch(max_span_bytes=16384, ignore_span_overflow_hints=False), \
            V.set_graph_handler(graph):
        groups = collect_groups(graph)
        assert [len(group[0]) for group in groups] == [n_ops]  # one run: the whole chain
        calls["grouping"] = calls.pop("get_name")
        tile_groups(graph, groups)
        calls["tile_groups"] = calls.pop("get_name")
        for op in graph.operations:
            op.get_read_writes()  # traces every body, as code generation does
    monkeypatch.undo()
    return calls


def test_grouping_and_tile_groups_work_per_op_is_constant(monkeypatch):
    counts = [_counts(n, monkeypatch) for n in SIZES]
    for what in ("grouping", "tile_groups", "swapped"):
        assert_linear(what, *(c[what] for c in counts))
