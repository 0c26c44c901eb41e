"""Op facts on real captured Inductor operations (small shapes), plus the binding table.

Symbol names are Inductor's (``d0``, ``d1``, ...): unit dims are squeezed out of
MemoryDeps, so in ``x + y`` on (1, 20, 16, 64) ``d0`` iterates host dim 1.
"""

from __future__ import annotations

import gc
import re
from pathlib import Path

import pytest
import sympy
import torch
import torch.nn.functional as F

import spyre_rules
from spyre_rules.facts import op_facts as facts
from spyre_rules.facts.per_tile import per_tile_layout
from spyre_rules.facts.records import Coord, FactError, HostCoord, Read
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.dim_hint import AutomaticDimHint, DimHint
from spyre_rules.ir.ir_edit import drop_caches, set_frozen

FP16 = torch.float16
PRELUDE = Path(__file__).resolve().parents[2] / "rules" / "prelude.rules"


def S(name: str) -> sympy.Symbol:
    return sympy.Symbol(name, integer=True, nonnegative=True)


def capture(fn, *inputs):
    return spyre_rules.capture_operations(fn, *inputs)


@pytest.fixture(scope="module")
def add():
    x = torch.randn(1, 20, 16, 64, dtype=FP16)
    return capture(lambda a, b: a + b, x, torch.randn_like(x))


@pytest.fixture(scope="module")
def sum0():
    return capture(lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))


@pytest.fixture(scope="module")
def lm_head():
    return capture(lambda x, w: F.linear(x, w), torch.randn(2, 64, dtype=FP16),
                   torch.randn(1024, 64, dtype=FP16))


@pytest.fixture(scope="module")
def gather():
    return capture(lambda x, i: x[i] + 1, torch.randn(8, 64, dtype=FP16), torch.tensor([1, 3, 5, 0]))


@pytest.fixture(scope="module")
def keepdim():
    return capture(lambda x: x.sum(dim=1, keepdim=True), torch.randn(1, 8, 128, dtype=FP16))


@pytest.fixture(scope="module")
def transposed():
    return capture(lambda x: x.t() + 1, torch.randn(128, 64, dtype=FP16))


# --------------------------------------------------------------------------- binding table


def test_every_prelude_fact_is_bound_with_its_arity():
    declared = dict(
        (m.group(1), len([p for p in m.group(2).split(",") if p.strip()]))
        for m in re.finditer(r"^fact\s+(\w+)\s*\(([^)]*)\)", PRELUDE.read_text(), re.M)
    )
    assert declared, "no facts found in the prelude"
    assert set(declared) == set(facts.FACTS)
    for name, arity in declared.items():
        code = facts.FACTS[name].__code__
        assert code.co_argcount == arity, name


def test_record_fields_match_the_prelude():
    text = PRELUDE.read_text()
    for record in (Read, Coord, HostCoord):
        body = re.search(rf"extern record {record.__name__} \{{(.*?)\}}", text, re.S).group(1)
        fields = re.findall(r"^\s*(\w+)\s*:", body, re.M)
        assert fields == [f.name for f in record.__dataclass_fields__.values()]


# --------------------------------------------------------------------------- op kind facts


def test_kind_facts(add, sum0, lm_head, gather):
    (a,), (s,), (restick, bmm) = add, sum0, lm_head
    assert all(facts.is_computed_buffer(op) and facts.has_fixed_tiled_layout(op)
               for op in (a, s, restick, bmm))
    assert facts.is_pointwise(a) and not facts.is_reduction(a)
    assert facts.is_reduction(s) and not facts.is_batch_matmul(s)
    assert facts.is_batch_matmul(bmm) and facts.is_reduction(bmm)
    assert facts.has_static_layout(a)
    assert not facts.is_computed_buffer(object()) and not facts.has_fixed_tiled_layout(object())
    assert not facts.has_static_layout(object())
    with add.graph_context(0):
        assert not facts.has_indirect_reads(a)
    with gather.graph_context(0):
        first, second = gather
        assert facts.has_indirect_reads(first) and not facts.has_indirect_reads(second)
        # the index tensor is read directly; the gathered tensor only indirectly
        assert facts.read_buffers(first) == {"arg0_1", "arg1_1"}
        assert [r.buffer for r in facts.input_reads(first)] == ["arg1_1"]


def test_user_hints_are_read_live(add):
    (op,) = add
    assert not facts.has_user_hints(op)
    op.dim_hints = ["a hint"]
    try:
        assert facts.has_user_hints(op)
    finally:
        del op.dim_hints
    assert not facts.has_user_hints(op)


