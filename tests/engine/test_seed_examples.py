"""The planner examples of docs/layout_model.md §6 (numbered 1-9) and the support matrix, on ops
captured from real programs.

Numbers are the SD ("single division") numbers of docs/layout_model.md §6, plus one
deliberate addition (docs/architecture.md: an accepted plan must be span-safe for
the code that actually runs): validation also requires each tile's write into
the FULL output buffer to fit (``full_buffer_write_fits`` in rules/planner.rules).
Every plan a test here produces is re-checked by the independent verifier
(``helpers.assert_span_safe``: brute-force enumeration of the per-tile buffer and
of every tile's full-buffer write).

Loop symbols are Inductor's (``d0``, ``d1``...): size-1 dims are squeezed out of
MemoryDeps, so in (1, 8195, 256, 64) ``d0`` iterates host dim 1.
"""

from __future__ import annotations

import pytest
import sympy
import torch
import torch.nn.functional as F

import spyre_rules
from spyre_rules import Unsupported, config
from spyre_rules.engine import plan_graph
from spyre_rules.facts import op_facts as facts
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.hints import DimHint
from spyre_rules.ir.dim_hint import AutomaticDimHint

from helpers import (
    FP16, assert_span_safe, by_name, capture, capture_without_running, span_problems,
)
from test_policy_edits import policy  # noqa: F401  (the edited-policy fixture)

MiB = 1 << 20
LIMIT = 256 * MiB


def decide(ops, name=None, **cfg):
    """The decision of op ``name`` (default: the only/last op) under ``cfg``."""
    with config.patch(**cfg):
        decisions = {d.op: d for d in plan_graph(ops)}
    return decisions[name] if name else list(decisions.values())[-1]


def plan_of(ops, name=None, **cfg):
    d = decide(ops, name, **cfg)
    assert d.decision == "plan", d.reason
    op = by_name(ops, d.op)
    assert_span_safe(op, d.plan, cfg.get("max_span_bytes", LIMIT))
    return d.plan


def unsupported(ops, name=None, **cfg) -> str:
    d = decide(ops, name, **cfg)
    assert d.decision == "unsupported", (d.decision, d.reason)
    return d.reason


def emitted(decision):
    return [s for s in decision.trace if s.section == "candidates" and s.outcome == "emit"]


# ------------------------------------------------------------------ fixtures


@pytest.fixture(scope="module")
def add_8195():
    x = torch.empty(1, 8195, 256, 64, dtype=FP16)
    return capture("add_8195", lambda a, b: a + b, x, torch.empty_like(x))


@pytest.fixture(scope="module")
def sum0():
    return capture("sum0", lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))


@pytest.fixture(scope="module")
def lm_head():
    return capture("lm_head", lambda x, w: F.linear(x, w), torch.randn(2, 64, dtype=FP16),
                   torch.randn(1024, 64, dtype=FP16))


# ------------------------------------------------------------- 1. pointwise


def test_1_pointwise_output_span_overflow(add_8195):
    """2 remainder tiles of 4224 rows (the last 3971): the fewest loop trips; the reference's
    exact-only search answers 5 tiles of 1639 (docs/layout_model.md §6.1; 5 tiles are 1664 rows
    here, the last 1539)."""
    plan = plan_of(add_8195)
    assert plan.splits == ((1, 2),)
    assert plan.levels == (spyre_rules.SpanOverflowTileLevel(1, 2, False),)
    assert plan.chunking_infos == (spyre_rules.ChunkingInfo(
        total_bytes=268_533_760, per_core_span=268_533_760, core_split_estimate=1,
        selected_device_dim_size=8195, selected_device_span_stride_elems=16384,
        selected_host_dim=1, stick_elems=64, reason="output span overflow"),)
    assert plan.reason == "output span overflow"
    # the public entry point gives the same plan (inside the op's graph)
    with add_8195.graph_context(0):
        assert spyre_rules.plan_span_overflow_tile(add_8195[0], max_cores=4) == plan


