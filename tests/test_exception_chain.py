"""spyre_rules.errors.exception_chain: every chained exception once, cycles included."""

from __future__ import annotations

from spyre_rules.errors import exception_chain


def test_cause_context_and_inner_exception_each_once():
    root = ValueError("root")
    inner = KeyError("inner")
    wrapper = RuntimeError("wrapper")
    wrapper.inner_exception = inner  # how Inductor wraps a lowering error
    inner.__cause__ = root
    top = TypeError("top")
    top.__context__ = wrapper
    root.__context__ = top  # a cycle back to the start
    assert [str(e) for e in exception_chain(top)] == ["top", "wrapper", "'inner'", "root"]


def test_a_lone_exception_is_its_own_chain():
    err = ValueError("x")
    assert list(exception_chain(err)) == [err]


def test_cause_chain_text_keeps_every_cause_the_outer_text_does_not_hold():
    from spyre_rules.errors import cause_chain_text

    root = ValueError("the real cause\nOriginal traceback:\n  File x")
    wrapper = RuntimeError("backend='b' raised:")
    wrapper.__cause__ = root
    repeated = KeyError("inner")
    top = TypeError("top level: 'inner'\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
    top.__cause__ = repeated  # its text is already in the top line: left out
    repeated.__cause__ = wrapper
    assert cause_chain_text(top) == (
        "TypeError: top level: 'inner' <- RuntimeError: backend='b' raised: "
        "<- ValueError: the real cause")
