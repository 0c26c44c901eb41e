"""cumsum / cumprod lower to a masked sum / prod Reduction (backend/scan.py)."""

from __future__ import annotations

import pytest
import torch

from ops_helpers import DTYPES, check, fresh_dims, named, randint, randn, run_spyre
from spyre_rules import config


def roberta_position_ids(input_ids, padding_idx=1):
    # transformers' create_position_ids_from_input_ids
    mask = input_ids.ne(padding_idx).int()
    incremental = (torch.cumsum(mask, dim=1).type_as(mask)) * mask
    return incremental.long() + padding_idx


def test_roberta_position_ids_exact():
    ids = randint(0, 5, 2, 16)
    compiled = check(roberta_position_ids, ids)
    (scan,) = [s for s in compiled.op_specs() if s.op == "sum"]
    assert scan.is_reduction and [str(s) for s in scan.op_info["reduction_symbols"]] == ["c2"]
    assert scan.op_info["store"]["dtype"] == "int64"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_float_cumsum_both_dims(dtype):
    x = randn(5, 37, dtype=dtype)
    check(lambda x: torch.cumsum(x, 1), x)
    check(lambda x: torch.cumsum(x, 0) * 2, x)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cumprod(dtype):
    check(lambda x: torch.cumprod(x * 0.1 + 1, dim=-1), randn(3, 20, dtype=dtype))


def test_integer_and_bool_scans_accumulate_in_int64_or_the_given_dtype():
    m = randint(0, 2, 3, 40)
    check(lambda m: torch.cumsum(m, 1, dtype=torch.int32), m)
    check(lambda x: torch.cumsum(x > 0, 1), randn(3, 40))
    check(lambda m: torch.cumprod(m + 1, 0), m)


def test_cummax_is_still_refused_by_name():
    with pytest.raises(Exception, match=r"cummax.*no Spyre lowering"):
        run_spyre(lambda x: torch.cummax(x, 0).values, randn(4, 5))


def test_cumsum_inside_a_hint_loop_over_the_other_dim():
    from spyre_rules.hints import spyre_hint

    def fn(m):
        with spyre_hint(slices={"B": 2}):
            return torch.cumsum(m, 1) * m

    for unroll in (False, True):
        fresh_dims()
        with config.patch(unroll_loops=unroll):
            check(fn, named(randint(0, 2, 4, 16), ["B", "S"]))


def test_tiling_the_scanned_dim_is_refused_naming_the_op():
    from spyre_rules.hints import spyre_hint

    def fn(m):
        with spyre_hint(slices={"S": 2}):
            return torch.cumsum(m, 1)

    fresh_dims()
    with pytest.raises(Exception, match=r"buf0 \(aten ops: cumsum.default\): coarse tiling cannot "
                                        r"tile dim c2: the op computes a value from its index"):
        run_spyre(fn, named(randint(0, 2, 4, 16), ["B", "S"]))
