"""A graph's decisions are freed by reference counting once unused (engine/planner.py
``_without_tracebacks``): a recorded Unsupported keeps no traceback, whose frames would reach
``plan_graph``'s list of decisions and make the whole result cyclic garbage."""

from __future__ import annotations

import gc
import weakref

import pytest
import torch

from spyre_rules import config
from spyre_rules.engine import plan_graph
from spyre_rules.errors import Unsupported

from helpers import FP16, capture


@pytest.fixture(scope="module")
def add_then_normalise():
    # At 16 KiB the adds are planned; the max and the subtraction have no legal split.
    return capture("add_then_normalise", lambda x: (x + 1) - (x + 1).amax(dim=-1, keepdim=True),
                   torch.randn(4, 64, 128, dtype=FP16))


def _plan(ops):
    with config.patch(max_span_bytes=16384):
        return plan_graph(ops)


def test_an_unsupported_decision_is_freed_without_the_collector(add_then_normalise):
    decisions = _plan(add_then_normalise)
    assert [(d.op, d.decision) for d in decisions] == [
        ("buf0", "plan"), ("buf1", "plan"), ("buf2", "unsupported"), ("buf3", "unsupported")]
    refused = decisions[3]
    assert refused.reason == (
        "Cannot auto-tile buf3 (aten ops: sub.Tensor): no legal split of host dims [1] brings its "
        "access under the limit of 16384 bytes (output span overflow: device dim 0 (d1) spans 65536 "
        "bytes); host dim 1: "
        "splits 2, 3, 4, 5, 6, 7, 8, 10, 11, 13, 16, 22, 32, 64 fail input_sticks_whole (splitting host dim 1 of buf3 2 ways "
        "would cut the sticks of an input it reads)")
    error = refused.error
    assert isinstance(error, Unsupported) and str(error) == refused.reason
    assert error.__traceback__ is None
    freed = weakref.ref(error)
    gc.disable()
    try:
        del decisions, refused, error
        assert freed() is None  # no cycle kept it: reference counting freed it
    finally:
        gc.enable()


def test_decisions_are_the_same_run_after_run(add_then_normalise):
    """The second run plans in a heap the first run's freed results left: same decisions, traces."""
    first = [(d.op, d.decision, d.reason, [(s.section, s.rule, s.outcome, s.message) for s in d.trace])
             for d in _plan(add_then_normalise)]
    again = [(d.op, d.decision, d.reason, [(s.section, s.rule, s.outcome, s.message) for s in d.trace])
             for d in _plan(add_then_normalise)]
    assert first == again


def test_a_recorded_error_keeps_its_chain():
    from spyre_rules.engine.planner import _without_tracebacks

    try:
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise Unsupported("outer") from inner
    except Unsupported as err:
        outer = err
    assert outer.__traceback__ is not None and outer.__cause__.__traceback__ is not None
    assert _without_tracebacks(outer) is outer
    assert outer.__traceback__ is None
    assert isinstance(outer.__cause__, KeyError) and outer.__cause__.__traceback__ is None
    assert outer.__context__ is outer.__cause__ and str(outer) == "outer"
