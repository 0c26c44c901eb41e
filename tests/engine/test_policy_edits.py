"""Changing policy needs no Python: edit a copy of rules/ and point SPYRE_RULES_PATH at it."""

from __future__ import annotations

import pytest
import sympy
import torch

import spyre_rules
from spyre_rules import config
from spyre_rules.engine import plan_graph

from helpers import FP16, assert_span_safe, by_name, capture, span_problems, without_hints
from test_policy_loading import rules_copy


FULL_BUFFER_REQUIREMENT = """\
  require full_buffer_write_fits:
    loop_local_output(op)
    or len(full_output_coords(op, tile)) > 0
       and all(c.span_bytes is known and c.span_bytes <= config.max_span_bytes
               for c in full_output_coords(op, tile)
               if not c.is_stick and c.symbols != {}
               if c.span_elems is unknown or c.span_elems > 1)
    because "writing tile {tile} of {op} into its full output buffer spans more than {config.max_span_bytes} bytes";
"""


def decisions(ops, **cfg):
    with config.patch(**cfg):
        return {d.op: d for d in plan_graph(ops)}


@pytest.fixture
def policy(tmp_path, monkeypatch):
    """``policy({file: [(old, new)]})`` makes the edited copy the active policy."""
    def use(edits):
        target = rules_copy(tmp_path, edits)
        monkeypatch.setenv("SPYRE_RULES_PATH", str(target))
        return target
    return use


def test_lower_the_auto_split_cap(policy):
    """(8192, 64) + 1 at 8 KiB needs 128 tiles of host dim 0: within the shipped cap,
    over a cap of 64 (the reference's, which unrolled its automatic loops): the counts up to
    64, exact and remainder, 15 of them kept, all overflow."""
    ops = capture("rows8192", lambda a: a + 1, torch.randn(8192, 64, dtype=FP16))
    before = decisions(ops, max_span_bytes=8192)["buf0"]
    assert before.plan.splits == ((0, 128),)
    assert_span_safe(ops[0], before.plan, 8192)
    policy({"limits.rules": [("const AUTO_SPLIT_CAP = 16384;", "const AUTO_SPLIT_CAP = 64;")]})
    after = decisions(ops, max_span_bytes=8192)["buf0"]
    assert after.reason == (
        "Cannot auto-tile buf0 (aten ops: add.Tensor): no combined split among host dims [0] "
        "keeps every span within 8192 bytes after trying 15 combinations (the last: an output "
        "span of buf0 still exceeds 8192 bytes with split {0: 64})")


def test_change_the_cost_order(policy):
    """Most tiles first instead of fewest: x + y on (1, 20, 16, 64) at 8 KiB."""
    ops = capture("add_small", lambda a, b: a + b, torch.randn(1, 20, 16, 64, dtype=FP16),
                  torch.randn(1, 20, 16, 64, dtype=FP16))
    assert decisions(ops, max_span_bytes=8192)["buf0"].plan.splits == ((1, 5),)
    policy({"planner.rules": [
        ("cost c: (product(c.counts), count(k > 1 for k in c.counts), max(c.counts), c.counts);",
         "cost c: (-product(c.counts), c.counts);")]})
    assert decisions(ops, max_span_bytes=8192)["buf0"].plan.splits == ((1, 20),)


