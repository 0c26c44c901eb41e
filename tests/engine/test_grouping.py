"""span_overflow_groups: runs, conformance, conflicts, hints, config gating (rules/grouping.rules)."""

from __future__ import annotations

import pytest
import sympy
import torch

import spyre_rules
from spyre_rules import Unsupported, config
from spyre_rules.hints import group_operations
from spyre_rules.hints import DimHint
from spyre_rules.ir.dim_hint import AutomaticDimHint
from spyre_rules.ir.loop_stamp import loop_count, loop_tiled_dims

from helpers import FP16, assert_span_safe, by_name, capture, without_hints

ON = dict(max_span_bytes=8192, ignore_span_overflow_hints=False)


def _chain(a):
    b = a + 1
    c = b * 2
    return c, b


def _conform(a):
    # a is fp32: the cast reads 4-byte elements and needs {1: 10}; d's own plan is
    # {1: 5} and the run's {1: 10} also fits it.  (This used to read c[:, :, :8, :]
    # with an own plan of {1: 4}, which left the read of c spanning 10,240 bytes.)
    c = a.half()
    d = c * 2
    return c, d


def _reduction_reads_run(a):
    c = a + 1
    return c.sum(dim=-1), c


def _pointwise_reads_reduction(a):
    s = a.sum(dim=0)
    return s + 1, s


@pytest.fixture(scope="module")
def x():
    return torch.randn(1, 20, 16, 64, dtype=FP16)


@pytest.fixture(scope="module")
def chain(x):
    return capture("chain", _chain, x)


def groups_of(ops, **cfg):
    with without_hints(ops), config.patch(**{**ON, **cfg}):
        return [([op.get_name() for op in g], levels)
                for g, levels in spyre_rules.span_overflow_groups(ops)]


def test_off_by_default_and_under_ignore_wsr_hints(chain):
    with config.patch(max_span_bytes=8192):
        assert config.ignore_span_overflow_hints is True
        assert spyre_rules.span_overflow_groups(chain) == []
    assert groups_of(chain, ignore_wsr_hints=True) == []
    assert all(getattr(op, "dim_hints", None) is None for op in chain)
    with config.patch(max_span_bytes=8192):
        outcome = group_operations(chain)
    assert {s.rule for s in outcome.actions.values()} == {"disabled"}
    assert outcome.decisions == {}  # the planner never ran


def test_equal_signatures_share_one_group(chain):
    groups = groups_of(chain)
    assert groups == [(["buf0", "buf1"], [(10000, sympy.Integer(5), False)])]
    assert isinstance(groups[0][1][0][1], sympy.Integer)


def test_synthetic_hints_are_stamped_like_user_hints(chain):
    with without_hints(chain), config.patch(**ON):
        spyre_rules.span_overflow_groups(chain)
        hints = [op.dim_hints for op in chain]
    (h0,), (h1,) = hints
    d0 = sympy.Symbol("d0", integer=True, nonnegative=True)
    assert h0 == AutomaticDimHint(["_span_overflow"], 5, d0, False, 10000, 1)
    assert h1.hint_id == 10000 and h1.host_dim == 1 and h1.split_count == 5


def test_conforming_consumer_adopts_the_run_split(x):
    ops = capture("conform32", _conform, x.float())
    with config.patch(max_span_bytes=8192):
        own = {d.op: d.plan.splits for d in spyre_rules.engine.plan_graph(ops)}
    assert own == {"buf0": ((1, 10),), "buf1": ((1, 5),)}
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
        groups = outcome.groups
        assert [h.split_count for h in by_name(ops, "buf1").dim_hints] == [10]
    assert [([o.get_name() for o in g], lv) for g, lv in groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(10), False)])]
    assert outcome.actions["buf1"].rule == "to_open_run"
    assert_span_safe(by_name(ops, "buf1"), ((1, 10),), 8192)


def test_reduction_reading_the_open_run_joins_it(x):
    """c.sum(-1) reads c's tile t in iteration t: its own split {1: 5} is the run's."""
    ops = capture("red_reads_run", _reduction_reads_run, x)
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
        hints = {op.get_name(): [(h.host_dim, int(h.split_count), h.hint_id) for h in op.dim_hints]
                 for op in ops}
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(5), False)])]
    assert {n: s.rule for n, s in outcome.actions.items()} == {
        "buf0": "new_run", "buf1": "run_tiles_agree"}
    assert hints == {"buf0": [(1, 5, 10000)], "buf1": [(1, 5, 10000)]}


