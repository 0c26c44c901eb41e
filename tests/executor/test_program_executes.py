"""Proof that results come from executing the generated program, not from eager.

The compiled program's OpSpecs are reachable through the kernels the wrapper
created; editing one TensorArg's device coordinates changes what the next call
computes, and an out-of-range coordinate is caught by the bounds check.
"""

from __future__ import annotations

import os

import pytest
import sympy
import torch

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.executor.hbm import DeviceMemoryError  # noqa: E402
from spyre_rules.executor.runtime import recent_kernels  # noqa: E402


def add(x, y):
    return x + y


@pytest.fixture
def compiled_add():
    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    fn = torch.compile(add, backend="spyre_rules")
    x = torch.arange(4 * 37, dtype=torch.float32).reshape(4, 37)
    y = torch.full((4, 37), 0.5)
    with config.patch(fallback="error"), torch.no_grad():
        first = fn(x, y)
    kernels = [k for k in recent_kernels() if k.serial > before]
    assert len(kernels) == 1
    yield fn, x, y, first, kernels[0]
    torch._dynamo.reset()


def _load_arg(kernel, buffer_is_input=True):
    spec = kernel.specs[0]
    return spec, next(a for a in spec.args if a.is_input == buffer_is_input)


def test_program_result_matches_eager_first(compiled_add):
    fn, x, y, first, kernel = compiled_add
    assert torch.equal(first, x + y)
    assert kernel.calls == 1


def test_mutated_coordinates_change_the_result(compiled_add):
    fn, x, y, first, kernel = compiled_add
    spec, arg = _load_arg(kernel)
    # Read row 0 of x for every row: coordinate of the row dim becomes 0.
    row = sympy.Symbol("c0")
    arg.device_coordinates = [c.subs(row, 0) for c in arg.device_coordinates]
    with torch.no_grad():
        out = fn(x, y)
    assert kernel.calls == 2
    assert not torch.equal(out, x + y)
    assert torch.equal(out, x[0].expand(4, 37) + y)


def test_out_of_range_coordinates_raise_bounds_error(compiled_add):
    fn, x, y, first, kernel = compiled_add
    spec, arg = _load_arg(kernel)
    arg.device_coordinates = [arg.device_coordinates[0] + 1000, *arg.device_coordinates[1:]]
    with torch.no_grad(), pytest.raises(DeviceMemoryError) as info:
        fn(x, y)
    message = str(info.value)
    assert f"op {kernel.name}/{spec.op}" in message
    assert f"tensor {arg.name}" in message
    assert "byte address" in message


def test_store_outside_allocation_raises(compiled_add):
    fn, x, y, first, kernel = compiled_add
    spec, arg = _load_arg(kernel, buffer_is_input=False)
    arg.device_coordinates = [*arg.device_coordinates[:-1], arg.device_coordinates[-1] + 64]
    with torch.no_grad(), pytest.raises(DeviceMemoryError, match=rf"store of tensor {arg.name}"):
        fn(x, y)
