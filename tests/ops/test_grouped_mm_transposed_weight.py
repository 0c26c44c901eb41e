"""gpt_oss's grouped experts matmul, its weight ``[E, K, N]`` (issue 41).

gpt_oss stores ``gate_up_proj`` as ``[E, hidden, 2 * intermediate]`` and ``down_proj`` as
``[E, intermediate, hidden]`` and multiplies them untransposed
(``_grouped_linear(..., is_transposed=True)``): the grouped product reads ``w[g(t), k, n]``
(backend/grouped_mm.py), the expert gathered through each row's group.  The weight's generic
layout ``[K, N/32, E, 32]`` puts K outermost, one K row of every expert 2 KiB here, so a tile
at 8 KiB holds 4 values of K while the rows ``x [S, K]`` are stuck on K, 32 a stick.
``input_layouts`` used to give such an input the staged layout ``[E, N/32, K, 32]``, the
gathered experts outermost: any row may pick any expert, so every tile spanned the whole
weight and the product was refused ("no split brings its gathered read under the limit of
8192 bytes (gathered rows of arg0_1 (any index may pick any row): device dim 0 (tmp2) spans
131072 bytes)"; the sweep's gpt_oss the same at 64 KiB, 524288 bytes).

A gathered input is now stuck on the finely split dim with the gathered dim just outside the
stick: ``[N, K/32, E, 32]``, Mixtral's layout (tests/ops/test_grouped_mm_tiling.py), and
the product tiles as Mixtral's does: stuck on its rows, rows in 3 tiles, N in 16 and K in 2,
every access within 8 KiB (span_check="error").  A weight computed in the graph (``w * 2``)
is read through a restickify copy laid out so (backend/gathered_sticks.py), staged as the
restickify policy says, and the product plans the same.
"""

from __future__ import annotations

import pytest
import torch

from grouped_mm_helpers import ROWS, auto_tiled, grouped_inputs, per_row, split_levels
from ops_helpers import run_spyre

import spyre_rules
from spyre_rules import config

moe = pytest.importorskip("transformers.integrations.moe")

KiB = 1024
LIMIT = 8 * KiB
EXPERTS, K, N = 4, 64, 128


def experts(x, w, offs):
    return moe._grouped_linear(x, w, offs, is_transposed=True)


def _per_row(x, w, offs):
    return per_row(x, w, offs, transposed=True)


def _inputs():
    return grouped_inputs(K, (EXPERTS, K, N))


def _auto():
    return auto_tiled(LIMIT)


def test_the_gathered_weight_is_stuck_on_its_depth_with_the_experts_inside():
    with _auto():
        ops = spyre_rules.capture_operations(experts, *_inputs())
        plans = dict(split_levels(ops))
        graph = ops.graphs[0]
        weight = graph.graph_inputs["arg0_1"].get_layout().device_layout
        out = next(op for op in ops if op.get_name() == "buf1").get_layout()
    assert list(weight.device_size) == [N, K // 32, EXPERTS, 32]  # [N, K/32, E, 32]
    assert list(weight.stride_map) == [1, 32 * N, K * N, N]       # stuck on K
    assert list(out.device_layout.device_size) == [3, N, 32]       # stuck on the rows
    assert plans == {"buf0": None, "buf1": [(0, 3), (1, 16), (2, 2)]}


def scaled_experts(x, w, offs):
    return moe._grouped_linear(x, w * 2, offs, is_transposed=True)


def test_a_computed_gathered_weight_is_read_through_a_copy_stuck_on_its_depth():
    with _auto():
        ops = spyre_rules.capture_operations(scaled_experts, *_inputs())
        plans = split_levels(ops)
        sizes = {op.get_name(): list(op.get_layout().device_layout.device_size) for op in ops}
    # buf0 = w * 2 stuck on N; buf3 its copy [N, K/32, E, 32] through two stages
    # (buf4 keeps the stick with K just outside it, buf5 is stuck on K with N outside)
    assert sizes == {"buf0": [K, N // 32, EXPERTS, 32], "buf1": [3, 32],
                     "buf4": [EXPERTS, N // 32, K, 32], "buf5": [EXPERTS, K // 32, N, 32],
                     "buf3": [N, K // 32, EXPERTS, 32], "buf2": [3, N, 32]}
    assert plans == [("buf0", [(1, 16)]), ("buf1", None), ("buf4", [(0, 4), (1, 16), (2, 4)]),
                     ("buf5", [(0, 4), (1, 2), (2, 4)]), ("buf3", [(0, 4), (1, 2), (2, 16)]),
                     ("buf2", [(0, 3), (1, 16), (2, 2)])]


def test_untiled_keeps_the_generic_layout():
    with config.patch(max_span_bytes=LIMIT, ignore_span_overflow_hints=True):
        ops = spyre_rules.capture_operations(experts, *_inputs())
        weight = ops.graphs[0].graph_inputs["arg0_1"].get_layout().device_layout
    assert list(weight.device_size) == [K, N // 32, EXPERTS, 32]  # [K, N/32, E, 32]


@pytest.mark.parametrize("fn, scale, loops", [(experts, 1, [2, 1]),
                                               (scaled_experts, 2, [16, 4, 4, 2, 1])])
def test_the_tiled_product_is_within_the_float32_summation_bound(fn, scale, loops):
    x, w, offs = _inputs()
    with _auto():
        compiled = run_spyre(fn, x, w, offs)
    out = compiled.output
    w = w * scale  # exact: a power of two
    # K split in 2: float32 partial sums in another order than eager's (docs/accumulation.md):
    # within the float32 summation bound of the exact product, K * eps * sum |x| |w|
    exact = _per_row(x.double(), w.double(), offs)
    bound = K * 2.0 ** -24 * _per_row(x.double().abs(), w.double().abs(), offs)
    eager = fn(x, w / scale, offs).double()
    assert bool(((eager - exact).abs() <= bound).all())
    assert out.shape == exact.shape == (ROWS, N)
    assert bool(((out.double() - exact).abs() <= bound).all())
    counts = [int(s.count) for k in compiled.kernels for s in k.specs if hasattr(s, "count")]
    # the outer loops of the kernels: the copies' of the computed weight, then the
    # product's rows: 2 whole tiles of 32, then the peeled tile of 13
    assert counts == loops