def test_1_per_tile_and_full_buffer_views_agree(add_8195):
    """Tiling the outermost device coordinate: both views give 1664 * 16384 * 2 (5 tiles of 8195
    rows: 1664 each, the last 1539)."""
    (op,) = add_8195
    with add_8195.graph_context(0):
        per_tile = facts.output_coords(op, {1: 5})[0]
        full = facts.full_output_coords(op, {1: 5})[0]
    assert per_tile.span_bytes == full.span_bytes == 54_525_952


def test_no_plan_under_the_limit(add_8195):
    d = decide(add_8195, max_span_bytes=512 * MiB)
    assert (d.decision, d.plan, d.reason) == ("no plan", None, "no span exceeds the limit")


# ---------------------------------------------------------- 2. indirect read


def test_2_indirect_read_is_measured_and_tiled_like_a_read():
    """x[i] + 1 at 64 bytes: the gathered read is measured (its indirect symbol over
    all 8 rows: 1024 bytes); those rows stay over the limit whatever the split, so the
    search refuses naming that read (the output span also asks for a split of the 4
    gathered rows, which would cut the sticks of the int64 index it reads)."""
    ops = capture("gather", lambda x, i: x[i] + 1, torch.randn(8, 64, dtype=FP16),
                  torch.tensor([1, 3, 5, 0]))
    d = decide(ops, "buf0", max_span_bytes=64)
    assert [s.section for s in d.trace if s.section == "eligibility"] == []
    assert d.decision == "unsupported"
    assert d.reason == (
        "Cannot auto-tile buf0 (aten ops: index.Tensor): no split brings its gathered read under "
        "the limit of 64 bytes (gathered rows of arg0_1 (any index may pick any row): device dim 1 "
        "(tmp0) spans 1024 bytes)")


def test_2_unmeasured_indirect_read_returns_none():
    """A gathered read whose indirect symbol has no recorded bound stays unplanned."""
    from torch._inductor import ir

    ops = capture("gather_unmeasured", lambda x, i: x[i] + 1, torch.randn(8, 64, dtype=FP16),
                  torch.tensor([1, 3, 5, 0]))
    op = next(o for o in ops if o.get_name() == "buf0")
    op.__class__ = type("OwnReadWrites", (type(op),),
                        {"get_read_writes": lambda self: ir.ComputedBuffer.get_read_writes(self)})
    d = decide(ops, "buf0", max_span_bytes=64)
    assert (d.decision, d.plan) == ("no plan", None)
    assert d.reason == ("buf0 reads through an indirect index whose indexed extent cannot be "
                        "shown; the indirect-access path owns it")
    assert [(s.section, s.rule, s.outcome) for s in d.trace] == [("eligibility", "indirect_reads", "skip")]


# ------------------------------------------------------- 3. reduction output


def test_3_reduction_output_span_overflow():
    """x.sum(dim=1), x (20, 2, 16, 64), 8 KiB: out (20, 16, 64) is [16, 1, 20, 64];
    its coordinate d1 spans 16 * 1280 * 2 = 40960 bytes (host dim 1), and so does
    the input's.  The reduction coordinate of x (the 2 reduced rows, 81920 bytes)
    is a reduction_span candidate on split dim 3: a split of 2 leaves tiles of one
    row, legal since codegen keeps a tiled unit dim's symbol.  Host dim 1 (16) may
    split 2, 4, 8 or 16; 8 is the first with 2 * 1280 * 2 = 5120 <= 8192 on both
    views, but the reduction level's fp32 accumulator of one output tile (20, 2, 64)
    is [2, 20, 2, 32]: 2 * 20 * 2 * 32 * 4 = 10240 bytes (validation accumulator_fits).
    16 leaves 5120: the plan is (1, 16) with the reduction level of 2 inside it."""
    ops = capture("sum1", lambda x: x.sum(dim=1), torch.randn(20, 2, 16, 64, dtype=FP16))
    d = decide(ops, max_span_bytes=8192)
    assert [(s.rule, s.values["host_dim"], s.values["span_bytes"]) for s in emitted(d)] == [
        ("output_span", 1, 40960), ("input_span", 1, 40960), ("reduction_span", 3, 81920)]
    plan = plan_of(ops, max_span_bytes=8192)
    assert plan.splits == ((1, 16), (3, 2))
    assert plan.reason == ("input span overflow for arg0_1; output span overflow; "
                           "reduction-controlled input span for arg0_1")


