"""NamesSoFar: grouping's O(1) set views behave as the frozensets they replace."""

from __future__ import annotations

import itertools

from spyre_rules.engine.values import NameLog, NamesSoFar, as_set, iteration_order, render


def _log(*names: str) -> NameLog:
    log = NameLog()
    for name in names:
        log.add(name)
    return log


def test_a_view_keeps_the_names_it_was_made_with():
    log = _log("buf2", "buf10")
    view = log.so_far()
    log.add("buf3")
    log.add("buf2")  # already there: no second entry
    assert set(view) == {"buf2", "buf10"}
    assert "buf3" not in view and "buf3" in log.so_far()
    assert len(view) == 2 and len(log.so_far()) == 3


def test_set_operators_give_the_frozenset_answers():
    view = _log("buf1", "buf2", "buf3").so_far()
    plain = frozenset(view)
    others = [frozenset(), frozenset({"buf2"}), frozenset({"buf2", "buf9"}), plain,
              frozenset({"buf1", "buf2", "buf3", "buf4"})]
    for other in others:
        for left, right in ((view, other), (other, view)):
            pl, pr = frozenset(left), frozenset(right)
            assert as_set(left) & as_set(right) == pl & pr
            assert type(as_set(left) & as_set(right)) is frozenset
            assert as_set(left) | as_set(right) == pl | pr
            assert as_set(left) - as_set(right) == pl - pr
            assert (as_set(left) <= as_set(right)) == (pl <= pr)
            assert (left == right) == (pl == pr)
            assert (left != right) == (pl != pr)
    assert hash(view) == hash(plain)
    assert view == plain and plain == view


def test_order_and_text_are_the_sets():
    view = _log("buf10", "buf2").so_far()
    # strings order by text, as in every set of the language
    assert iteration_order(view) == ["buf10", "buf2"] == iteration_order(frozenset(view))
    assert render(view) == render(frozenset(view)) == "{'buf10', 'buf2'}"
    assert isinstance(view, NamesSoFar) and as_set(view) is view


def test_views_of_a_growing_log_stay_equal_to_their_prefix():
    log = NameLog()
    views = []
    for i in itertools.count():
        if i == 6:
            break
        views.append(log.so_far())
        log.add(f"buf{i}")
    assert [sorted(v) for v in views] == [[f"buf{j}" for j in range(i)] for i in range(6)]


def test_text_of_views_rendered_in_any_order_is_the_frozensets():
    log = NameLog()
    views = []
    for name in ["buf7", "buf30", "buf1", "buf12", "buf4"]:
        log.add(name)
        views.append(log.so_far())
    texts = {id(v): render(frozenset(v)) for v in views}
    for view in views[1:3] + views[::-1] + views:  # newer, then older ones, then all again
        assert render(view) == texts[id(view)]
    assert render(views[-1]) == "{'buf1', 'buf12', 'buf30', 'buf4', 'buf7'}"
