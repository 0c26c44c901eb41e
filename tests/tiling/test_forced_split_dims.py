"""A dim the read floors force to one split count is fixed, not searched (issue 41).

Grouped attention's scores read the query heads as ``2*kv_head + head`` (Gemma 4's
global layers, head dim 512): when one head's rows alone fill the limit, both head dims
take one value per tile, and the query rows and the head dim (a reduction level) are the
search's real choices.  The search refused such an op as "4 dims overflow, more than the
bounded search limit of 3"; the bound now counts only the dims with a choice
(``open_dims``, rules/planner.rules ``too_many_dims``; engine/span_floor.py).
"""

from __future__ import annotations

import torch

from tiling_helpers import loop_counts, run_spyre, verify_program
from spyre_rules import config
from spyre_rules.engine.span_floor import ReadFloor, below_floor, read_floors, viable_counts


def grouped_scores(q, k):
    # 4 query heads on 2 key heads: [1, 2 kv heads, 2 heads each, 32, 128] @ [1, 2, 1, 128, 32]
    return q.view(1, 2, 2, 32, 128) @ k[:, :, None].transpose(-1, -2)


def test_grouped_scores_tile_on_four_dims_and_equal_eager():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(1, 4, 32, 128, generator=g), torch.randn(1, 2, 32, 128, generator=g)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=8192):
        compiled = run_spyre(grouped_scores, q, k)
    # fp32 partial sums over two head-dim tiles: summation order only (docs/accumulation.md)
    torch.testing.assert_close(compiled.output, grouped_scores(q, k), rtol=1e-5, atol=1e-5)
    assert max(span for *_, span in verify_program(compiled)) <= 8192
    # kv heads, heads per kv head, query rows, then the head dim as a reduction level
    assert loop_counts(compiled.kernels[-1].specs) == [
        (2, [(2, [(2, ["acc_init", (2, ["batchmatmul"]), "acc_finalize"])])])]


def test_an_affine_read_of_two_symbols_has_one_floor():
    import sympy
    from types import SimpleNamespace

    d0, d1 = sympy.Symbol("d0", integer=True), sympy.Symbol("d1", integer=True)
    coord = SimpleNamespace(expr="2*d0 + d1", symbols=frozenset({d0, d1}), span_elems=4,
                            inner_elems=65536, is_stick=False, span_bytes=4 * 65536 * 4)
    found = [("input_span", SimpleNamespace(host_dim=1, coord=coord, source="input:buf197"))]
    floors = read_floors(found, {1: 2, 2: 2}.get, {"d0": 1, "d1": 2}.get)
    assert floors == [ReadFloor(((1, 2, 2), (2, 2, 1)), 262144)]
    limit = 65536
    assert viable_counts(floors, 1, [1, 2], limit) == [2]      # one kv head per tile
    assert viable_counts(floors, 2, [1, 2], limit) == [2]      # one head of it per tile
    assert below_floor(floors, [1, 2], [2, 1], limit)          # 2 heads: 2 values
    assert not below_floor(floors, [1, 2], [2, 2], limit)      # one value: a base address