# ------------------------------------------------ 4. reduction input by output


def test_4_reduction_input_span_controlled_by_output_dim(sum0):
    """x.sum(dim=0), x (2, 20, 16, 64), 8 KiB (docs/layout_model.md §6.2).

    Candidates as in docs/layout_model.md §6.2: output host 1 (40,960) and input host 0 (81,920,
    from x's coordinate d0; the reduction coordinate is skipped).  The reference's
    plan ((0, 10)) validates on the per-tile output buffer [16, 1, 2, 64] but a
    Reduction's output is always read outside its (singleton) loop, so each tile
    writes the full [16, 1, 20, 64] buffer, whose coordinate d1 still spans
    16 * 1280 * 2 = 40,960 bytes: ((0, 10)) is not span-safe.  The input read
    needs d0's range down to 2 (d0 steps over the whole inner extent of x:
    2 * 2048 * 2 = 8192 bytes), the full-buffer write needs d1's down to 3
    (3 * 1280 * 2 = 7680 bytes): the cheapest safe combination is
    ((0, 10), (1, 6)), host dim 1 in 6 remainder tiles of 3 (the last 1): 60 loop trips
    where the exact ((0, 10), (1, 8)) takes 80.  (Dropping the full-buffer requirement from the rules
    gives back ((0, 10)): test_policy_edits.py.)
    """
    d = decide(sum0, max_span_bytes=8192)
    assert [(s.rule, s.values["host_dim"], s.values["span_bytes"]) for s in emitted(d)] == [
        ("output_span", 1, 40960), ("input_span", 0, 81920)]
    plan = plan_of(sum0, max_span_bytes=8192)
    assert plan.splits == ((0, 10), (1, 6))
    assert plan.reason == "input span overflow for arg0_1; output span overflow"
    assert [(c.selected_host_dim, c.per_core_span, c.reason) for c in plan.chunking_infos] == [
        (1, 40960, "output span overflow"), (0, 81920, "input span overflow for arg0_1")]


def test_4_seed_split_fails_only_on_the_full_buffer_write(sum0):
    (op,) = sum0
    with sum0.graph_context(0):
        per_tile = facts.output_coords(op, {0: 10})
        full = facts.full_output_coords(op, {0: 10})
        assert max(c.span_bytes for c in per_tile if not c.is_stick) == 4096
        assert full[0].expr == "d1" and full[0].span_bytes == 40960
        # the independent verifier agrees: ((0, 10)) overflows only on the full-buffer write
        problems = span_problems(op, ((0, 10),), 8192)
    assert problems and all(p.startswith("full-buffer write: device dim 0 (d1)") for p in problems)


# ------------------------------------------------------------- 5. LM head


def test_5_lm_head_plans(lm_head):
    """buf1: restickified weight [16, 64, 64] (stick on N); buf0: the BMM reading it
    as [floor(n/64), k, Mod(n/64)].  SD: 131072 / k <= limit (docs/layout_model.md §6.3)."""
    assert [op.get_name() for op in lm_head] == ["buf1", "buf0"]
    assert plan_of(lm_head, "buf1", max_span_bytes=8192).splits == ((0, 16),)
    bmm = plan_of(lm_head, "buf0", max_span_bytes=8192)
    assert bmm.splits == ((1, 16),)
    assert bmm.reason == "input span overflow for buf1"
    # the reference's restickify count 4 is the SD answer at 32 KiB
    assert plan_of(lm_head, "buf1", max_span_bytes=32768).splits == ((0, 4),)
    assert plan_of(lm_head, "buf0", max_span_bytes=32768).splits == ((1, 4),)


