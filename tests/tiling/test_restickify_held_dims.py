"""A restickified copy puts the dims its reader holds at one value outermost (issue 41).

JetMoE's experts run ``F.linear(x, w[e])`` on one expert's weights of a stack ``[E, N, K]``:
the matmul reads ``w[e]`` transposed, so the stack is restickified onto N.  The generic
layout moved the stack's outermost dim, the experts, just before the stick, inside K:
every step of K strode over all the experts, 32 rows of K (one stick of x's) spanned
``32 x E x N x 4`` bytes, and no split of the matmul fitted 64 KiB.  The copy now keeps
the selected dim outermost (``stick_layout.restickify_layout``'s ``held_dims``): a step of
K is one stick, and the matmul tiles.  A copy is exact.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tiling_helpers import loop_counts, run_spyre, verify_program
from spyre_rules import config
from spyre_rules.facts.stick_layout import restickify_layout


def experts(x, w):
    return F.linear(x[:32], w[1]), F.linear(x[32:], w[3])


def test_selected_experts_weights_tile_and_equal_eager():
    g = torch.Generator().manual_seed(0)
    x, w = torch.randn(64, 128, generator=g), torch.randn(4, 256, 128, generator=g)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=65536):
        compiled = run_spyre(experts, x, w)
    for out, ref in zip(compiled.output, experts(x, w)):
        assert torch.equal(out, ref)
    assert max(span for *_, span in verify_program(compiled)) <= 65536
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        [(4, [(8, ["ReStickifyOpHBM"])])],        # the copy, by experts and weight rows
        [(2, ["batchmatmul"])], [(2, ["batchmatmul"])]]


def test_held_dims_go_outermost_and_the_first_walked_dim_inside():
    # [E, N, K] onto N: generic [K, N/32, E, 32]; with E held [E, N/32, K, 32]
    assert restickify_layout([4, 256, 128], [32768, 128, 1], torch.float32, 1).device_size \
        == (128, 8, 4, 32)
    assert restickify_layout([4, 256, 128], [32768, 128, 1], torch.float32, 1, [0]).device_size \
        == (4, 8, 128, 32)
    # a rank-2 buffer has one other dim: nothing to reorder
    assert restickify_layout([256, 128], [128, 1], torch.float32, 0, [1]) \
        == restickify_layout([256, 128], [128, 1], torch.float32, 0)
