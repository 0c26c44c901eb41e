"""Layout model facts: dtype table, SpyreTensorLayout, the generic constructor (§1.2-§1.5)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
import sympy
import torch

from spyre_rules.errors import LayoutError
from spyre_rules.facts.stick_layout import (
    BYTES_IN_STICK,
    DataFormat,
    DTypeInfo,
    ElementArrangement,
    SpyreTensorLayout,
    contiguous_strides,
    dtype_info,
    generic_stick_layout,
    restickify_layout,
    splits_stick,
    within_stick_host_dim,
)

FP16 = DataFormat.SEN169_FP16


def raises(message: str):
    """The error message must be exactly ``message`` (it names the bad value)."""
    return pytest.raises(LayoutError, match="^" + re.escape(message) + "$")


# --------------------------------------------------------------------------- dtypes (§1.2)


@pytest.mark.parametrize(
    "dtype, span_itemsize, device_dtype, eps",
    [
        (torch.float16, 2, DataFormat.SEN169_FP16, 64),
        (torch.bfloat16, 2, DataFormat.SEN169_FP16, 64),
        (torch.bool, 2, DataFormat.SEN169_FP16, 64),
        (torch.float32, 4, DataFormat.IEEE_FP32, 32),
        (torch.int32, 4, DataFormat.IEEE_INT32, 32),
        (torch.int64, 4, DataFormat.IEEE_INT32, 32),
        (torch.float8_e4m3fn, 1, DataFormat.SEN143_FP8, 128),
    ],
)
def test_dtype_table(dtype, span_itemsize, device_dtype, eps):
    name = str(dtype).removeprefix("torch.")
    expected = DTypeInfo(name, dtype.itemsize, device_dtype, eps)
    assert dtype_info(dtype) == expected
    assert dtype_info(name) == expected
    # spans count the bytes an element occupies in device memory, as the span check does
    assert dtype_info(dtype).itemsize == span_itemsize == 128 // eps
    assert dtype_info(dtype).host_itemsize == dtype.itemsize
    assert device_dtype.elems_per_stick == eps


@pytest.mark.parametrize("bad", [torch.float64, "complex64", "torch.uint8", None])
def test_unsupported_dtype_names_it(bad):
    with pytest.raises(LayoutError, match=re.escape(f"unsupported dtype {bad!r}")):
        dtype_info(bad)


def test_constants_and_enums():
    assert BYTES_IN_STICK == 128
    assert [e.value for e in ElementArrangement] == [0, 1, 2, 3]
    assert [e.name for e in ElementArrangement] == ["STANDARD", "DL16_TO_FP32", "QFP8CH", "EXX2"]
    assert {d.name for d in DataFormat} == {"SEN169_FP16", "IEEE_FP32", "IEEE_INT32", "SEN143_FP8"}


# --------------------------------------------------------------------------- SpyreTensorLayout


def test_layout_properties():
    stl = SpyreTensorLayout([64, 1024, 64], [64, 4096, 1], FP16)
    assert stl.device_size == (64, 1024, 64)  # lists are frozen into tuples
    assert stl.stride_map == (64, 4096, 1)
    assert stl.element_arrangement is ElementArrangement.STANDARD
    assert stl.elems_per_stick == 64
    assert stl.device_rank == 3
    assert stl.device_strides == (65536, 64, 1)
    assert stl.size_in_bytes == 128 * 64 * 1024
    assert stl.host_offset([3, 5, 7]) == 3 * 64 + 5 * 4096 + 7
    c0, c1 = sympy.symbols("c0 c1", integer=True, nonnegative=True)
    offset = stl.host_offset([sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)])
    assert offset == 4096 * c0 + 64 * sympy.floor(c1 / 64) + sympy.Mod(c1, 64)
    assert all(offset.subs({c0: a, c1: b}) == 4096 * a + b for a in (0, 7) for b in (0, 63, 64, 4095))
    assert str(stl) == "SpyreTensorLayout(device_size=[64, 1024, 64], stride_map=[64, 4096, 1], SEN169_FP16)"
    assert hash(stl) == hash(SpyreTensorLayout((64, 1024, 64), (64, 4096, 1), FP16))


def test_layout_host_offset_skips_minus_one_and_arrangement():
    stl = SpyreTensorLayout((8195, 256, 1, 1, 64), (16384, 64, 64, -1, 1), FP16)
    assert stl.host_offset([2, 3, 0, 5, 7]) == 2 * 16384 + 3 * 64 + 7
    q = stl.with_element_arrangement(ElementArrangement.QFP8CH)
    assert q.element_arrangement is ElementArrangement.QFP8CH
    assert q != stl
    assert str(q).endswith("SEN169_FP16, QFP8CH)")
    with raises("coordinates [1, 2] have 2 entries, device rank is 5"):
        stl.host_offset([1, 2])


def test_layout_validation_messages():
    with raises("device_size [64, 1024] and stride_map [64] differ in length (2 != 1)"):
        SpyreTensorLayout((64, 1024), (64,), FP16)
    with raises("device_size[0] = 0 must be positive (in device_size [0, 64])"):
        SpyreTensorLayout((0, 64), (1, 1), FP16)
    with raises("device_size[0] = 2.5 is not an integer (in device_size [2.5, 64])"):
        SpyreTensorLayout((2.5, 64), (1, 1), FP16)
    with raises("stride_map[0] = -2 must be >= -1 (in stride_map [-2, 1])"):
        SpyreTensorLayout((2, 64), (-2, 1), FP16)
    with raises("device_size [2, 32]: last (stick) dim is 32, but SEN169_FP16 holds 64 elements per stick"):
        SpyreTensorLayout((2, 32), (32, 1), FP16)
    with raises("device_dtype 'SEN169_FP16' is not a DataFormat"):
        SpyreTensorLayout((2, 64), (64, 1), "SEN169_FP16")
    with raises("element_arrangement 7 is not an ElementArrangement"):
        SpyreTensorLayout((2, 64), (64, 1), FP16, 7)
    with raises("device_size () is empty: a device tensor has at least a stick dim"):
        SpyreTensorLayout((), (), FP16)


# --------------------------------------------------------------------------- generic layout (§1.5 table)


def _row(size, dtype="float16", stride=None, dim_order=None):
    stride = contiguous_strides(size) if stride is None else stride
    return generic_stick_layout(size, stride, dtype, dim_order)


@pytest.mark.parametrize(
    "size, stride, dtype, device_size, stride_map",
    [
        ([1024, 4096], [4096, 1], "float16", [64, 1024, 64], [64, 4096, 1]),
        ([512, 1024], None, "float16", [16, 512, 64], [64, 1024, 1]),
        ([1, 8195, 256, 64], [134266880, 16384, 64, 1], "float16", [8195, 256, 1, 1, 64], [16384, 64, 64, -1, 1]),
        ([2, 20, 16, 64], [20480, 1024, 64, 1], "float16", [20, 16, 1, 2, 64], [1024, 64, 64, 20480, 1]),
        ([20, 16, 64], [1024, 64, 1], "float16", [16, 1, 20, 64], [64, 64, 1024, 1]),
        ([2, 64], [64, 1], "float16", [1, 2, 64], [64, 64, 1]),
        ([1024, 64], [64, 1], "float16", [1, 1024, 64], [64, 64, 1]),
        ([4096, 4096, 4096, 64], None, "float16", [4096, 4096, 1, 4096, 64], [262144, 64, 64, 1073741824, 1]),
        ([128, 256, 512], None, "float16", [256, 8, 128, 64], [512, 64, 131072, 1]),
        ([4, 150], [150, 1], "float16", [3, 4, 64], [64, 150, 1]),
        ([1024, 4096], [4096, 1], "float32", [128, 1024, 32], [32, 4096, 1]),
        ([4194304], [1], "float16", [65536, 64], [64, 1]),
        ([], [], "float16", [1, 64], [-1, -1]),
    ],
)
def test_worked_example_table(size, stride, dtype, device_size, stride_map):
    stl = _row(size, dtype, stride)
    assert list(stl.device_size) == device_size
    assert list(stl.stride_map) == stride_map
    assert stl.device_dtype is dtype_info(dtype).device_dtype
    assert stl.element_arrangement is ElementArrangement.STANDARD


def test_torch_dtype_and_name_agree():
    assert _row([4, 150], torch.float16) == _row([4, 150], "float16")
    assert _row([4, 150], torch.bfloat16) == _row([4, 150], "float16")


def test_padding_slots_4x150():
    stl = _row([4, 150])
    # 150 -> 3 sticks = 192 slots per row, 42 of them padding; nothing else is padded.
    assert stl.device_size[0] * stl.elems_per_stick - 150 == 42
    assert stl.size_in_bytes == 128 * 3 * 4


def test_sparse_layout():
    expected = ((1, 64, 64), (-1, 1, -1))
    a = generic_stick_layout([64], [1], "float16", [0, -1])
    b = generic_stick_layout([64], [1], "float16", sparse=True)
    assert (a.device_size, a.stride_map) == expected
    assert a == b
    c = generic_stick_layout([3, 64], [64, 1], "float16", [0, 1, -1])
    # dim_map [1, 0, 1... ] -> [o1, o2, o0, o2] = [1, -1, 0, -1]
    assert (c.device_size, c.stride_map) == ((64, 1, 3, 64), (1, -1, 64, -1))


def test_dim_map_for_each_rank():
    # Rank 5 and 6 (the generic constructor's limit): middle dims, tile count, outermost, stick.
    stl = _row([2, 3, 4, 5, 130])
    assert stl.device_size == (3, 4, 5, 3, 2, 64)
    assert stl.stride_map == (2600, 650, 130, 64, 7800, 1)
    stl6 = _row([2, 3, 4, 5, 6, 7])
    assert stl6.device_size == (3, 4, 5, 6, 1, 2, 64)
    assert stl6.stride_map == (840, 210, 42, 7, 64, 2520, 1)


def test_tile_count_stride_when_tile_count_is_one():
    # The tile-count dim gets eps * host_stride[stick] even when there is one stick.
    stl = _row([3, 10])
    assert stl.device_size == (1, 3, 64)
    assert stl.stride_map == (64, 10, 1)


def test_size_one_stick_gets_minus_one():
    stl = generic_stick_layout([4, 1], [1, 1], "float16")
    assert stl.device_size == (1, 4, 64)
    assert stl.stride_map == (-1, 1, -1)


def test_non_default_dim_order():
    stl = generic_stick_layout([3, 130], [130, 1], "float16", [1, 0])
    assert stl.device_size == (1, 130, 64)
    assert stl.stride_map == (8320, 1, 130)


# --------------------------------------------------------------------------- restickify (§1.5)


def test_restickify_lm_head_weight():
    stl = restickify_layout([1024, 64], [64, 1], "float16", 0)
    assert stl.device_size == (16, 64, 64)
    assert stl.stride_map == (4096, 1, 64)
    # Same as dim_order [1, 0] on the base shape.
    assert stl == generic_stick_layout([1024, 64], [64, 1], "float16", [1, 0])


def test_restickify_equals_transposed_view_layout():
    w_t = generic_stick_layout([64, 1024], [1, 64], "float16", [0, 1])
    assert w_t == restickify_layout([1024, 64], [64, 1], "float16", 0)
    assert restickify_layout([64, 1024], [1, 64], "float16", 1) == w_t


def test_restickify_onto_current_stick_is_generic():
    assert restickify_layout([1024, 64], [64, 1], "float16", 1) == _row([1024, 64])


def test_restickify_3d_keeps_other_order():
    stl = restickify_layout([2, 20, 64], [1280, 64, 1], "float16", 1)
    # dim_order [0, 2, 1] -> dim_map [2, 1, 0, 1]
    assert stl.device_size == (64, 1, 2, 64)
    assert stl.stride_map == (1, 4096, 1280, 64)


def test_restickify_bad_dim():
    with raises("new_stick_dim = 2 is not a host dim in range(0, 2)"):
        restickify_layout([1024, 64], [64, 1], "float16", 2)
    with raises("new_stick_dim = True is not a host dim in range(0, 2)"):
        restickify_layout([1024, 64], [64, 1], "float16", True)
    with raises("cannot restickify a scalar: it has no host dim to stick on"):
        restickify_layout([], [], "float16", 0)


# --------------------------------------------------------------------------- bad input


def test_bad_sizes_name_the_value():
    s0 = sympy.Symbol("s0", integer=True, positive=True)
    with raises("host_size[1] = -3 must be positive (in host_size [4, -3])"):
        generic_stick_layout([4, -3], [3, 1], "float16")
    with raises("host_size[0] = 0 must be positive (in host_size [0, 64])"):
        generic_stick_layout([0, 64], [64, 1], "float16")
    with raises("host_size[1] = s0 is not an integer (in host_size [4, s0])"):
        generic_stick_layout([4, s0], [s0, 1], "float16")
    with raises("host_size[0] = True is not an integer (in host_size [True, 64])"):
        generic_stick_layout([True, 64], [64, 1], "float16")
    with raises("host_size[0] = 4.0 is not an integer (in host_size [4.0, 64])"):
        generic_stick_layout([4.0, 64], [64, 1], "float16")
    with raises("host_stride[0] = -64 must be >= 0 (in host_stride [-64, 1])"):
        generic_stick_layout([4, 64], [-64, 1], "float16")
    with raises("host_stride [64] has 1 entries but host_size [4, 64] has 2"):
        generic_stick_layout([4, 64], [64], "float16")
    with pytest.raises(LayoutError, match=re.escape("unsupported dtype 'float64'")):
        generic_stick_layout([4, 64], [64, 1], "float64")


def test_sympy_integers_are_accepted():
    stl = generic_stick_layout([sympy.Integer(4), sympy.Integer(150)], [sympy.Integer(150), 1], "float16")
    assert stl == _row([4, 150])
    assert all(type(v) is int for v in stl.device_size + stl.stride_map)


def test_bad_dim_order_and_rank():
    with raises("dim_order [0, 0] is not a permutation of the host dims 0..1 (optionally followed by -1 for a sparse layout)"):
        generic_stick_layout([4, 64], [64, 1], "float16", [0, 0])
    with raises("dim_order [0, 2] is not a permutation of the host dims 0..1 (optionally followed by -1 for a sparse layout)"):
        generic_stick_layout([4, 64], [64, 1], "float16", [0, 2])
    with raises("dim_order [0] is not a permutation of the host dims 0..1 (optionally followed by -1 for a sparse layout)"):
        generic_stick_layout([4, 64], [64, 1], "float16", [0])
    with raises("dim_order[1] = 'x' is not an integer (in [0, 'x'])"):
        generic_stick_layout([4, 64], [64, 1], "float16", [0, "x"])
    with raises("dim_order [0] given for a scalar host tensor"):
        generic_stick_layout([], [], "float16", [0])
    with raises("dim_order [0, 1, 2, 3, 4, 5, 6] has 7 entries; the generic stick layout supports at most 6 (host rank 7)"):
        _row([2] * 7)
    with raises("dim_order [0, 1, 2, 3, 4, 5, -1] has 7 entries; the generic stick layout supports at most 6 (host rank 6, sparse)"):
        generic_stick_layout([2] * 6, contiguous_strides([2] * 6), "float16", sparse=True)


def test_contiguous_strides():
    assert contiguous_strides([1024, 4096]) == (4096, 1)
    assert contiguous_strides([2, 20, 16, 64]) == (20480, 1024, 64, 1)
    assert contiguous_strides([]) == ()
    assert contiguous_strides([7]) == (1,)


# --------------------------------------------------------------------------- within-stick dim (§4.5)


def test_within_stick_host_dim():
    assert within_stick_host_dim([1024, 4096], [4096, 1], _row([1024, 4096])) == 1
    restick = restickify_layout([1024, 64], [64, 1], "float16", 0)
    # LM head: host stride 64 of dim 0 equals stride_map[-1].
    assert within_stick_host_dim([1024, 64], [64, 1], restick) == 0
    # Size-1 stick: stride_map[-1] is -1, one value a stick: the size-1 dim stands for
    # it (every dim above 1 is an outer device dim), so no split of another dim cuts it.
    stick1 = generic_stick_layout([4, 1], [1, 1], "float16")
    assert within_stick_host_dim([4, 1], [1, 1], stick1) == 1
    guard = restickify_layout([1, 2, 3, 200, 1], [1200, 600, 200, 1, 1200], "bool", 4)
    assert within_stick_host_dim([1, 2, 3, 200, 1], [1200, 600, 200, 1, 1200], guard) == 4
    # ... but not a layout whose outer dims do not hold this view's dims above 1
    assert within_stick_host_dim([4, 1], [2, 1], stick1) is None
    # A layout describing another view: no exact stride match -> None, never a guess.
    assert within_stick_host_dim([32, 32], [32, 1], restick) is None


def test_splits_stick():
    restick = restickify_layout([1024, 64], [64, 1], "float16", 0)
    args = ([1024, 64], [64, 1], restick)
    assert [k for k in (1, 2, 4, 8, 16, 32) if not splits_stick(*args, 0, k)] == [1, 2, 4, 8, 16]
    assert splits_stick(*args, 0, 32) is True
    assert splits_stick(*args, 1, 64) is False  # not the within-stick dim
    stl = _row([8192, 49159])
    # 11 divides 49159 but 4469 is not 64-aligned: whole-stick tiles of 4480 and a last of
    # 4359 (facts/tile_extent.py), which cut no stick
    assert splits_stick([8192, 49159], [49159, 1], stl, 1, 11) is False
    assert splits_stick([8192, 49159], [49159, 1], stl, 0, 2) is False
    stick1 = generic_stick_layout([4, 1], [1, 1], "float16")
    assert splits_stick([4, 1], [1, 1], stick1, 0, 2) is False  # one value a stick
    assert splits_stick([4, 1], [1, 1], stick1, 0, 1) is False
    assert splits_stick(*args, 0, 3) is False  # tiles of 384 (3 x 128), the last 256
    assert splits_stick(*args, 0, 5) is True  # tiles of 224 (7 x 32), the last 128
    with raises("split = 1000 leaves an empty tile of host dim 0 of size 1024"):
        splits_stick(*args, 0, 1000)
    with raises("split = 0 must be a positive integer"):
        splits_stick(*args, 0, 0)
    with raises("host_dim = 2 is not a host dim in range(0, 2)"):
        splits_stick(*args, 2, 2)


# --------------------------------------------------------------------------- import hygiene


def test_layout_facade_does_not_import_torch():
    code = (
        "import sys, spyre_rules.layout as L\n"
        "assert L.generic_stick_layout([4, 150], [150, 1], 'float16').device_size == (3, 4, 64)\n"
        "assert 'torch' not in sys.modules, sorted(m for m in sys.modules if m.startswith('torch'))\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_facade_exports():
    import spyre_rules.layout as L

    for name in ["generic_stick_layout", "restickify_layout", "resize_device_layout",
                 "device_coordinates", "host_coordinates", "within_stick_host_dim",
                 "SpyreTensorLayout", "DataFormat", "dtype_info", "FixedTiledLayout"]:
        assert getattr(L, name) is not None
    from spyre_rules.facts.tiled_layout import FixedTiledLayout

    assert L.FixedTiledLayout is FixedTiledLayout
    with pytest.raises(AttributeError):
        L.no_such_name  # noqa: B018