def _sum_over_the_run_dim(a):
    c = a + 1
    return c, c.sum(dim=1)


def test_reduction_over_a_dim_the_run_splits_runs_after_the_loop():
    """The run splits host dim 1 of c (19 tiles), which c.sum(dim=1) reduces: no split of
    its own dims reads c tile by tile, so it runs after the run's loop over c's full buffer,
    with a reduction level of one row per tile (19) inside 4 tiles of its output dim 1: with
    2 its fp32 accumulator of one output tile would span 16 KiB (validation accumulator_fits;
    executed in tests/tiling/test_accumulator_fits.py)."""
    ops = capture("sum_over_run_dim", _sum_over_the_run_dim,
                  torch.randn(1, 19, 128, 64, dtype=FP16))
    groups = groups_of(ops, max_span_bytes=8192)
    assert [(names, [(lv.split, lv.is_reduction) for lv in levels]) for names, levels in groups] == [
        (["buf0"], [(19, False), (2, False)]), (["buf1"], [(4, False), (19, True)])]
    assert all(getattr(op, "dim_hints", None) is None for op in ops)


def _sum_of_cast(a):
    c = a.half()
    return c, c.sum(dim=-1)


def test_reduction_conforms_to_a_finer_run_split(x):
    """The fp32 -> fp16 cast needs 10 tiles; the sum alone needs 5 and takes the run's 10."""
    ops = capture("sum_of_cast", _sum_of_cast, x.float())
    with config.patch(max_span_bytes=8192):
        own = {d.op: d.plan.splits for d in spyre_rules.engine.plan_graph(ops)}
    assert own == {"buf0": ((1, 10),), "buf1": ((1, 5),)}
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
        assert [h.split_count for h in by_name(ops, "buf1").dim_hints] == [10]
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(10), False)])]
    assert outcome.actions["buf1"].rule == "carried_to_open_run"
    assert outcome.actions["buf1"].message == (
        "buf1 reads {'buf0'} of the open run tile by tile and the run's split on its dims "
        "{1: 10} is legal and sufficient for buf1")
    assert_span_safe(by_name(ops, "buf1"), ((1, 10),), 8192)


def _layer_norm(a, r, w, b):
    y = a + r
    return torch.nn.functional.layer_norm(y, (32,), w, b), y


def test_layer_norm_reading_an_auto_tiled_residual_add_shares_its_loop():
    """Every op of the LayerNorm joins the residual add's {0: 4} loop: its reductions and
    their (untiled-sized) row statistics read the run tile by tile.  The weight and bias
    casts read nothing computed since the run began: they are hoisted to run once,
    untiled, before the loop (rule `independent_of_open_run`)."""
    a = torch.randn(128, 32, dtype=FP16)
    ops = capture("layer_norm", _layer_norm, a, a, torch.randn(32, dtype=FP16),
                  torch.randn(32, dtype=FP16))
    with without_hints(ops), config.patch(**{**ON, "max_span_bytes": 4096}):
        outcome = group_operations(ops)
        untiled = sorted(op.get_name() for op in ops if not getattr(op, "dim_hints", None))
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        ([f"buf{i}" for i in range(15) if i not in (10, 12)], [(10000, sympy.Integer(4), False)])]
    assert {n: s.rule for n, s in outcome.actions.items()} == {
        "buf0": "new_run", "buf1": "same_split", "buf2": "run_tiles_agree",
        "buf3": "untiled_reader_to_open_run", "buf4": "run_tiles_agree",
        "buf5": "untiled_reader_to_open_run", "buf6": "same_split",
        "buf7": "untiled_reader_to_open_run", "buf8": "untiled_reader_to_open_run",
        "buf9": "same_split", "buf10": "no_plan", "buf11": "same_split",
        "buf12": "no_plan", "buf13": "same_split", "buf14": "same_split"}
    assert outcome.hoisted == {"buf10": "buf0", "buf12": "buf0"}
    assert untiled == ["buf10", "buf12"]


def test_independent_ops_are_hoisted_before_the_loop(x):
    """c + 1 opens the run; w * 2 reads nothing computed since: it runs once, untiled,
    before the loop (hoisted), and the run stays open."""
    ops = capture("untiled_tail", lambda a, w: (a + 1, w * 2), x, torch.randn(64, dtype=FP16))
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
        assert getattr(by_name(ops, "buf1"), "dim_hints", None) is None
    assert outcome.actions["buf1"].rule == "no_plan"
    assert outcome.hoisted == {"buf1": "buf0"}
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0"], [(10000, sympy.Integer(5), False)])]


