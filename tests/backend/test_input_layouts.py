"""A graph input a reader must split finer than another read's stick is laid out with that
dim just outside its stick, under automatic tiling (backend/input_layouts.py).

Llama 4's experts multiply the tokens grouped by expert ``[E, T, K]`` by a weight
``[E, K, N]`` (``bmm``).  The generic layout keeps the weight's K outermost (``[K, N/32, E,
32]``): one K row of every expert is 4 KiB, a tile at 64 KiB may hold 16, while the tokens
are stuck on K with 32 a stick: every split of K that fits the weight cut the tokens' sticks
and the sweep's tiny Llama 4 was refused.  With K just outside the stick the weight splits
by experts and N's sticks, the tokens by K's sticks, in one loop of four dims.
"""

from __future__ import annotations

import torch

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules import config
from spyre_rules.engine.api import plan_graph

KiB = 1024


def experts(h, w):
    return torch.bmm((h * 2).view(4, 128, 128), w)


def _inputs():
    g = torch.Generator().manual_seed(41)
    return torch.randn(512, 128, generator=g), torch.randn(4, 128, 256, generator=g)


def _capture(automatic):
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=not automatic):
        ops = spyre_rules.capture_operations(experts, *_inputs())
        weight = ops.graphs[0].graph_inputs["arg1_1"].get_layout()
        plans = [(op.get_name(), None if d.plan is None else
                  [(lv.selected_host_dim, lv.split_count) for lv in d.plan.levels])
                 for op, d in zip(ops, plan_graph(ops))]
        return list(weight.device_layout.device_size), plans


def test_tiling_lays_the_weight_out_experts_outermost_and_splits_four_dims():
    device_size, plans = _capture(automatic=True)
    assert device_size == [4, 8, 128, 32]            # [E, N/32, K, 32]
    assert plans == [("buf0", [(1, 4)]), ("buf1", [(0, 4), (1, 8), (2, 2), (3, 4)])]


def test_untiled_keeps_the_generic_layout():
    device_size, _ = _capture(automatic=False)
    assert device_size == [128, 8, 4, 32]            # [K, N/32, E, 32]


def test_tiled_is_within_float32_summation_of_the_exact_product():
    h, w = _inputs()
    with config.patch(max_span_bytes=64 * KiB, ignore_span_overflow_hints=False):
        out = run_spyre(experts, h, w).output
    # K split in 4: float32 partial sums in another order than eager's (docs/accumulation.md):
    # within the float32 summation bound of the exact product, K * eps * sum |a| |b|
    exact = experts(h.double(), w.double())
    bound = 128 * 2.0 ** -24 * experts(h.double().abs(), w.double().abs())
    assert out.shape == exact.shape
    assert bool(((out.double() - exact).abs() <= bound).all())
