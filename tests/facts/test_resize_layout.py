"""``resize_device_layout`` (docs/layout_model.md §2.2): every listed example plus each raise."""

from __future__ import annotations

import re

import pytest

from spyre_rules.errors import LayoutError
from spyre_rules.facts.stick_layout import (
    DataFormat,
    ElementArrangement,
    SpyreTensorLayout,
    contiguous_strides,
    generic_stick_layout,
    resize_device_layout,
)

FP16 = DataFormat.SEN169_FP16


def stl(device_size, stride_map, fmt=FP16, ea=ElementArrangement.STANDARD):
    return SpyreTensorLayout(tuple(device_size), tuple(stride_map), fmt, ea)


def pair(layout):
    return list(layout.device_size), list(layout.stride_map)


@pytest.mark.parametrize(
    "ds, sm, old, new, want_ds, want_sm",
    [
        # [1024,4096] -> per-tile [512,1024] (docs/layout_model.md §2.2's [16,512,64]).
        ([64, 1024, 64], [64, 4096, 1], [1024, 4096], [512, 1024], [16, 512, 64], [64, 1024, 1]),
        # Both size-1 device dims match host dim 0, so the tile-count stride 64 becomes -1.
        ([8195, 256, 1, 1, 64], [16384, 64, 64, -1, 1], [1, 8195, 256, 64], [1, 1639, 256, 64],
         [1639, 256, 1, 1, 64], [16384, 64, -1, -1, 1]),
        # The size-1 tile-count dim has no size-1 host dim: left untouched.
        ([16, 1, 20, 64], [64, 64, 1024, 1], [20, 16, 64], [2, 16, 64], [16, 1, 2, 64], [64, 64, 1024, 1]),
        # Restickified LM-head weight: j=0 unmatched -> tile count ceil(256/64)=4.
        ([16, 64, 64], [4096, 1, 64], [1024, 64], [256, 64], [4, 64, 64], [4096, 1, 64]),
        # Three size-4096 device dims resolved by the stride tiebreak.
        ([4096, 4096, 1, 4096, 64], [262144, 64, 64, 2**30, 1], [4096, 4096, 4096, 64], [4096, 64, 512, 64],
         [64, 512, 1, 4096, 64], [32768, 64, 64, 2097152, 1]),
    ],
)
def test_spec_examples(ds, sm, old, new, want_ds, want_sm):
    assert pair(resize_device_layout(stl(ds, sm), old, new)) == (want_ds, want_sm)


def test_grow_back_gives_the_original():
    orig = stl([64, 1024, 64], [64, 4096, 1])
    tile = resize_device_layout(orig, [1024, 4096], [512, 1024])
    assert resize_device_layout(tile, [512, 1024], [1024, 4096]) == orig


def test_resize_agrees_with_generic_constructor_for_tiles():
    for size, tile in [([1024, 4096], [512, 1024]), ([2, 20, 16, 64], [2, 4, 16, 64]),
                       ([128, 256, 512], [64, 256, 128]), ([4, 150], [2, 150])]:
        full = generic_stick_layout(size, contiguous_strides(size), "float16")
        want = generic_stick_layout(tile, contiguous_strides(tile), "float16")
        assert resize_device_layout(full, size, tile) == want, (size, tile)


def test_synthetic_raise():
    with pytest.raises(LayoutError, match=re.escape(
        "resizing SpyreTensorLayout(device_size=[10, 64], stride_map=[7, 1], SEN169_FP16) "
        "from host [20, 64] to [10, 64]: cannot uniquely identify the stick host dim "
        "(unmatched host dims [0, 1])"
    )):
        resize_device_layout(stl([10, 64], [7, 1]), [20, 64], [10, 64])


def test_pass_1b_tile_count_collision():
    # Host [64, 4096]: the stick tile count 64 collides with host dim 0 (size 64).
    full = generic_stick_layout([64, 4096], [4096, 1], "float16")
    assert pair(full) == ([64, 64, 64], [64, 4096, 1])
    assert pair(resize_device_layout(full, [64, 4096], [64, 1024])) == ([16, 64, 64], [64, 1024, 1])
    assert pair(resize_device_layout(full, [64, 4096], [32, 4096])) == ([64, 32, 64], [64, 4096, 1])


