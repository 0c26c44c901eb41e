"""A buffer read across its stick into its outermost dim is laid out rows outermost
(backend/row_major_layouts.py, facts/row_major_sticks.py).

qwen3_next's gated norm writes ``[T * H, D]`` and its output projection reads it as
``[T, H * D]``.  Generically laid out ``[D/32, T * H, 32]``, the product's reduction
variable ``k = D h + e`` jumps between stick columns: before, no split was legal at
64 KiB (``Cannot auto-tile buf163 ... not rigid translations``), the sweep's qwen3_next
and qwen3_5_text rows.  Laid out ``[T * H, D/32, 32]`` the walk moves along consecutive
sticks and the product tiles over tokens, output sticks and ``k``.  Here at a quarter of
the sizes, 16 KiB; olmo_hybrid's padded heads of 48 at 32 KiB.
"""

from __future__ import annotations

import json

import torch

from spyre_helpers import run_spyre

from spyre_rules import config

T, H, D, O = 64, 8, 64, 64


def _gated_projection(x, w, weight):
    return (x * w).reshape(T, H * D) @ weight.t()


def _inputs():
    g = torch.Generator().manual_seed(0)
    return (torch.randn(T * H, D, generator=g), torch.randn(D, generator=g),
            torch.randn(O, H * D, generator=g))


def test_the_flattened_rows_are_laid_out_rows_outermost_and_the_product_tiles(tmp_path):
    x, w, weight = _inputs()
    with config.patch(max_span_bytes=16 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_gated_projection, x, w, weight)
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    plans = {r["op"]: (r["kind"], r["levels"], r["layout"]["device_size"]) for r in records}
    assert plans == {
        "buf0": ("pointwise", [[0, 8], [1, 2]], [512, 2, 32]),          # rows outermost
        "buf2": ("ReStickifyOpHBM", [[0, 2], [1, 8]], [2, 512, 32]),
        "buf1": ("reduction:batchmatmul", [[0, 8], [1, 2], [0, 4]], [2, 64, 32]),
    }, plans
    # k is split in 4 tiles: the documented bound of an accumulated product
    # (docs/accumulation.md), against the float64 product
    exact = (x.double() * w.double()).reshape(T, H * D) @ weight.double().t()
    scale = (x.double() * w.double()).abs().reshape(T, H * D) @ weight.double().abs().t()
    bound = (H * D + 1) * torch.finfo(torch.float32).eps * scale
    ulp_half = exact.abs() * torch.finfo(torch.float32).eps / 2
    assert ((compiled.output.double() - exact).abs() <= bound + ulp_half).all()


def test_untiled_the_buffer_keeps_the_generic_layout(tmp_path):
    x, w, weight = _inputs()
    with config.patch(dump_dir=str(tmp_path), fallback="error"):
        compiled = run_spyre(_gated_projection, x, w, weight)
    assert torch.equal(compiled.output, _gated_projection(x, w, weight))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    assert records[0]["layout"]["device_size"] == [2, 512, 32]


def _padded_projection(x, w, weight):
    # olmo_hybrid's gate: heads of 48 (a stick and a half), [T * 4, 48] read as [T, 192]
    return (x * w).reshape(128, 4 * 48) @ weight.t()


def test_a_padded_stick_dim_tiles_by_whole_heads(tmp_path):
    g = torch.Generator().manual_seed(0)
    x, w, weight = (torch.randn(128 * 4, 48, generator=g), torch.randn(48, generator=g),
                    torch.randn(64, 4 * 48, generator=g))
    # generically [2, 512, 32]: a tile of whole heads spans both stick columns, 64 KiB
    # apart (refused before: "a reduction-controlled input span of buf1 still exceeds")
    with config.patch(max_span_bytes=32 * 1024, ignore_span_overflow_hints=False,
                      span_check="error", fallback="error", dump_dir=str(tmp_path)):
        compiled = run_spyre(_padded_projection, x, w, weight)
    assert torch.equal(compiled.output, _padded_projection(x, w, weight))
    records = json.loads((tmp_path / "graph_0" / "plan.json").read_text())["ops"]
    plans = {r["op"]: (r["kind"], r["levels"], r["layout"]["device_size"]) for r in records}
    assert plans == {
        "buf0": ("pointwise", [[0, 4], [1, 2]], [512, 2, 32]),
        "buf2": ("ReStickifyOpHBM", [[0, 2], [1, 2]], [2, 192, 32]),
        "buf1": ("reduction:batchmatmul", [[0, 4], [1, 2]], [2, 128, 32]),
    }, plans
