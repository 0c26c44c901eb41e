"""`otherwise splits`: the legality section's fallback split counts (docs/rules_language.md §6.3).

Parsing and the AST, the checker's placement rules (E044, with file:line:col), scoping
(the fallback's expression sees what `splits` saw, not the split variable) and the
formatter's layout.
"""

from __future__ import annotations

import textwrap

from spyre_rules.lang import ast as A
from spyre_rules.lang.driver import check_sources
from spyre_rules.lang.formatter import format_text
from spyre_rules.lang.parser import keywords, parse_source
from spyre_rules.resources import rules_dir

PRELUDE = (rules_dir() / "prelude.rules").read_text()

GOOD = """\
legality {
  let n = 96;
  splits k in divisors(n);
  otherwise splits k in tile_counts(n);
  require cap: k <= 8;
}
"""


def diagnostics(text: str) -> list[str]:
    result = check_sources([("rules/prelude.rules", PRELUDE), ("t.rules", textwrap.dedent(text))], complete=False)
    return [f"{d.span.file}:{d.span.line}:{d.span.col}: {d.code} {d.message}" for d in result.diagnostics]


def test_parses_into_a_fallback_splits_item():
    tree, diags = parse_source(GOOD, "t.rules")
    assert diags == []
    items = tree.items[0].items
    plain, fallback = items[1], items[2]
    assert isinstance(plain, A.SplitsItem) and not plain.fallback
    assert isinstance(fallback, A.SplitsItem) and fallback.fallback
    assert fallback.var.name == "k"
    assert isinstance(fallback.source, A.Call) and fallback.source.func.name == "tile_counts"
    # the span starts at `otherwise` and ends after `;`
    assert fallback.span[1:] == (4, 3, 4, 40)
    assert "otherwise" in keywords()


def test_a_well_placed_fallback_checks_clean():
    assert diagnostics(GOOD) == []


def test_otherwise_is_reserved():
    assert diagnostics("const otherwise = 3;\n") == [
        "t.rules:1:7: E001 expected a name, found keyword `otherwise`"]


def test_fallback_before_splits():
    assert diagnostics("""\
        legality {
          otherwise splits k in tile_counts(96);
          splits k in divisors(96);
          require cap: k <= 8;
        }
        """) == [
        "t.rules:2:3: E044 `otherwise splits` comes right after the `splits` item whose counts it falls back from"]


def test_fallback_after_a_require_or_a_let():
    text = """\
        legality {
          splits k in divisors(96);
          require cap: k <= 8;
          otherwise splits k in tile_counts(96);
        }
        """
    assert diagnostics(text) == [
        "t.rules:4:3: E044 `otherwise splits` comes right after the `splits` item whose counts it falls back from"]
    result = check_sources([("rules/prelude.rules", PRELUDE), ("t.rules", textwrap.dedent(text))], complete=False)
    assert result.diagnostics[0].notes == ["note: the `splits` item is at t.rules:2:3"]
    assert diagnostics("""\
        legality {
          splits k in divisors(96);
          let m = 96;
          otherwise splits k in tile_counts(m);
          require cap: k <= 8;
        }
        """) == [
        "t.rules:4:3: E044 `otherwise splits` comes right after the `splits` item whose counts it falls back from"]


def test_fallback_binds_another_variable():
    assert diagnostics("""\
        legality {
          splits k in divisors(96);
          otherwise splits j in tile_counts(96);
          require cap: k <= 8;
        }
        """) == [
        "t.rules:3:20: E044 `otherwise splits` binds `j`, `splits` binds `k`: the fallback counts are values "
        "of the same split variable"]


def test_a_second_fallback():
    assert diagnostics("""\
        legality {
          splits k in divisors(96);
          otherwise splits k in tile_counts(96);
          otherwise splits k in [3];
          require cap: k <= 8;
        }
        """) == ["t.rules:4:3: E044 a second `otherwise splits` item in this section"]


def test_fallback_alone_still_needs_splits():
    assert diagnostics("""\
        legality {
          otherwise splits k in tile_counts(96);
          require cap: k <= 8;
        }
        """) == [
        "t.rules:1:1: E037 a `legality` section needs a `splits` item",
        "t.rules:2:3: E044 `otherwise splits` comes right after the `splits` item whose counts it falls back from",
        "t.rules:3:3: E038 `require` conditions of a legality section come after `splits`",
        "t.rules:3:16: E010 unknown name `k`"]  # a fallback binds no variable of its own


def test_fallback_does_not_see_the_split_variable():
    assert diagnostics("""\
        legality {
          splits k in divisors(96);
          otherwise splits k in [k + 1];
          require cap: k <= 8;
        }
        """) == ["t.rules:3:26: E010 unknown name `k`"]


def test_fallback_enumerates_ints():
    assert diagnostics("""\
        legality {
          splits k in divisors(96);
          otherwise splits k in ["a"];
          require cap: k <= 8;
        }
        """) == ["t.rules:3:25: E022 `otherwise splits` enumerates split counts (int), found `list[str]`"]


def test_fallback_only_in_legality():
    assert diagnostics("""\
        validation {
          otherwise splits k in [2];
        }
        """) == [
        "t.rules:2:3: E019 an `otherwise splits` item is not allowed in a `validation` section "
        "(allowed: `let`, `require`)"]


def test_formatter_lays_out_and_keeps_the_fallback():
    messy = "legality {\n  let n = 96;\n  splits k in divisors( n );\n     otherwise   splits k in tile_counts( n ) ;\n" \
            "  require cap: k <= 8;\n}\n"
    assert format_text(messy) == GOOD
    assert format_text(GOOD) == GOOD