def test_drop_the_gathered_read_validation(policy):
    """x[i] on a (4000, 128) fp16 table at 128 KiB: its rows alone span 512000 bytes in
    every tile, so the search refuses it (the gathered_rows candidates,
    unshrinkable_gathered_read) and gathered_reads_fit would refuse every split;
    without them the planner would accept a split that leaves the gathered read over
    the limit."""
    ops = capture("gather_rows", lambda x, i: x[i], torch.randn(4000, 128, dtype=FP16),
                  torch.tensor([1, 3, 5, 0]))
    before = decisions(ops, max_span_bytes=131072)["buf0"]
    assert before.decision == "unsupported"
    policy({"planner.rules": [(
        '''  require gathered_reads_fit:
    all(c.span_bytes is known and c.span_bytes <= config.max_span_bytes
        for r in indirect_reads(op)
        for c in read_coords(op, r, tile)
        if not c.is_stick and c.symbols != {}
        if c.span_elems is unknown or c.span_elems > 1)
    because "a gathered read of {op} still exceeds {config.max_span_bytes} bytes with split {tile}";
''', ""), (
        '''  gathered_rows:
    for r in indirect_reads(op)
    for c in read_coords(op, r, tile)
    if not c.is_stick
    if not (c.symbols subset (output_symbols(op) | reduction_symbols(op)))
    if c.span_bytes is known
    if c.span_elems is known and c.span_elems > 1  # one value only picks a base address
    if c.span_bytes > config.max_span_bytes
    for s in output_symbols(op)
    let d = output_dim(op, s)
    if d is known
    emit Candidate {
      host_dim: d, span_bytes: c.span_bytes, coord: c,
      reason: "gathered rows of {r.buffer} (any index may pick any row)", source: "gathered:{r.buffer}",
    };
''', ""), (
        '''  reject unshrinkable_gathered_read
    when any(not (c.coord.symbols subset (output_symbols(op) | reduction_symbols(op)))
             for g in groups for c in g.spans)
    because "Cannot auto-tile {what}: no split brings its gathered read under the limit of {config.max_span_bytes} bytes ({gathered})";
''', "")]})
    after = decisions(ops, max_span_bytes=131072)["buf0"]
    assert after.decision == "plan" and after.plan.splits == ((1, 2),)


def test_keep_reductions_out_of_pointwise_runs(policy):
    """The bundled policy lets c.sum(-1) join c's run; a grouping-only edit (sharing
    loops for Pointwise ops only, as the original design) puts the sum after the loop in a
    group of its own."""
    def reduction_reads_run(a):
        c = a + 1
        return c.sum(dim=-1), c

    ops = capture("red_reads_run", reduction_reads_run, torch.randn(1, 20, 16, 64, dtype=FP16))
    on = dict(max_span_bytes=8192, ignore_span_overflow_hints=False)
    with without_hints(ops), config.patch(**on):
        groups = spyre_rules.span_overflow_groups(ops)
    assert [([o.get_name() for o in g], lv) for g, lv in groups] == [
        (["buf0", "buf1"], [(10000, sympy.Integer(5), False)])]
    policy({"grouping.rules": [
        ("join run_tiles_agree\n    when carried is known",
         "join run_tiles_agree\n    when is_pointwise(op) and carried is known"),
        ("conform carried_to_open_run\n    when carried is known",
         "conform carried_to_open_run\n    when is_pointwise(op) and carried is known"),
        ("single after_open_run_loop\n    when is_reduction(op) and run_producers != []",
         "single after_open_run_loop\n    when is_pointwise(op) and run_producers != []")]})
    with without_hints(ops), config.patch(**on):
        groups = spyre_rules.span_overflow_groups(ops)
    # the sum no longer shares the loop: it runs after it in its own group, reading
    # buf0's full buffer (its plan was accepted only if that read fits)
    assert [([o.get_name() for o in g], lv) for g, lv in groups] == [
        (["buf0"], [(10000, sympy.Integer(5), False)]), (["buf1"], [(10001, sympy.Integer(5), False)])]


@pytest.mark.unsafe_plans
def test_per_tile_only_validation_gives_the_seed_number(policy):
    """Without the full-buffer requirement the policy is the reference's: x.sum(dim=0) on
    (2, 20, 16, 64) at 8 KiB splits ((0, 10)) -- and the verifier shows why the
    bundled policy does not: every tile's full-buffer write spans 40,960 bytes."""
    ops = capture("sum0", lambda x: x.sum(dim=0), torch.randn(2, 20, 16, 64, dtype=FP16))
    policy({"planner.rules": [(FULL_BUFFER_REQUIREMENT, "")]})
    decision = decisions(ops, max_span_bytes=8192)["buf0"]
    # The policy accepts ((0, 10)); the engine's span-verifier veto refuses to apply it.
    assert decision.plan is None and decision.decision == "unsupported"
    assert "the span verifier refuses split {0: 10}" in decision.reason
    assert [s.levels for s in decision.trace if s.section == "search" and s.rule == "plan"] == []
    problems = span_problems(by_name(ops, "buf0"), ((0, 10),), 8192)
    assert problems == ["full-buffer write: device dim 0 (d1) tile () spans 40960 > 8192"]
