"""facts/row_major_sticks.py: when a buffer is read across its stick into its outermost
dim, and the row-major layout it then gets."""

from __future__ import annotations

import sympy
import torch

from spyre_rules.facts.row_major_sticks import (
    reads_across_the_stick_into_dim_0,
    row_major_stick_layout,
)

d0, d1, d2 = sympy.symbols("d0 d1 d2", integer=True, nonnegative=True)


def test_a_flattening_read_walks_from_the_stick_into_the_rows():
    # [T * H, D] = [4096, 128] read as [T, H * D]: 4096 d0 + d2, d2 over 4096
    read = (4096 * d0 + d2, {d0: 128, d2: 4096})
    assert reads_across_the_stick_into_dim_0([4096, 128], [128, 1], 32, [read])


def test_reads_within_the_stick_row_or_not_reaching_dim_0_do_not_count():
    by_rows = (128 * d0 + d1, {d0: 4096, d1: 128})
    assert not reads_across_the_stick_into_dim_0([4096, 128], [128, 1], 32, [by_rows])
    # [A, B, C]: a walk merging B and C never reaches A (the generic layout serves it)
    merged_bc = (4096 * d0 + d2, {d0: 4, d2: 4096})
    assert not reads_across_the_stick_into_dim_0([4, 32, 128], [4096, 128, 1], 32, [merged_bc])
    # ... but one merging all three does
    flat = (d2, {d2: 4 * 4096})
    assert reads_across_the_stick_into_dim_0([4, 32, 128], [4096, 128, 1], 32, [flat])


def test_a_padded_stick_dim_counts():
    # olmo_hybrid's gate [T * 4, 48] read as [T, 192]: whole heads move by a padded row
    read = (192 * d0 + d2, {d0: 128, d2: 192})
    assert reads_across_the_stick_into_dim_0([512, 48], [48, 1], 32, [read])
    layout = row_major_stick_layout([512, 48], [48, 1], torch.float32)
    assert (list(layout.device_size), list(layout.stride_map)) == ([512, 2, 32], [48, 32, 1])


def test_a_single_stick_or_a_unit_dim_0_is_left_alone():
    flat = (d2, {d2: 4096 * 32})
    assert not reads_across_the_stick_into_dim_0([4096, 32], [32, 1], 32, [flat])  # one stick
    flat = (d2, {d2: 4096 * 128})
    assert not reads_across_the_stick_into_dim_0([1, 4096, 128], [524288, 128, 1], 32, [flat])


def test_the_row_major_layout_keeps_the_host_order_with_the_tile_count_inside():
    layout = row_major_stick_layout([4096, 128], [128, 1], torch.float32)
    assert list(layout.device_size) == [4096, 4, 32]
    assert list(layout.stride_map) == [128, 32, 1]
    layout = row_major_stick_layout([4, 1, 32, 64], [2048, 2048, 64, 1], torch.float16)
    assert list(layout.device_size) == [4, 1, 32, 1, 64]
    assert list(layout.stride_map) == [2048, -1, 64, 64, 1]
