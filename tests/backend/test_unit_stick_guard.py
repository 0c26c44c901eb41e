"""A small read whose every dim a tile must cut is read through a copy stuck on its unit dim.

torch's safe softmax (what scaled-dot-product attention's math path runs) zeroes the
rows of ``softmax(scores)`` that are wholly masked: ``where(all_masked, 0, p)``.  The
guard ``all_masked`` is ``[1, KV, R, L, 1]`` (a bool, 64 values a stick), stuck by
default on the query positions L.  At 200 tokens and 32 KiB the output
``[1, KV, R, L, K]`` (fp32, 896 bytes a row) holds at most 36 positions a tile and one
value each of KV and R: every dim of the guard the tile walks would cut its sticks, so
no split was legal (``input_sticks_whole``) and the sweep's llama-likes at these sizes
were refused.  The where now reads the guard through a copy stuck on its size-1 dim,
one value a stick (``restickify._off_a_cut_stick``), that no split cuts
(``stick_layout.within_stick_host_dim``).  The op's own write counts in which tiles it
must cut.
"""

from __future__ import annotations

import torch

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules import config
from spyre_rules.engine.api import plan_graph
from spyre_rules.facts.stick_layout import within_stick_host_dim

KiB = 1024
TILED = {"max_span_bytes": 32 * KiB, "ignore_span_overflow_hints": False}


def safe_softmax(scores):
    return torch.ops.aten._safe_softmax(scores, -1)


def _scores():
    x = torch.randn(1, 2, 3, 200, 200, generator=torch.Generator().manual_seed(41))
    x[..., 5, :] = float("-inf")      # a wholly masked row: zeros, not NaN
    x[..., 7, 100:] = float("-inf")   # a partly masked one
    return x


def _stick(op):
    layout = op.get_layout()
    return within_stick_host_dim([int(s) for s in layout.size], [int(s) for s in layout.stride],
                                 layout.device_layout)


def _guards_and_where():
    """(stick host dim of each [1, 2, 3, 200, 1] op in order, the where's plan, its error)."""
    with config.patch(**TILED):
        ops = spyre_rules.capture_operations(safe_softmax, _scores())
        decisions = plan_graph(ops)
        guards = [_stick(op) for op in ops if [int(n) for n in op.get_size()] == [1, 2, 3, 200, 1]]
        where = decisions[-1]  # the output: the where, last
        levels = None if where.plan is None else [(lv.selected_host_dim, lv.split_count)
                                                  for lv in where.plan.levels]
        return guards, levels, where.error


def test_the_guard_is_read_stuck_on_its_unit_dim():
    # the any over the keys, its not, the row max and the row sum (stuck on the
    # positions, dim 3), then the copy of the guard the where reads (stuck on the unit
    # dim 4); the where is split by kv heads, heads per kv head and 6 position blocks
    guards, levels, error = _guards_and_where()
    assert (guards, levels, error) == ([3, 3, 3, 3, 4], [(1, 2), (2, 3), (3, 6)], None)


def test_tiled_equals_untiled_and_eager():
    x = _scores()
    with config.patch(**TILED):
        tiled = run_spyre(safe_softmax, x).output
    with config.patch(ignore_span_overflow_hints=True):
        untiled = run_spyre(safe_softmax, x).output
    assert torch.equal(tiled, untiled)
    expected = safe_softmax(x)
    assert torch.equal(tiled[..., 5, :], torch.zeros_like(tiled[..., 5, :]))
    # the program sums each row in its own order: within fp32 rounding of eager
    assert torch.allclose(tiled, expected, rtol=0, atol=1e-7)
