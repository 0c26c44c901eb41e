"""Compiled graphs: each call stickifies a graph input once however many kernels
read it, and a changed input is written again on the next call."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.backend import support  # noqa: E402
from spyre_rules.executor.runtime import recent_kernels  # noqa: E402


def _compile(fn, *inputs, fallback="error"):
    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    compiled = torch.compile(fn, backend="spyre_rules")
    with config.patch(fallback=fallback), torch.no_grad():
        out = compiled(*inputs)
    kernels = [k for k in recent_kernels() if k.serial > before]
    return compiled, out, kernels


def _layer_norm(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b)


@pytest.fixture(scope="module")
def layer_norm():
    x, w, b = torch.randn(8, 96), torch.randn(96), torch.randn(96)
    compiled, out, kernels = _compile(_layer_norm, x, w, b)
    yield compiled, (x, w, b), out, kernels
    torch._dynamo.reset()


def test_layer_norm_writes_each_input_once_per_call(layer_norm):
    compiled, inputs, out, kernels = layer_norm
    device = kernels[0].device
    reading_x = [k for k in kernels if any(p.name == "arg0_1" for p in k.stickify.values())]
    assert len(reading_x) == 3  # the two sums and the subtraction
    writes, skips = device.stickify_writes, device.stickify_skips
    with torch.no_grad():
        again = compiled(*inputs)
    assert torch.equal(again, out)
    torch.testing.assert_close(again, _layer_norm(*inputs), atol=1e-5, rtol=1e-5)
    # x, w and b written once each; x skipped by the two later kernels that read it
    assert (device.stickify_writes - writes, device.stickify_skips - skips) == (3, 2)


@pytest.mark.parametrize("change", ["add_", "data", "numpy"])
def test_an_input_changed_between_calls_gives_the_new_result(layer_norm, change):
    compiled, (x, w, b), _, kernels = layer_norm
    x = x.clone()
    with torch.no_grad():
        compiled(x, w, b)
        if change == "add_":
            x.add_(1.5)
        elif change == "data":
            x.data.mul_(-2)  # not seen by x's version counter
        else:
            x.numpy()[:] = x.numpy()[::-1]  # nor is this
        got = compiled(x, w, b)
    torch.testing.assert_close(got, _layer_norm(x, w, b), atol=1e-5, rtol=1e-5)


def test_host_step_between_kernels_reading_the_same_input(monkeypatch):
    monkeypatch.setitem(support.NO_SPYRE_LOWERING, torch.ops.aten.tanh, "left unlowered by the test")

    def fn(x):
        return torch.tanh(x + 1) * x + x

    x = torch.randn(4, 70)
    with pytest.warns(UserWarning, match=r"spyre_rules: 1 op of this graph runs on the host .*"
                                         r"buf1 \(aten ops: tanh.default\)"):
        compiled, out, kernels = _compile(fn, x, fallback="eager")
    device = kernels[0].device
    assert device.host_transfers == 2
    torch.testing.assert_close(out, fn(x), atol=0, rtol=0)
    reading_x = sum(1 for k in kernels for p in k.stickify.values() if p.name == "arg0_1")
    assert reading_x >= 2
    assert device.stickify_skips == reading_x - 1
    torch._dynamo.reset()
