"""Evaluation semantics the engine fixes once (docs/rules_language.md §4-§7)."""

from __future__ import annotations

import pytest
import sympy
import torch

from spyre_rules import config
from spyre_rules.engine import plan_graph
from spyre_rules.engine.planner import cap_splits
from spyre_rules.engine.values import (
    Combo, Level, PlanRecord, Tiling, iteration_order, render, sort_key,
)

from helpers import FP16, capture
from test_policy_loading import rules_copy


@pytest.fixture(scope="module")
def add_small():
    return capture("add_small", lambda a, b: a + b, torch.randn(1, 20, 16, 64, dtype=FP16),
                   torch.randn(1, 20, 16, 64, dtype=FP16))


def with_eligibility(tmp_path, monkeypatch, rule: str) -> None:
    """Put ``rule`` first in the eligibility section of a copy of the rules."""
    target = rules_copy(tmp_path, {"planner.rules": [("eligibility {\n", "eligibility {\n" + rule)]})
    monkeypatch.setenv("SPYRE_RULES_PATH", str(target))


def decide(ops, **cfg):
    with config.patch(**cfg):
        return plan_graph(ops)[0]


def test_evaluation_error_is_unsupported_naming_op_section_rule(tmp_path, monkeypatch, add_small):
    with_eligibility(tmp_path, monkeypatch,
                     '  skip boom when rank(op) // (rank(op) - 4) == 1 because "never";\n')
    d = decide(add_small)
    assert d.decision == "unsupported"
    assert d.reason.startswith("Cannot plan buf0: rule eligibility.boom failed: `//` by zero (4 // 0) at ")
    assert "planner.rules:" in d.reason


def test_unknown_is_unequal_to_everything(tmp_path, monkeypatch, add_small):
    with_eligibility(tmp_path, monkeypatch,
                     '  skip same when extent(op, 99) == extent(op, 99) because "unknown == unknown";\n'
                     '  skip differ when extent(op, 99) != extent(op, 99) '
                     'because "{op}: unknown != unknown";\n')
    d = decide(add_small, max_span_bytes=8192)
    assert (d.decision, d.reason) == ("no plan", "buf0: unknown != unknown")


def test_message_rendering_and_traced_values(tmp_path, monkeypatch, add_small):
    with_eligibility(tmp_path, monkeypatch,
                     '  let syms = output_symbols(op);\n'
                     '  skip show when len(syms) == 3 because '
                     '"{op} {syms} {config.max_span_bytes} {MAX_TILE_DIMS}";\n')
    d = decide(add_small, max_span_bytes=8192)
    assert d.reason == "buf0 {d0, d1, d2} 8192 4"
    (step,) = d.trace
    assert (step.section, step.rule, step.outcome) == ("eligibility", "show", "skip")
    assert step.rendered_values() == {"syms": "{d0, d1, d2}", "op": "buf0",
                                      "config.max_span_bytes": "8192", "MAX_TILE_DIMS": "4"}


def test_rendering():
    assert render(Tiling.of([(2, 8), (1, 5), (0, 1)])) == "{1: 5, 2: 8}"
    assert render(["buf1", "buf2"]) == "['buf1', 'buf2']"
    assert render(frozenset({"b", "a"})) == "{'a', 'b'}"
    assert render((1, [2, 3])) == "(1, [2, 3])"
    assert render(None) == "unknown" and render(True) == "true"
    assert render(Level(1, 5, False)) == "Level(host_dim=1, split=5, is_reduction=false)"
    assert render(PlanRecord([], Tiling(()), "r")) == "Plan(levels=[], tiling={}, reason='r')"
    assert render(Combo([1], [5])) == "Combo(dims=[1], counts=[5])"


def test_set_iteration_order_is_natural():
    c = [sympy.Symbol(f"c{i}") for i in (10, 2, 1)]
    assert [s.name for s in iteration_order(frozenset(c))] == ["c1", "c2", "c10"]
    assert iteration_order(frozenset({10, 9, 100})) == [9, 10, 100]
    assert sorted([(2, [c[0]]), (2, [c[1]])], key=sort_key) == [(2, [c[1]]), (2, [c[0]])]


def test_cap_splits_keeps_small_window_and_large():
    """docs/layout_model.md §4.4: 1 and the smallest (5 in all), a window of +-2 around the
    first count >= required, then the largest down to 16."""
    legal = list(range(1, 41))  # 40 legal counts
    kept = cap_splits(legal, required=20, max_splits=16, keep_smallest=5, radius=2)
    assert kept == [1, 2, 3, 4, 5, 18, 19, 20, 21, 22, 35, 36, 37, 38, 39, 40]
    assert cap_splits([1, 2, 4], 99, 16, 5, 2) == [1, 2, 4]
    # no count reaches `required`: the window sits on the last one
    assert cap_splits(legal, 999, 16, 5, 2)[-3:] == [38, 39, 40]
