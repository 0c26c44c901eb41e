"""The elementwise, mask, cast and normalization ops transformer models use, fp32 and fp16.

Each case groups a family into one compiled function (one compile per dtype) and
is checked against eager: floats within the model tolerances, masks, ids and
other integer/bool results exactly.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ops_helpers import DTYPES, check, fresh_dims, named, randint, randn
from spyre_rules import config

S, H = 16, 64


def causal_masks(x):
    s = x.shape[-1]
    tril = torch.ones(s, s, dtype=x.dtype).tril()
    iota = torch.arange(s)[:, None] >= torch.arange(s)[None, :]
    triu = torch.ones(s, s, dtype=torch.bool).triu(1)
    return (
        tril * x,
        iota,
        x.masked_fill(triu, float("-inf")),
        x.masked_fill(~iota, torch.finfo(x.dtype).min),
        torch.where(iota, x, torch.full((), -1e4, dtype=x.dtype)),
        torch.full((s, s), float("-inf"), dtype=x.dtype).triu(1) + x,
    )


def comparisons_and_logic(x, y):
    return (
        x == y, x != y, x < y, x <= y, x > y, x >= y,
        (x > 0) & (y < 0), (x > 0) | (y > 1), (x > 0) ^ (y > 0), ~(x > 0),
        torch.logical_and(x > 0, y > 0), torch.logical_not(x > 0.5),
        torch.where(x > y, x, y),
    )


def casts(x, ids):
    other = torch.float16 if x.dtype == torch.float32 else torch.float32
    return (
        x.to(other), (x * 3).to(other).to(x.dtype), x.bool(), (x > 0).to(x.dtype),
        (x * 10).long(), (x * 10).int(), ids.to(x.dtype), ids + 1, ids.bool(), ids * 2 - 3,
    )


def activations(x):
    return (F.gelu(x), F.gelu(x, approximate="tanh"), F.silu(x), torch.sigmoid(x) * x,
            F.relu(x), torch.tanh(x))


def norms(x, g, b):
    variance = x.float().pow(2).mean(-1, keepdim=True)
    rms = (x.float() * torch.rsqrt(variance + 1e-6)).to(x.dtype) * g  # Llama's RMSNorm
    ln = F.layer_norm(x, (x.shape[-1],), g, b, eps=1e-5)
    return rms, ln, x + ln  # residual add


def constants(x):
    s = x.shape[-1]
    return (x + torch.arange(s, dtype=x.dtype), torch.arange(s) * 2 + x.shape[0],
            x * torch.full((s,), 0.5, dtype=x.dtype), torch.zeros_like(x) + torch.ones_like(x))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_causal_masks(dtype):
    check(causal_masks, randn(2, S, S, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_comparisons_and_logic(dtype):
    x, y = randn(4, 37, dtype=dtype), randn(4, 37, dtype=dtype, seed=1)
    y[0, :5] = x[0, :5]  # some equal elements
    check(comparisons_and_logic, x, y)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_casts(dtype):
    check(casts, randn(4, 37, dtype=dtype), randint(-40, 40, 4, 37))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_activations(dtype):
    check(activations, randn(4, 150, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rms_norm_layer_norm_residual(dtype):
    check(norms, randn(2, 5, H, dtype=dtype), randn(H, dtype=dtype, seed=1),
          randn(H, dtype=dtype, seed=2))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_arange_full_constants(dtype):
    check(constants, randn(5, 37, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place_ops_on_intermediates(dtype):
    def fn(x, y):
        h = x * 2
        h.add_(y)
        h.masked_fill_(y > 1, 0.0)
        h.mul_(0.5).sub_(1)
        return h

    check(fn, randn(4, 37, dtype=dtype), randn(4, 37, dtype=dtype, seed=1))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_in_place_ops_on_inputs_write_back(dtype):
    def fn(x, m, y):
        x.add_(y)
        m.masked_fill_(y > 0, 0.0)
        return x * m

    x, m, y = randn(4, 37, dtype=dtype), randn(4, 37, dtype=dtype, seed=1), randn(4, 37, dtype=dtype, seed=2)
    ex, em = x.clone(), m.clone()
    expected = fn(ex, em, y)
    compiled = check(fn, x, m, y)
    assert torch.equal(compiled.output, expected)
    assert torch.equal(x, ex) and torch.equal(m, em)  # the caller's tensors are updated
    assert {s.op for s in compiled.op_specs()} >= {"add", "where", "mul"}  # masked_fill: where


def test_masks_inside_a_hint_loop():
    from spyre_rules.hints import spyre_hint

    def fn(x):
        with spyre_hint(slices={"Q": 4}):
            s = x.shape[-1]
            keep = torch.arange(s)[:, None] >= torch.arange(s)[None, :]
            return x.masked_fill(~keep, torch.finfo(x.dtype).min).softmax(-1)

    for unroll in (False, True):
        fresh_dims()
        with config.patch(unroll_loops=unroll):
            check(fn, named(randn(S, S, dtype=torch.float16), ["Q", "K"]))
