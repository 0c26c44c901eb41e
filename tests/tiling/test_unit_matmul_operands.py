"""A tiled matmul whose operand takes one value per chunk compiles, runs and equals eager.

Found by the differential fuzzer (programs 1202:134, 1202:304, 1202:2616 and
1202:2622, manual and mixed variants): when the contracted dim K is tiled by its
full size (per-tile extent 1) and the operand's other dim is a unit row (M = 1, a
keepdim reduction's dim) or a per-tile column of extent 1 (N tiled by its size),
every symbol the operand depends on takes a single value in the executor's chunk,
so its load is a 0-dim tensor and the batchmatmul reduction's ``"...k,...k->..."``
einsum stopped at run time.  The operand is now padded to the chunk's rank.
"""

from __future__ import annotations

import pytest
import torch
from layout_cases import check

from spyre_rules import spyre_hint
from spyre_rules.executor.reductions import reduce_chunk

F16 = torch.float16
C, U = "compact", "unrolled"


def keepdim_row_times_k_tiles_of_one(x0, x1):
    # fuzz 1202:2616: a (1, K) row from a keepdim sum, K = 2 tiled by 2
    with spyre_hint(slices={"A": 2}):
        t0 = x0.permute(1, 0).contiguous()
        t1 = t0.sum(dim=0, keepdim=True)
        return t1 @ x1


def unit_row_nested_k_hints(x0, x1, x2):
    # fuzz 1202:304: the (1, 32) row's K tiled 2 x 16 (extent 1) by nested hints
    t0 = x0.sum(dim=0, keepdim=True)
    t2 = torch.sigmoid(t0 * x1)
    with spyre_hint(slices={"B": 2}):
        with spyre_hint(slices={"B": 16}):
            return t2 @ x2


def batched_n_and_k_tiles_of_one(x0, x1):
    # fuzz 1202:2622: a 4-D @ 2-D matmul with N and K both tiled to extent 1, so the
    # (K, N) operand is one element per chunk
    with spyre_hint(slices={"E": 4}):
        t0 = x0.amax(dim=1, keepdim=True)
        with spyre_hint(slices={"D": 16}):
            return t0 @ x1


@pytest.mark.parametrize("mode", [C, U])
def test_unit_row_from_keepdim_sum_with_k_tiles_of_one(mode):
    check(keepdim_row_times_k_tiles_of_one, [(2, 96), (2, 5)], [["A", "B"], ["A", "C"]],
          F16, mode)


@pytest.mark.parametrize("mode", [C, U])
def test_unit_row_with_nested_hints_on_k(mode):
    check(unit_row_nested_k_hints, [(32, 32), (1, 1), (32, 96)],
          [["A", "B"], None, ["B", "C"]], F16, mode)


@pytest.mark.parametrize("mode", [C, U])
def test_batched_matmul_with_n_and_k_tiles_of_one(mode):
    check(batched_n_and_k_tiles_of_one, [(8, 6, 8, 16), (16, 4)],
          [["A", "B", "C", "D"], ["D", "E"]], F16, mode)


@pytest.mark.parametrize("a_shape, b_shape", [((), (3, 1)), ((2, 1, 1), ()), ((), ())],
                         ids=["lhs_scalar", "rhs_scalar", "both_scalar"])
def test_batchmatmul_chunk_with_a_0_dim_operand(a_shape, b_shape):
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(a_shape, generator=gen)
    b = torch.randn(b_shape, generator=gen)
    shape = [2, 3, 1]  # two output axes and a reduction axis of extent 1
    part = reduce_chunk("batchmatmul", [a, b], shape, 1, 0)
    assert part.shape == (2, 3)
    torch.testing.assert_close(part, (a * b).expand(shape).sum(-1))
