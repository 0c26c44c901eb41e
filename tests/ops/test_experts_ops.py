"""The experts' and Mamba2's ops on the program under fallback='error' (issue 41):
topk and sort as counting reductions (backend/ranking.py), histc bin for bin ATen's
(backend/histogram.py), grouped matmuls as one reduction with an indirect weight read
(backend/grouped_mm.py), a depthwise conv1d as shifted slices (backend/depthwise_conv.py),
a grouped or dense one as shifted matmuls (backend/grouped_conv.py).

Exact where the math is: values of topk/sort, indices wherever the order is strict
(and the stable order among ties), every histc count.  The matmul and the conv sum in
another order than ATen: the ops tests' tolerance.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ops_helpers import assert_same, check, randint, randn, run_spyre

NAN = float("nan")


# -- topk ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
def test_router_topk_equals_eager_values_and_indices(dtype):
    logits = randn(16, 8, dtype=dtype)  # no ties
    check(lambda x: torch.topk(torch.softmax(x, -1), 2, dim=-1), logits)


def test_topk_smallest_along_dim_0_and_sorted_false():
    x = randn(9, 5)
    check(lambda x: torch.topk(x, 3, dim=0, largest=False), x)
    values, indices = run_spyre(lambda x: torch.topk(x, 3, sorted=False), x).output
    assert torch.equal(values, torch.topk(x, 3).values)  # sorted: one order ATen may give
    assert torch.equal(indices, torch.topk(x, 3).indices)


def test_topk_with_ties_gives_the_values_and_the_lowest_indices_first():
    x = randint(0, 3, 6, 8).float()
    values, indices = run_spyre(lambda x: torch.topk(x, 4), x).output
    assert torch.equal(values, torch.topk(x, 4).values)
    stable = torch.sort(x, descending=True, stable=True)
    assert torch.equal(indices, stable.indices[:, :4])


def test_topk_orders_nan_above_every_number_as_aten():
    x = torch.tensor([[1.0, NAN, 3.0, NAN, -2.0], [0.5, 0.25, NAN, 4.0, 1.0]])
    check(lambda x: torch.topk(x, 3), x)
    check(lambda x: torch.topk(x, 2, largest=False), x)


# -- sort ------------------------------------------------------------------------------

def test_expert_id_sort_equals_a_stable_sort():
    ids = randint(0, 4, 32)  # many ties: transformers' grouped experts sort these
    values, indices = run_spyre(lambda x: torch.sort(x), ids).output
    stable = torch.sort(ids, stable=True)
    assert torch.equal(values, stable.values) and torch.equal(indices, stable.indices)
    check(lambda x: torch.sort(x, stable=True), ids)
    check(lambda x: torch.argsort(x, stable=True, descending=True), ids)


@pytest.mark.parametrize("descending", [False, True])
def test_float_sort_with_nan_along_either_dim(descending):
    x = randn(6, 7)
    x[1, 3] = x[4, 0] = x[4, 5] = NAN
    check(lambda x: torch.sort(x, dim=1, descending=descending), x)
    check(lambda x: torch.sort(x, dim=0, descending=descending), x)


# -- histc -----------------------------------------------------------------------------

def test_expert_counts_by_histc_are_exact():
    ids = randint(0, 4, 32).float()
    check(lambda x: torch.histc(x, bins=4, min=0, max=3), ids)


def _around_every_bound(bins, low, high, dtype, seed=0):
    """Every bin's least and greatest value, one ulp either side, noise, NaN, the ends."""
    from spyre_rules.backend.histogram import histc_bin_bounds

    edges = torch.tensor([float(v) for bound in histc_bin_bounds(bins, low, high, dtype)
                          for v in bound], dtype=dtype)
    up, down = torch.tensor(1e30, dtype=dtype), torch.tensor(-1e30, dtype=dtype)
    return torch.cat([edges, torch.nextafter(edges, up), torch.nextafter(edges, down),
                      randn(64, dtype=dtype, seed=seed) * 2,
                      torch.tensor([NAN, low, high, 5.0], dtype=dtype)])


def test_float_histc_bins_every_value_as_aten():
    bins, low, high = 7, -1.3, 2.9
    x = _around_every_bound(bins, low, high, torch.float32)
    compiled = check(lambda x: torch.histc(x, bins=bins, min=low, max=high), x)
    assert torch.equal(compiled.output, torch.histc(x, bins=bins, min=low, max=high))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("bins, low, high", [(4, 0, 3), (7, -1.3, 2.9), (100, 0.1, 0.3),
                                             (3, -1e-3, 1e-3), (64, -1000.0, 7.0)])
