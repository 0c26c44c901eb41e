"""matmul/linear with leading batch dims lower to one batchmatmul over the real batch.

ATen folds ``[B, M, K] @ [K, N]`` (and ``linear`` on a 3-D input) into a 2-D mm
over ``B*M`` rows; hints on B, M or N then matched nothing.  Here each product
is compiled untiled and with a hint on each of its output dims, and must equal
eager (fp16 and fp32).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import spyre_rules
from spyre_helpers import run_spyre

from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint
from spyre_rules.program.op_spec import LoopSpec

TOL = {torch.float16: dict(atol=2e-3, rtol=2e-3), torch.float32: dict(atol=2e-5, rtol=2e-5)}


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


def _named(shape, names, dtype, seed):
    x = (torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) / 4).to(dtype)
    for n, s in zip(names, shape):
        declare_tensor_dim(n, s)
    name_tensor_dims(x, names)
    return x


def _matmul_3d_2d(dtype):
    return (lambda a, w: torch.matmul(a, w),
            [_named((4, 64, 128), ["B", "M", "K"], dtype, 0),
             _named((128, 64), ["K", "N"], dtype, 1)])


def _linear_3d(dtype):
    return (lambda x, w, b: F.linear(x, w, b),
            [_named((4, 64, 128), ["B", "M", "K"], dtype, 0),
             _named((64, 128), ["N", "K"], dtype, 1), _named((64,), ["N"], dtype, 2)])


def _linear_3d_no_bias(dtype):
    return (lambda x, w: F.linear(x, w),
            [_named((4, 64, 128), ["B", "M", "K"], dtype, 0),
             _named((64, 128), ["N", "K"], dtype, 1)])


def _matmul_4d_4d(dtype):
    return (lambda a, b: a @ b,
            [_named((4, 4, 32, 64), ["B", "H", "M", "K"], dtype, 0),
             _named((4, 4, 64, 64), ["B", "H", "K", "N"], dtype, 1)])


CASES = {"matmul_3d_2d": _matmul_3d_2d, "linear_3d": _linear_3d,
         "linear_3d_no_bias": _linear_3d_no_bias, "matmul_4d_4d": _matmul_4d_4d}


def _hinted(fn, dim, split):
    def run(*xs):
        with spyre_hint(slices={dim: split}):
            return fn(*xs)
    return run


def _looped(compiled):
    return any(isinstance(i, LoopSpec) for k in compiled.kernels for i in k.specs)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("hint", [None, ("B", 2), ("M", 2), ("N", 2)],
                         ids=["untiled", "B2", "M2", "N2"])
@pytest.mark.parametrize("case", list(CASES))
def test_equals_eager_untiled_and_hinted(case, hint, dtype):
    fn, xs = CASES[case](dtype)
    expected = fn(*xs)
    run = fn if hint is None else _hinted(fn, *hint)
    compiled = run_spyre(run, *xs)
    torch.testing.assert_close(compiled.output, expected, **TOL[dtype])
    assert _looped(compiled) == (hint is not None)
    ops = [s.op for s in compiled.op_specs()]
    assert "batchmatmul" in ops and "mm" not in ops


def test_the_batch_is_kept_in_the_reduction():
    fn, xs = _matmul_3d_2d(torch.float16)
    ops = spyre_rules.capture_operations(fn, *xs)
    bmm = [op for op in ops if getattr(op.data, "reduction_type", None) == "batchmatmul"]
    assert [list(map(int, op.data.ranges)) for op in bmm] == [[4, 64, 64]]
    assert [list(map(int, op.data.reduction_ranges)) for op in bmm] == [[128]]
    assert (bmm[0].dim_names, bmm[0].reduction_dim_names) == (["B", "M", "N"], ["K"])


def test_4d_matmul_keeps_both_batch_dims():
    fn, xs = _matmul_4d_4d(torch.float32)
    (op,) = spyre_rules.capture_operations(fn, *xs)
    assert list(map(int, op.data.ranges)) == [4, 4, 32, 64]
    hinted = run_spyre(_hinted(fn, "H", 2), *xs)
    torch.testing.assert_close(hinted.output, fn(*xs), **TOL[torch.float32])
    assert _looped(hinted)


def test_plain_bmm_and_2d_mm_are_unchanged():
    a, b = torch.randn(2, 5, 37), torch.randn(2, 37, 6)
    compiled = run_spyre(torch.bmm, a, b)
    torch.testing.assert_close(compiled.output, torch.bmm(a, b), **TOL[torch.float32])
    ops = spyre_rules.capture_operations(lambda x, y: x @ y, torch.randn(4, 8), torch.randn(8, 3))
    assert [list(map(int, op.data.ranges)) for op in ops] == [[4, 3]]


def test_3d_by_2d_matmul_in_a_hint_block_is_tiled_with_it():
    # repro w3b: the mm over merged (A*B) rows was left untiled inside the A loop and
    # re-read rows of tile 0 every iteration; over the real batch it tiles by A.
    x0 = _named((8, 2, 16), ["A", "B", "D"], torch.float32, 0)
    w = _named((8, 16), ["E", "D"], torch.float32, 1)
    x2 = _named((8, 2, 8), ["A", "B", "E"], torch.float32, 2)

    def f(x0, w, x2):
        with spyre_hint(slices={"A": 2}):
            return x2 - x0 @ w.t()

    compiled = run_spyre(f, x0, w, x2)
    torch.testing.assert_close(compiled.output, f(x0, w, x2), **TOL[torch.float32])
    assert _looped(compiled)