def test_automatic_hints_are_told_by_their_type_not_their_label(add):
    """A hint automatic grouping stamped is an ``AutomaticDimHint``; a user's hint
    counts as a user's whatever its dim is called (even the automatic label)."""
    (op,) = add
    d1 = sympy.Symbol("d1")
    try:
        op.dim_hints = [AutomaticDimHint(["_span_overflow"], 5, d1, False, 10000, 1)]
        assert not facts.has_user_hints(op)
        op.dim_hints = [DimHint(["_span_overflow"], 5, d1, False, 0, 1)]
        assert facts.has_user_hints(op)
    finally:
        del op.dim_hints


def test_rank_and_extent(add, keepdim):
    (op,), (kd,) = add, keepdim
    assert facts.rank(op) == 4
    assert [facts.extent(op, d) for d in range(4)] == [1, 20, 16, 64]
    assert facts.extent(op, 4) is None and facts.extent(op, -1) is None
    assert facts.rank(kd) == 3 and facts.extent(kd, 1) == 1
    assert facts.rank(object()) == 0


# --------------------------------------------------------------------------- symbol facts


def test_symbol_map_maps_squeezed_symbols_to_host_dims(add):
    (op,) = add
    with add.graph_context(0):
        assert facts.output_symbols(op) == {S("d0"), S("d1"), S("d2")}
        assert [facts.output_dim(op, S(f"d{i}")) for i in range(3)] == [1, 2, 3]
        assert facts.output_dim(op, "d2") == 3  # by name, as rules render symbols
        assert facts.output_dim(op, S("d7")) is None
        assert facts.reduction_symbols(op) == frozenset()


def test_keepdim_reduction_symbols(keepdim):
    (op,) = keepdim
    with keepdim.graph_context(0):
        assert facts.op_facts(op).position_vars == [0, 0, S("d0")]
        assert facts.output_dim(op, S("d0")) == 2
        assert facts.reduction_symbols(op) == {S("d1")}


def test_reduction_and_bmm_symbols(sum0, lm_head):
    (s,), (_, bmm) = sum0, lm_head
    with sum0.graph_context(0):
        assert [facts.output_dim(s, S(f"d{i}")) for i in range(3)] == [0, 1, 2]
        assert facts.reduction_symbols(s) == {S("d3")}
    with lm_head.graph_context(0):
        assert facts.output_dim(bmm, S("d0")) == 0 and facts.output_dim(bmm, S("d1")) == 1
        assert facts.reduction_symbols(bmm) == {S("d2")}  # exactly one: k


# --------------------------------------------------------------------------- reads


def test_input_reads_include_graph_inputs_and_host_coords(sum0, lm_head):
    (s,), (restick, bmm) = sum0, lm_head
    with sum0.graph_context(0):
        (read,) = facts.input_reads(s)
        assert read.buffer == "arg0_1" and isinstance(read.layout, FixedTiledLayout)
        assert read.index == S("d0") * 1024 + 64 * S("d1") + S("d2") + 20480 * S("d3")
        assert facts.read_host_coords(s, read) == [
            HostCoord(0, frozenset({S("d3")})), HostCoord(1, frozenset({S("d0")})),
            HostCoord(2, frozenset({S("d1")})), HostCoord(3, frozenset({S("d2")})),
        ]
    with lm_head.graph_context(0):
        reads = facts.input_reads(bmm)
        assert [r.buffer for r in reads] == ["arg0_1", restick.get_name()]
        assert facts.read_buffers(bmm) == {"arg0_1", restick.get_name()}
        w = reads[1]
        assert [h.symbols for h in facts.read_host_coords(bmm, w)] == [{S("d1")}, {S("d2")}]
        # a Read built without its dep is matched by buffer name
        plain = Read(w.buffer, w.layout)
        assert facts.read_coords(bmm, plain, {}) == facts.read_coords(bmm, w, {})
        with pytest.raises(FactError, match="does not read"):
            facts.read_coords(bmm, Read("nope", w.layout), {})


def test_read_coords_and_unknown_spans(lm_head):
    _, bmm = lm_head
    with lm_head.graph_context(0):
        x = facts.input_reads(bmm)[0]
        recs = facts.read_coords(bmm, x, {})
        assert [r.expr for r in recs] == ["0", "d0", "d2"]
        assert [r.span_elems for r in recs] == [1, 2, 64]
        assert recs[2].is_stick and recs[2].inner_elems == 1
        # 4 does not divide d0's range (2): spans it touches are unknown, never guessed
        bad = facts.read_coords(bmm, x, {0: 4})
        assert bad[1].span_elems is None and bad[1].span_bytes is None
        assert bad[0].inner_elems == 128  # the full inner extent is known even when a span is not


# --------------------------------------------------------------------------- coordinate facts


