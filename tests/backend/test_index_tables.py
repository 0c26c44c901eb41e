"""Index values read from index tables (backend/index_tables.py).

Mamba2's segment sum scans the chunk positions of an expanded tensor: our cumsum is a
masked reduction whose mask compares the scanned position ``j`` with the reduced one
``k`` (``ops.index_expr``, backend/scan.py).  A counted loop runs one program for every
tile, so a value computed from a tiled index would restart at 0 on every tile: the
planner refused every split of ``j`` and ``k``, and one head's (128, 128) fp32 block
(64 KiB) overflowed 32 KiB whatever the other splits (the tiny Mamba2 and Bamba of the
architecture sweep, issue 41).  With automatic tiling on, an overflowing op reads such
values from a table of positions instead, which moves with the loop like any read.
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules import capture_operations
from spyre_rules.backend.index_tables import INDEX_TABLE_KIND
from spyre_rules.engine import plan_graph
from spyre_rules.ir.op_identity import op_kind, stamped_kind
from spyre_rules.program.op_spec import LoopSpec

LIMIT = 32 * 1024


def segment_cumsum(a):
    """transformers' ``segment_sum`` up to its cumsum: (1, 4, 1, 128) -> (1, 4, 1, 128, 128)."""
    n = a.size(-1)
    x = a[..., None].expand(*a.size(), n)
    mask = torch.tril(torch.ones(n, n, dtype=torch.bool), diagonal=-1)
    return torch.cumsum(x.masked_fill(~mask, 0), dim=-2)


def _inputs():
    # small integers: every partial sum is exact in fp32, whatever the order
    return [torch.randint(-3, 4, (1, 4, 1, 128), generator=torch.Generator().manual_seed(0))
            .float()]


def test_scan_reads_its_positions_from_a_table_and_tiles_them():
    with config.patch(max_span_bytes=LIMIT, ignore_span_overflow_hints=False):
        ops = capture_operations(segment_cumsum, *_inputs())
        decisions = {d.op: d.as_dict() for d in plan_graph(ops)}
    (table,) = [op for op in ops if stamped_kind(op) == INDEX_TABLE_KIND]
    (scan,) = [op for op in ops if op_kind(op) == "reduction:sum"]
    assert list(table.get_size()) == [128, 32]  # one position per stick
    with ops.graph_context(0):
        assert table.get_name() in {dep.name for dep in scan.get_read_writes().reads}
    assert decisions[table.get_name()]["decision"] == "no plan"  # 16 KiB: fits untiled
    # heads, the scanned position j (2 tiles of 64 rows) and the reduced position k
    # (reduction dim 0 of a rank-5 op: split dim 5): each tile reads its rows of the table
    levels = decisions[scan.get_name()]["plan"]["levels"]
    assert [(lv["selected_host_dim"], lv["split_count"]) for lv in levels] \
        == [(1, 4), (3, 2), (5, 2)]


def test_tiled_scan_equals_eager():
    xs = _inputs()
    with config.patch(max_span_bytes=LIMIT, ignore_span_overflow_hints=False,
                      span_check="error"):
        compiled = run_spyre(segment_cumsum, *xs)
    assert any(isinstance(s, LoopSpec) for k in compiled.kernels for s in k.specs)
    assert torch.equal(compiled.output, segment_cumsum(*xs))


# qwen3_next writes each chunk's output into its slice of the chunked result
# (``core_attn_out[:, :, i] = ...``: a select_scatter whose ``index == i`` reads the table
# of chunk positions).  A tiling of one chunk a tile squeezes that dim out of Inductor's
# dependency analysis, so no index value named the table while codegen, tracing every dim
# as a loop symbol, read it: the Scheduler dropped the table as unread and codegen failed
# (``AssertionError: buf9``).  The table is now read in both.

def _chunk_writes(x, y):
    out = torch.zeros_like(x)
    for i in range(2):
        out[:, :, i] = x[:, :, i] * 2 + y
    return out


def test_a_table_of_a_dim_tiled_one_value_a_tile_stays_read(tmp_path):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(1, 8, 2, 64, 64, generator=g), torch.randn(1, 8, 64, 64, generator=g)
    with config.patch(max_span_bytes=16 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_chunk_writes, x, y)
    assert torch.equal(compiled.output, _chunk_writes(x, y))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    plans = {r["op"]: (r["kind"], r["levels"]) for r in records}
    assert plans["buf9"] == (INDEX_TABLE_KIND, [])
    assert plans["buf8"] == ("pointwise", [[1, 8], [2, 2]])   # one chunk a tile


def test_a_tile_of_one_position_still_names_the_table_among_its_reads():
    # A tile of one value of a tabled dim has range 1 there: Inductor's read/write
    # extraction (the scheduler's dependencies) passes 0 for it, while the program reads
    # the table through its loop.  The table must stay a read, or the wrapper frees a
    # table two scans share after the first and the second's call raises (the 1-layer
    # GraniteMoeHybrid at 64 KiB: UnboundLocalError on buf217).
    import types

    from torch._inductor import dependencies
    from torch._inductor.sizevars import SizeVarAllocator
    from torch._inductor.virtualized import V, ops

    from spyre_rules.backend.index_tables import _tabled

    def mask(index, rindex):
        return ops.index_expr(index[1] - rindex[0], torch.int64)

    tabled = _tabled(mask, [[4, 8], [8]], {8: "table8"}, 32)
    with V.set_graph_handler(types.SimpleNamespace(sizevars=SizeVarAllocator())):
        for ranges in ([4, 8], [8]), ([4, 1], [1]), ([4, 1], [8]):
            rw = dependencies.extract_read_writes(tabled, *ranges)
            assert {dep.name for dep in rw.reads} == {"table8"}, ranges
        untabled = dependencies.extract_read_writes(mask, [4, 1], [1])
    assert {dep.name for dep in untabled.reads} == set()
