"""One fact registry: a fact is the prelude's declaration plus one ``@fact`` function.

The signature the engine checks is derived from the function's annotations;
the binding check reports every disagreement at once; adding a fact takes
exactly two edits (shown end to end: a copied rules directory, a fact defined
once from this test, a rule that uses it, the engine firing that rule).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

import spyre_rules
from spyre_rules.engine.binding import BindingError
from spyre_rules.engine.planner import Evaluator
from spyre_rules.engine.policy import load_policy
from spyre_rules.facts import op_facts
from spyre_rules.facts.op_facts import REGISTRY
from spyre_rules.facts.records import Coord, Read
from spyre_rules.facts.registry import (
    FactDefinitionError,
    FactRegistry,
    Layout,
    Op,
    Sym,
    Tiling,
    fact,
    signature_of,
)
from spyre_rules.resources import rules_dir

FACTS_DIR = Path(op_facts.__file__).resolve().parent

NEW_FACT = "fact output_elems(op: Op) -> int;  # elements op writes: the product of its ranges\n"
NEW_RULE = """eligibility {
  skip few_output_elems
    when is_computed_buffer(op) and output_elems(op) < 30000
    because "{op} writes few elements";
"""


@pytest.fixture
def rules_with_new_fact(tmp_path: Path) -> Path:
    """A copy of the bundled rules whose prelude declares `output_elems` (edit 1 of 2)
    and whose planner uses it in its first eligibility rule (the use, not the adding)."""
    target = tmp_path / "rules"
    shutil.copytree(rules_dir(), target)
    prelude = target / "prelude.rules"
    prelude.write_text(prelude.read_text() + NEW_FACT)
    planner = target / "planner.rules"
    text = planner.read_text()
    assert text.count("eligibility {\n") == 1
    planner.write_text(text.replace("eligibility {\n", NEW_RULE, 1))
    return target


def test_adding_a_fact_is_two_edits_prelude_and_one_definition(rules_with_new_fact):
    registry = REGISTRY.extended()

    @registry.fact  # edit 2 of 2: the one Python definition; its signature is its annotations
    def output_elems(op: Op) -> int:
        count = 1
        for r in op.data.ranges:
            count *= int(r)
        return count

    assert registry.signatures["output_elems"] == "(op: Op) -> int"
    assert "output_elems" not in REGISTRY.functions  # the bundled registry is untouched
    policy = load_policy([str(rules_with_new_fact)], facts=registry)

    small = spyre_rules.capture_operations(lambda a, b: a + b, torch.randn(2, 64), torch.randn(2, 64))
    big = spyre_rules.capture_operations(lambda a: a * 2, torch.randn(256, 128))
    decisions = []
    for ops in (small, big):
        with ops.graph_context(0):
            (op,) = [o for o in ops if op_facts.is_computed_buffer(o)]
            decisions.append(Evaluator(policy, policy.config_snapshot()).decide(op))
    fired, not_fired = decisions
    assert (fired.decision, fired.reason) == ("no plan", f"{fired.op} writes few elements")
    assert [(s.section, s.rule, s.outcome) for s in fired.trace] == [
        ("eligibility", "few_output_elems", "skip")]
    assert not any(s.rule == "few_output_elems" for s in not_fired.trace)


def test_a_declared_fact_needs_its_definition(rules_with_new_fact):
    with pytest.raises(BindingError) as info:
        load_policy([str(rules_with_new_fact)])  # the bundled registry has no output_elems
    assert info.value.problems == [
        "fact `output_elems` is declared in the prelude but has no Python binding"]


def test_binding_reports_every_mismatch_at_once():
    kept = [fn for name, fn in REGISTRY.functions.items() if name not in {"divisors", "rank", "extent"}]
    registry = FactRegistry(kept)

    @registry.fact
    def extra(op: Op) -> bool:
        return True

    @registry.fact
    def rank(op: Op) -> str:
        return ""

    @registry.fact
    def extent(op: Op, dim: str) -> int | None:
        return None

    with pytest.raises(BindingError) as info:
        load_policy(None, facts=registry)
    assert info.value.problems == [
        "fact `divisors` is declared in the prelude but has no Python binding",
        "Python binding `extra` is not declared as a fact in the prelude",
        "fact `extent`: the prelude declares `extent(op: Op, dim: int) -> int?`, "
        "the Python binding `extent(op: Op, dim: str) -> int?`",
        "fact `rank`: the prelude declares `rank(op: Op) -> int`, the Python binding `rank(op: Op) -> str`",
    ]
    assert str(info.value).startswith("the prelude and its Python bindings disagree:\n  fact `divisors`")


def test_signatures_are_derived_from_annotations():
    def every_kind(op: Op, s: Sym, layout: Layout, tile: Tiling, read: Read, n: int, flag: bool,
                   name: str, maybe: int | None, syms: frozenset[Sym], names: set[str],
                   coords: list[Coord]) -> list[int] | None:
        return None

    assert str(signature_of(every_kind)) == (
        "(op: Op, s: Sym, layout: Layout, tile: Tiling, read: Read, n: int, flag: bool, name: str, "
        "maybe: int?, syms: set[Sym], names: set[str], coords: list[Coord]) -> list[int]?")
    assert op_facts.SIGNATURES["read_coords"] == "(op: Op, read: Read, tile: Tiling) -> list[Coord]"
    assert op_facts.FACTS["divisors"] is op_facts.divisors  # the definition itself, not a wrapper


def test_a_fact_without_a_language_type_is_refused_at_definition():
    def untyped(op, dim: int) -> bool:
        return True

    def foreign(op: Op) -> object:
        return None

    def union(op: Op, x: int | str) -> bool:
        return True

    with pytest.raises(FactDefinitionError, match=r"^fact `untyped`: parameter `op` has no annotation$"):
        fact(untyped)
    with pytest.raises(FactDefinitionError,
                       match=r"^fact `foreign`, return type: `<class 'object'>` has no rules-language type$"):
        fact(foreign)
    with pytest.raises(FactDefinitionError, match=r"^fact `union`, parameter `x`: `int \| str` is a union"):
        fact(union)


def test_a_fact_is_defined_once():
    registry = REGISTRY.extended()

    def divisors(n: int) -> list[int]:
        return []

    with pytest.raises(FactDefinitionError, match=r"^fact `divisors` is defined twice"):
        registry.fact(divisors)


def test_every_facts_module_is_under_600_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in FACTS_DIR.glob("*.py")}
    assert "op_facts.py" in sizes
    assert {name: n for name, n in sizes.items() if n > 600} == {}