def test_output_coords_records(add):
    (op,) = add
    with add.graph_context(0):
        recs = facts.output_coords(op, {})
        assert [r.expr for r in recs] == ["d0", "d1", "0", "0", "d2"]
        assert recs[0] == Coord(
            buffer=op.get_name(), dim=0, is_stick=False, expr="d0", symbols=frozenset({S("d0")}),
            span_elems=20, inner_elems=1024, span_bytes=40_960, total_bytes=40_960, stick_elems=64,
        )
        tiled = facts.output_coords(op, {1: 5})
        assert tiled[0].span_bytes == 8_192 and tiled[0].total_bytes == 8_192
        # 3 tiles of 20 rows: 8, 8 and a last tile of 4, measured as a whole tile of 8
        assert facts.output_coords(op, {1: 3})[0].span_elems == 8
        # 6 tiles of 20 rows would be tiles of 4: the sixth would be empty
        assert facts.output_coords(op, {1: 6}) == [] and not facts.has_output_coords(op, {1: 6})
        assert not facts.has_output_coords(op, {0: 2})  # a unit dim cannot be split


def test_transposed_output_tiles_in_its_memory_order(transposed):
    """x.t() + 1 is laid out like its read (host [64, 128], strides [1, 64]); its
    per-tile buffer stays transposed, as coarse tiling builds it (memory_order.py):
    a tile of 32 rows has strides [1, 32] and spans its 8 KiB."""
    op = transposed[-1]
    with transposed.graph_context(0):
        assert list(op.layout.stride) == [1, 64]
        view = facts.op_facts(op).output_view({0: 2})
        assert view and view.host_size == (32, 128) and view.host_stride == (1, 32)
        assert view.total_bytes == 8192


# --------------------------------------------------------------------------- layout facts


def test_layout_facts(lm_head, add):
    restick, bmm = lm_head
    lay = facts.layout(restick)
    assert facts.within_stick_dim(lay) == 0  # restickified onto N
    assert facts.within_stick_dim(facts.layout(bmm)) == 1
    assert facts.host_size(lay, 0) == 1024 and facts.host_size(lay, 2) is None
    assert facts.stick_elems(lay) == 64
    with pytest.raises(FactError, match="FixedTiledLayout"):
        facts.layout(object())


def test_divisors():
    assert facts.divisors(8195) == [1, 5, 11, 55, 149, 745, 1639, 8195]
    assert facts.divisors(20) == [1, 2, 4, 5, 10, 20]
    assert facts.divisors(1) == [1] and facts.divisors(0) == [] and facts.divisors(-4) == []
    assert facts.divisors(64) == [1, 2, 4, 8, 16, 32, 64]


