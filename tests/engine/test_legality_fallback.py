"""Legality's `otherwise splits` (docs/rules_language.md §6.3): exact split counts first;
the fallback counts only where no exact count above 1 is legal, tested by the same
requirements.  A policy edit adds remainder tiles (`tile_counts`) and states the stick
requirements with `ceil_div` (a remainder tiling's tiles hold ceil(n / k) elements)."""

from __future__ import annotations

import pytest
import torch

from spyre_rules.commands.policy_coverage import exercised
from spyre_rules.engine.api import evaluator

from helpers import FP16, capture
from test_policy_loading import rules_copy

FALLBACK = [
    ("  splits k in divisors(n);\n",
     "  splits k in divisors(n);\n  otherwise splits k in tile_counts(n);\n"),
    ("host_size(out, dim) // k % stick_elems(out) == 0",
     "ceil_div(host_size(out, dim), k) % stick_elems(out) == 0"),
    ("host_size(r.layout, h.dim) // k % stick_elems(r.layout) == 0",
     "ceil_div(host_size(r.layout, h.dim), k) % stick_elems(r.layout) == 0"),
]


@pytest.fixture
def remainder_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_PATH", str(rules_copy(tmp_path, {"planner.rules": FALLBACK})))


def plus_one(cols: int):
    """x + 1 on (2, cols) fp16: host dim 1 is within the stick (64 elements)."""
    return capture(f"plus_one_{cols}", lambda a: a + 1, torch.randn(2, cols, dtype=FP16))[0]


def legality_steps(ev, dim):
    return [s for s in ev.trace if s.section == "legality" and s.rule == "splits" and s.values["dim"] == dim]


def test_without_a_fallback_190_columns_do_not_split():
    """190 = 2 * 5 * 19: no divisor leaves whole sticks."""
    ev = evaluator()
    assert ev.legal_splits(plus_one(190), 1) == [1]


def test_no_legal_exact_count_gets_the_fallback_counts(remainder_policy):
    """3 tiles of ceil(190 / 3) = 64 columns (the last one 62): whole sticks."""
    ev = evaluator()
    op = plus_one(190)
    assert ev.legal_splits(op, 1) == [1, 3]
    (step,) = legality_steps(ev, 1)
    assert step.values["fallback"] is True
    assert ("legality", "otherwise splits", "otherwise splits") in exercised(ev.trace)  # --coverage
    # every count tried, exact and fallback, is kept with the requirement that refused it
    assert sorted(int(r.split(":")[0]) for r in step.values["rejected"]) == [
        2, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 22, 24, 28, 32, 38, 48, 64, 95, 190]


def test_a_legal_exact_count_never_sees_a_fallback_count(remainder_policy):
    """256 columns: 2 and 4 split exactly into whole sticks; 3 (tiles of 86) is never tried."""
    ev = evaluator()
    op = plus_one(256)
    assert ev.legal_splits(op, 1) == [1, 2, 4]
    (step,) = legality_steps(ev, 1)
    assert "fallback" not in step.values
    assert ("legality", "otherwise splits", "otherwise splits") not in exercised(ev.trace)
    assert [r.split(":")[0] for r in step.values["rejected"]] == ["8", "16", "32", "64", "128", "256"]


def test_refusal_names_the_counts_of_both_sets(remainder_policy):
    """200 columns: neither a divisor nor a remainder count gives tiles of whole sticks."""
    ev = evaluator()
    op = plus_one(200)
    assert ev.legal_splits(op, 1) == [1]
    assert ev.legality(op, 1).refusals(1) == (
        "host dim 1: splits 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 23, 25, 29, "
        "34, 40, 50, 67, 100, 200 fail output_sticks_whole "
        "(splitting host dim 1 of buf0 2 ways would cut its sticks)")
