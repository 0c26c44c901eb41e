"""engine/collector.py: planning freezes the existing objects for the collector, then restores."""

from __future__ import annotations

import gc

import pytest

from spyre_rules.engine import api, collector, grouping


def test_the_outermost_scope_freezes_and_restores():
    assert gc.get_freeze_count() == 0
    before = gc.get_threshold()
    with collector.existing_objects_frozen():
        frozen = gc.get_freeze_count()
        assert frozen > 0
        assert gc.get_threshold() == (before[0], before[1], collector.POSTPONED_THRESHOLD)
        with collector.existing_objects_frozen():
            assert gc.get_freeze_count() == frozen  # nested: nothing more
        assert gc.get_freeze_count() == frozen  # the inner end does not unfreeze
        assert gc.get_threshold()[2] == collector.POSTPONED_THRESHOLD
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_custom_thresholds_come_back_exactly():
    before = gc.get_threshold()
    gc.set_threshold(1234, 7, 3)
    try:
        with collector.existing_objects_frozen():
            assert gc.get_threshold() == (1234, 7, collector.POSTPONED_THRESHOLD)
        assert gc.get_threshold() == (1234, 7, 3)
    finally:
        gc.set_threshold(*before)


def test_young_cycles_are_still_collected_inside_the_scope():
    import weakref

    class Node:
        pass

    with collector.existing_objects_frozen():
        a = Node()
        a.self = a
        alive = weakref.ref(a)
        del a
        gc.collect(0)  # a young collection, as the allocator triggers them
        assert alive() is None


def test_restored_also_when_the_scope_raises():
    before = gc.get_threshold()
    with pytest.raises(ValueError):
        with collector.existing_objects_frozen():
            raise ValueError("x")
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == before


def test_someone_elses_frozen_objects_stay_frozen():
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        thresholds = gc.get_threshold()
        with collector.existing_objects_frozen():
            assert gc.get_threshold() == thresholds
        assert gc.get_freeze_count() == before
    finally:
        gc.unfreeze()


def test_a_disabled_collector_is_left_alone():
    gc.disable()
    try:
        with collector.existing_objects_frozen():
            assert gc.get_freeze_count() == 0
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
