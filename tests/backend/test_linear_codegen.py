"""Compiling a graph does a fixed amount of per-graph lookup work per kernel.

Counted, not timed: a chain of 20, 40 and 60 ops (one kernel each, untiled) through
``torch.compile``.  Rebuilding a per-graph lookup per kernel made compile time
quadratic in the graph (RWKV's 7000-op graph at the sweep's sizes spent minutes in
these): the HBM segments' bounds read per kernel (``Segment.end``) and the graph's
ops scanned for accumulators per kernel.  Built once per graph, each grows by the
same amount per 20 ops (second difference 0).  Inductor's own fusion search asks
nothing: our Scheduling never fuses, so no pair is tried (``Scheduler.can_fuse``
is never called) and the program is the same.
"""

from __future__ import annotations

import collections
import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from torch._inductor.scheduler import Scheduler  # noqa: E402

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.backend import scheduling  # noqa: E402
from spyre_rules.program.memory_map import Segment  # noqa: E402
from linear_growth import SIZES, assert_linear, chain  # noqa: E402


def _counts(n_ops: int, monkeypatch: pytest.MonkeyPatch) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    end = Segment.end.fget
    accumulators = scheduling.accumulators
    can_fuse = Scheduler.can_fuse

    def counted_end(self):
        counts["segment ends read"] += 1
        return end(self)

    def counted_accumulators(graph):
        counts["ops scanned for accumulators"] += len(graph.operations)
        return accumulators(graph)

    def counted_can_fuse(self, *args, **kwargs):
        counts["fusion pairs tried"] += 1
        return can_fuse(self, *args, **kwargs)

    monkeypatch.setattr(Segment, "end", property(counted_end))
    monkeypatch.setattr(scheduling, "accumulators", counted_accumulators)
    monkeypatch.setattr(Scheduler, "can_fuse", counted_can_fuse)
    x = torch.randn(4, 64, 128)
    torch._dynamo.reset()
    with config.patch(fallback="error"):
        out = torch.compile(chain(n_ops), backend="spyre_rules")(x)
    monkeypatch.undo()
    assert torch.equal(out, chain(n_ops)(x))
    return counts


def test_per_graph_lookups_cost_a_fixed_amount_per_kernel(monkeypatch):
    counts = [_counts(n, monkeypatch) for n in SIZES]
    for what in ("segment ends read", "ops scanned for accumulators"):
        assert_linear(what, *(c[what] for c in counts))
    assert [c["fusion pairs tried"] for c in counts] == [0, 0, 0]