def test_pass_3_raise_tile_count_mismatch():
    with pytest.raises(LayoutError, match=re.escape(
        "device dim 0 (size 3) matches no host dim and is not the tile count 1 of stick host dim 1"
    )):
        resize_device_layout(stl([3, 20, 64], [64, 64, 1]), [20, 64], [10, 64])


def test_reduction_collapsed_stick_returns_after_pass_2():
    # Host [20, 16]: every host dim matched; tile-count and stick entries stay frozen;
    # non-contiguous strides are left unchanged.
    got = resize_device_layout(stl([16, 1, 20, 64], [64, 64, 1024, 1]), [20, 16], [10, 16])
    assert pair(got) == ([16, 1, 10, 64], [64, 64, 1024, 1])


def test_reduction_collapsed_with_unclaimed_device_dim_raises():
    with pytest.raises(LayoutError, match=re.escape(
        "every host dim is matched (the stick was reduced away) but device dims [0] are unclaimed"
    )):
        resize_device_layout(stl([5, 20, 64], [64, 1, 1]), [20], [10])


def test_new_size_one_gets_minus_one():
    got = resize_device_layout(stl([64, 1024, 64], [64, 4096, 1]), [1024, 4096], [1, 1])
    assert pair(got) == ([1, 1, 64], [-1, -1, -1])


def test_stick_host_dim_hint_resolves_transposed_host():
    # Column-major host [64, 64]: the stride tiebreak alone picks the wrong host dim.
    full = generic_stick_layout([64, 64], [1, 64], "float16")
    assert pair(full) == ([1, 64, 64], [4096, 1, 64])
    assert pair(resize_device_layout(full, [64, 64], [32, 64], stick_host_dim=1)) == ([1, 32, 64], [4096, 1, 64])
    # Without the hint the reference matches by contiguous strides (documented, not a guess).
    assert pair(resize_device_layout(full, [64, 64], [32, 64])) == ([1, 64, 64], [4096, 1, 64])


def test_stick_host_dim_dropped_when_not_in_layout():
    orig = stl([64, 1024, 64], [64, 4096, 1])
    want = ([16, 512, 64], [64, 1024, 1])
    assert pair(resize_device_layout(orig, [1024, 4096], [512, 1024], stick_host_dim=1)) == want
    # ceil(1024/64)=16 is not in ds[:-1]: the hint is dropped, inference takes over.
    assert pair(resize_device_layout(orig, [1024, 4096], [512, 1024], stick_host_dim=0)) == want
    assert pair(resize_device_layout(orig, [1024, 4096], [512, 1024], stick_host_dim=9)) == want
    with pytest.raises(LayoutError, match=re.escape("stick_host_dim = True is not an integer")):
        resize_device_layout(orig, [1024, 4096], [512, 1024], stick_host_dim=True)


def test_format_and_arrangement_are_copied():
    fp32 = stl([128, 1024, 32], [32, 4096, 1], DataFormat.IEEE_FP32, ElementArrangement.DL16_TO_FP32)
    got = resize_device_layout(fp32, [1024, 4096], [512, 1024])
    assert pair(got) == ([32, 512, 32], [32, 1024, 1])
    assert got.device_dtype is DataFormat.IEEE_FP32
    assert got.element_arrangement is ElementArrangement.DL16_TO_FP32


def test_bad_inputs():
    orig = stl([64, 1024, 64], [64, 4096, 1])
    with pytest.raises(LayoutError, match=re.escape("old_host_size [1024, 4096] and new_host_size [512] differ in rank")):
        resize_device_layout(orig, [1024, 4096], [512])
    with pytest.raises(LayoutError, match=re.escape("new_host_size[1] = 0 must be positive (in new_host_size [512, 0])")):
        resize_device_layout(orig, [1024, 4096], [512, 0])
    with pytest.raises(LayoutError, match=re.escape("layout ([64, 1024, 64], [64, 4096, 1]) is not a SpyreTensorLayout")):
        resize_device_layout(([64, 1024, 64], [64, 4096, 1]), [1024, 4096], [512, 1024])
