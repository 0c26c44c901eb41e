"""The checker's half of the ``collectives`` section (lang/sections/collectives.py): its one
bound, its cost over a ``Chunking``, and the diagnostics a policy author gets."""

from __future__ import annotations

from test_language import check


def messages(text: str) -> list[str]:
    return [f"{d.code} {d.message}" for d in check(text).diagnostics]


def test_the_bundled_form_checks_cleanly():
    assert messages("collectives { bound max_chunks = 8; cost c: (c.count, c.dim); }") == []


def test_the_cost_sees_the_chunking_and_the_collective():
    assert messages('collectives { bound max_chunks = 8; cost c: (collective, c.count, c.dim); }') == []
    assert messages("collectives { bound max_chunks = 8; cost c: (c.rows, c.dim); }") == [
        "E012 record `Chunking` has no field `rows`"]


def test_bounds_and_the_cost_are_required_and_checked():
    assert messages("collectives { cost c: c.count; }") == [
        "E034 the collectives section does not set bound `max_chunks`"]
    assert messages("collectives { bound max_chunks = 8; }") == [
        "E037 a `collectives` section needs a `cost` item"]
    assert messages("collectives { bound max_chunk = 8; bound max_chunks = 0; cost c: c.count; }") == [
        "E034 unknown collectives bound `max_chunk` (bounds: max_chunks)",
        "E033 bound `max_chunks` must be a positive integer, found 0"]
    assert messages("collectives { bound max_chunks = 8; cost c: c.count; skip a; }") == [
        "E019 a `decision` item is not allowed in a `collectives` section (allowed: `let`, `bound`, "
        "`cost`)"]
