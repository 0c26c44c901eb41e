"""docs/rules_language.md documents the language as implemented: every fact,
record, field, config value and opaque type of the prelude, every diagnostic
code, every reserved word."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spyre_rules.lang.diagnostics import CODES
from spyre_rules.lang.driver import check_paths
from spyre_rules.lang.parser import keywords

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "rules_language.md").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def vocab():
    result = check_paths(None)
    assert result.vocab is not None
    return result.vocab


def test_every_fact_is_documented_with_its_signature(vocab):
    missing = [f.signature() for f in vocab.facts.values() if f"`{f.signature()}`" not in DOC]
    assert not missing, f"undocumented facts (or signature changed): {missing}"
    # and nothing documented as a fact is missing from the prelude
    documented = set(re.findall(r"^\| `([a-z_]+)\(", DOC, re.M))
    assert documented == set(vocab.facts), documented ^ set(vocab.facts)


def test_every_record_and_field_is_documented(vocab):
    for name, rec in vocab.records.items():
        row = next((line for line in DOC.splitlines()
                    if line.startswith(f"| `{'extern ' if rec.extern else ''}record {name}`")), None)
        assert row is not None, f"record {name} is not in the records table"
        for field, t in rec.fields.items():
            assert f"`{field}: {t}`" in row, f"{name}.{field}: {t} is not documented"


def test_every_config_value_and_type_is_documented(vocab):
    for c in vocab.config.values():
        assert f"`config {c.name}: {c.type};`" in DOC
    for name in vocab.opaque:
        assert f"| `{name}` |" in DOC


def test_diagnostics_table_matches_the_codes():
    rows = dict(re.findall(r"^\| ([EW]\d{3}) \| (.+) \|$", DOC, re.M))
    assert rows == CODES


def test_every_reserved_word_is_listed():
    para = DOC[DOC.index("**Reserved words**"):]
    para = para[:para.index("\n\n")]
    listed = set(re.findall(r"[a-z_]+", para.split(":", 1)[1]))
    assert listed == keywords()


def test_prelude_config_matches_spyre_rules_config(vocab):
    from spyre_rules.config import SETTINGS

    kinds = {bool: "bool", int: "int", str: "str"}
    for c in vocab.config.values():
        assert c.name in SETTINGS, f"config.{c.name} is not a spyre_rules.config setting"
        assert kinds[type(SETTINGS[c.name].default)] == str(c.type), c.name


def test_examples_in_the_docs_parse():
    from spyre_rules.lang.parser import parse_source

    blocks = re.findall(r"^```\n(.*?)^```", DOC, re.M | re.S)
    starts = ("const", "eligibility", "candidates", "legality", "search", "validation", "grouping")
    examples = [b for b in blocks if b.lstrip().startswith(starts)]
    assert len(examples) >= 6
    for block in examples:
        _, diags = parse_source(block, "doc.rules")
        assert diags == [], (block, diags)