def test_tile_counts():
    from spyre_rules.facts.layout_facts import tile_counts

    # k = 6..9 would give tiles of 2 elements whose last ones are empty
    assert tile_counts(10) == [1, 2, 3, 4, 5, 10]
    assert tile_counts(7) == [1, 2, 3, 4, 7]  # 4 tiles: 2, 2, 2, 1
    assert tile_counts(1) == [1] and tile_counts(0) == [] and tile_counts(-3) == []
    # against the definition, (k - 1) * ceil(n / k) < n, divisors included
    for n in [*range(1, 400), 49155, 152064, 50257, 1 << 20]:
        expected = [k for k in range(1, n + 1) if (k - 1) * -(-n // k) < n]
        assert tile_counts(n) == expected, n
        assert set(facts.divisors(n)) <= set(expected)


def test_tile_extent_of_a_dividing_count():
    from spyre_rules.facts.tile_extent import is_even_split, last_tile_extent, tile_extent

    # n / k in whole 64-element grains: the even tiles
    assert (tile_extent(16384, 4), last_tile_extent(16384, 4)) == (4096, 4096)
    assert tile_extent(12800, 8) == 1600 and is_even_split(12800, 8)  # 25 sticks each
    # n / k would cut sticks: whole-stick tiles, the last shorter (16052 query rows in 4)
    assert (tile_extent(16052, 4), last_tile_extent(16052, 4)) == (4096, 3764)
    assert (tile_extent(16052, 2), last_tile_extent(16052, 2)) == (8064, 7988)
    assert (tile_extent(8195, 5), last_tile_extent(8195, 5)) == (1664, 1539)
    assert not is_even_split(16052, 4)
    # n / k would cut fp32 sticks (32 elements, the finest stick): whole 32-element tiles
    # (olmo_hybrid's heads of 48 in 2 tiles: 32 and 16, not 24 and 24)
    assert (tile_extent(48, 2), last_tile_extent(48, 2)) == (32, 16)
    assert (tile_extent(100, 4), last_tile_extent(100, 4)) == (32, 4)
    # no k tiles in whole 32-element grains exist: the even tiles
    assert tile_extent(120, 3) == 40 and tile_extent(24, 4) == 6 and tile_extent(96, 3) == 32
    assert tile_extent(7, 1) == 7 and tile_extent(130, 1) == 130
    # a remainder count is unchanged
    assert (tile_extent(8195, 2), last_tile_extent(8195, 2)) == (4224, 3971)
    # never longer than k tiles of the next power of two, for a power-of-two k that divides it
    for n in range(1025, 4097, 7):
        for k in (2, 4, 8, 16):
            assert tile_extent(n, k) <= 4096 // k, (n, k)


# --------------------------------------------------------------------------- caching


def test_facts_follow_coarse_tiling_edits():
    """Coarse tiling divides ranges and swaps layouts in place: facts must re-measure."""
    x = torch.randn(1, 20, 16, 64, dtype=FP16)
    ops = capture(lambda a, b: a + b, x, torch.randn_like(x))
    (op,) = ops
    with ops.graph_context(0):
        before = facts.op_facts(op)
        assert facts.op_facts(op) is before  # cached while nothing changes
        assert facts.output_coords(op, {})[0].span_bytes == 40_960
        read = facts.input_reads(op)[0]

        old = op.layout
        size, stride, stl = per_tile_layout(old.size, old.stride, old.device_layout, {1: 5})
        op.layout = FixedTiledLayout(old.device, old.dtype, [sympy.Integer(n) for n in size],
                                     [sympy.Integer(n) for n in stride], device_layout=stl)
        set_frozen(op.data, "ranges", [sympy.Integer(n) for n in size])
        drop_caches(op)

        after = facts.op_facts(op)
        assert after is not before
        assert facts.extent(op, 1) == 4
        assert facts.output_coords(op, {})[0].span_bytes == 8_192
        assert facts.layout(op).device_layout.device_size == (4, 16, 1, 1, 64)
        # the input read keeps its index; its dep now ranges over the tile
        assert facts.read_coords(op, read, {})[0].span_elems == 4


def test_cache_never_outlives_its_op():
    class Dummy:
        pass

    thing = Dummy()
    first = facts.op_facts(thing)
    assert facts.op_facts(thing) is first and facts.rank(thing) == 0
    key = id(thing)
    del thing, first
    gc.collect()
    assert key not in facts._CACHE


def test_explicit_snapshot_with_graph(sum0):
    (s,) = sum0
    snap = facts.OpFacts(s, graph=sum0.graphs[0])  # no V.graph needed
    assert snap.reduction_symbols == {S("d3")}
    assert [r.buffer for r in snap.input_reads()] == ["arg0_1"]
    assert snap.output_view({0: 10}).device_layout.device_size == (16, 1, 2, 64)


def test_facts_asked_before_the_graph_is_set_are_retried():
    ops = capture(lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))
    (op,) = ops
    snap = facts.op_facts(op)  # outside any graph: Inductor cannot list the deps yet
    assert snap.read_writes is None and "V.graph" in snap.rw_error
    assert facts.has_indirect_reads(op)  # "cannot tell" never reads as "direct only"
    assert not facts.has_output_coords(op, {})
    with ops.graph_context(0):
        assert facts.op_facts(op) is snap
        assert not facts.has_indirect_reads(op)
        assert facts.reduction_symbols(op) == {S("d3")}
        assert facts.has_output_coords(op, {})


def test_read_coords_of_a_flattening_view_across_a_padded_stick():
    """x.view(-1) + 1 on a [5, 37] fp32 input: one loop variable walks both host
    dims, and the 37-wide stick dim is padded to 64 slots (two 32-element sticks)."""
    import torch

    import spyre_rules
    from spyre_rules.facts import op_facts as F

    ops = spyre_rules.capture_operations(lambda x: x.view(-1) + 1, torch.randn(5, 37))
    with ops.graph_context(0):
        op = [o for o in ops if F.is_computed_buffer(o)][-1]
        (read,) = F.input_reads(op)
        exprs = [c.expr for c in F.read_coords(op, read, {})]
    assert exprs == ["floor((Mod(d0, 37))/32)", "floor(d0/37)", "Mod(Mod(d0, 37), 32)"]


def test_read_names_of_a_concatenation_are_its_regions():
    """A concatenation is an extern kernel whose ``get_read_names`` is its own name;
    what it must come after (hoisting, dead-op removal) is the regions it reads."""
    from spyre_rules.facts.op_kind import order_dependencies, read_names

    ops = spyre_rules.capture_operations(
        lambda x, y: torch.cat([x + 1, y * 2]).sum(0),
        torch.randn(8, 64, dtype=torch.float16), torch.randn(8, 64, dtype=torch.float16))
    deps = {op.get_name(): sorted(read_names(op)) for op in ops}
    assert deps == {"buf0": ["arg0_1"], "buf1": ["arg1_1"], "buf2": ["buf0", "buf1"],
                    "buf3": ["buf2"]}
    assert {op.get_name(): sorted(order_dependencies(op)) for op in ops} == deps
