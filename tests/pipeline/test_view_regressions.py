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

from pipeline_helpers import DEMO_LIMIT, assert_close, run_auto, span_violations

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
