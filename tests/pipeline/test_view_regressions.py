"""Views, reshapes and permutes compile to programs equal to eager, every access in bounds.

Regressions of the correctness issue's classes W5/C2 (an untiled view whose rows
straddle source rows lost the carry between index terms), C1 (an auto-tiled op
reading its input through a merged view) and A1 (automatic grouping across a
permute).  Each program is compiled with ``backend="spyre_rules"`` and
``fallback="error"``, compared with eager, and every generated access is
re-measured by the independent span verifier (in bounds, within the limit).
"""

from __future__ import annotations

import pytest
import torch

from pipeline_helpers import DEMO_LIMIT, assert_close, auto_refusal, run_auto, span_violations

UNTILED = dict(ignore_span_overflow_hints=True)


def _check(fn, x, limit=DEMO_LIMIT, **cfg):
    run = run_auto(fn, x, **cfg)
    assert_close(run.output, fn(x))
    specs = run.op_specs()
    assert specs
    for spec in specs:
        assert span_violations(spec, limit) == []
    return run


@pytest.mark.parametrize("src, tgt, dtype", [
    ((2, 3), (3, 2), torch.float32),          # W5: c1 + Mod(2*c0, 3) reached 3
    ((3, 64), (64, 3), torch.float16),        # C2: coordinate 2 left [0, 64) at run time
    ((5, 37), (37, 5), torch.float32),        # a padded stick under the straddling rows
    ((4, 6, 5), (5, 24), torch.float16),
    ((3, 70), (10, 21), torch.float16),
])
def test_untiled_view_straddling_rows_equals_eager(src, tgt, dtype):
    x = torch.arange(torch.Size(src).numel(), dtype=torch.float32).reshape(src).to(dtype)
    _check(lambda t: t.view(tgt) + 1.0, x, **UNTILED)


@pytest.mark.parametrize("fn", [
    lambda t: t.permute(1, 0, 2).reshape(6, 14) * 2.0,
    lambda t: t.transpose(0, 2).contiguous().view(6, 14) + 1.0,
    lambda t: t[..., :5].reshape(4, 15) + 1.0,
], ids=["permute_reshape", "transpose_contiguous_view", "slice_reshape"])
def test_untiled_reads_through_permuted_and_sliced_views_equal_eager(fn):
    x = torch.randn(3, 4, 7).to(torch.float16)
    _check(fn, x, **UNTILED)


def test_auto_tiled_read_through_a_merged_view_is_refused_at_compile_time():
    """C1: at 4 KiB the op's output (64, 64) needs a split of its merged (2*32) dim, but
    every tile of 32 rows reads 8 KiB of x (2, 32, 64) and a tile of 16 rows is no
    rigid translation of the first one: no span-safe loop exists.  (It used to compile,
    derive the read over the per-tile range, fold floor(c0/32) to 0 and read past x.)"""
    x = torch.randn(2, 32, 64).to(torch.float16)
    cause = auto_refusal(lambda t: t.reshape(64, 64) * 2.0, x, max_span_bytes=4096)
    assert str(cause) == (
        "spyre_rules cannot compile this graph: Cannot auto-tile buf0 (aten ops: mul.Tensor, "
        "reshape.default): no combined split among host dims [0] keeps every span within 4096 "
        "bytes after trying 14 combinations (the last: the tiles of buf0 under split {0: 64} are "
        "not rigid translations of the first tile (a split through part of a stick, a wrapping "
        "access or a dim the op computes a value from))")


def test_auto_grouping_shares_a_loop_across_a_permute_on_corresponding_dims():
    """A1: x + 1 and its transposed copy both split their host dim 1 in two, but dim 1
    of the copy is dim 0 of x + 1: one loop on the same dim number would pair tiles
    that hold other elements.  The copy refines the run instead: one loop of 2 x 2 in
    which each op tiles its own dims (the copy's dim 1 is x + 1's dim 0, by
    read_tile_dim), equal to eager."""
    x = torch.randn(4, 8, 64).to(torch.float16)
    run = _check(lambda t: (t + 1.0).transpose(0, 1).contiguous(), x, limit=2048,
                 max_span_bytes=2048)
    (loop,) = run.loops()
    (inner,) = loop.body
    assert (int(loop.count), int(inner.count)) == (2, 2)


def test_auto_grouping_still_shares_a_loop_when_tiles_correspond():
    x = torch.randn(8, 4, 64).to(torch.float16)
    run = _check(lambda t: (t + 1.0) * 2.0, x, limit=2048, max_span_bytes=2048)
    assert len(run.loops()) == 1
