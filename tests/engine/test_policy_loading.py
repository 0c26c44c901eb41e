"""Loading a policy: check errors, prelude/Python binding agreement, rules_path, caching."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spyre_rules import config
from spyre_rules.engine.binding import BindingError
from spyre_rules.engine.policy import PolicyError, get_policy, load_policy
from spyre_rules.facts import op_facts
from spyre_rules.resources import rules_dir


def rules_copy(tmp_path: Path, edits: dict[str, list[tuple[str, str]]] | None = None) -> Path:
    """A copy of the bundled rules with textual edits ``{file: [(old, new), ...]}``."""
    target = tmp_path / "rules"
    shutil.copytree(rules_dir(), target)
    for name, changes in (edits or {}).items():
        path = target / name
        text = path.read_text()
        for old, new in changes:
            assert old in text, f"{old!r} not in {name}"
            text = text.replace(old, new, 1)
        path.write_text(text)
    return target


def test_bundled_policy_loads_and_is_cached():
    first = get_policy()
    assert first is get_policy()
    assert first.source == "bundled rules/"
    assert first.program.search.bounds == {
        "max_splits_per_dim": 16, "max_combos": 512, "keep_smallest_splits": 5,
        "split_window_radius": 2, "widen_to_dims": 3}
    assert [g.name for g in first.program.generators] == [
        "output_span", "input_span", "reduction_span", "mixed_output_span", "mixed_reduction_span",
        "gathered_span", "gathered_rows", "in_place_rows"]


def test_rules_path_directory_and_separated_files(tmp_path, monkeypatch):
    target = rules_copy(tmp_path)
    monkeypatch.setenv("SPYRE_RULES_PATH", str(target))
    by_dir = get_policy()
    assert by_dir.source == str(target) and by_dir is not get_policy(rules_path="")
    files = os.pathsep.join(str(target / n) for n in
                            ("limits.rules", "planner.rules", "grouping.rules",
                                                      "collectives.rules", "restickify.rules",
                                                      "layout_choice.rules"))
    with config.patch(rules_path=files):
        by_files = get_policy()
    assert by_files is not by_dir
    assert len(by_files.files) == 7  # the bundled prelude is added


def test_check_errors_refuse_to_load_and_carry_diagnostics(tmp_path):
    target = rules_copy(tmp_path, {"limits.rules": [("const MAX_TILE_DIMS = 4;",
                                                    "const MAX_TILE_DIMS = true;")]})
    with pytest.raises(PolicyError) as info:
        load_policy([str(target)])
    err = info.value
    assert err.diagnostics and {d.code for d in err.diagnostics} == {"E020"}
    text = str(err)
    assert "the rules do not check cleanly" in text
    assert "planner.rules:" in text and "error[E020]" in text and "len(open_dims) > MAX_TILE_DIMS" in text


def test_rules_cannot_run_python(tmp_path):
    target = rules_copy(tmp_path, {"planner.rules": [
        ("when has_unmeasured_indirect_reads(op)", 'when eval("__import__(\'os\')")')]})
    with pytest.raises(PolicyError) as info:
        load_policy([str(target)])
    assert "E011" in str(info.value) and "unknown function `eval`" in str(info.value)


def test_declared_fact_without_binding(tmp_path):
    target = rules_copy(tmp_path, {"prelude.rules": [
        ("fact divisors(n: int) -> list[int];",
         "fact divisors(n: int) -> list[int];\nfact mystery(op: Op) -> bool;")]})
    with pytest.raises(BindingError) as info:
        load_policy([str(target)])
    assert info.value.problems == [
        "fact `mystery` is declared in the prelude but has no Python binding"]


def test_binding_without_declaration(monkeypatch):
    def extra(op):
        return True

    monkeypatch.setitem(op_facts.FACTS, "extra", extra)
    monkeypatch.setitem(op_facts.SIGNATURES, "extra", "(op: Op) -> bool")
    with pytest.raises(BindingError) as info:
        load_policy(None)
    assert info.value.problems == ["Python binding `extra` is not declared as a fact in the prelude"]


def test_type_and_arity_disagreements(tmp_path, monkeypatch):
    target = rules_copy(tmp_path, {"prelude.rules": [
        ("fact divisors(n: int) -> list[int];", "fact divisors(n: int) -> set[int];")]})
    with pytest.raises(BindingError) as info:
        load_policy([str(target)])
    assert info.value.problems == [
        "fact `divisors`: the prelude declares `divisors(n: int) -> set[int]`, the Python binding "
        "`divisors(n: int) -> list[int]`"]
    monkeypatch.setitem(op_facts.FACTS, "divisors", lambda n, m: [])
    with pytest.raises(BindingError) as info:
        load_policy(None)
    assert info.value.problems == [
        "fact `divisors` takes 1 argument(s) in the prelude, its Python function 2"]


def test_extern_record_and_config_disagreements(tmp_path):
    target = rules_copy(tmp_path, {"prelude.rules": [
        ("  stick_elems: int,   # elements per stick of the layout\n}",
         "  stick_elems: int,\n  extra: int,\n}"),
        ("config sencores: int;", "config sencores: int;\nconfig warp_speed: int;")]})
    with pytest.raises(BindingError) as info:
        load_policy([str(target)])
    problems = info.value.problems
    assert any(p.startswith("extern record `Coord`: the prelude declares fields") for p in problems)
    assert "config value `warp_speed` is not a setting of spyre_rules.config" in problems
