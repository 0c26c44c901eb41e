"""A buffer stuck on a variable automatic tiling must split finer than a stick is stuck elsewhere.

xLSTM's multi-head norm takes the mean of ``h.transpose(1, 2)`` over each head and
subtracts it: the mean ``[1, L, H, 1]`` is stuck on its 8 heads by default (the last
host dim above 1), while both ops read ``h`` with the heads outermost, 16 KiB a head.
At 64 KiB a tile may hold 4 heads, half of one stick of the mean: the mean could not
split its output (``output_sticks_whole``) nor the subtraction its read of the mean
(``input_sticks_whole``), and the sweep's tiny xLSTM was refused.  Under automatic
tiling the mean's output is stuck on its positions (``stick_choice.restuck_off_a_wide_read``)
and the subtraction reads the mean through a copy stuck on them
(``restickify._off_a_cut_stick``); untiled nothing changes.
"""

from __future__ import annotations

import torch

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules import config
from spyre_rules.engine.api import plan_graph
from spyre_rules.facts.stick_layout import within_stick_host_dim

KiB = 1024


def head_norm_center(x, n):
    h = (x / n[..., None]).reshape(1, 8, 128, 16).transpose(1, 2)  # heads outermost in memory
    return h - h.mean(-1, keepdim=True)


def _inputs():
    g = torch.Generator().manual_seed(41)
    return (torch.randn(1, 8, 2, 64, 16, generator=g),
            torch.rand(1, 8, 2, 64, generator=g) + 1)


def _plans(automatic):
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=not automatic):
        ops = spyre_rules.capture_operations(head_norm_center, *_inputs())
        rows = []
        for op, d in zip(ops, plan_graph(ops)):
            layout = op.get_layout()
            stick = within_stick_host_dim([int(s) for s in layout.size],
                                          [int(s) for s in layout.stride], layout.device_layout)
            levels = None if d.plan is None else [(lv.selected_host_dim, lv.split_count)
                                                  for lv in d.plan.levels]
            rows.append((op.get_name(), stick, levels, d.error is None))
        return rows


def test_tiling_sticks_the_mean_on_its_positions():
    # (op, its stick host dim, its plan, planned without refusal): the division, the sum
    # (stuck on its positions, dim 1, split by heads), the copy of it onto the heads that
    # the division by 16 reads, that division, the copy of it back onto the positions
    # that the subtraction reads, the subtraction (split by positions and heads)
    assert _plans(automatic=True) == [
        ("buf0", 4, [(1, 2)], True), ("buf1", 1, [(2, 2)], True), ("buf4", 2, None, True),
        ("buf2", 2, None, True), ("buf5", 1, None, True), ("buf3", 3, [(1, 2), (2, 2)], True)]


def test_untiled_keeps_the_default_sticks():
    assert [(name, stick) for name, stick, _, _ in _plans(automatic=False)] == [
        ("buf0", 4), ("buf1", 2), ("buf2", 2), ("buf3", 3)]


def test_tiled_equals_eager():
    x, n = _inputs()
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=False):
        out = run_spyre(head_norm_center, x, n).output
    assert torch.equal(out, head_norm_center(x, n))
