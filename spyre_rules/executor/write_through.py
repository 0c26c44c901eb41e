"""Copy the elements a kernel wrote into a graph input's segment to its host tensor.

A graph input the program writes in place (a KV cache: ``index_copy_`` of the new
token's keys) lives on the device: its segment keeps the written values from call to
call (``resident.py``), and the caller's host tensor must show them too, as eager's
in-place write does.  Only the elements the kernel wrote are copied -- the new rows
of a cache, never the whole cache: while the kernel runs, ``DeviceMemory.log``
records the element indices of every store (its in-place writes take the general
store path for that: ``evaluate._Program.general_store``), and each one inside the
segment is read back (its stored bits, converted to the host dtype as an unstickify
does) and written to the host storage offset it holds.

Which host storage offset an element holds is derived once per placement by
stickifying the host tensor's own storage offsets with the placement's layout.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from spyre_rules.executor import dtypes
from spyre_rules.executor.hbm import DeviceMemory
from spyre_rules.executor.resident import placement_key
from spyre_rules.executor.stickify import host_offsets
from spyre_rules.facts.stick_layout import SpyreTensorLayout
from spyre_rules.program.op_spec import TensorPlacement, element_bytes

__all__ = ["mirror_writes"]

#: placement_key -> per segment element, the host storage offset it holds (-1: padding)
_OFFSETS: dict[tuple, torch.Tensor] = {}
_OFFSETS_LIMIT = 64


def _host_offsets(p: TensorPlacement) -> torch.Tensor:
    key = placement_key(p)
    hit = _OFFSETS.get(key)
    if hit is None:
        if len(_OFFSETS) >= _OFFSETS_LIMIT:
            _OFFSETS.clear()
        layout = SpyreTensorLayout(tuple(p.device_size), tuple(p.stride_map), p.device_dtype)
        hit = _OFFSETS[key] = host_offsets(layout, p.host_size, p.host_stride)
    return hit


def mirror_writes(memory: DeviceMemory, p: TensorPlacement, tensor: Any,
                  written: list[tuple[int, torch.Tensor]], who: str) -> None:
    """Copy every element of segment ``p`` in ``written`` to host ``tensor``."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{who}: argument {p.name} is {type(tensor).__name__}, not a tensor")
    width = element_bytes(p.device_dtype)
    base = p.address // width
    count = math.prod(p.device_size)
    picked = [elements for size, elements in written if size == width]
    if not picked:
        return
    elements = torch.unique(torch.cat(picked))
    elements = elements[(elements >= base) & (elements < base + count)]
    if not elements.numel():
        return
    host = dtypes.host_dtype(p.host_dtype)
    storage = dtypes.storage_dtype(p.device_dtype, host)
    offsets = _host_offsets(p).index_select(0, elements - base)
    keep = offsets >= 0
    values = dtypes.from_storage(memory.read(elements[keep], storage), host)
    # host storage offsets count from the tensor's own first element
    span = 1 + sum((n - 1) * s for n, s in zip(tensor.shape, tensor.stride()))
    flat = tensor.as_strided((span,), (1,), tensor.storage_offset())
    flat.index_copy_(0, offsets[keep], values.to(tensor.dtype))
