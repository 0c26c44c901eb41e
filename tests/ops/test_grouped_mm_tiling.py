"""A grouped experts matmul tiled inside one expert's weight (issue 41, other sizes).

transformers' experts multiply the rows grouped by expert ``x [S, K]`` by
``w[g(t)].T``, the weight ``[E, N, K]`` as ``nn.Linear`` stores it
(backend/grouped_mm.py: one reduction over K whose read of ``w`` is gathered through
the row's expert).  The weight's generic layout is ``[N, K/32, E, 32]``: one output
column of every expert is ``E * K * 4`` bytes, so a tile that fits the limit holds
fewer columns than a stick.  With the output stuck on N (its last host dim) no split of
N kept its sticks whole, the only combination left split K, and the sweep's experts
models at hidden 256 were refused at 64 KiB ("no combined split among host dims [1, 2,
0] ... after trying 1 combination (the last: an output span of buf107 still exceeds
65536 bytes ...)").  The same sizes scaled down (4 experts of ``64 x 64``, 77 rows, 8 KiB:
one column of every expert 1 KiB, at most 8 columns a tile) were refused the same way:
"no combined split among host dims [1, 2, 0] keeps every span within 8192 bytes after
trying 1 combination (the last: an output span of buf1 still exceeds 8192 bytes with
split {0: 2})".

Under automatic tiling the reduction's output is stuck on its rows instead
(``stick_choice.restuck_off_a_wide_read``: its stick variable alone drives an outer dim
of the weight read that must be split finer than a stick), so N splits freely: rows in
3 tiles of whole sticks (32, 32 and a peeled 13), N in 8 tiles of 8 columns and K in 2
tiles of one stick each, every access within 8 KiB (span_check="error").
"""

from __future__ import annotations

import pytest
import torch

from grouped_mm_helpers import ROWS, auto_tiled, grouped_inputs, per_row, split_levels
from ops_helpers import randn, run_spyre

import spyre_rules

moe = pytest.importorskip("transformers.integrations.moe")

KiB = 1024
LIMIT = 8 * KiB
EXPERTS, N, K = 4, 64, 64


def experts(x, w, offs):
    return moe._grouped_linear(x, w, offs, is_transposed=False)


def _per_row(x, w, offs):
    return per_row(x, w, offs, transposed=False)


def _inputs():
    return grouped_inputs(K, (EXPERTS, N, K))


def _auto():
    return auto_tiled(LIMIT)


def test_the_grouped_matmul_splits_rows_columns_and_depth_of_one_expert():
    with _auto():
        ops = spyre_rules.capture_operations(experts, *_inputs())
        plans = dict(split_levels(ops))
        graph = ops.graphs[0]
        weight = graph.graph_inputs["arg0_1"].get_layout().device_layout.device_size
        out = next(op for op in ops if op.get_name() == "buf1").get_layout()
    assert list(weight) == [N, K // 32, EXPERTS, 32]  # one column of every expert: 1 KiB
    # the output stuck on its rows (3 sticks of 77), N an outer dim of it
    assert list(out.device_layout.device_size) == [3, N, 32]
    # buf0: each row's expert (no span over the limit); buf1: the product
    assert plans == {"buf0": None, "buf1": [(0, 3), (1, 8), (2, 2)]}


def test_the_tiled_grouped_matmul_is_within_the_float32_summation_bound():
    x, w, offs = _inputs()
    with _auto():
        compiled = run_spyre(experts, x, w, offs)
    out = compiled.output
    # K split in 2: float32 partial sums in another order than eager's (docs/accumulation.md):
    # within the float32 summation bound of the exact product, K * eps * sum |x| |w|
    exact = _per_row(x.double(), w.double(), offs)
    bound = K * 2.0 ** -24 * _per_row(x.double().abs(), w.double().abs(), offs)
    assert torch.allclose(experts(x, w, offs).double(), exact, rtol=0, atol=1e-4)  # eager too
    assert out.shape == exact.shape == (ROWS, N)
    assert bool(((out.double() - exact).abs() <= bound).all())
    counts = [int(s.count) for k in compiled.kernels for s in k.specs if hasattr(s, "count")]
    # the rows' loop: 2 whole tiles of 32, then the peeled tile of 13 (columns, depth inside)
    assert counts == [2, 1]


def _swiglu_halves(x, w, offs):
    """The experts' ``act(gate) * up`` of ``gate, up = (x @ w[g].T).chunk(2, -1)``."""
    gate, up = experts(x, w, offs).chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def test_an_up_half_that_starts_inside_a_stick_is_refused_by_its_read_and_runs_eagerly():
    """Intermediate 48 (1.5 sticks): ``up`` starts at column 48 of the ``[77, 96]`` product,
    half way into a stick.  That product is read stuck on its columns (a copy of the grouped
    matmul's rows-stuck output), one stick column of 77 rows 9,856 bytes: every tile of the
    product reads two stick columns, over 8 KiB whatever the rows do (the sweep's mixtral,
    granitemoe, olmoe and phimoe at intermediate 176 and 258 routed rows, 32 KiB).  The
    refusal names the op and the read; the default fallback runs the graph eagerly."""
    x, _, offs = _inputs()
    w = randn(EXPERTS, 2 * 48, K, seed=1)
    with _auto(), pytest.warns(UserWarning) as caught:
        compiled = run_spyre(_swiglu_halves, x, w, offs, fallback="eager")
    assert torch.equal(compiled.output, _swiglu_halves(x, w, offs))
    assert not compiled.kernels
    reasons = [str(m.message) for m in caught if "running this graph eagerly" in str(m.message)]
    assert len(reasons) == 1
    assert reasons[0].endswith(
        "Cannot auto-tile buf6 (aten ops: mul.Tensor, split.Tensor): no combined split among "
        "host dims [1, 0] keeps every span within 8192 bytes after trying 30 combinations (the "
        "last: an input span of buf6 still exceeds 8192 bytes with split {0: 77, 1: 2}: "
        "['input span overflow for buf7 (19712 bytes)'])")
