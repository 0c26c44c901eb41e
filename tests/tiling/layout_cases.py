"""Shared runner of the tiled-layout regression tests: compile with hints, equal eager.

``check(fn, shapes, names, dtype, unroll)`` builds seeded inputs, declares and
names their dims, compiles ``fn`` (fallback='error', coarse tiling on) compact or
unrolled, and asserts the result equals eager PyTorch and that every TensorArg
of every OpSpec passes the span verifier.  Returns the compiled program so a test
can also assert on its loops.
"""

from __future__ import annotations

import torch
from tiling_helpers import run_spyre, verify_program

from spyre_rules import config
from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims
from spyre_rules.program.op_spec import LoopSpec

def inputs(shapes, names, dtype, seed=0):
    clear_tensor_dims()
    gen = torch.Generator().manual_seed(seed)
    xs = [torch.randn(*s, generator=gen).to(dtype) for s in shapes]
    for x, dims in zip(xs, names):
        if dims is None:
            continue
        for n, size in zip(dims, x.shape):
            if n is not None:  # an unnamed dim
                declare_tensor_dim(n, size)
        name_tensor_dims(x, dims)
    return xs


def check(fn, shapes, names, dtype, mode):
    xs = inputs(shapes, names, dtype)
    expected = fn(*xs)
    with config.patch(unroll_loops=(mode == "unrolled"), coarse_tiling=True):
        compiled = run_spyre(fn, *xs, dynamic=False)
    out = compiled.output
    outs = out if isinstance(out, (tuple, list)) else [out]
    refs = expected if isinstance(expected, (tuple, list)) else [expected]
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        tol = 2e-3 if r.dtype == torch.float16 else 1e-5
        torch.testing.assert_close(o, r, rtol=tol, atol=tol)
    reports = verify_program(compiled)
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs())
    looped = any(isinstance(i, LoopSpec) for k in compiled.kernels for i in k.specs)
    assert looped == (mode == "compact"), "compact mode keeps a counted loop, unrolled none"
    clear_tensor_dims()
    return compiled
