"""A consumer reads a restickified copy through the *copy's* layout, even when the
copy's source is later tiled (regression: fuzzer seed 1:49, auto variant).

``(x + y) @ w`` with ``w`` of one column: the matmul needs ``x + y`` stuck on its
reduction dim, so a restickify copy is inserted; automatic tiling then splits the
add (and the copy) along the columns, shrinking the add's buffer to one tile.
The matmul outside the loop used to compute its index into the copy from the
add's *per-tile* strides (``32*c0 + c1`` instead of ``64*c0 + c1``) and read
the wrong rows.
"""

from __future__ import annotations

import torch

from tiling_helpers import loop_counts, run_spyre
from spyre_rules import config


def test_matmul_in_the_loop_reads_the_restickified_copy_through_its_layout():
    g = torch.Generator().manual_seed(100052)
    x, y, w = (torch.randn(s, generator=g) for s in ([32, 64], [32, 64], [64, 1]))

    def fn(x, y, w):
        return (x + y) @ w

    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=4771, sencores=1,
                      span_check="off"):
        compiled = run_spyre(fn, x, y, w)
    torch.testing.assert_close(compiled.output, fn(x, y, w), atol=1e-4, rtol=1e-4)
    specs = compiled.op_specs()
    # The matmul shares the add's loop as a reduction level over k (its accumulator
    # initialised and finalised around the loop), reading each tile of the copy
    # through the copy's own layout.
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (2, ["add", "ReStickifyOpHBM", "batchmatmul"]), "acc_finalize"]]
    _init, add, copy, matmul, _finalize = specs
    assert add.tiled_symbols and copy.tiled_symbols and matmul.tiled_symbols
    operand = matmul.args[0]
    assert operand.name == copy.args[1].name
    assert [str(c) for c in operand.device_coordinates] == ["0", "c1", "c0"]