def test_5_lm_head_restickify_and_bmm_share_one_loop(lm_head):
    """The original design leaves this pair Unsupported.  The BMM reads host dim 0 of the
    restickified weight by n, the loop symbol of its output dim 1
    (``read_tile_dim``), so the run's {0: 16} is {1: 16} on the BMM's dims -- its
    own plan: both share one loop of 16, each tiling its own dim."""
    from helpers import without_hints
    from spyre_rules.hints import group_operations

    d = sympy.Symbol
    with without_hints(lm_head), config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False):
        with lm_head.graph_context(0):
            assert facts.read_tile_dim(by_name(lm_head, "buf0"), "buf1", 0) == 1
            # k: the BMM's reduction dim 0, split dim rank 2 + 0
            assert facts.read_tile_dim(by_name(lm_head, "buf0"), "buf1", 1) == 2
        outcome = group_operations(lm_head)
        hints = {op.get_name(): op.dim_hints for op in lm_head}
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf1", "buf0"], [(10000, sympy.Integer(16), False)])]
    assert {n: s.rule for n, s in outcome.actions.items()} == {
        "buf1": "new_run", "buf0": "run_tiles_agree"}
    assert hints == {
        "buf1": [AutomaticDimHint(["_span_overflow"], 16, d("d0", integer=True, nonnegative=True),
                                  False, 10000, 0)],
        "buf0": [AutomaticDimHint(["_span_overflow"], 16, d("d1", integer=True, nonnegative=True),
                                  False, 10000, 1)]}


def test_5_granite_lm_head_plans_at_the_real_limit():
    """Granite's LM head, F.linear(x[8, 4096], W[49152, 4096]) fp16 (W: 403 MB), at
    256 MiB, lowered but never run.  The restickify reads W stick-on-k, so its own
    plan splits k too ({0: 2, 1: 2}).  The BMM reads the restickified weight's n by
    its output dim 1 and its k by its reduction symbol, so the run's split carried
    onto its dims is {1: 2, 2: 2}: n, then a reduction level on k (split dim rank 2
    + 0) -- it conforms, and both share one loop of 2 x 2, the BMM accumulating
    its k tiles."""
    from spyre_rules.hints import group_operations

    ops = capture_without_running(lambda x, w: F.linear(x, w),
                                  torch.empty(8, 4096, dtype=FP16),
                                  torch.empty(49152, 4096, dtype=FP16))
    assert [op.get_name() for op in ops] == ["buf1", "buf0"]
    assert plan_of(ops, "buf1").splits == ((0, 2), (1, 2))
    assert plan_of(ops, "buf0").splits == ((1, 2),)
    with config.patch(ignore_span_overflow_hints=False):
        outcome = group_operations(ops)
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf1", "buf0"], [(10000, sympy.Integer(2), False), (10001, sympy.Integer(2), True)])]
    assert outcome.actions["buf0"].rule == "carried_to_open_run"
    assert [(h.host_dim, h.split, h.is_reduction) for h in outcome.hints["buf0"]] == [
        (1, 2, False), (0, 2, True)]  # output dim 1 (n), reduction dim 0 (k)
    with ops.graph_context(0):
        bmm = by_name(ops, "buf0")
        weight = next(r for r in facts.input_reads(bmm) if r.buffer == "buf1")
        spans = [c.span_bytes for c in facts.read_coords(bmm, weight, {1: 2, 2: 2})
                 if not c.is_stick]
    # floor(n/64) per tile (over the full buffer's inner extent), k per tile
    assert spans == [384 * 4096 * 64 * 2, 2048 * 64 * 2]


