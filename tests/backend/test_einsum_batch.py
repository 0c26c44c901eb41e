"""A two-operand einsum lowers to one batchmatmul over its batch letters kept apart.

ATen's einsum merges the batch letters into the one batch dim of a bmm; Mamba2's
chunk scan (``bclhn,bcshn->bclsh``) then reads an operand whose merged batch
``c * H + h`` no tile of the merged dim translates rigidly, and no split fits
(Granite-4.0-H-Small at 8192 tokens, 256 MiB; here the same structure at 512 KiB).
"""

from __future__ import annotations

import pytest
import torch

from spyre_helpers import run_spyre

import spyre_rules
from spyre_rules import config
from spyre_rules.backend import einsum_batch
from spyre_rules.backend.einsum_batch import einsum_roles
from spyre_rules.program.op_spec import LoopSpec

TOL = dict(atol=2e-5, rtol=2e-5)


def test_roles_of_the_chunk_scan_contractions():
    roles = einsum_roles("bclhn,bcshn->bclsh", [(1, 4, 8, 2, 3), (1, 4, 8, 2, 3)])
    assert (roles.batch, roles.m, roles.n, roles.k) == (["b", "c", "h"], ["l"], ["s"], ["n"])
    roles = einsum_roles("bzch,bzhpn->bchpn", [(1, 5, 5, 2), (1, 5, 2, 3, 4)])
    assert (roles.batch, roles.m, roles.n, roles.k) == (["b", "h"], ["c"], ["p", "n"], ["z"])


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),              # no batch letter: a plain mm
    ("bij,bjk", [(2, 2, 3), (2, 3, 4)]),          # implicit output
    ("...ij,...jk->...ik", [(2, 2, 3), (2, 3, 4)]),
    ("bii,bij->bj", [(2, 3, 3), (2, 3, 4)]),       # a diagonal
    ("bij,bjk->bk", [(2, 2, 3), (2, 3, 4)]),       # i summed in one operand only
    ("bij,bjk->bik", [(1, 2, 3), (2, 3, 4)]),      # a broadcast batch letter
])
def test_other_einsums_are_left_to_aten(equation, shapes):
    assert einsum_roles(equation, shapes) is None


EQUATIONS = {
    # Mamba2's chunked scan (transformers' mamba2_chunk_scan), every contraction
    "scores": ("bclhn,bcshn->bclsh", [(1, 2, 4, 3, 5), (1, 2, 4, 3, 5)]),
    "apply": ("bclsh,bcshp->bclhp", [(1, 2, 4, 4, 3), (1, 2, 4, 3, 6)]),
    "states": ("bclhn,bclhp->bchpn", [(1, 2, 4, 3, 5), (1, 2, 4, 3, 6)]),
    "recurrence": ("bzch,bzhpn->bchpn", [(1, 3, 3, 2), (1, 3, 2, 6, 5)]),
    "readout": ("bclhn,bchpn->bclhp", [(1, 2, 4, 3, 5), (1, 2, 3, 6, 5)]),
}


@pytest.mark.parametrize("name", list(EQUATIONS))
def test_chunk_scan_contractions_equal_eager(name):
    equation, shapes = EQUATIONS[name]
    g = torch.Generator().manual_seed(0)
    xs = [torch.randn(*s, generator=g) for s in shapes]

    def fn(a, b):
        return torch.einsum(equation, a, b)

    compiled = run_spyre(fn, *xs)
    torch.testing.assert_close(compiled.output, fn(*xs), **TOL)
    ops = spyre_rules.capture_operations(fn, *xs)
    bmm = [op for op in ops if getattr(op.data, "reduction_type", None) == "batchmatmul"]
    roles = einsum_roles(equation, shapes)
    assert [len(op.data.ranges) for op in bmm] == [len(roles.batch) + 2]


C, L, H, N = 4, 64, 16, 64  # chunks, chunk length, heads, state: 1 MiB fp32 per operand


def _chunk_scores(x, y):
    return torch.einsum("bclhn,bcshn->bclsh", x.reshape(1, C, L, H, N), y.reshape(1, C, L, H, N))


def _compile_tiled(fn, *xs):
    torch._dynamo.reset()
    with config.patch(max_span_bytes=512 * 1024, ignore_span_overflow_hints=False,
                      coarse_tiling=True):
        return run_spyre(fn, *xs)


def test_chunk_scores_tile_at_a_kib_limit_and_equal_eager():
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(1, C * L, H, N, generator=g), torch.randn(1, C * L, H, N, generator=g)
    compiled = _compile_tiled(_chunk_scores, x, y)
    torch.testing.assert_close(compiled.output, _chunk_scores(x, y), **TOL)
    assert any(isinstance(s, LoopSpec) for k in compiled.kernels for s in k.specs)


def test_the_merged_batch_is_what_was_refused(monkeypatch):
    # Without the rewrite ATen's bmm over (b, c, h) merged is planned: no split fits.
    monkeypatch.setattr(einsum_batch, "keep_einsum_batch", lambda gm: False)
    x = torch.randn(1, C * L, H, N)
    with pytest.raises(Exception, match=r"Cannot auto-tile buf\d+ \(aten ops: bmm"):
        _compile_tiled(_chunk_scores, x, x.clone())


# Granite-4.0-H-Small's scores at 32768 tokens, scaled down: 32 chunks of 64, 32 heads, state 32
# (16 MiB of fp32 scores at 1 MiB; 4 GiB at 256 MiB).  The plan splits chunks and heads: the
# second operand, restickified onto the positions, is laid out heads outermost, and a split
# of the heads too coarse for it is below its read floor (engine/span_floor.py).  In cost
# order the first combination that fits comes after MAX_TILE_COMBOS others.
C32, L32, H32, N32 = 32, 64, 32, 32


def _long_scores(x, y):
    shape = (1, C32, L32, H32, N32)
    return torch.einsum("bclhn,bcshn->bclsh", x.reshape(shape), y.reshape(shape))


def _compile_at_1_mib(fn, *xs):
    torch._dynamo.reset()
    with config.patch(max_span_bytes=1024 * 1024, ignore_span_overflow_hints=False,
                      coarse_tiling=True):
        return run_spyre(fn, *xs)


def test_long_chunk_scores_reach_their_plan_past_the_read_floors():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(1, C32 * L32, H32, N32, generator=g)
    y = torch.randn(1, C32 * L32, H32, N32, generator=g)
    compiled = _compile_at_1_mib(_long_scores, x, y)
    torch.testing.assert_close(compiled.output, _long_scores(x, y), **TOL)
    assert any(isinstance(s, LoopSpec) for k in compiled.kernels for s in k.specs)


def test_without_the_floors_the_budget_ends_first(monkeypatch):
    from spyre_rules.engine import search

    monkeypatch.setattr(search, "below_floor", lambda *args: False)
    monkeypatch.setattr(search, "viable_counts", lambda floors, dim, counts, limit: counts)
    x = torch.randn(1, C32 * L32, H32, N32)
    with pytest.raises(Exception, match=r"no combined split among host dims \[1, 3, 2\]"):
        _compile_at_1_mib(_long_scores, x, x.clone())
