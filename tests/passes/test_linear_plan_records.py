"""Plan records of one long run cost a fixed amount of rendering per op.

Counted, not timed: on chains of 20, 40 and 60 overflowing ops (one run) the
characters ``render`` makes while ``collect_groups`` plans and records every op
grow by the same amount per 20 ops (second difference 0).  Each op's grouping
step shows the run, whose members grow with the run: rendered when recorded,
that was quadratic.  The records still serialise to the same text.
"""

from __future__ import annotations

import collections
import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch._inductor.virtualized import V  # noqa: E402

import spyre_rules  # noqa: E402
from spyre_rules import config  # noqa: E402
from spyre_rules.engine import records, values  # noqa: E402
from spyre_rules.engine.records import TraceStep  # noqa: E402
from spyre_rules.engine.values import NameLog, Run, Level, Tiling  # noqa: E402
from spyre_rules.ir.graph_state import graph_state  # noqa: E402
from spyre_rules.passes.pipeline import collect_groups  # noqa: E402
from linear_growth import SIZES, assert_linear, chain  # noqa: E402

def _rendered_chars(n_ops: int, monkeypatch: pytest.MonkeyPatch) -> tuple[int, dict]:
    x = torch.randn(4, 64, 128, dtype=torch.float16)  # 64 KiB per buffer
    graph = spyre_rules.capture_operations(chain(n_ops), x).graphs[0]
    counted = collections.Counter()
    render = values.render

    def counted_render(value, top=True):
        text = render(value, top)
        counted["chars"] += len(text)
        return text

    monkeypatch.setattr(values, "render", counted_render)
    monkeypatch.setattr(records, "render", counted_render)
    with config.patch(max_span_bytes=16384, ignore_span_overflow_hints=False), \
            V.set_graph_handler(graph):
        groups = collect_groups(graph)
    monkeypatch.undo()
    assert [len(group[0]) for group in groups] == [n_ops]
    return counted["chars"], graph_state(graph).plan


def test_recording_a_long_run_renders_a_fixed_amount_per_op(monkeypatch):
    small, middle, large = (_rendered_chars(n, monkeypatch)[0] for n in SIZES)
    assert_linear("rendered characters", small, middle, large)


def test_the_records_still_show_the_run_members_as_they_were(monkeypatch):
    _, plan = _rendered_chars(20, monkeypatch)
    steps = [s for s in plan["buf2"].as_dict()["rule_trace"] if s["section"] == "grouping"]
    assert steps == [{
        "section": "grouping", "rule": "same_split", "outcome": "join",
        "message": "buf2 has the same split as the open run",
        "values": {
            "tiles_correspond": "true",
            "run": "Run(is_open=true, members={'buf0', 'buf1'}, levels=[Level(host_dim=1, "
                   "split=4, is_reduction=false)], tiling={1: 4})",
            "plan": "Plan(levels=[Level(host_dim=1, split=4, is_reduction=false)], "
                    "tiling={1: 4}, reason='output span overflow')",
            "op": "buf2"}}]


def test_a_recorded_step_is_the_step_as_it_was_when_recorded():
    log = NameLog()
    log.add("buf1")
    run = Run(True, log.so_far(), [Level(1, 4, False)], Tiling.of([(1, 4)]))
    step = TraceStep("grouping", "same_split", "join", "m", {"run": run, "members": run.members,
                                                              "n": 3})
    before = step.as_dict()
    kept = step.recorded()
    log.add("buf0")  # the run grows after the step was recorded
    assert kept.as_dict() == before == {
        "section": "grouping", "rule": "same_split", "outcome": "join", "message": "m",
        "values": {"run": "Run(is_open=true, members={'buf1'}, levels=[Level(host_dim=1, "
                          "split=4, is_reduction=false)], tiling={1: 4})",
                   "members": "{'buf1'}", "n": "3"}}