def test_5_bmm_k_controlled_span_is_a_reduction_candidate():
    """F.linear(x[2, 8192], W[1024, 8192]) at 16 KiB: the BMM reads x as
    [floor(k/64), m, Mod(k, 64)] -- 128 * 128 * 2 = 32,768 bytes over the limit,
    driven by k, the reduction symbol.  Once skipped, it is now a candidate
    on split dim 2 (rank 2 + reduction dim 0), as is the restickified weight's k
    coordinate, and the plan tiles n by 16 and k by 64 (a reduction level)."""
    ops = capture("lm_k", lambda x, w: F.linear(x, w), torch.randn(2, 8192, dtype=FP16),
                  torch.randn(1024, 8192, dtype=FP16))
    bmm = by_name(ops, "buf0")
    with ops.graph_context(0):
        (k,) = facts.reduction_symbols(bmm)
        x_read = next(r for r in facts.input_reads(bmm) if r.buffer == "arg0_1")
        k_coord = facts.read_coords(bmm, x_read, ())[0]
    assert k_coord.symbols == {k} and k_coord.span_bytes == 32768
    d = decide(ops, "buf0", max_span_bytes=16384)
    assert [(s.rule, s.values["host_dim"], s.values["r"].buffer) for s in emitted(d)] == [
        ("input_span", 1, "buf1"), ("reduction_span", 2, "arg0_1"), ("reduction_span", 2, "buf1")]
    assert d.plan.splits == ((1, 16), (2, 64))
    assert [lv.is_reduction for lv in d.plan.levels] == [False, True]


# ------------------------------------------------------------ 6. multi-level


def test_6_multi_level_plan_is_sorted_by_host_dim(sum0):
    plan = plan_of(sum0, max_span_bytes=8192)
    assert [lv.selected_host_dim for lv in plan.levels] == [0, 1]
    assert all(lv.is_reduction is False for lv in plan.levels)


@pytest.fixture(scope="module")
def huge():
    """x + 1 on (4096, 4096, 4096, 64) fp16 (2^39 bytes): lowered, never run."""
    return capture_without_running(lambda a: a.expand(4096, 4096, 4096, 64) + 1,
                                   torch.randn(1, 1, 1, 64, dtype=FP16))


def test_6_layout_model_6_4_is_unsupported_under_single_division(huge, policy):
    """layout_model §6.4 under the reference's cap of 64.  Candidates: host 1 (2^43
    bytes, needs 2^15) and host 2 (2^31, needs 8); legal splits of both are 1..64 (exact
    and remainder counts), 16 kept per dim: 255 combinations.  The reference accepts (64, 8) only by dividing twice.  Dividing
    once, the per-tile buffer [64, 512, 1, 4096, 64] still spans 2^34 bytes on dim 0
    for (64, 8), and every combination leaves some span over 256 MiB; host dim 0 joins the
    widened search (512 more combinations), which fits none either -- so the policy
    raises Unsupported rather than emit an unsafe plan."""
    policy({"limits.rules": [("const AUTO_SPLIT_CAP = 16384;", "const AUTO_SPLIT_CAP = 64;")]})
    d = decide(huge, max_span_bytes=LIMIT, sencores=1)
    assert d.reason == (
        "Cannot auto-tile buf0 (aten ops: add.Tensor, expand.default): no combined split among "
        f"host dims [1, 2, 0] keeps every span within {LIMIT} bytes after trying 767 combinations "
        f"(the last: an output span of buf0 still exceeds {LIMIT} bytes with split {{0: 2, 1: 60, 2: 4}})")
    assert [(s.values["host_dim"], s.values["span_bytes"]) for s in emitted(d)] == [
        (1, 2**43), (2, 2**31)]


def test_6_plans_under_the_shipped_cap(huge):
    """With the shipped cap (a compact counted loop costs the same for any trip count)
    the §6.4 example plans: 4096 tiles of host 1 and 8 of host 2, the cheapest split
    whose per-tile spans and whole-buffer writes all fit 256 MiB."""
    d = decide(huge, max_span_bytes=LIMIT, sencores=1)
    assert d.plan.splits == ((1, 4096), (2, 8))
    assert_span_safe(huge[0], d.plan, LIMIT)


