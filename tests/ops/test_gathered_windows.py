"""A gathered read whose rows alone overflow the limit, read in windows of rows.

backend/gathered_windows.py: with automatic tiling on, an op whose one indirect index
drives a table coordinate over the limit on its own reads the table in windows of
consecutive rows, one indirect read per window; each index takes its value from the
window it falls in.  Bitwise equal to eager whatever the indices (both ends, window
edges, repeated, negative through ``x[i]``) and the data (NaN, -0.0), under
``fallback="error"`` and ``span_check="error"`` (every access enforced).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from ops_helpers import randint, randn, run_spyre
from spyre_rules import config
from spyre_rules.executor import IndirectIndexError
from spyre_rules.ir.errors import BackendCompileError, find_cause


def _auto(limit: int):
    return config.patch(max_span_bytes=limit, span_check="error", ignore_span_overflow_hints=False)


def _bitwise_equal(out: torch.Tensor, ref: torch.Tensor) -> bool:
    if out.dtype != ref.dtype or out.shape != ref.shape:
        return False
    width = {2: torch.int16, 4: torch.int32, 8: torch.int64}[ref.element_size()]
    return torch.equal(out.view(width), ref.view(width))


def _table_reads(compiled):
    """(indirect size, row coordinate) of each gathered read of the table by the one op
    that gathers."""
    (spec,) = [s for s in compiled.op_specs() if any(a.indirect for a in s.args)]
    return [(a.indirect[0].size, str(a.device_coordinates[1])) for a in spec.args if a.indirect]


def _edge_ids(rows: int, *shape: int) -> torch.Tensor:
    ids = randint(0, rows, *shape)
    flat = ids.view(-1)
    flat[:6] = torch.tensor([0, rows - 1, rows // 2 - 1, rows // 2, rows // 2, 0])  # edges, repeats
    return ids


def test_position_table_just_over_the_limit_is_read_in_two_windows():
    """OPT's learned positions: (514, 128) fp32 is laid out [4, 514, 32]; its row coordinate
    spans 514 x 128 = 65792 bytes, just over 64 KiB.  Two windows of 257 rows (32896 bytes
    each), then the hidden dim's 4 sticks split 4 ways: one counted loop of 4."""
    ids, w = _edge_ids(514, 1, 128), randn(514, 128)
    w[257, 3], w[0, 0], w[513, 127] = float("nan"), -0.0, float("-inf")
    with _auto(64 * 1024):
        compiled = run_spyre(F.embedding, ids, w)
    assert _bitwise_equal(compiled.output, F.embedding(ids, w))
    (loop,) = compiled.kernels[0].specs
    assert loop.count == 4
    (spec,) = loop.body
    assert spec.op == "embedding" and [str(s) for s in spec.tiled_symbols[0]] == ["c1"]
    assert _table_reads(compiled) == [(257, "ind1"), (257, "ind2 + 257")]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_index_with_negative_indices_in_three_uneven_windows(dtype):
    """x[i] on a (700, 64) table at 32 KiB: 256 rows fit, so 3 windows of 234, 233 and 233
    rows; negative indices count from the end as in eager."""
    x = randn(700, 64, dtype=dtype)
    i = _edge_ids(700, 40)
    i[6:10] = torch.tensor([-1, -700, -467, -466])
    with _auto(32 * 1024):
        compiled = run_spyre(lambda x, i: x[i] * 2, x, i)
    assert _bitwise_equal(compiled.output, x[i] * 2)
    assert _table_reads(compiled) == [(234, "ind1"), (233, "ind2 + 234"), (233, "ind3 + 467")]


def test_gathered_rows_in_windows_feed_a_reduction():
    """amax over rows gathered in 3 windows of 200: exactly the eager values reach it."""
    ids, w = _edge_ids(600, 2, 16), randn(600, 64)
    fn = lambda ids, w: F.embedding(ids, w).amax(dim=1)  # noqa: E731
    with _auto(32 * 1024):
        compiled = run_spyre(fn, ids, w)
    assert _bitwise_equal(compiled.output, fn(ids, w))
    assert _table_reads(compiled) == [(200, "ind1"), (200, "ind2 + 200"), (200, "ind3 + 400")]


def test_an_index_outside_the_table_is_still_an_error_naming_the_op():
    ids, w = _edge_ids(514, 1, 16), randn(514, 128)
    ids[0, 9] = 514
    with _auto(64 * 1024), pytest.raises(IndirectIndexError) as err:
        run_spyre(F.embedding, ids, w)
    assert str(err.value) == (
        "op sdsc_embedding_0/embedding: indirect index ind0 = 514 at c0=9 is outside "
        "[0, 514) of the dim it indexes (indexing tensor arg1_1; read from tensor arg0_1)")


def test_two_indices_into_the_table_stay_refused_by_name():
    """x[i, j]: two indirect indices address the table, so it is not windowed: the refusal
    names the read as before."""
    x, i, j = randn(4000, 64, dtype=torch.float16), randint(0, 4000, 8), randint(0, 64, 8)
    with _auto(128 * 1024), pytest.raises(Exception) as info:
        run_spyre(lambda x, i, j: x[i, j], x, i, j)
    error = find_cause(info.value, BackendCompileError)
    assert error is not None, info.value
    assert str(error) == (
        "spyre_rules cannot compile this graph: Cannot auto-tile buf0 (aten ops: index.Tensor): "
        "no split brings its gathered read under the limit of 131072 bytes (gathered rows of arg0_1 "
        "(any index may pick any row): device dim 1 (tmp0) spans 512000 bytes)")
