"""engine/collector.py: planning freezes the existing objects for the collector, then restores."""

from __future__ import annotations

import gc

import pytest

from spyre_rules.engine import api, collector, grouping


def _frozen(obj: object) -> bool:
    """``obj`` (tracked by the collector) is in the permanent generation: no
    generation lists it."""
    return gc.is_tracked(obj) and not any(o is obj for o in gc.get_objects())


def _in_generation(obj: object, generation: int) -> bool:
    return any(o is obj for o in gc.get_objects(generation))


def test_the_outermost_scope_freezes_and_restores():
    assert gc.get_freeze_count() == 0 and gc.isenabled()
    before = gc.get_threshold()
    existing = [object()]
    with collector.existing_objects_frozen():
        assert _frozen(existing)
        assert not gc.isenabled()  # no automatic collection inside the scope
        made_inside = [object()]
        with collector.existing_objects_frozen():
            assert not _frozen(made_inside)  # nested: nothing more is frozen
        assert _frozen(existing)  # the inner end does not unfreeze
        assert not gc.isenabled()
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    assert gc.get_threshold() == before
    # Both the existing objects and the scope's survivors end in the oldest generation.
    assert _in_generation(existing, 2)
    assert _in_generation(made_inside, 2)


def test_cycles_made_inside_the_scope_are_freed_by_the_next_full_collection():
    import weakref

    class Node:
        pass

    with collector.existing_objects_frozen():
        a = Node()
        a.self = a
        alive = weakref.ref(a)
        del a
        gc.collect(0)  # a young collection would free it: explicit collections still run
        assert alive() is None
        b = Node()
        b.self = b
        alive = weakref.ref(b)
        del b
    gc.collect(1)  # not young any more: it joined the oldest generation
    assert alive() is not None
    gc.collect()
    assert alive() is None


def test_restored_also_when_the_scope_raises():
    before = gc.get_threshold()
    with pytest.raises(ValueError):
        with collector.existing_objects_frozen():
            raise ValueError("x")
    assert gc.get_freeze_count() == 0
    assert gc.isenabled()
    assert gc.get_threshold() == before


def test_someone_elses_frozen_objects_stay_frozen():
    # The freeze count is no witness: a frozen object that dies (anything the test
    # process frees meanwhile) leaves the permanent generation and lowers it.
    marker = [object()]
    gc.freeze()
    try:
        assert _frozen(marker)
        thresholds = gc.get_threshold()
        with collector.existing_objects_frozen():
            assert gc.get_threshold() == thresholds
            assert gc.isenabled()  # left alone: nobody's collection is turned off for them
        assert _frozen(marker)
        assert gc.get_threshold() == thresholds
    finally:
        gc.unfreeze()
    assert not _frozen(marker)


def test_a_disabled_collector_is_left_alone():
    gc.disable()
    try:
        with collector.existing_objects_frozen():
            assert gc.get_freeze_count() == 0
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_plan_graph_and_grouping_plan_inside_the_scope(monkeypatch):
    seen = []

    class Ev:
        def decide(self, op):
            seen.append(gc.get_freeze_count() > 0)
            return op

    monkeypatch.setattr(api, "evaluator", lambda max_cores=None: Ev())
    monkeypatch.setattr(api, "_require_graph", lambda op: None)
    assert api.plan_graph(["a", "b"]) == ["a", "b"]
    monkeypatch.setattr(grouping, "_decide_groups",
                        lambda *args: seen.append(gc.get_freeze_count() > 0))
    grouping.decide_groups([])
    assert seen == [True, True, True] and gc.get_freeze_count() == 0