def test_6_full_buffer_and_per_tile_views_differ(huge):
    """For split (64, 8) the per-tile buffer spans 2^34 bytes on device dim 0; each
    tile's write into the full buffer spans 64 * 2^30 * 2 = 2^37 bytes."""
    (op,) = huge
    with huge.graph_context(0):
        per_tile = facts.output_coords(op, {1: 64, 2: 8})
        full = facts.full_output_coords(op, {1: 64, 2: 8})
    assert per_tile[0].span_bytes == 2**34
    assert full[0].span_bytes == 2**37
    assert [c.expr for c in full] == ["d1", "d2", "0", "d0", "d3"]


# --------------------------------------------------------- 7. stick alignment


#: The reference divides exactly or not at all: without the remainder counts.
NO_REMAINDER = {"planner.rules": [
    ("  splits k in [c for c in tile_counts(n) if dim < rank(op) or tile_extent(n, c) == n // c];\n",
     "  splits k in [c for c in divisors(n) if tile_extent(n, c) == n // c];\n")]}


def test_7_output_stick_alignment_rejects_every_split(policy):
    """(8192, 49159) + 1: device [769, 8192, 64]; the overflowing coordinate is the
    stick tile count of host dim 1 (the within-stick dim).  49159 = 11 * 41 * 109:
    every divisor up to 4469 leaves tiles that are not whole sticks (49159 is odd), 49159
    is over the cap (docs/layout_model.md §6.5 lists only 11, 4469, 49159: 41 and 109 are
    divisors too).  With even splits only, as the reference plans, only 1 is legal (11 and 41
    tiles are not even here: 4469 and 1199 elements would cut sticks, so they mean whole-stick
    tiles and a shorter last one, docs/layout_model.md §4.5; the edit leaves them out)."""
    policy(NO_REMAINDER)
    ops = capture("stick", lambda a: a + 1, torch.empty(8192, 49159, dtype=FP16))
    d = decide(ops)
    legal = next(s for s in d.trace if s.section == "legality")
    assert legal.values["legal"] == [1]
    assert legal.values["rejected"] == [
        "109: output_sticks_whole", "451: output_sticks_whole", "1199: output_sticks_whole",
        "4469: output_sticks_whole", "49159: auto_split_cap"]
    # the refusal names the op's aten ops, the access and each failing requirement
    # with the split counts it refused
    assert d.reason == (
        "Cannot auto-tile buf0 (aten ops: add.Tensor): no legal split of host dims [1] brings its "
        "access under the limit of 268435456 bytes (output span overflow: device dim 0 "
        "(floor(d1/64)) spans 806354944 bytes); host dim 1: splits 109, 451, 1199, 4469 fail "
        "output_sticks_whole (splitting host dim 1 of buf0 109 ways would cut its sticks); split "
        "49159 fails auto_split_cap (automatic split counts are capped at 16384)")


def test_7_remainder_tiles_keep_whole_sticks():
    """The same op with the shipped policy: no exact split is legal, the remainder counts
    are (docs/layout_model.md §4.5): 4 tiles of 12416 elements (97 x 128,
    whole sticks), the last 11911, bring the stick coordinate to 194 sticks
    (203,423,744 bytes), the fewest tiles that fit; 2 tiles of 24704 do not."""
    ops = capture("stick", lambda a: a + 1, torch.empty(8192, 49159, dtype=FP16))
    d = decide(ops)
    assert d.plan.splits == ((1, 4),)
    legal = next(s for s in d.trace if s.section == "legality")
    assert "fallback" not in legal.values and legal.values["legal"][:4] == [1, 2, 3, 4]
    assert_span_safe(ops[0], d.plan, LIMIT)