def test_the_bin_bounds_count_as_atens_kernel(dtype, bins, low, high):
    """The compile-time bounds against ATen's own CPU kernel (no program: every dtype)."""
    from spyre_rules.backend.histogram import histc_bin_bounds

    bounds = histc_bin_bounds(bins, low, high, dtype)
    x = _around_every_bound(bins, low, high, dtype, seed=bins)
    lower = torch.tensor([float(lo) for lo, _ in bounds], dtype=dtype).unsqueeze(-1)
    upper = torch.tensor([float(hi) for _, hi in bounds], dtype=dtype).unsqueeze(-1)
    counts = ((x >= lower) & (x <= upper)).sum(-1).to(dtype)
    assert torch.equal(counts, torch.histc(x, bins=bins, min=low, max=high))


def test_histc_over_the_datas_own_range_is_refused_by_name():
    with pytest.raises(Exception, match=r"histc.default.*no Spyre lowering"):
        run_spyre(lambda x: torch.histc(x, bins=4), randn(10))


# -- grouped matmul --------------------------------------------------------------------

def _offsets(counts):
    return torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32)


def test_grouped_mm_equals_eager_on_the_grouped_rows():
    # torch._grouped_mm compiles for bfloat16 only; both accumulate in float32
    x, w = randn(12, 16, dtype=torch.bfloat16), randn(3, 16, 32, dtype=torch.bfloat16, seed=1)
    offs = _offsets([5, 0, 4])  # an empty group; rows 9.. belong to none
    out = run_spyre(lambda x, w, o: torch._grouped_mm(x, w, offs=o), x, w, offs).output
    ref = torch._grouped_mm(x, w, offs=offs)
    assert out.dtype == torch.bfloat16
    # one rounding of a float32 sum each: at most a bfloat16 ulp apart
    torch.testing.assert_close(out[:9].float(), ref[:9].float(), rtol=2 ** -7, atol=0)
    assert torch.equal(out[9:], torch.zeros(3, 32, dtype=torch.bfloat16))  # ATen: unspecified


def test_transformers_grouped_mm_fallback_equals_eager_on_a_transposed_weight():
    moe = pytest.importorskip("transformers.integrations.moe")
    x, w = randn(10, 32), randn(4, 64, 32, seed=1)  # (experts, out, in) as nn.Linear stores
    offs = _offsets([2, 3, 0, 5])

    def fn(x, w, o):
        return moe._grouped_linear(x, w, o, is_transposed=False)

    check(fn, x, w, offs)


# -- depthwise conv1d ------------------------------------------------------------------

def test_mamba_causal_depthwise_conv1d_equals_eager():
    x, w, b = randn(2, 12, 16), randn(12, 1, 4, seed=1), randn(12, seed=2)

    def causal_conv(x, w, b):
        return F.silu(F.conv1d(x, w, b, padding=3, groups=12)[..., :16])

    check(causal_conv, x, w, b)


def test_strided_dilated_depthwise_conv1d_without_bias():
    x, w = randn(1, 8, 20), randn(8, 1, 3, seed=1)
    check(lambda x, w: F.conv1d(x, w, None, stride=2, padding=2, dilation=2, groups=8), x, w)


def test_zaya_grouped_conv1d_after_a_depthwise_one_equals_eager():
    # ZAYA's CCA: 6 heads of 8 channels, a depthwise then a grouped conv, 2 taps each
    x, wd, bd = randn(1, 48, 18), randn(48, 1, 2, seed=1), randn(48, seed=2)
    wg, bg = randn(48, 8, 2, seed=3), randn(48, seed=4)

    def cca(x, wd, bd, wg, bg):
        padded = F.pad(x, (2, 0))
        return F.conv1d(F.conv1d(padded, wd, bd, groups=48), wg, bg, groups=6)

    check(cca, x, wd, bd, wg, bg)


def test_dense_strided_padded_conv1d_batch_two_equals_eager():
    x, w = randn(2, 4, 10), randn(6, 4, 3, seed=1)
    check(lambda x, w: F.conv1d(x, w, stride=2, padding=1, dilation=2), x, w)


def test_grouped_conv1d_half_rounds_once_from_float32():
    x, w, b = randn(1, 8, 12, dtype=torch.float16), randn(4, 4, 3, seed=1, dtype=torch.float16), \
        randn(4, seed=2, dtype=torch.float16)
    fn = lambda x, w, b: F.conv1d(x, w, b, groups=2)  # noqa: E731
    out = run_spyre(fn, x, w, b).output
    ref = F.conv1d(x.float(), w.float(), b.float(), groups=2).to(torch.float16)
    assert_same(out, ref)


def test_a_2d_conv_is_still_refused_by_name():
    x, w = randn(1, 4, 6, 6), randn(6, 4, 3, 3, seed=1)
    with pytest.raises(Exception, match=r"convolution.*no Spyre lowering"):
        run_spyre(lambda x, w: F.conv2d(x, w), x, w)
