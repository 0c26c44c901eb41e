"""Parser, typed AST, type checker and shadowing analysis, feature by feature."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from spyre_rules.lang import ast as A
from spyre_rules.lang.driver import check_paths, check_sources
from spyre_rules.lang.parser import get_parser, parse_source
from spyre_rules.lang.templates import parse_template
from spyre_rules.resources import grammar_file, rules_dir

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = (rules_dir() / "prelude.rules").read_text()


def check(text: str, name: str = "t.rules", complete: bool = False):
    result = check_sources([("rules/prelude.rules", PRELUDE), (name, textwrap.dedent(text))], complete=complete)
    return result


def codes(text: str) -> list[str]:
    return [d.code for d in check(text).diagnostics]


# ----------------------------------------------------------------- parser

def test_parser_is_built_once_from_the_grammar_file():
    assert grammar_file().name == "spyre_rules.lark"
    assert get_parser() is get_parser()


def _nodes(obj):
    if isinstance(obj, list):
        for x in obj:
            yield from _nodes(x)
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        yield obj
        for f in dataclasses.fields(obj):
            yield from _nodes(getattr(obj, f.name))


def test_every_node_of_the_bundled_rules_has_a_span():
    result = check_paths(None)
    count = 0
    for f in result.files:
        for node in _nodes(f.items):
            count += 1
            s = node.span
            assert isinstance(s, A.Span) and s.file == f.path, node
            assert 1 <= s.line <= s.end_line and s.col >= 1, node
            assert s.end_line > s.line or s.end_col > s.col, node
            lines = f.text.split("\n")
            assert s.end_line <= len(lines)
    assert count > 500


def test_ast_shapes_and_spans():
    sf, diags = parse_source('const SPAN = 256 MiB;\neligibility {\n  skip a when x.y is known because "m {x}";\n}\n',
                             "f.rules")
    assert diags == []
    const, section = sf.items
    assert isinstance(const, A.ConstDecl) and const.name.name == "SPAN"
    assert const.value.digits == 256 and const.value.unit.name == "MiB"
    assert const.span == A.Span("f.rules", 1, 1, 1, 22)
    rule = section.items[0]
    assert isinstance(rule, A.Decision) and rule.action.name == "skip" and rule.name.name == "a"
    assert isinstance(rule.guard, A.IsKnown) and rule.guard.known
    assert isinstance(rule.guard.operand, A.Field) and rule.guard.operand.name.name == "y"
    assert rule.guard.span == A.Span("f.rules", 3, 15, 3, 27)
    assert rule.message.value == "m {x}" and rule.message.span == A.Span("f.rules", 3, 36, 3, 43)


def test_precedence():
    sf, _ = parse_source("const A = not a or b and c == d + e * -f;", "p.rules")
    e = sf.items[0].value
    assert e.op == "or"
    assert isinstance(e.left, A.Unary) and e.left.op == "not"
    assert e.right.op == "and" and e.right.right.op == "=="
    plus = e.right.right.right
    assert plus.op == "+" and plus.right.op == "*" and isinstance(plus.right.right, A.Unary)


def test_units_and_underscores_evaluate():
    result = check("const A = 256 MiB;\nconst B = 268_435_456;\nconst C = A == B;\n"
                   "const D = 2 GiB // 4 KiB;\nlegality { splits k in [1]; require r: C and k <= D; }\n")
    assert [d.code for d in result.diagnostics] == []
    consts = result.checker.consts
    assert consts["A"].value == 268435456 and consts["C"].value is True and consts["D"].value == 524288


def test_several_syntax_errors_in_one_file_and_across_files():
    result = check_sources([
        ("rules/prelude.rules", PRELUDE),
        ("a.rules", "const A = ;\nconst B = 1 +;\nconst C = 2;\n"),
        ("b.rules", "eligibility {\n  skip x when true\n  skip y when false because \"m\";\n"),
    ], complete=False)
    found = [(d.span.file, d.span.line, d.code) for d in result.diagnostics]
    assert ("a.rules", 1, "E001") in found and ("a.rules", 2, "E001") in found
    assert ("b.rules", 3, "E001") in found  # the missing `;`
    assert ("b.rules", 3, "E005") in found  # the missing `}`
    # the items that parsed are still checked: C is unused, y is unreachable after x
    assert ("a.rules", 3, "W001") not in found  # (unused-constant checks wait for clean syntax)
    assert ("b.rules", 3, "W003") in found


def test_reserved_word_as_name_is_reported_and_parsing_goes_on():
    result = check("eligibility {\n  skip order when has_user_hints(op) because \"x\";\n}\n")
    assert [d.code for d in result.diagnostics] == ["E001"]
    assert "reserved word" in result.diagnostics[0].notes[0]


def test_fast_lexer_matches_lark_lexer():
    parser = get_parser()
    assert parser.fast_lexer is not None
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in
             [*rules_dir().glob("*.rules"), *(ROOT / "tests/lang/invalid").rglob("*.rules")]]
    texts += ['x = "unterminated\n$ @ ≥ \t"ok" 12_3 a.b //% ->\n# c\n', "", "\n\n  ", "a\rb"]
    # blanks and comments before the first, between and after the last token (skipped as one
    # prefix of the next token's match by the fast lexer)
    texts += ["# only a comment", "# c\n\n# d", "x" + " \n" * 5000 + "# end", "\n# a\n  # b\n\tconst X = 1;  # c\n "]
    import lark

    for text in texts:
        fast = [(t.type, str(t), t.line, t.column, t.end_line, t.end_column) for t in parser.fast_lexer.lex(text)]
        slow = [(t.type, str(t), t.line, t.column, t.end_line, t.end_column)
                for t in parser.lark_lexer.lex(lark.lexer.LexerState(lark.lexer.TextSlice.cast_from(text)), None)]
        assert fast == slow


# ------------------------------------------------------------- templates

def test_template_placeholders_and_escapes():
    sf, _ = parse_source('const M = "a {x} {{literal}} {r.buffer} {config.sencores}";', "t.rules")
    holders, errors = parse_template(sf.items[0].value)
    assert errors == []
    assert [h.path for h in holders] == [("x",), ("r", "buffer"), ("config", "sencores")]
    assert holders[0].span.col == sf.items[0].value.span.col + 3


# ----------------------------------------------------------------- types

@pytest.mark.parametrize("text, expected", [
    # narrowing by `and`, by a filter, by a first-match guard, by a requirement
    ("legality { let n = extent(op, dim); splits k in [2]; require r: n is known and n % k == 0; }", []),
    ("legality { let n = extent(op, dim); splits k in [2]; require r: n % k == 0; }", ["E024"]),
    ("legality { let n = extent(op, dim); reject u when n is unknown because \"x\"; splits k in divisors(n); "
     "require r: n % k == 0; }", []),
    ("legality { let n = extent(op, dim); reject u when n is unknown or n <= 1 because \"{n}\"; "
     "splits k in divisors(n); require r: k > 1; }", []),
    ("validation { require a: extent(op, 0) is known; require b: extent(op, 0) > 1; }", []),
    ("validation { require b: extent(op, 0) > 1; require a: extent(op, 0) is known; }", ["E024"]),
    ("validation { require a: extent(op, 0) is unknown or extent(op, 0) > 1; }", []),
    ("validation { require a: all(c.span_bytes > 0 for c in output_coords(op, tile) if c.span_bytes is known); }",
     []),
    # `==` with an unknown-able value is fine; ordering is not
    ("validation { require a: extent(op, 0) == 3; }", []),
    ("validation { require a: within_stick_dim(layout(op)) < 3; }", ["E024"]),
    # generators are values only in validation
    ("candidates { g: for c in output_coords(op, tile) if c.span_bytes is known emit Candidate "
     "{ host_dim: c.dim, span_bytes: c.span_bytes, coord: c, reason: \"r\", source: \"s\" }; }\n"
     "validation { require v: len(g) == 0; }\neligibility { skip s when len(g) > 0; }", ["E019"]),
    # set operations and membership
    ("grouping { single s when read_buffers(op) & auto_tiled_producers != {} and \"a\" in hinted_producers; }",
     []),
    ("grouping { single s when read_buffers(op) & [1] != {}; }", ["E020"]),
    ("grouping { single s when 3 in hinted_producers; }", ["E020"]),
    # types of builtins
    ("validation { require a: sorted(output_symbols(op)) != []; }", []),
    ("validation { require a: sorted({layout(op)}) != []; }", ["E025"]),
    ("validation { require a: count(k > 1 for k in [1, 2]) == max(1, 2, 3); }", []),
    ("validation { require a: sum([true]) > 0; }", ["E022"]),
    ("grouping { single s when plan.levels == run.levels; }", ["E024"]),
    ("grouping { pass p when plan is unknown; single s when plan.levels == run.levels; }", []),
])
def test_type_rules(text, expected):
    assert codes(text) == expected


def test_legal_splits_and_conforms_availability():
    ok = "grouping { conform c when conforms(op, run.tiling) and legal_splits(op, 0) != []; }"
    assert codes(ok) == []
    assert codes("legality { splits k in legal_splits(op, dim); require r: k > 1; }") == ["E019"]
    assert codes("validation { require a: conforms(op, tile); }") == ["E019"]


# ------------------------------------------------------------- shadowing

@pytest.mark.parametrize("guards, expected", [
    (["has_user_hints(op)", "is_pointwise(op)"], []),
    (["has_user_hints(op)", "has_user_hints(op)"], ["W004"]),
    (["is_pointwise(op) or has_user_hints(op)", "has_user_hints(op)"], ["W004"]),
    (["has_user_hints(op)", "has_user_hints(op) and is_pointwise(op)"], ["W004"]),
    (["has_user_hints(op) and is_pointwise(op)", "has_user_hints(op)"], []),
    (["rank(op) == 0 and is_reduction(op)", "is_reduction(op) and (rank(op) == 0)"], ["W004"]),
    (["has_user_hints(op) and is_pointwise(op)", "is_pointwise(op) or has_user_hints(op)"], []),
    (["true", "has_user_hints(op)"], ["W003"]),
    (["false", "has_user_hints(op)"], ["W006"]),
])
def test_shadowing(guards, expected):
    rules = "".join(f"  pass r{i} when {g};\n" for i, g in enumerate(guards))
    assert codes("grouping {\n" + rules + "}\n") == expected


def test_unconditional_rule_then_dead_rules():
    text = "grouping { pass a when has_user_hints(op); single b; start c when is_pointwise(op); pass d; }"
    assert codes(text) == ["W003", "W003"]


# ------------------------------------------------------------- structure

def test_sections_are_required_only_for_whole_policies(tmp_path):
    assert codes("eligibility { skip a when has_user_hints(op); }") == []
    result = check("eligibility { skip a when has_user_hints(op); }", complete=True)
    assert [d.code for d in result.diagnostics] == ["E018"]


def test_bundled_policy_types_every_expression():
    from spyre_rules.lang import types as T

    result = check_paths(None)
    assert result.checker.expr_types
    assert all(t is not T.ERROR for t in result.checker.expr_types.values())