def test_7_input_stick_alignment():
    """x.t() + y: the backend restickifies x (buf1); splitting its host dim 1 (256)
    keeps its own sticks whole but 3 or 8 and more tiles would cut the sticks of the input
    it reads (the transposed x, 192 rows... 256 / 8 = 32 elements per tile)."""
    ops = capture("transposed", lambda x, y: x.t() + y, torch.randn(192, 256, dtype=FP16),
                  torch.randn(256, 192, dtype=FP16))
    d = decide(ops, "buf1", max_span_bytes=8192)
    legality = {s.values["dim"]: s.values for s in d.trace if s.section == "legality"}
    assert legality[1]["legal"] == [1, 2, 4]
    # the remainder counts are tried with the exact ones: 3 tiles of 86 cut them too
    assert legality[1]["rejected"][:5] == [
        "3: input_sticks_whole", "5: input_sticks_whole", "6: input_sticks_whole",
        "7: input_sticks_whole", "8: input_sticks_whole"]
    # 192 = 3 sticks of its own output: 3 tiles of one, or 2 of 128 and 64 (96 would cut one)
    assert legality[0]["legal"] == [1, 2, 3]


# ---------------------------------------------------- 8. reduction-controlled


def test_8_reduction_controlled_span_plans_a_reduction_level():
    """x.sum(dim=-1), x (64, 8192), 64 KiB: x's coordinate floor(r/64) spans
    128 * 64 * 64 * 2 = 1 MiB, driven only by the reduction symbol r.  Output-range tiling
    left it alone (it needs reduction-range tiling); it is now a candidate on split
    dim 1 (rank 1 + reduction dim 0) and the plan tiles r by 16: each tile reads
    8 stick columns, 8 * 64 * 64 * 2 = 64 KiB."""
    ops = capture("sum_last", lambda x: x.sum(dim=-1), torch.randn(64, 8192, dtype=FP16))
    (op,) = ops
    with ops.graph_context(0):
        (r,) = facts.reduction_symbols(op)
        (read,) = facts.input_reads(op)
        coords = facts.read_coords(op, read, ())
    over = [c for c in coords if not c.is_stick and c.span_bytes > 65536]
    assert [(c.expr, c.span_bytes) for c in over] == [(f"floor({r}/64)", 1 * MiB)]
    d = decide(ops, max_span_bytes=65536)
    assert (d.decision, d.reason) == ("plan", "reduction-controlled input span for arg0_1")
    assert [(s.rule, s.values["host_dim"]) for s in emitted(d)] == [("reduction_span", 1)]
    assert [(lv.selected_host_dim, lv.split_count, lv.is_reduction) for lv in d.plan.levels] == [
        (1, 16, True)]


# ------------------------------------------------------- 9. joint coordinate


def test_9_coordinate_jointly_controlled_by_two_output_symbols():
    """x.view(2, 16, 128).sum(0), x (2, 2048): the read of x has the device
    coordinate 2*d0 + floor(d1/64) (output dims 0 and 1 interleaved on one stride):
    one candidate per contributing dim, both with the coordinate's joint span."""
    ops = capture("joint", lambda x: x.view(2, 16, 128).sum(0), torch.randn(2, 2048, dtype=FP16))
    d = decide(ops, max_span_bytes=4096)
    cands = emitted(d)
    assert [(s.values["host_dim"], s.values["span_bytes"], s.values["c"].expr) for s in cands] == [
        (0, 8192, "2*d0 + floor(d1/64)"), (1, 8192, "2*d0 + floor(d1/64)")]
    assert plan_of(ops, max_span_bytes=4096).splits == ((0, 2),)


# -------------------------------------------------------- the support matrix


def test_scalar_reduction_takes_a_reduction_level():
    """x.sum() (rank 0): split dim 0 is reduction dim 0; 4 tiles of 2 rows fit 256 bytes."""
    ops = capture("scalar", lambda x: x.sum(), torch.randn(8, 64, dtype=FP16))
    plan = plan_of(ops, max_span_bytes=256)
    assert plan.splits == ((0, 4),)
    assert [lv.is_reduction for lv in plan.levels] == [True]


