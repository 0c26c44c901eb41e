"""A tiled reduction over several dims of which one has size 1 compiles and equals eager.

Found by the differential fuzzer (programs 777:803 and 777:1429, manual and mixed
variants): the tiled op's loop body was traced with one reduction index per
reduced dim of size > 1, but the reduction's loader takes one index per reduced
dim (Inductor's squeeze passes 0 for a unit dim), so Inductor asserted at compile
time.  A unit reduction dim now gets index 0, as in the untiled body.
"""

from __future__ import annotations

import pytest
import torch
from layout_cases import check

from spyre_rules import spyre_hint

F16, F32 = torch.float16, torch.float32
C, U = "compact", "unrolled"


def permuted_amax_keepdim(x0):
    # fuzz 777:803: the permuted view puts a unit dim among the reduced ones
    with spyre_hint(slices={"B": 2}):
        t1 = x0.view(6, 1, 2, 37).permute(3, 1, 0, 2) * 2.0
        t3 = t1.amax(dim=(0, 1), keepdim=True)
    return t3, t1


def nested_amin(x0):
    # fuzz 777:1429: nested hints on one dim over a reduction of a unit and a real dim
    with spyre_hint(slices={"A": 8}):
        with spyre_hint(slices={"A": 4}):
            return x0.amin(dim=(0, 2))


def summed(x0):
    with spyre_hint(slices={"A": 4}):
        return x0.sum(dim=(0, 2))


@pytest.mark.parametrize("mode", [C, U])
def test_permuted_view_reduced_over_a_unit_dim(mode):
    check(permuted_amax_keepdim, [(6, 2, 37)], [["A", "B", "C"]], F32, mode)


@pytest.mark.parametrize("mode", [C, U])
def test_nested_hints_over_a_reduction_with_a_unit_dim(mode):
    check(nested_amin, [(1, 32, 5)], [[None, "A", "B"]], F16, mode)


def test_sum_over_a_unit_and_a_real_dim():
    check(summed, [(1, 32, 5)], [[None, "A", "B"]], F32, C)
