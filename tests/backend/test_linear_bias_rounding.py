"""A linear / addmm with bias in float16 or bfloat16 rounds once, as eager does:
``round(bias + sum_k x*w)`` with the sum and the bias add in float32 (issue 32: the
product was rounded to the half dtype before the bias add, so 30% of the outputs
were ``round(round(x @ w.T) + b)``).  On every route: untiled, a tiled K
(accumulated across tiles), tiled M in a counted or unrolled loop, a batched
linear and addmm's alpha/beta.

Eager's float32 sum runs in another order than the executor's, so an output whose
terms cancel may still round to a neighbour: the bound is at most 1% of the
outputs differing, each by at most one ulp of the float32 sum's scale
``sum_k |x*w| + |b|`` (the double rounding broke both)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))

import fuzz_paths  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.accumulate import INIT  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec, iter_op_specs  # noqa: E402
from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


def _mantissa_bits(dtype):
    return {torch.float16: 10, torch.bfloat16: 7}[dtype]


def _assert_rounds_once(out, expected, scale, dtype):
    assert out.dtype == expected.dtype == dtype
    differ = out != expected
    assert differ.float().mean().item() < 0.01, f"{int(differ.sum())} of {differ.numel()} differ"
    exponent = torch.floor(torch.log2(scale.clamp_min(torch.finfo(dtype).tiny)))
    ulp = 2.0 ** (exponent - _mantissa_bits(dtype))
    assert bool(((out.double() - expected.double()).abs() <= ulp).all())


def _hinted(slices, fn):
    def run(*xs):
        with spyre_hint(slices=slices):
            return fn(*xs)
    return run


def _linear(x, w, b):
    return F.linear(x, w, b)


# name -> (fn, x shape, config patch)
ROUTES = {
    "untiled": (_linear, (256, 64), {}),
    "K tiled by a hint (accumulated)": (_hinted({"K": 4}, _linear), (256, 64), {}),
    "M tiled by a hint": (_hinted({"M": 4}, _linear), (256, 64), {}),
    "M tiled by a hint, unrolled": (_hinted({"M": 4}, _linear), (256, 64), {"unroll_loops": True}),
    "a batched linear": (_linear, (4, 64, 64), {}),
    "addmm, alpha 0.5, beta 2": (lambda x, w, b: torch.addmm(b, x, w.t(), alpha=0.5, beta=2),
                                 (256, 64), {}),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("route", list(ROUTES))
def test_linear_with_bias_rounds_once_like_eager(route, dtype):
    fn, x_shape, patch = ROUTES[route]
    g = torch.Generator().manual_seed(1)
    x = torch.randn(x_shape, generator=g).to(dtype)
    w = torch.randn(512, x_shape[-1], generator=g).to(dtype)
    b = torch.randn(512, generator=g).to(dtype)
    names = "BMK"[-x.dim():]
    for n, size in zip(names, x.shape):
        declare_tensor_dim(n, size)
    declare_tensor_dim("N", 512)
    name_tensor_dims(x, list(names))
    name_tensor_dims(w, ["N", "K"])
    name_tensor_dims(b, ["N"])
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    with torch.no_grad(), config.patch(fallback="error", **patch):
        out = torch.compile(fn, backend="spyre_rules", fullgraph=True, dynamic=False)(x, w, b)
    items = [item for k in fuzz_paths.kernels_since(before) for item in k.specs]
    looped = any(isinstance(item, LoopSpec) for item in items)
    assert looped == (route in ("K tiled by a hint (accumulated)", "M tiled by a hint"))
    if route.startswith("K tiled"):
        assert any(spec.op == INIT for spec in iter_op_specs(items))
    expected = fn(x, w, b)
    alpha, beta = (0.5, 2.0) if "addmm" in route else (1.0, 1.0)
    scale = alpha * (x.double().abs() @ w.double().abs().t()) + beta * b.double().abs()
    _assert_rounds_once(out, expected, scale, dtype)
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_outputs_that_differ_from_eager_differ_only_by_the_float32_summation_order(dtype):
    """Why some outputs still differ from eager, measured (issue 32): eager's CPU half
    addmm and the program both accumulate sum_k x*w in float32, add the bias in float32
    and round once; only the order of the float32 sum differs (eager: ATen's vectorised
    half dot; the program: one float32 contraction).  Where the biased sum cancels
    (|out| << sum_k |x*w| + |b|), one float32 ulp of that scale is many ulps of the
    small result: (256, 64) x (512, 64) fp16 differs from eager in 95 of 131,072
    outputs, up to 28 ulps of the result yet at most 1/4 ulp of the scale, and against
    the exact (float64) value eager errs by up to 18 result ulps, the program by 10.
    No order is eager's on every CPU, so the bound both meet is the contract: within
    half an ulp of the exact result plus the float32 accumulation bound
    (K + 1) * eps32 * scale.  A product rounded to the half dtype before the bias
    add (the double rounding) breaks it in 16% (fp16) to 26% (bf16) of the outputs."""
    g = torch.Generator().manual_seed(1)
    k = 64
    x = torch.randn(256, k, generator=g).to(dtype)
    w = torch.randn(512, k, generator=g).to(dtype)
    b = torch.randn(512, generator=g).to(dtype)
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(fallback="error"):
        out = torch.compile(_linear, backend="spyre_rules", fullgraph=True, dynamic=False)(x, w, b)
    exact = x.double() @ w.double().t() + b.double()
    scale = x.double().abs() @ w.double().abs().t() + b.double().abs()
    spacing = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(torch.finfo(dtype).tiny)))
                      - _mantissa_bits(dtype))
    bound = 0.5 * spacing + (k + 1) * torch.finfo(torch.float32).eps * scale

    def over(v):
        return int(((v.double() - exact).abs() > bound).sum())

    twice = ((x.float() @ w.float().t()).to(dtype).float() + b.float()).to(dtype)
    assert (over(out), over(F.linear(x, w, b))) == (0, 0)
    assert over(twice) > out.numel() // 8
    torch._dynamo.reset()



def _issue_40_operands(dtype, rows=192):
    g = torch.Generator().manual_seed(11)
    return (torch.randn(rows, 32, generator=g).to(dtype), torch.randn(384, 32, generator=g).to(dtype),
            torch.randn(384, generator=g).to(dtype))


def _loops_since(before):
    return [item.count for k in fuzz_paths.kernels_since(before) for item in k.specs
            if isinstance(item, LoopSpec)]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("limit,slices", [(32768, {"M": 3, "N": 6}), (16384, {"M": 6, "N": 6})])
def test_biased_half_linear_fits_by_hint_when_its_product_stays_in_the_loop(dtype, limit, slices):
    """Issue 40: (192, 32) x (384, 32)^T + b in a half dtype at 32 and 16 KiB.  The float32
    product's device layout is [12, 192, 32] (294,912 bytes) and no tile may cut a half stick
    of the weight, so its column tiles hold 2 float32 sticks; a tile written into the full
    product spans 2 x 192 x 32 x 4 = 49,152 bytes whatever the row split, and the bias add
    reading that full buffer spans as much.  When the product and the bias add share one
    loop, the product is a per-tile buffer nothing else reads: a manual hint runs that
    program, span-checked as an error, within the bound."""
    x, w, b = _issue_40_operands(dtype)
    for n, size in (("M", 192), ("K", 32), ("N", 384)):
        declare_tensor_dim(n, size)
    name_tensor_dims(x, ["M", "K"])
    name_tensor_dims(w, ["N", "K"])
    name_tensor_dims(b, ["N"])
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    with torch.no_grad(), config.patch(fallback="error", span_check="error", max_span_bytes=limit):
        out = torch.compile(_hinted(slices, _linear), backend="spyre_rules", fullgraph=True,
                            dynamic=False)(x, w, b)
    assert sorted(_loops_since(before)) == sorted(slices.values())
    scale = x.double().abs() @ w.double().abs().t() + b.double().abs()
    _assert_rounds_once(out, F.linear(x, w, b), scale, dtype)
    torch._dynamo.reset()


# rows, limit -> the loops automatic tiling runs: the weight's restickify, then the
# product and the bias add in one loop of row x column tiles
AUTO_LOOPS = {(192, 32768): [2, 3, 6], (192, 16384): [3, 3, 6], (191, 32768): [2, 3, 6]}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("rows,limit", list(AUTO_LOOPS))
def test_biased_half_linear_plans_with_its_product_in_the_loop(dtype, rows, limit):
    """The same linear under automatic tiling: the product's full-buffer write fits no
    split, so grouping plans it as a per-tile buffer of the loop its one reader, the bias
    add, shares (engine/joint_plans.py).  The groups are exact, the program is
    span-checked as an error, and the outputs are within the bias-linear bound."""
    from spyre_rules.engine import decide_groups
    import spyre_rules

    x, w, b = _issue_40_operands(dtype, rows)
    torch._dynamo.reset()
    auto = dict(fallback="error", max_span_bytes=limit, ignore_span_overflow_hints=False)
    with config.patch(**auto):
        ops = spyre_rules.capture_operations(_linear, x, w, b)
        groups = [([op.get_name() for op in g.ops], [int(lv.split) for lv in g.levels])
                  for g in decide_groups(ops).groups]
    assert groups == [(["buf2"], AUTO_LOOPS[(rows, limit)][:1]),
                      (["buf0", "buf1"], AUTO_LOOPS[(rows, limit)][1:])]
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    with torch.no_grad(), config.patch(span_check="error", **auto):
        out = torch.compile(_linear, backend="spyre_rules", fullgraph=True, dynamic=False)(x, w, b)
    assert _loops_since(before)  # the tiles ran in counted loops
    scale = x.double().abs() @ w.double().abs().t() + b.double().abs()
    _assert_rounds_once(out, F.linear(x, w, b), scale, dtype)
    torch._dynamo.reset()