def test_independent_ops_with_the_run_split_share_its_loop():
    """The reference's case (issue 40): two independent x + y on (1, 8195, 256, 64) fp16 at
    256 MiB plan (1, 2) each; nothing orders them apart, so the second joins the first's
    loop (rule independent_same_split): one group, one hint id, nothing hoisted (before:
    two loops, hint ids 10000 and 10001)."""
    shape = (1, 8195, 256, 64)
    ops = capture("two_adds_8195", lambda a, b, c, d: (a + b, c + d),
                  *(torch.empty(shape, dtype=FP16) for _ in range(4)))
    with without_hints(ops), config.patch(max_span_bytes=256 * 1024 * 1024,
                                          ignore_span_overflow_hints=False):
        outcome = group_operations(ops)
    assert outcome.actions["buf1"].rule == "independent_same_split"
    assert outcome.hoisted == {}
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(2), False)])]


def test_pointwise_reading_a_reduction_joins_the_run_it_opened():
    ops = capture("pw_reads_red", _pointwise_reads_reduction, torch.randn(2, 20, 16, 64, dtype=FP16))
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
    assert outcome.actions["buf0"].rule == "reduction_opens_run"
    assert outcome.actions["buf1"].rule == "to_open_run"
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(10), False), (10001, sympy.Integer(6), False)])]


def _reads_closed_group(a):
    c = a + 1
    d = c[:, :1] * 2  # no plan: the run closes
    return d, c * 3


def test_reading_a_closed_auto_tiled_group_reads_its_full_buffer(x):
    ops = capture("reads_closed", _reads_closed_group, x)
    with without_hints(ops), config.patch(**ON):
        outcome = group_operations(ops)
    assert outcome.actions["buf2"].rule == "new_run"
    assert [[o.get_name() for o in g] for g, _ in outcome.groups] == [["buf0"], ["buf2"]]


def test_reading_a_user_hinted_producer_is_rejected(chain):
    producer = by_name(chain, "buf0")
    user = DimHint(["H"], 5, sympy.Symbol("d0"), False, 0, 1)
    with without_hints(chain), config.patch(**ON):
        producer.dim_hints = [user]
        with pytest.raises(Unsupported) as info:
            spyre_rules.span_overflow_groups(chain)
        assert producer.dim_hints == [user]  # manual hints are left alone
    assert str(info.value) == ("Cannot auto-tile buf1 (aten ops: mul.Tensor): it reads already "
                               "auto-tiled producer(s) ['buf0']; their tile loops cannot be fused "
                               "with this op")


def test_user_hinted_op_itself_is_passed(chain):
    consumer = by_name(chain, "buf1")
    with without_hints(chain), config.patch(**ON):
        consumer.dim_hints = [DimHint(["H"], 2, sympy.Symbol("d0"), False, 0, 1)]
        outcome = group_operations(chain)
    assert outcome.actions["buf1"].rule == "user_hinted"
    assert [([o.get_name() for o in g], lv) for g, lv in outcome.groups] == [
        (["buf0"], [(10000, sympy.Integer(5), False)])]


def test_reduction_gets_a_singleton_group():
    ops = capture("sum0", lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))
    assert groups_of(ops) == [(["buf0"], [(10000, sympy.Integer(10), False),
                                          (10001, sympy.Integer(6), False)])]


def test_regrouping_is_idempotent(chain):
    """Synthetic hints are not user hints: grouping the same ops again gives the same groups."""
    with without_hints(chain), config.patch(**ON):
        first = spyre_rules.span_overflow_groups(chain)
        second = spyre_rules.span_overflow_groups(chain)
    assert [lv for _, lv in first] == [lv for _, lv in second]


def test_coarse_tile_consumes_the_groups(x):
    """The groups are in user-hint format: coarse_tile divides the ranges by the hints."""
    ops = spyre_rules.capture_operations(lambda a, b: a + b, x, x)  # own copy: it is mutated
    with config.patch(**ON):
        groups = spyre_rules.span_overflow_groups(ops)
        with ops.graph_context(0):
            spyre_rules.coarse_tile(ops, groups)
    (op,) = ops
    assert list(op.data.ranges) == [1, 4, 16, 64]
    assert [int(c) for c in loop_count(op)] == [5]
    assert loop_tiled_dims(op) == [[1]]
