"""Host <-> device transfers through the per-placement cache (runtime._transfer) and the
precomputed view steps of views.Plan: exact bytes, padding included, against the
general stickify, whatever was cached before."""

from __future__ import annotations

import pytest
import torch

from spyre_rules.executor import runtime, stickify, views
from spyre_rules.executor.stickify import StickifyError
from spyre_rules.executor.dtypes import DeviceOverflowError
from spyre_rules.executor.hbm import DeviceMemory
from spyre_rules.layout import generic_stick_layout
from spyre_rules.program.op_spec import TensorPlacement


def _placement(shape, dtype, address=0, stride=None, name="x"):
    stride = stride or torch.empty(shape).stride()
    layout = generic_stick_layout(list(shape), list(stride), dtype)
    return TensorPlacement(name=name, host_size=tuple(shape), host_stride=tuple(stride),
                           host_dtype=str(dtype).split(".")[1], device_size=layout.device_size,
                           stride_map=layout.stride_map, device_dtype=layout.device_dtype,
                           address=address), layout


def _segment(memory, p):
    return memory.read_bytes(p.address, p.size_in_bytes).clone()


def _expected(tensor, layout):
    return stickify(tensor, layout).reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("shape, dtype", [((4, 150), torch.float16), ((3, 37), torch.float32),
                                          ((70,), torch.bool), ((5, 33), torch.int64),
                                          ((4, 150), torch.bfloat16), ((2, 3, 70), torch.int32),
                                          ((3, 250), torch.float16), ((2, 5, 31), torch.float32),
                                          ((4, 128), torch.float16)])
def test_cached_write_and_read_give_the_general_bytes_padding_zero(shape, dtype):
    x = (torch.randn(shape) * 10).to(dtype)
    p, layout = _placement(shape, dtype, address=256)
    memory = DeviceMemory(256 + p.size_in_bytes + 128)
    memory.read_bytes(0, memory.total_bytes).fill_(0xAB)  # stale bytes, padding must be zeroed
    for _ in range(2):  # the second write and read hit the cache
        runtime.write_host_tensor(memory, p, x, "test")
        assert torch.equal(_segment(memory, p), _expected(x, layout))
        assert torch.equal(memory.read_bytes(0, 256), torch.full((256,), 0xAB, dtype=torch.uint8))
        out = torch.empty_like(x)
        runtime.read_host_tensor(memory, p, out, "test")
        assert torch.equal(out, x)
    general = DeviceMemory(memory.total_bytes)
    views.FORCE_GENERAL = True
    try:
        runtime.write_host_tensor(general, p, x, "test")
    finally:
        views.FORCE_GENERAL = False
    assert torch.equal(_segment(general, p), _segment(memory, p))


def test_padding_is_zeroed_by_index_when_small_else_by_one_memset():
    few, _ = _placement((3, 250), torch.float16)  # device [4, 3, 64]: 6 of 256 per row
    padding = runtime._transfer(DeviceMemory(few.size_in_bytes), few, few.host_stride).padding
    assert padding.tolist() == [3 * 192 + r * 64 + e for r in range(3) for e in range(58, 64)]
    many, _ = _placement((3, 37), torch.float32)  # 27 of 64 per row
    assert runtime._transfer(DeviceMemory(many.size_in_bytes), many, many.host_stride).padding is True
    none, _ = _placement((3, 64), torch.float32)
    assert runtime._transfer(DeviceMemory(none.size_in_bytes), none, none.host_stride).padding is False


def test_in_place_host_edit_is_written_again():
    x = torch.randn(4, 150, dtype=torch.float16)
    p, layout = _placement(x.shape, x.dtype)
    memory = DeviceMemory(p.size_in_bytes)
    runtime.write_host_tensor(memory, p, x, "test")
    x[1, 7] = 3.0
    x.add_(1)
    runtime.write_host_tensor(memory, p, x, "test")
    assert torch.equal(_segment(memory, p), _expected(x, layout))


def test_another_placement_of_the_same_layout_writes_its_own_address():
    x = torch.randn(3, 37)
    p, layout = _placement(x.shape, x.dtype, address=0)
    q, _ = _placement(x.shape, x.dtype, address=p.size_in_bytes)
    memory = DeviceMemory(2 * p.size_in_bytes)
    runtime.write_host_tensor(memory, p, x, "test")
    y = x * 2
    runtime.write_host_tensor(memory, q, y, "test")
    assert torch.equal(_segment(memory, p), _expected(x, layout))
    assert torch.equal(_segment(memory, q), _expected(y, layout))


def test_same_placement_other_host_strides_is_planned_anew():
    # a placement for a transposed view: its cached plan must not serve a tensor of the
    # same shape with other strides (the stride_map identity fails for it)
    xt = torch.randn(70, 6).t()  # size (6, 70), strides (1, 6)
    p, layout = _placement(xt.shape, xt.dtype, stride=xt.stride())
    memory = DeviceMemory(p.size_in_bytes)
    runtime.write_host_tensor(memory, p, xt, "test")
    assert torch.equal(_segment(memory, p), _expected(xt, layout))
    out = torch.empty_strided(p.host_size, p.host_stride)
    runtime.read_host_tensor(memory, p, out, "test")
    assert torch.equal(out, xt)
    with pytest.raises(StickifyError, match=r"covers 140 of the 420 elements of a host "
                                            r"tensor of size \[6, 70\] stride \[70, 1\]"):
        runtime.write_host_tensor(memory, p, xt.contiguous(), "test")


def test_a_smaller_memory_is_not_served_from_the_cache():
    x = torch.randn(3, 37)
    p, _ = _placement(x.shape, x.dtype, address=128)
    runtime.write_host_tensor(DeviceMemory(128 + p.size_in_bytes), p, x, "test")
    with pytest.raises(runtime.DeviceMemoryError, match="test: stickified x is 768 bytes, its segment at 128 holds 768"):
        runtime.write_host_tensor(DeviceMemory(128 + p.size_in_bytes - 128), p, x, "test")


def test_int64_outside_int32_raises_on_the_cached_path():
    x = torch.zeros(4, 40, dtype=torch.int64)
    p, _ = _placement(x.shape, x.dtype)
    memory = DeviceMemory(p.size_in_bytes)
    runtime.write_host_tensor(memory, p, x, "test")
    x[2, 3] = 2 ** 31
    with pytest.raises(DeviceOverflowError, match="stickify: int64 value outside the int32 range"):
        runtime.write_host_tensor(memory, p, x, "test")


def test_plan_steps_skip_indexing_only_for_whole_block_views():
    # 150 = 2 sticks + 22: two pieces, each a part of the block; 128 = 2 sticks: one view
    p, _ = _placement((3, 150), torch.float16)
    plan = runtime._transfer(DeviceMemory(p.size_in_bytes), p, p.host_stride).plan
    assert [step[0] for step in plan.steps] == [(slice(0, 3), slice(0, 128)),
                                                (slice(0, 3), slice(128, 150))]
    q, _ = _placement((3, 128), torch.float16)
    whole = runtime._transfer(DeviceMemory(q.size_in_bytes), q, q.host_stride).plan
    assert len(whole.views) == 1 and [step[0] for step in whole.steps] == [None]
    moved = plan.at(64)
    assert moved.base == 64 and moved.steps is plan.steps and moved.shape == plan.shape
