"""Differential suite: programs compiled with spyre_rules (fallback=error) vs eager.

Every case must (a) compile without falling back, (b) create kernels that ran,
and (c) match eager: exactly for integer/bool results; for floats within
``FP32`` / ``FP16`` tolerances (fp32 sums are reassociated, fp16 results may
differ by an ulp of rounding).  Shapes are small and deliberately not multiples
of the stick size (32 fp32 / 64 fp16 elements): 37, 150, 5, 7.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from spyre_helpers import run_spyre

FP32 = dict(atol=2e-5, rtol=2e-5)
FP16 = dict(atol=2e-3, rtol=2e-3)


def g(*shape, dtype=torch.float32, seed=0, scale=1.0):
    gen = torch.Generator().manual_seed(seed + sum(shape))
    return (torch.randn(*shape, generator=gen) * scale).to(dtype)


def ints(*shape, low=-50, high=50, dtype=torch.int64, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=gen, dtype=dtype)


def h(*shape, seed=0):
    return g(*shape, dtype=torch.float16, seed=seed)


def mlp_block(x, w1, b1, w2, b2):
    return x + F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)


def attention(q, k, v):
    scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    return torch.softmax(scores, dim=-1) @ v


CASES = {
    # ---- elementwise, broadcasting, constants
    "add_mul_150": (lambda x, y: (x + y) * 2, lambda: (g(4, 150), g(4, 150, seed=1))),
    "sub_div_37": (lambda x, y: (x - y) / (y.abs() + 1), lambda: (g(37, 5), g(37, 5, seed=1))),
    "bcast_row": (lambda x, b: x + b, lambda: (g(8, 37), g(37))),
    "bcast_outer": (lambda a, b: a * b, lambda: (g(8, 1), g(1, 37))),
    "bcast_3d": (lambda a, b: a * b - a, lambda: (g(2, 1, 37), g(1, 5, 37))),
    "scalar_consts": (lambda x: x * 2.5 - 1.0, lambda: (g(6, 37),)),
    "exp_log_sqrt": (lambda x: torch.log(x.abs() + 1) + torch.sqrt(x.abs()) - torch.exp(-x),
                     lambda: (g(5, 37),)),
    "tanh_sigmoid": (lambda x: torch.tanh(x) * torch.sigmoid(x), lambda: (g(7, 37),)),
    "neg_abs_recip": (lambda x: -x.abs() + torch.reciprocal(x.abs() + 0.5), lambda: (g(7, 5),)),
    "pow_rsqrt": (lambda x: x ** 3 + torch.rsqrt(x.abs() + 1), lambda: (g(5, 37),)),
    "relu": (torch.relu, lambda: (g(7, 37),)),
    "clamp_min_max": (lambda x, y: torch.clamp(torch.maximum(x, y), -0.5, 0.5),
                      lambda: (g(5, 37), g(5, 37, seed=1))),
    "where": (lambda x, y: torch.where(x > 0, x, y), lambda: (g(5, 37), g(5, 37, seed=1))),
    # ---- comparisons and integer results (exact)
    "cmp_lt_bool": (lambda x, y: x < y, lambda: (g(5, 37), g(5, 37, seed=1))),
    "cmp_eq_int": (lambda a, b: a == b, lambda: (ints(6, 37, low=0, high=3), ints(6, 37, low=0, high=3, seed=1))),
    "logical_and_or": (lambda x, y: ((x > 0) & (y < 0)) | (x > 1),
                       lambda: (g(5, 37), g(5, 37, seed=1))),
    "int32_arith": (lambda a, b: a + b * 3 - 7,
                    lambda: (ints(5, 37, dtype=torch.int32), ints(5, 37, dtype=torch.int32, seed=1))),
    "int64_floordiv_mod": (lambda a, b: a // b + a % b,
                           lambda: (ints(5, 37), ints(5, 37, low=1, high=9, seed=1))),
    "cast_float_to_int": (lambda x: (x * 10).to(torch.int32), lambda: (g(5, 37),)),
    "cast_int_to_float": (lambda a: a.to(torch.float32) / 3, lambda: (ints(5, 37),)),
    "cast_fp32_to_fp16": (lambda x: (x * 3).to(torch.float16), lambda: (g(5, 150),)),
    "cast_bool_to_float": (lambda x: (x > 0).float() * x, lambda: (g(5, 37),)),
    # ---- fp16 elementwise
    "fp16_add_mul": (lambda x, y: x * y + x, lambda: (h(4, 150), h(4, 150, seed=1))),
    "fp16_exp": (lambda x: torch.exp(x) - 1, lambda: (h(5, 37),)),
    # ---- reductions (every axis, with/without keepdim)
    "sum_all": (lambda x: x.sum(), lambda: (g(5, 37),)),
    "sum_dims_0_2": (lambda x: x.sum(dim=(0, 2)), lambda: (g(2, 5, 37),)),
    "amax_amin": (lambda x: x.amax(0) + x.amin(1, keepdim=True), lambda: (g(5, 37),)),
    "mean_last": (lambda x: x.mean(-1), lambda: (g(2, 5, 37),)),
    "max_values_indices": (lambda x: torch.max(x, 1), lambda: (g(5, 37),)),
    "argmin_dim0": (lambda x: x.argmin(0), lambda: (g(5, 37),)),
    "prod": (lambda x: x.prod(-1), lambda: (g(4, 7) * 0.5 + 1,)),
    "any": (lambda x: (x > 1.5).any(1), lambda: (g(5, 37),)),
    "var": (lambda x: torch.var(x, dim=1), lambda: (g(5, 37),)),
    "fp16_sum": (lambda x: x.sum(-1), lambda: (h(5, 150),)),
    # ---- matmul family
    "mm": (lambda a, b: a @ b, lambda: (g(7, 37), g(37, 5))),
    "linear_bias": (lambda x, w, b: F.linear(x, w, b), lambda: (g(4, 150), g(16, 150), g(16))),
    "bmm": (torch.bmm, lambda: (g(2, 5, 37), g(2, 37, 6))),
    "matmul_batch_bcast": (lambda a, b: a @ b, lambda: (g(2, 3, 5, 8), g(8, 6))),
    "matmul_transposed_a": (lambda a, b: a.t() @ b, lambda: (g(37, 7), g(37, 5))),
    "bmm_transposed_b": (lambda a, b: a @ b.transpose(-1, -2), lambda: (g(2, 5, 37), g(2, 6, 37))),
    "mm_k1": (lambda a, b: a @ b, lambda: (g(5, 1), g(1, 7))),
    "addmm_alpha_beta": (lambda b, x, w: torch.addmm(b, x, w, beta=0.5, alpha=2.0),
                         lambda: (g(5, 6), g(5, 37), g(37, 6))),
    "fp16_mm": (lambda a, b: a @ b, lambda: (h(7, 37), h(37, 5))),
    # ---- views: permute / transpose / reshape
    "permute_add": (lambda x, y: x.permute(2, 0, 1) + y, lambda: (g(3, 5, 37), g(37, 3, 5))),
    "transpose_read": (lambda x, y: x.t() * y, lambda: (g(37, 5), g(5, 37))),
    "reshape_sum": (lambda x: x.reshape(5, 3, 37).sum(1), lambda: (g(15, 37),)),
    "view_flatten": (lambda x: (x * 2).view(-1) + 1, lambda: (g(5, 37),)),
    # ---- composites as Inductor decomposes them
    "softmax_last": (lambda x: torch.softmax(x, -1), lambda: (g(5, 37),)),
    "softmax_dim0": (lambda x: torch.softmax(x, 0), lambda: (g(5, 37),)),
    "log_softmax": (lambda x: F.log_softmax(x, -1), lambda: (g(5, 37),)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (37,), w, b), lambda: (g(4, 37), g(37), g(37))),
    "layer_norm_welford": (lambda x: F.layer_norm(x, (1100,)), lambda: (g(2, 1100),)),
    "gelu": (F.gelu, lambda: (g(5, 37),)),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda: (g(5, 37),)),
    "silu": (F.silu, lambda: (g(5, 37),)),
    "mlp_block": (mlp_block, lambda: (g(4, 37), g(64, 37, scale=0.2), g(64), g(37, 64, scale=0.2), g(37))),
    "attention_softmax": (attention, lambda: (g(2, 5, 16), g(2, 7, 16), g(2, 7, 16))),
    "fp16_softmax": (lambda x: torch.softmax(x, -1), lambda: (h(5, 150),)),
    "fp16_layer_norm": (lambda x: F.layer_norm(x, (150,)), lambda: (h(4, 150),)),
    "fp16_gelu": (F.gelu, lambda: (h(5, 37),)),
    # ---- graph boundaries: views, several outputs, odd inputs, generated constants
    "output_view_of_intermediate": (lambda x: (x * 2).t(), lambda: (g(5, 37),)),
    "several_outputs": (lambda x: (x.t(), x * 2, x.sum()), lambda: (g(5, 37),)),
    "arange_constant": (lambda x: x + torch.arange(37), lambda: (g(5, 37),)),
    "noncontiguous_input": (lambda x: x + 1, lambda: (g(37, 5).t(),)),
    "storage_offset_input": (lambda x: x * 3, lambda: (g(6, 37)[2:],)),
    "int_sum": (lambda a: a.sum(1), lambda: (ints(5, 37),)),
    "bool_all": (lambda x: (x > -1).all(1), lambda: (g(5, 37),)),
}


def _reduction_axis_cases():
    cases = {}
    for dim in range(3):
        for keepdim in (False, True):
            cases[f"sum_dim{dim}_keep{int(keepdim)}"] = (
                lambda x, dim=dim, keepdim=keepdim: x.sum(dim, keepdim=keepdim),
                lambda: (g(3, 5, 37),),
            )
            cases[f"amax_dim{dim}_keep{int(keepdim)}"] = (
                lambda x, dim=dim, keepdim=keepdim: x.amax(dim, keepdim=keepdim),
                lambda: (g(3, 5, 37),),
            )
    return cases


CASES.update(_reduction_axis_cases())


def _flat(value):
    if isinstance(value, torch.Tensor):
        return [value]
    return [t for v in value for t in _flat(v)]


def assert_matches(actual, expected):
    actual, expected = _flat(actual), _flat(expected)
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.dtype == e.dtype, (a.shape, a.dtype, e.shape, e.dtype)
        if e.dtype.is_floating_point:
            tol = FP16 if e.dtype in (torch.float16, torch.bfloat16) else FP32
            torch.testing.assert_close(a, e, **tol)
        else:
            assert torch.equal(a, e), (a, e)


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_eager(name):
    fn, make_inputs = CASES[name]
    inputs = make_inputs()
    compiled = run_spyre(fn, *inputs)
    with torch.no_grad():
        expected = fn(*inputs)
    assert compiled.kernels, "no Spyre kernel was generated"
    assert all(k.calls == 1 for k in compiled.kernels), "a kernel of the program did not run"
    assert_matches(compiled.output, expected)


def test_suite_size():
    assert len(CASES) >= 40


def test_wide_layer_norm_uses_welford():
    fn, make_inputs = CASES["layer_norm_welford"]
    ops = {spec.op for spec in run_spyre(fn, *make_inputs()).op_specs()}
    assert "welford_reduce" in ops


def test_linear_restickifies_weight_and_uses_batchmatmul():
    fn, make_inputs = CASES["linear_bias"]
    ops = [spec.op for spec in run_spyre(fn, *make_inputs()).op_specs()]
    assert ops == ["ReStickifyOpHBM", "batchmatmul", "addmm"]
