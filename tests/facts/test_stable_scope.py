"""The stable-graph scope (``facts.memo.stable``) and the cheap record copy of ``per_tile``."""

from __future__ import annotations

import dataclasses

from spyre_rules.facts import memo
from spyre_rules.facts.per_tile import _renamed
from spyre_rules.facts.records import Coord


class _Box:
    def __init__(self, value: int) -> None:
        self.value = value


def test_by_identity_keeps_answers_only_inside_a_scope() -> None:
    box, calls = _Box(1), []

    def measure(b: _Box) -> int:
        calls.append(b.value)
        return b.value

    assert memo.by_identity("t", box, measure) == 1
    box.value = 2  # an edit outside any scope is always seen
    assert memo.by_identity("t", box, measure) == 2
    with memo.stable():
        assert memo.stable_scope() != 0
        assert memo.by_identity("t", box, measure) == 2
        with memo.stable():  # nested: the same scope
            assert memo.by_identity("t", box, measure) == 2
        assert memo.by_identity("t", box, measure) == 2
    assert memo.stable_scope() == 0
    box.value = 3  # after the outermost scope closed, nothing kept survives
    with memo.stable():
        assert memo.by_identity("t", box, measure) == 3
    assert calls == [1, 2, 2, 3]


def test_scopes_have_distinct_ids() -> None:
    with memo.stable():
        first = memo.stable_scope()
    with memo.stable():
        assert memo.stable_scope() not in (0, first)


def test_renamed_equals_dataclasses_replace() -> None:
    coord = Coord("", 1, False, "i0", frozenset({"i0"}), 4, 64, 512, 4096, 64)
    copy = _renamed(coord, "buf3")
    assert copy == dataclasses.replace(coord, buffer="buf3")
    assert type(copy) is Coord and coord.buffer == "" and hash(copy) == hash(
        dataclasses.replace(coord, buffer="buf3"))
