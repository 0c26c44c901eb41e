"""A restickify copy whose source keeps the new stick dim outermost with a wide row goes
through an intermediate under automatic tiling (rules/restickify.rules, issue 41).

Mamba2 layers pad ``x.transpose(1, 2)`` for their causal conv1d, ``x`` a column slice of
the input projection (776 float32 columns at the sweep's tiny sizes).  The pad reads the
projection restickified on its sequence dim; one stick of 32 sequence rows of the
projection spans 32 x 3200 bytes, more than 64 KiB, while any tile of the copy writes
whole sequence sticks: no single tile fitted both sides, and automatic tiling refused the
whole graph.  Staged, the first copy keeps the stick on the columns with the rows just
outside it, the second transposes: each tiles within the limit.  Copies are exact.
"""

from __future__ import annotations

import torch

from tiling_helpers import loop_counts, run_spyre, verify_program
from spyre_rules import config

STAGE, COPY = "ReStickifyStageHBM", "ReStickifyOpHBM"


def mamba_conv_pad(p):
    _gate, x, _dt = p.split([256, 512, 8], dim=-1)
    return torch.nn.functional.pad(x.transpose(1, 2), (3, 0))


def transposed(p):
    return p.transpose(1, 2).contiguous()


def _auto(fn, p, limit=65536):
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=limit):
        compiled = run_spyre(fn, p)
    assert torch.equal(compiled.output, fn(p))
    assert max(span for *_, span in verify_program(compiled)) <= limit
    return [loop_counts(k.specs) for k in compiled.kernels], {s.op for s in compiled.op_specs()}


def test_mamba_pad_of_a_transposed_projection_slice_tiles_in_two_stages():
    p = torch.randn(1, 128, 776, generator=torch.Generator().manual_seed(0))
    stage = (6, [(6, [STAGE]), (1, [STAGE])])
    assert _auto(mamba_conv_pad, p)[0] == [
        [stage, (1, stage[1])],                   # rows and 32-column blocks, same stick
        [(6, [COPY]), (1, [COPY])],               # the transposition, by column blocks
        [(5, ["full", "cat"]), (1, ["full", "cat"])],
    ]


def test_a_wide_output_is_written_through_an_intermediate():
    # [1, 640, 64] stuck on its last dim, read transposed: the copy stuck on the 640 keeps
    # the 64 outermost, one stick of it 32 x 640 x 4 = 81920 bytes of the output
    p = torch.randn(1, 640, 64, generator=torch.Generator().manual_seed(1))
    programs, ops = _auto(transposed, p)
    assert ops == {STAGE, COPY, "clone"}
    assert programs[0] == [(2, [STAGE]), (1, [STAGE])]   # the transposition into the intermediate first


def test_both_sides_wide_in_half_precision():
    p = torch.randn(1, 640, 640, generator=torch.Generator().manual_seed(2)).half()
    programs, ops = _auto(transposed, p)
    assert ops == {STAGE, COPY, "clone"}
    assert len(programs) == 3                  # source stage, transposition, output stage


def test_one_copy_without_automatic_tiling():
    p = torch.randn(1, 128, 776, generator=torch.Generator().manual_seed(0))
    compiled = run_spyre(mamba_conv_pad, p)
    assert torch.equal(compiled.output, mamba_conv_pad(p))
    assert STAGE not in {spec.op for spec in compiled.op_specs()}
