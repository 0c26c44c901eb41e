"""The checker hands the engine a resolved program: the engine resolves no name and
parses no template of its own (lang/resolved.py)."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import spyre_rules
from spyre_rules.lang import ast as A
from spyre_rules.lang import templates

ENGINE = Path(spyre_rules.__file__).parent / "engine"


def _string_literals(files) -> list[A.Str]:
    out, stack = [], [item for f in files for item in f.items]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Str):
            out.append(x)
        elif isinstance(x, list):
            stack.extend(x)
        elif dataclasses.is_dataclass(x) and not isinstance(x, A.Span):
            stack.extend(getattr(x, f.name) for f in dataclasses.fields(x) if f.name != "span")
    return out


def test_every_template_is_parsed_once_by_the_checker_and_never_by_the_engine(monkeypatch):
    from spyre_rules.engine import policy as P
    from spyre_rules.lang import driver

    calls: list[str] = []
    real = templates.split_template

    def counting(raw: str):
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(templates, "split_template", counting)
    compiled: list[int] = []
    real_compile = P.compile_program

    def compile_program(*args):
        before = len(calls)
        program = real_compile(*args)
        compiled.append(len(calls) - before)
        return program

    monkeypatch.setattr(P, "compile_program", compile_program)
    checked = driver.load_policy(None)
    with_braces = [s for s in _string_literals(checked.files) if "{" in s.raw or "}" in s.raw]
    assert len(calls) == len(with_braces) > 20  # one parse per literal with a placeholder
    calls.clear()
    P.load_policy(None)
    assert compiled == [0]  # compiling parsed nothing
    assert len(calls) == len(with_braces)


def test_the_engine_has_no_scopes_and_reads_no_template_text():
    """No module of the engine defines a scope, looks a name up or splits a template:
    names, slots and placeholders come from the checker's Resolution."""
    for path in sorted(ENGINE.glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                assert "Scope" not in node.name, path.name
            if isinstance(node, ast.Attribute):
                assert node.attr not in ("lookup", "raw"), f"{path.name}:{node.lineno} .{node.attr}"
            if isinstance(node, ast.ImportFrom) and node.module:
                names = {a.name for a in node.names}
                assert node.module != "spyre_rules.lang.scope", path.name
                assert not names & {"split_template", "parse_template", "parse_template_pieces",
                                    "unescape", "evaluate"}, f"{path.name} imports {names}"
                assert not (node.module == "spyre_rules.lang" and "consts" in names), path.name


def test_names_resolve_to_the_checkers_bindings_and_slots():
    """A let, a shadowing let of another section and an engine binding: each name
    node points at the binding it means; rule-made bindings have distinct int slots."""
    from spyre_rules.lang.driver import check_sources
    from spyre_rules.lang.scope import Binding
    from spyre_rules.resources import rules_dir

    PRELUDE = (rules_dir() / "prelude.rules").read_text()

    text = ('validation {\n  let n = 2;\n  require a: n > 1 because "{n} {op} {config.sencores}";\n}\n'
            'eligibility {\n  let n = 3;\n  skip s when n > 2 because "x";\n}\n')
    result = check_sources([("rules/prelude.rules", PRELUDE), ("t.rules", text)], complete=False)
    assert [d for d in result.diagnostics if not d.is_warning] == []
    resolved = result.checker.resolved
    validation, eligibility = result.files[1].items
    let_v, req = validation.items
    let_e, skip = eligibility.items
    b_v, b_e = resolved.binding(let_v.name), resolved.binding(let_e.name)
    assert isinstance(b_v, Binding) and b_v is not b_e and isinstance(b_v.slot, int) and b_v.slot != b_e.slot
    assert resolved.name(req.cond.left) is b_v and resolved.name(skip.guard.left) is b_e
    pieces = resolved.template(req.message).pieces
    assert [p if isinstance(p, str) else (p.label, getattr(p.ref, "slot", p.ref)) for p in pieces] == [
        ("n", b_v.slot), " ", ("op", "op"), " ", ("config.sencores", pieces[4].ref)]
    assert type(pieces[4].ref).__name__ == "ConfigValue" and pieces[4].ref.name == "sencores"
    assert [(name, b) for name, b in resolved.watch[id(req)]] == [("n", b_v)]


def test_each_section_kind_is_compiled_and_run_by_one_module():
    """One engine module per section kind holds its compilation and its evaluation,
    and imports the kind's check (its record ``lang/sections/<kind>.py`` SPEC); that
    record's module names the engine module back: one hop either way."""
    import importlib

    from spyre_rules.engine.planner import Evaluator
    from spyre_rules.engine.program import SECTION_MODULES
    from spyre_rules.lang.sections import SECTION_KINDS, SPECS

    assert tuple(SECTION_MODULES) == SECTION_KINDS
    for kind, name in SECTION_MODULES.items():
        module = importlib.import_module(name)
        assert name == f"spyre_rules.engine.{kind}"
        assert callable(getattr(module, f"compile_{kind}")), kind
        assert module.SPEC is SPECS[kind] and SPECS[kind].kind == kind
        assert f"``lang/sections/{kind}.py``" in module.__doc__.replace("\n", " "), kind
        check = importlib.import_module(f"spyre_rules.lang.sections.{kind}")
        assert check.SPEC is SPECS[kind]
        assert f"``spyre_rules/engine/{kind}.py``" in check.__doc__, kind
        camel = "".join(part.capitalize() for part in kind.split("_"))  # layout_choice: LayoutChoice
        evaluation = getattr(module, f"{camel}Evaluation", None)
        # grouping runs over a graph and collectives over a collective step's buffers, not
        # inside the per-op planner
        if kind not in ("grouping", "collectives"):
            assert evaluation is not None and issubclass(Evaluator, evaluation), kind
