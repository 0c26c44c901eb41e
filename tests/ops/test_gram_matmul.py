"""A matrix times its own transpose with automatic tiling (issue 40).

``a @ a.T`` reads the restickified copy of ``a`` twice, once per output dim, and both
reads need stick-whole splits: at an odd row count both output dims tile 64 + 63, so
the batchmatmul has a remainder at two loop levels.  The corner tile (last row block x
last column block) used to keep a whole tile's rows and stored past the output
(DeviceMemoryError).  Each case is either equal to eager or refused naming the op,
never an access outside an allocation (the compile-time proof,
``codegen/in_allocation.py``, would refuse it before it runs).

Half results are bit-equal to eager's matmul of the widened operands rounded once (the
executor accumulates in float32 and rounds at the store; torch's CPU half matmul does
not round that way); float32 results are within float32 rounding of eager's (another
summation order).
"""

from __future__ import annotations

import pytest
import torch

from ops_helpers import randn, run_spyre

from spyre_rules import config
from spyre_rules.errors import exception_chain
from spyre_rules.ir.errors import UnsupportedGraph

KiB = 1024
F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32

FNS = {
    "a @ a.T": lambda a: a @ a.T,
    "x @ x.transpose(-1, -2)": lambda x: x @ x.transpose(-1, -2),
    "bmm(x, x.transpose(1, 2))": lambda x: torch.bmm(x, x.transpose(1, 2)),
}
MM = "(aten ops: mm.default, permute.default)"
BMM = "(aten ops: bmm.default, permute.default)"

#: (function, shape, dtype, limit, None = equal to eager | the op the refusal names).
#: The transposed operand is a copy of its own under automatic tiling (backend/matmul.py
#: ``_own_buffers``): the first op is that copy, and (2, 97, 32) fp16 at 8 KiB and
#: (3, 127, 64) bf16 at 16 KiB, refused while one restickified copy served both reads,
#: now tile.
CASES = [
    *[("a @ a.T", (127, 64), dtype, 8 * KiB, None) for dtype in (F16, BF16, F32)],
    ("a @ a.T", (97, 32), F16, 8 * KiB, None),
    ("a @ a.T", (128, 64), BF16, 8 * KiB, None),
    ("a @ a.T", (127, 64), F32, 16 * KiB, None),
    ("a @ a.T", (127, 64), F16, 64 * KiB, None),
    ("a @ a.T", (130, 64), F16, 16 * KiB, None),
    ("a @ a.T", (130, 64), F32, 16 * KiB, f"buf1 {MM}"),
    ("a @ a.T", (127, 64), F16, 4 * KiB, f"buf4 {MM}"),
    ("x @ x.transpose(-1, -2)", (2, 127, 64), F32, 32 * KiB, None),
    ("x @ x.transpose(-1, -2)", (2, 128, 64), BF16, 64 * KiB, None),
    ("x @ x.transpose(-1, -2)", (2, 97, 32), F16, 8 * KiB, None),
    ("bmm(x, x.transpose(1, 2))", (2, 127, 64), F16, 32 * KiB, None),
    ("bmm(x, x.transpose(1, 2))", (2, 128, 64), F32, 64 * KiB, None),
    ("bmm(x, x.transpose(1, 2))", (3, 127, 64), BF16, 16 * KiB, None),
]


def _eager(fn, x):
    if x.dtype == F32:
        return fn(x)
    return fn(x.float()).to(x.dtype)


def _compile(fn, x, limit):
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=limit,
                      span_check="error"):
        return run_spyre(fn, x, fullgraph=True)


@pytest.mark.parametrize("name,shape,dtype,limit,refused", CASES,
                         ids=lambda v: str(v).removeprefix("torch."))
def test_equal_to_eager_or_refused_naming_the_op(name, shape, dtype, limit, refused):
    fn, x = FNS[name], randn(*shape, dtype=dtype, seed=40)
    if refused is None:
        out = _compile(fn, x, limit).output
        if dtype == F32:
            torch.testing.assert_close(out, fn(x), rtol=1.3e-6, atol=1e-5)
        else:
            assert torch.equal(out, _eager(fn, x))
        return
    with pytest.raises(Exception) as info:  # noqa: PT011 - the chain is checked below
        _compile(fn, x, limit)
    causes = list(exception_chain(info.value))
    assert any(isinstance(c, UnsupportedGraph) for c in causes)
    assert f"Cannot auto-tile {refused}: no combined split" in str(info.value)


def test_the_corner_tile_runs_both_remainders():
    """(127, 64) fp16 at 8 KiB: rows and columns each tile 64 + 63; the four
    batchmatmul tiles run (64, 64), (64, 63), (63, 64) and (63, 63)."""
    a = randn(127, 64, dtype=F16, seed=40)
    compiled = _compile(FNS["a @ a.T"], a, 8 * KiB)
    tiles = [{str(s): int(r) for s, (r, _) in spec.iteration_space.items()}
             for spec in compiled.op_specs() if spec.op == "batchmatmul"]
    assert [(t["c0"], t["c1"], t["c2"]) for t in tiles] == [
        (64, 64, 64), (64, 63, 64), (63, 64, 64), (63, 63, 64)]
    assert torch.equal(compiled.output, _eager(FNS["a @ a.T"], a))
