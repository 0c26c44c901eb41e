"""stickify / unstickify: the stride_map identity, padding, dtypes, odd strides."""

from __future__ import annotations

import itertools

import pytest
import torch

from spyre_rules.executor import stickify, unstickify
from spyre_rules.layout import generic_stick_layout, restickify_layout


def _layout(t, dim_order=None):
    return generic_stick_layout(list(t.shape), list(t.stride()), t.dtype, dim_order)


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((4, 150), torch.float16),
        ((3, 37), torch.float32),
        ((2, 5, 7), torch.float32),
        ((2, 3, 5, 70), torch.float16),
        ((), torch.float32),
        ((70,), torch.bool),
        ((4, 1), torch.int64),
        ((5, 33), torch.int32),
        ((4, 150), torch.bfloat16),
    ],
)
def test_round_trip(shape, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    layout = _layout(x)
    device = stickify(x, layout)
    assert tuple(device.shape) == layout.device_size
    back = unstickify(device, layout, x.shape, x.stride(), dtype)
    assert back.dtype == dtype and torch.equal(back, x)


def test_stride_map_identity_and_zero_padding():
    x = torch.randn(4, 150, dtype=torch.float16)
    layout = _layout(x)  # [3, 4, 64] / [64, 150, 1]
    assert layout.device_size == (3, 4, 64)
    device = stickify(x, layout)
    flat = x.reshape(-1)
    for t, r, s in itertools.product(range(3), range(4), range(64)):
        col = t * 64 + s
        if col < 150:
            offset = t * layout.stride_map[0] + r * layout.stride_map[1] + s * layout.stride_map[2]
            assert device[t, r, s] == flat[offset]
        else:
            assert device[t, r, s] == 0  # padding


def test_transposed_host_view_and_restickified_layout():
    base = torch.randn(70, 6)
    xt = base.t()  # size [6, 70], stride [1, 6]
    layout = _layout(xt)
    assert torch.equal(unstickify(stickify(xt, layout), layout, xt.shape, xt.stride()), xt)
    x = torch.randn(6, 70)
    layout = restickify_layout([6, 70], [70, 1], torch.float32, 0)
    device = stickify(x, layout)
    assert device[0, 5, 3] == x[3, 5]  # stick now runs along host dim 0
    assert torch.equal(unstickify(device, layout, x.shape, x.stride()), x)


def test_int64_outside_int32_range_is_refused():
    x = torch.tensor([2**40, 1], dtype=torch.int64)
    with pytest.raises(OverflowError, match="int32"):
        stickify(x, _layout(x))
