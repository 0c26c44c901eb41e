"""``linalg_solve_triangular`` on the program (backend/triangular_solve.py, issue 41).

The gated delta rule (Qwen3-Next, Qwen3.5, OLMo-Hybrid) solves a unit lower system
per chunk; every form decomposes into matmuls by doubling and must equal eager within
the ops tests' tolerance, also tiled at a KiB limit.  No ATen fallback kernel is left
(fallback='error' would refuse it).
"""

from __future__ import annotations

import json

import pytest
import torch

from ops_helpers import check, randn

from spyre_rules import config
from spyre_rules.program.op_spec import LoopSpec


def _chunk_system(a):
    """The delta rule's system: strictly lower, decayed (entries below 1)."""
    return torch.tril(torch.tanh(a), -1) * 0.5


@pytest.mark.parametrize("n", [16, 5])
def test_unit_lower_chunk_solve_equals_eager(n):
    a, b = randn(1, 2, n, n), randn(1, 2, n, 32, seed=1)
    check(lambda a, b: torch.linalg.solve_triangular(_chunk_system(a), b, upper=False,
                                                     unitriangular=True), a, b)


@pytest.mark.parametrize("upper,left", [(False, True), (True, True), (False, False)],
                         ids=["lower", "upper", "right"])
def test_non_unit_solves_equal_eager(upper, left):
    a, b = randn(3, 16, 16), randn(3, 16, 16, seed=1)

    def solve(a, b):
        system = torch.tril(a * 0.2, -1) + torch.diag_embed(2.0 + a.diagonal(0, -2, -1).abs())
        system = system.mT if upper else system
        return torch.linalg.solve_triangular(system, b, upper=upper, left=left)

    check(solve, a, b)


def test_chunk_solve_auto_tiled_at_16_kib_equals_eager():
    a, b = randn(1, 8, 16, 16), randn(1, 8, 16, 64, seed=1)
    with config.patch(max_span_bytes=16384, ignore_span_overflow_hints=False, span_check="error"):
        compiled = check(lambda a, b: torch.linalg.solve_triangular(
            _chunk_system(a), b, upper=False, unitriangular=True), a, b)
    assert any(isinstance(item, LoopSpec) for k in compiled.kernels for item in k.specs)



def test_chunk_solve_keeps_its_batch_and_tiles_whole_matrices(tmp_path):
    """Qwen3-Next's solve: [1, heads, chunks, 64, 64] systems.  Folded into a bmm over
    heads * chunks, the powers N @ N were a 3-D buffer with that batch just outside the
    stick: a row strode over all 8 matrices (2 KiB), a column of 64 rows spanned 128 KiB,
    and the reduction split only in whole sticks (32 rows): refused at 16 KiB ("Cannot
    auto-tile buf16 (aten ops: bmm.default, reshape.default): no combined split among host
    dims [1, 3, 0]").  With the batch kept, every product is tiled in whole matrices
    (16 KiB each: heads 4 ways, chunks 2 ways)."""
    a, b = randn(1, 4, 2, 64, 64), randn(1, 4, 2, 64, 32, seed=1)
    with config.patch(max_span_bytes=16384, ignore_span_overflow_hints=False, span_check="error",
                      dump_dir=str(tmp_path)):
        check(lambda a, b: torch.linalg.solve_triangular(
            _chunk_system(a), b, upper=False, unitriangular=True), a, b)
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    products = {r["op"]: r["levels"] for r in records if r["kind"] == "reduction:batchmatmul"}
    assert len(products) == 11   # N ** 2 .. N ** 32 and the six products with X
    assert all(levels == [[1, 4], [2, 2]] for levels in products.values()), products
