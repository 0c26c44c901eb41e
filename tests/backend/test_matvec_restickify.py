"""A matrix-vector batchmatmul's operand restickified onto m keeps k just outside the stick.

Mamba's scan output contracts its states ``[L, I, N]`` with ``C [L, N]`` over the N=16
state values: a product whose output ``[L, I, 1]`` is stuck on ``m`` (I), so the states
are restickified onto I.  The generic restickified layout put N outermost over all of L
and I (1 MiB per stick's worth of N at these sizes), and N cannot be split: C holds it
inside a 40-wide stick row.  At 64 KiB main refused ("reduction-controlled input span ...
splits fail input_sticks_whole"); Mamba, Falcon-Mamba and Jamba stopped there.  With N
just outside the new stick (``backend/restickify.py`` ``_reduction_inside``) one value of
N spans one stick and the product tiles over L.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from spyre_helpers import run_spyre

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tiling"))
from tiling_helpers import loop_counts  # noqa: E402

from spyre_rules import config  # noqa: E402

KiB = 1024


def scan_output(states, x_proj):
    # C is columns 24..39 of the 40-wide projection, as in Mamba's x_proj split
    return torch.matmul(states, x_proj[:, 24:].unsqueeze(-1)).squeeze(-1)


def test_matvec_operand_tiles_at_64_kib():
    gen = torch.Generator().manual_seed(0)
    states = torch.randn(128, 128, 16, generator=gen)
    x_proj = torch.randn(128, 40, generator=gen)
    untiled = run_spyre(scan_output, states, x_proj).output
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=64 * KiB,
                      span_check="error"):
        compiled = run_spyre(scan_output, states, x_proj)
    # no reduction level: the tiles sum in the untiled program's order
    assert torch.equal(compiled.output, untiled)
    torch.testing.assert_close(compiled.output, scan_output(states, x_proj), atol=1e-5, rtol=1e-5)
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        [(32, [(32, ["ReStickifyStageHBM"])])],
        [(32, ["ReStickifyOpHBM", "batchmatmul"])]]
    product = compiled.op_specs()[-1]
    # per tile: 4 sticks of I, N (16) just outside them, 4 rows of L outermost
    assert product.op == "batchmatmul" and product.args[0].device_size == [4, 4, 16, 32]
