"""Legality's `otherwise splits` (docs/rules_language.md §6.3): exact split counts first;
the fallback counts only where no exact count above 1 is legal, tested by the same
requirements.  The bundled policy offers exact and remainder counts together (`splits k in
tile_counts(n)`, remainders on output dims; a reduction dim's only when no even count is
legal, by its own `otherwise splits`) so that the search weighs them by the loop
trips they cost; the language's fallback is tested on a policy edit that restores the
exact-first form (remainder tiles, `tile_extent(n, k)` elements, only where no exact count is
legal: docs/layout_model.md §4.5), and another that drops the remainders altogether."""

from __future__ import annotations

import pytest
import torch

from spyre_rules.commands.policy_coverage import exercised
from spyre_rules.engine.api import evaluator

from helpers import FP16, capture
from test_policy_loading import rules_copy

BUNDLED_SPLITS = (
    "  splits k in [c for c in tile_counts(n) if dim < rank(op) or tile_extent(n, c) == n // c];\n"
    "  otherwise splits k in [c for c in tile_counts(n)\n"
    "                         if dim >= rank(op)\n"
    "                         and reduction_type(op) in {\"sum\", \"batchmatmul\", \"max\", \"min\", \"any\"}];\n")
EXACT_FIRST = [(BUNDLED_SPLITS, "  splits k in divisors(n);\n"
                "  otherwise splits k in [c for c in tile_counts(n) if dim < rank(op)];\n")]
NO_FALLBACK = [(BUNDLED_SPLITS, "  splits k in divisors(n);\n")]


@pytest.fixture
def exact_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_PATH", str(rules_copy(tmp_path, {"planner.rules": NO_FALLBACK})))


@pytest.fixture
def fallback_policy(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_PATH", str(rules_copy(tmp_path, {"planner.rules": EXACT_FIRST})))


def plus_one(cols: int):
    """x + 1 on (2, cols) fp16: host dim 1 is within the stick (64 elements)."""
    return capture(f"plus_one_{cols}", lambda a: a + 1, torch.randn(2, cols, dtype=FP16))[0]


def legality_steps(ev, dim):
    return [s for s in ev.trace if s.section == "legality" and s.rule == "splits" and s.values["dim"] == dim]


def test_without_a_fallback_75_columns_do_not_split(exact_policy):
    """75 = 3 * 5 * 5: no divisor leaves whole sticks (3 tiles of 75 are 25 each: no tiling
    of 3 in whole sticks exists)."""
    ev = evaluator()
    assert ev.legal_splits(plus_one(75), 1) == [1]


def test_no_legal_exact_count_gets_the_fallback_counts(fallback_policy):
    """75 columns: 2 tiles of 64 columns (the last one 11): whole sticks."""
    ev = evaluator()
    op = plus_one(75)
    assert ev.legal_splits(op, 1) == [1, 2]
    (step,) = legality_steps(ev, 1)
    assert step.values["fallback"] is True
    assert ("legality", "otherwise splits", "otherwise splits") in exercised(ev.trace)  # --coverage
    # every count tried, exact and fallback, is kept with the requirement that refused it
    assert ev.legality(op, 1).rejected.keys() == {
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 19, 25, 38, 75}
    assert step.values["rejected"][0] == "3: output_sticks_whole"


def test_a_legal_exact_count_never_sees_a_fallback_count(fallback_policy):
    """256 columns: 2 and 4 split exactly into whole sticks; 3 (tiles of 86) is never tried."""
    ev = evaluator()
    op = plus_one(256)
    assert ev.legal_splits(op, 1) == [1, 2, 4]
    (step,) = legality_steps(ev, 1)
    assert "fallback" not in step.values
    assert ("legality", "otherwise splits", "otherwise splits") not in exercised(ev.trace)
    assert [r.split(":")[0] for r in step.values["rejected"]] == ["8", "16", "32", "64", "128", "256"]


def test_bundled_policy_offers_exact_and_remainder_counts_together():
    """320 columns (5 sticks): the exact count 5 (tiles of 64), the remainder count 3 (tiles of
    128, the last 64) and 2, which divides 320 into 160 columns that would cut sticks and so
    means tiles of 192 and 128 (docs/layout_model.md §4.5), keep whole sticks and are legal, in
    one list; 4 (80 columns, no 4 tiles of whole sticks exist) cuts them.  No fallback step is
    traced."""
    ev = evaluator()
    op = plus_one(320)
    assert ev.legal_splits(op, 1) == [1, 2, 3, 5]
    (step,) = legality_steps(ev, 1)
    assert "fallback" not in step.values
    assert ("legality", "otherwise splits", "otherwise splits") not in exercised(ev.trace)


def test_refusal_names_the_counts_of_both_sets():
    """200 columns: 4 divides 200, but 4 tiles of 50 would cut sticks, so they are 64, 64, 64
    and 8 (legal, as 2: 128 and 72); the rest cut sticks, and the message spells out 22 of
    the 25 refused counts, then the largest and how many."""
    ev = evaluator()
    op = plus_one(200)
    assert ev.legal_splits(op, 1) == [1, 2, 4]
    assert ev.legality(op, 1).refusals(1) == (
        "host dim 1: splits 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19, 20, 23, 25, 29, "
        "34, 40, 50, ..., 200 (25 counts) fail output_sticks_whole "
        "(splitting host dim 1 of buf0 3 ways would cut its sticks)")


def test_no_count_keeps_the_sticks_of_one_partial_stick():
    """60 columns, less than a stick: every count cuts it."""
    ev = evaluator()
    assert ev.legal_splits(plus_one(60), 1) == [1]
