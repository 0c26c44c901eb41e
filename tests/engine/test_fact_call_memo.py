"""facts/memo.py ``per_scope_call``: bundled facts memoised on argument identity inside a stable scope.

The memo must be invisible: every decision, trace and grouping is identical with
and without it (compared as their serialised dicts, rendered values included).
"""

from __future__ import annotations

import pytest
import torch

from spyre_rules import config
from spyre_rules.errors import Unsupported
from spyre_rules.engine import api, policy as policy_module
from spyre_rules.engine.grouping import decide_groups
from spyre_rules.facts import memo, op_facts
from spyre_rules.facts.records import Read

from helpers import capture


# ------------------------------------------------------------------ the wrapper itself


def _counting(arity: int):
    calls = []
    if arity == 1:
        def fn(a):
            calls.append((a,))
            return [a]
    else:
        def fn(a, b):
            calls.append((a, b))
            return (a, b)
    return fn, calls


def test_outside_a_scope_every_call_computes():
    fn, calls = _counting(1)
    wrapped = memo.per_scope_call(fn)
    key = object()
    assert wrapped(key) == [key] and wrapped(key) == [key]
    assert len(calls) == 2


def test_inside_a_scope_one_call_per_argument_identity():
    fn, calls = _counting(2)
    wrapped = memo.per_scope_call(fn)
    a, b = object(), object()
    with memo.stable():
        assert wrapped(a, b) == (a, b)
        assert wrapped(a, b) == (a, b)
        assert len(calls) == 1
        assert wrapped(b, a) == (b, a)
        assert len(calls) == 2
    with memo.stable():  # a new scope forgets
        wrapped(a, b)
    assert len(calls) == 3


def test_equal_but_distinct_arguments_are_distinct_questions():
    # Two reads of one buffer through two indices compare equal as records.
    first, second = Read("buf0", None), Read("buf0", None)
    assert first == second and first is not second
    fn, calls = _counting(1)
    wrapped = memo.per_scope_call(fn)
    with memo.stable():
        wrapped(first)
        wrapped(second)
    assert [c[0] for c in calls] == [first, second] and calls[0][0] is first and calls[1][0] is second


def test_list_answers_are_fresh_copies():
    fn, _ = _counting(1)
    wrapped = memo.per_scope_call(fn)
    with memo.stable():
        got = wrapped(1)
        got.append("edited")
        assert wrapped(1) == [1]


def test_an_exception_is_not_kept():
    calls = []

    def fn(a):
        calls.append(a)
        raise ValueError(f"no answer for {a}")

    wrapped = memo.per_scope_call(fn)
    with memo.stable():
        for _ in range(2):
            with pytest.raises(ValueError, match="no answer for 3"):
                wrapped(3)
    assert calls == [3, 3]


def test_clear_forgets_inside_a_scope():
    fn, calls = _counting(1)
    wrapped = memo.per_scope_call(fn)
    with memo.stable():
        wrapped(5)
        memo.clear()
        wrapped(5)
    assert len(calls) == 2


def test_only_bundled_facts_are_memoised():
    def custom(op):
        return True

    bound = policy_module._scope_memoised({"custom": custom,
                                           "rank": op_facts.REGISTRY.functions["rank"]})
    assert bound["custom"] is custom
    assert bound["rank"] is not op_facts.REGISTRY.functions["rank"]
    assert bound["rank"].__wrapped__ is op_facts.REGISTRY.functions["rank"]


# ------------------------------------------------------- plans identical with and without it


def _chain(n_ops: int):
    def program(x):
        made, step = 0, 0
        while made < n_ops:
            step += 1
            if step % 10 == 0 and made + 2 <= n_ops:
                x = x - x.amax(dim=-1, keepdim=True)
                made += 2
            else:
                x = x + 1
                made += 1
        return x
    return program


def _two_indices(x):
    # one buffer read through two indices (a Read of each compares equal)
    y = x + 1
    return y + y.transpose(1, 2)


def _programs():
    x = torch.randn(4, 64, 128, dtype=torch.float16)
    s = torch.randn(2, 64, 64, dtype=torch.float16)
    return [capture("memo-chain-24", _chain(24), x), capture("memo-two-indices", _two_indices, s)]


def _outcome(ops) -> tuple:
    decisions = [d.as_dict() for d in api.plan_graph(ops)]
    trace: list = []
    try:
        with config.patch(ignore_span_overflow_hints=False):
            grouping = decide_groups(ops, trace=trace)
    except Unsupported as err:  # the grouping refuses: its message and steps so far
        return decisions, str(err), [s.as_dict() for s in trace]
    actions = {name: step.as_dict() for name, step in grouping.actions.items()}
    groups = [repr(g) for g in grouping.groups]
    planned = [d.as_dict() for d in grouping.decisions.values()] \
        if isinstance(grouping.decisions, dict) else [d.as_dict() for d in grouping.decisions]
    return decisions, actions, groups, planned


@pytest.mark.parametrize("limit", [8192, 16384, 256 * 1024 * 1024])
def test_plans_and_groups_are_identical_without_the_memo(monkeypatch, limit):
    memoised = policy_module.load_policy()
    with monkeypatch.context() as m:
        m.setattr(policy_module, "_scope_memoised", lambda functions: dict(functions))
        plain = policy_module.load_policy()
    assert plain.program is not memoised.program
    for index, ops in enumerate(_programs()):
        outcomes = []
        for pol in (memoised, plain, memoised):
            monkeypatch.setattr(api, "get_policy", lambda rules_path=None, pol=pol: pol)
            with config.patch(max_span_bytes=limit):
                op_facts.clear_cache()
                outcomes.append(_outcome(ops))
        assert outcomes[0] == outcomes[1] == outcomes[2]
        if index == 0 and limit == 16384:  # the limit every op of the chain overflows at
            decisions = outcomes[0][0]
            assert {d["decision"] for d in decisions} >= {"plan"}


def test_a_changed_limit_in_a_new_scope_is_seen():
    """Answers are kept per scope: planning again at another limit gives that limit's plans,
    the same as planning there first."""
    ops = _programs()[0]
    results = {}
    for limit in (16384, 256 * 1024 * 1024, 16384):
        with config.patch(max_span_bytes=limit):
            results.setdefault(limit, []).append([d.as_dict() for d in api.plan_graph(ops)])
    assert results[16384][0] == results[16384][1]
    assert [d["decision"] for d in results[256 * 1024 * 1024][0]] == ["no plan"] * len(ops)
    assert "plan" in [d["decision"] for d in results[16384][0]]
