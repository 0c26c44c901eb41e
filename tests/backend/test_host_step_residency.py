"""Host steps that write in place between program ops (fallback='eager', the default).

A host step's writes include the buffers it mutates: ``scatter_add`` into a buffer a
Spyre kernel filled must start from the device's values and hand its result back
before the next kernel reads it (backend/residency.py).  Every case runs a
program op before and after a step that can only run on the host, and equals eager
bit for bit (the host step is the same aten call on the same values; the program
ops here are exact).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from spyre_helpers import run_spyre

HOST = "on the host instead of the Spyre program"


def _scatter_add(x, y, idx):
    return torch.zeros_like(y).scatter_add(-1, idx, x[..., : idx.shape[-1]] * 2) + y


def _scatter_amax(x, y, idx):
    base = y * 3
    return base.scatter_reduce(-1, idx, x[..., : idx.shape[-1]] + 1, reduce="amax") - y


def _masked_scatter(x, y, idx):
    return (x * 2).masked_scatter(y > 0, x.flip(0) + 1) + y


def _scatter_add_twice(x, y, idx):
    # A host step's output mutated by a second host step, read by the program.
    once = torch.zeros_like(y).scatter_add(-1, idx, x[..., : idx.shape[-1]] * 2)
    return once.scatter_add(-1, idx, x[..., : idx.shape[-1]]) + y


# Inductor lowers these to host calls (ScatterFallback, masked_scatter); index_put and
# index_add run on the program (tests/backend/test_in_place_writes.py).
CASES = [_scatter_add, _scatter_amax, _masked_scatter, _scatter_add_twice]
SHAPES = [((6, 40), torch.float32), ((3, 5, 70), torch.float16), ((4, 33), torch.bfloat16)]


def _inputs(shape, dtype):
    torch.manual_seed(sum(shape))
    x = torch.randn(shape).to(dtype)
    y = torch.randn(shape).to(dtype)
    idx = torch.randint(0, shape[-1], (*shape[:-1], 5))
    return x, y, idx


@pytest.mark.parametrize("shape,dtype", SHAPES, ids=lambda v: str(v).removeprefix("torch."))
@pytest.mark.parametrize("fn", CASES, ids=lambda fn: fn.__name__.lstrip("_"))
def test_in_place_host_step_between_program_ops_equals_eager(fn, shape, dtype):
    x, y, idx = _inputs(shape, dtype)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = run_spyre(fn, x, y, idx, fallback="eager")
    host = [str(w.message) for w in seen if HOST in str(w.message)]
    assert len(host) == 1, host  # the in-place op ran on the host ...
    assert compiled.op_specs(), "... and the rest on the program"
    torch.testing.assert_close(compiled.output, fn(x, y, idx), rtol=0, atol=0)


def test_host_step_mutating_a_graph_input_feeds_the_program():
    def fn(cache, idx, value):
        cache.index_add_(0, idx, value * 2)
        return cache * 3

    cache, idx, value = torch.randn(8, 40), torch.tensor([1, 5, 1]), torch.randn(3, 40)
    expected_cache = cache.clone()
    expected = fn(expected_cache, idx, value)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        compiled = run_spyre(fn, cache, idx, value, fallback="eager")
    torch.testing.assert_close(compiled.output, expected, rtol=0, atol=0)
    torch.testing.assert_close(cache, expected_cache, rtol=0, atol=0)
