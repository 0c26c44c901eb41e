"""One-element and lower-rank operands in a counted loop under automatic tiling: the
batched pass, the iterations and the general path leave the same bytes and equal
eager (issue 32: a rank-0 op's per-tile buffer read by a tiled op did not
broadcast in the batched pass)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS.parent / "bench") not in sys.path:
    sys.path.insert(0, str(TESTS.parent / "bench"))

import fuzz_paths  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import batched_loops  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402
from test_batched_loops import _routes  # noqa: E402  (the three executor routes, one helper)

H, F = torch.float16, torch.float32

#: name -> (fn, input shapes, dtype, span limit in bytes)
PROGRAMS = {
    "x * 2 + s * 1.4, s (1,), fp16": (lambda x, s: x * 2 + s * 1.4, [(64, 48), (1,)], H, 2048),
    "x * 2 + s * 1.4, s (1,), fp32": (lambda x, s: x * 2 + s * 1.4, [(512, 32), (1,)], F, 8192),
    "x * 2 + s * 1.4, s (1, 1), fp16": (lambda x, s: x * 2 + s * 1.4, [(64, 48), (1, 1)], H, 2048),
    "x - s * s, rank 3, s (1, 1, 1), fp16": (lambda x, s: x - s * s, [(8, 16, 48), (1, 1, 1)], H, 2048),
    "x - s * s, rank 3, s (1, 1, 1), fp32": (lambda x, s: x - s * s, [(8, 64, 32), (1, 1, 1)], F, 8192),
    "x + (s * 1.4) * (s + 1), a scalar chain, fp16": (lambda x, s: x + (s * 1.4) * (s + 1),
                                                      [(64, 48), (1,)], H, 2048),
    # c * 0.5 is computed whole in every iteration and read tile by tile: a view other
    # than its store's, so the loop runs its iterations (batched_loops._plan)
    "x * r + c * 0.5, a row and a column, fp32": (lambda x, r, c: x * r + c * 0.5,
                                                  [(512, 32), (1, 32), (512, 1)], F, 8192),
    "x * 2 + r, a vector, fp16": (lambda x, r: x * 2 + r, [(64, 64), (64,)], H, 2048),
    "x + s * 3, rank 1, fp16": (lambda x, s: x + s * 3, [(4096,), (1,)], H, 2048),
    "x + s * 3, rank 1, fp32": (lambda x, s: x + s * 3, [(4096,), (1,)], F, 8192),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_one_element_operands_in_a_counted_loop_equal_eager_on_every_route(name, monkeypatch):
    fn, shapes, dtype, limit = PROGRAMS[name]
    g = torch.Generator().manual_seed(len(name))
    inputs = [torch.randn(shape, generator=g).to(dtype) for shape in shapes]
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(fn, backend="spyre_rules", fullgraph=True, dynamic=False)
    with torch.no_grad(), config.patch(fallback="error", ignore_span_overflow_hints=False,
                                       max_span_bytes=limit):
        out = program(*inputs)
    kernels = fuzz_paths.kernels_since(before)
    assert any(isinstance(item, LoopSpec) for k in kernels for item in k.specs)
    general, iterations, batched, count = _routes(program, inputs, kernels, monkeypatch)
    assert count == (0 if "a column" in name else 1)
    assert fuzz_paths.difference(general, batched) is None
    assert fuzz_paths.difference(iterations, batched) is None
    expected = fn(*inputs)
    if dtype == torch.float32:
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    else:  # the device rounds each constant and op result to fp16, eager the whole chain once
        torch.testing.assert_close(out, expected, rtol=2e-2, atol=2e-2)
    torch._dynamo.reset()
