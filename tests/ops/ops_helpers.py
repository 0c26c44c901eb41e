"""Helpers for the op-coverage tests: compile with fallback=error, compare with eager.

A plain module (tests must not import conftest).  Tolerances are the model-level
ones (fp32 1e-4, fp16 2e-2); integer and bool results must be exactly equal.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backend"))

import torch  # noqa: E402
from spyre_helpers import Compiled, run_spyre  # noqa: E402,F401

from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims  # noqa: E402

TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2}
DTYPES = [torch.float32, torch.float16]


def assert_same(out, ref) -> None:
    """Exact for integer/bool tensors, within the dtype's tolerance for floats."""
    if isinstance(ref, (tuple, list)):
        assert len(out) == len(ref)
        for o, r in zip(out, ref):
            assert_same(o, r)
        return
    assert out.dtype == ref.dtype and out.shape == ref.shape, (out.dtype, out.shape, ref.dtype, ref.shape)
    if ref.dtype.is_floating_point:
        tol = TOLERANCE[ref.dtype]
        torch.testing.assert_close(out, ref, atol=tol, rtol=tol, equal_nan=True)
    else:
        assert torch.equal(out, ref)


def check(fn, *inputs, **compile_kwargs) -> Compiled:
    """Compile ``fn`` (fallback=error), run it on the program, compare with eager."""
    ref = fn(*(x.clone() for x in inputs))
    compiled = run_spyre(fn, *inputs, **compile_kwargs)
    assert compiled.kernels, "nothing ran on the Spyre program"
    assert_same(compiled.output, ref)
    return compiled


def named(x: torch.Tensor, names: list[str]) -> torch.Tensor:
    for n, size in zip(names, x.shape):
        declare_tensor_dim(n, size)
    return name_tensor_dims(x, names)


def fresh_dims() -> None:
    clear_tensor_dims()


def randn(*shape, dtype=torch.float32, seed=0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=gen).to(dtype)


def randint(low, high, *shape, seed=0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(low, high, shape, generator=gen)