def test_more_than_four_overflowing_host_dims_is_unsupported():
    ops = capture("rank6", lambda a: a + 1, torch.randn(2, 2, 2, 2, 2, 64, dtype=FP16))
    assert unsupported(ops, max_span_bytes=128) == (
        "Cannot auto-tile buf0: host dims [1, 2, 3, 4, 0] overflow, more than the bounded "
        "search limit of 4")


def test_no_legal_divisor_17():
    """(1, 17, 16, 64) at 32 KiB (docs/layout_model.md §6.5): span 17 * 1024 * 2 = 34,816.
    17 is prime: its only exact split is 17 ways, and the remainder count 2 (tiles of 9, the
    last 8) fits with fewer loop trips, for Pointwise and Reduction alike.  At 4 KiB a tile
    holds one row: 17 tiles of extent 1 (fine for both: codegen keeps a tiled unit dim's
    loop symbol)."""
    pw = capture("pw17", lambda a: a + 1, torch.randn(1, 17, 16, 64, dtype=FP16))
    assert plan_of(pw, max_span_bytes=32768).splits == ((1, 2),)
    assert plan_of(pw, max_span_bytes=2048).splits == ((1, 17),)
    red = capture("red17", lambda x: x.sum(dim=0), torch.randn(2, 1, 17, 16, 64, dtype=FP16))
    assert plan_of(red, max_span_bytes=32768).splits == ((1, 3),)
    assert plan_of(red, max_span_bytes=4096).splits == ((1, 17),)


def test_user_hinted_op_is_skipped(add_8195):
    (op,) = add_8195
    op.dim_hints = [DimHint(["H"], 5, sympy.Symbol("d0"), False, 0, 1)]
    try:
        d = decide(add_8195)
    finally:
        op.dim_hints = None
    assert (d.decision, d.reason) == ("no plan", "buf0 carries user spyre_hint dims; manual hints win")


def test_symbolic_layout_returns_none():
    """Dynamic shapes never reach the planner through this backend, so the layout is
    made symbolic by hand: a size that is a symbol, not an integer."""
    ops = spyre_rules.capture_operations(lambda a: a + 1, torch.randn(8, 64, dtype=FP16))
    (op,) = ops
    lay = op.layout
    op.layout = FixedTiledLayout(lay.device, lay.dtype, [sympy.Symbol("s0"), 64], [64, 1],
                                 device_layout=lay.device_layout)
    d = decide(ops, max_span_bytes=64)
    assert (d.decision, d.reason) == (
        "no plan", "buf0 has symbolic layout metadata; exact divisors and post-tile layouts need "
        "concrete sizes")


def test_non_fixed_tiled_layout_returns_none():
    """A mutation/copy-back layout (the backend refuses in-place programs, so the
    layout is swapped by hand): not a FixedTiledLayout -> no plan."""
    from torch._inductor import ir

    ops = spyre_rules.capture_operations(lambda a: a + 1, torch.randn(8, 64, dtype=FP16))
    (op,) = ops
    lay = op.layout
    op.layout = ir.FixedLayout(lay.device, lay.dtype, lay.size, lay.stride)
    d = decide(ops, max_span_bytes=64)
    assert (d.decision, d.reason) == (
        "no plan", "buf0 has no FixedTiledLayout (for example a mutation/copy-back layout)")


def test_non_computed_buffer_returns_none(add_8195):
    graph = add_8195.graphs[0]
    with add_8195.graph_context(0):
        assert spyre_rules.plan_span_overflow_tile(graph.graph_inputs["arg0_1"]) is None


def test_planning_needs_the_graph(add_8195, monkeypatch):
    # a captured op carries its graph (issue 9: no graph_context needed) ...
    assert spyre_rules.plan_span_overflow_tile(add_8195[0]) is not None
    # ... an op that carries none, outside any graph, is refused by name
    from spyre_rules.engine.api import OWNER_GRAPH_ATTR

    monkeypatch.delattr(add_8195[0], OWNER_GRAPH_ATTR)
    with pytest.raises(RuntimeError, match="planning buf0 needs its Inductor graph"):
        spyre_rules.plan_span_overflow_tile(add_8195[0])
