"""Host tensor <-> device stick layout, through the stride_map identity.

A device tensor is dense row-major over ``layout.device_size`` (last dim: one
stick).  For a device position with coordinates ``coords`` the identity of
docs/layout_model.md §1.1 gives its host element: ``host_offset = dot(coords,
stride_map)`` (dims with stride_map -1 contribute nothing and must be 0).
Padding positions (the stick dim padded up to a multiple of elems_per_stick)
also produce *some* offset, possibly one of a real element, so a position is
kept only if it round-trips: its host offset decomposes into an in-range host
index whose device coordinates (docs/layout_model.md §1.4) are exactly ``coords``.
Padding stays zero.

Positions are processed in chunks of ``CHUNK_POSITIONS`` so temporary index
tensors stay bounded whatever the tensor size.  The position lists of small
layouts (at most ``CACHE_POSITIONS`` real elements in all cached entries) are
kept, because a program stickifies the same graph inputs on every call.

Structured layouts skip the position lists (``structured``): when the forward
coordinates are separable (``views``), satisfy the stride_map identity exactly
on every host dim, stay in range and never collide, and the host strides do not
overlap, the kept positions are exactly the forward images of the host elements,
so the host tensor is copied through a few strided views of the device tensor.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import torch

from spyre_rules.codegen.access import forward_coordinates
from spyre_rules.executor import dtypes, views
from spyre_rules.program.index_eval import evaluate
from spyre_rules.facts.stick_layout import SpyreTensorLayout, contiguous_strides

__all__ = ["CHUNK_POSITIONS", "StickifyError", "host_offsets", "stickify", "structured",
           "unstickify"]

#: device positions handled at once (bounds temporary memory to ~100 MB).
CHUNK_POSITIONS = 1 << 20
#: real elements whose positions may be cached in total (16 bytes each).
CACHE_POSITIONS = 1 << 22

_CACHE: OrderedDict[tuple, list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()


class StickifyError(ValueError):
    """The layout does not describe the host tensor (names both)."""


def _unravel(lin: torch.Tensor, sizes: Sequence[int]) -> list[torch.Tensor]:
    out = []
    for stride, size in zip(contiguous_strides(sizes), sizes):
        out.append(torch.div(lin, stride, rounding_mode="floor") % size)
    return out


def _positions(
    layout: SpyreTensorLayout, host_size: tuple[int, ...], host_stride: tuple[int, ...]
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(device linear index, host element offset) of every real element, chunked."""
    coords_fwd, syms = forward_coordinates(layout, host_size, host_stride)
    names = [s.name for s in syms]
    order = sorted((d for d in range(len(host_size)) if host_size[d] > 1),
                   key=lambda d: -host_stride[d])
    total = math.prod(layout.device_size)
    for start in range(0, total, CHUNK_POSITIONS):
        lin = torch.arange(start, min(total, start + CHUNK_POSITIONS), dtype=torch.int64)
        coords = _unravel(lin, layout.device_size)
        valid = torch.ones_like(lin, dtype=torch.bool)
        offset = torch.zeros_like(lin)
        for c, s in zip(coords, layout.stride_map):
            if s == -1:
                valid &= c == 0
            else:
                offset += c * s
        # Decompose the host offset into a host index (largest stride first).
        rest = offset.clone()
        env: dict[str, Any] = {n: 0 for n in names}
        for d in order:
            idx = torch.div(rest, host_stride[d], rounding_mode="floor")
            rest -= idx * host_stride[d]
            valid &= idx < host_size[d]
            env[names[d]] = idx
        valid &= rest == 0
        for c, expr in zip(coords, coords_fwd):
            valid &= torch.as_tensor(evaluate(expr, env)) == c
        yield lin[valid], offset[valid]


def _cached_positions(
    layout: SpyreTensorLayout, host_size: tuple[int, ...], host_stride: tuple[int, ...]
) -> Iterable[tuple[torch.Tensor, torch.Tensor]]:
    numel = math.prod(host_size)
    if numel > CACHE_POSITIONS // 4:
        return _positions(layout, host_size, host_stride)
    key = (layout, host_size, host_stride)
    chunks = _CACHE.get(key)
    if chunks is None:
        chunks = list(_positions(layout, host_size, host_stride))
        _CACHE[key] = chunks
        while sum(lin.numel() for c in _CACHE.values() for lin, _ in c) > CACHE_POSITIONS:
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    return chunks


_STRUCTURED: dict[tuple, Any] = {}


def _non_overlapping(size: Sequence[int], stride: Sequence[int]) -> bool:
    reach = 0
    for n, st in sorted((d for d in zip(size, stride) if d[0] > 1), key=lambda d: d[1]):
        if st <= reach:
            return False
        reach += (n - 1) * st
    return True


def _analyse(layout: SpyreTensorLayout, host_size: tuple[int, ...],
             host_stride: tuple[int, ...]) -> views.Structure | None:
    coords, syms = forward_coordinates(layout, host_size, host_stride)
    structure = views.analyse(coords, list(contiguous_strides(layout.device_size)))
    if structure is None or not _non_overlapping(host_size, host_stride):
        return None
    ranges = {s.name: int(n) for s, n in zip(syms, host_size)}
    if not structure.symbols <= set(ranges) or not structure.injective(ranges):
        return None
    smap = layout.stride_map
    # the stride_map identity: dot(coords, stride_map) == the host offset, per host dim
    if any(c != 0 for c, m in zip(structure.const, smap) if m == -1) or \
            sum(c * m for c, m in zip(structure.const, smap) if m != -1) != 0:
        return None
    for sym, st in zip(syms, host_stride):
        fns = structure.fns.get(sym.name)
        if fns is None:
            if ranges[sym.name] > 1 and st != 0:
                return None
            continue
        c = torch.arange(ranges[sym.name], dtype=torch.int64)
        k = structure.ks[sym.name]
        offset = torch.zeros_like(c)
        for f, m in zip(fns, smap):
            g = f.lin * c + f.fl * torch.div(c, k, rounding_mode="floor") + f.md * (c % k)
            if m == -1:
                if bool(g.any()):
                    return None
            else:
                offset += g * m
        if not torch.equal(offset, c * st):
            return None
    return structure


def structured(layout: SpyreTensorLayout, host_size: Sequence[int], host_stride: Sequence[int],
               base: int = 0) -> views.Plan | None:
    """Views of every host element's device position (element index ``base`` is the
    device tensor's first element), or None when the layout takes the general path."""
    if views.FORCE_GENERAL:
        return None
    size, stride = tuple(int(s) for s in host_size), tuple(int(s) for s in host_stride)
    key = (layout, size, stride)
    if key not in _STRUCTURED:
        if len(_STRUCTURED) > 4096:
            _STRUCTURED.clear()
        _STRUCTURED[key] = _analyse(layout, size, stride)
    structure = _STRUCTURED[key]
    if structure is None:
        return None
    box = {f"h{d}": (d, 0, n) if n > 1 else 0 for d, n in enumerate(size)}
    plan = views.plan(structure, box, len(size), base)
    if plan is None or any(lo < 0 or hi >= n for lo, hi, n in
                           zip(plan.low, plan.high, layout.device_size)):
        return None
    return plan


def _host_layout(tensor_or_size: Any, host_stride: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    size = tuple(int(s) for s in tensor_or_size)
    stride = tuple(int(s) for s in host_stride) if host_stride is not None else contiguous_strides(size)
    return size, tuple(stride)


def host_offsets(layout: SpyreTensorLayout, host_size: Sequence[int],
                 host_stride: Sequence[int]) -> torch.Tensor:
    """Per device element (flat), the host storage offset of the element it holds, or -1
    (padding): the positions ``stickify`` copies through, as data."""
    size, stride = _host_layout(host_size, host_stride)
    device = torch.full((math.prod(layout.device_size),), -1, dtype=torch.int64)
    plan = structured(layout, size, stride)
    if plan is not None:
        span = 1 + sum((n - 1) * s for n, s in zip(size, stride))
        offsets = torch.arange(span, dtype=torch.int64).as_strided(size, stride)
        views.copy_out(device, plan, offsets.reshape(plan.shape))
        return device
    for lin, off in _cached_positions(layout, size, stride):
        device.index_copy_(0, lin, off)
    return device


def stickify(tensor: torch.Tensor, layout: SpyreTensorLayout) -> torch.Tensor:
    """The device tensor (shape ``device_size``, device storage dtype) of ``tensor``."""
    size, stride = _host_layout(tensor.shape, tensor.stride())
    storage = dtypes.storage_dtype(layout.device_dtype, tensor.dtype)
    device = torch.zeros(math.prod(layout.device_size), dtype=storage)
    plan = structured(layout, size, stride)
    if plan is not None:
        values = dtypes.to_storage(tensor, tensor.dtype, storage, "stickify")
        views.copy_out(device, plan, values.reshape(plan.shape))
        return device.view(layout.device_size)
    flat = tensor.as_strided((tensor.untyped_storage().nbytes() // tensor.element_size(),), (1,), 0) \
        if tensor.numel() else tensor.reshape(-1)
    base = tensor.storage_offset()
    count = 0
    for lin, off in _cached_positions(layout, size, stride):
        # index_select/index_copy_: advanced indexing is ~1000x slower on CPU.
        values = flat.index_select(0, off + base)
        device.index_copy_(0, lin, dtypes.to_storage(values, tensor.dtype, storage, "stickify"))
        count += lin.numel()
    if count != tensor.numel():
        raise StickifyError(
            f"layout {layout} covers {count} of the {tensor.numel()} elements of a host "
            f"tensor of size {list(size)} stride {list(stride)}"
        )
    return device.view(layout.device_size)


def unstickify(
    device: torch.Tensor,
    layout: SpyreTensorLayout,
    host_size: Sequence[int],
    host_stride: Sequence[int] | None = None,
    dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """The host tensor (given size/stride/dtype) held by the device tensor ``device``."""
    size, stride = _host_layout(host_size, host_stride)
    dtype = dtype or device.dtype
    length = 1 + sum((s - 1) * st for s, st in zip(size, stride)) if all(size) else 0
    out = torch.zeros(length, dtype=dtype)
    flat = device.reshape(-1)
    plan = structured(layout, size, stride)
    if plan is not None:
        host = out.as_strided(size, stride)
        host.copy_(dtypes.from_storage(views.copy_in(flat, plan), dtype).reshape(size))
        return host
    count = 0
    for lin, off in _cached_positions(layout, size, stride):
        out.index_copy_(0, off, dtypes.from_storage(flat.index_select(0, lin), dtype))
        count += lin.numel()
    if count != math.prod(size):
        raise StickifyError(
            f"layout {layout} covers {count} of the {math.prod(size)} elements of a host "
            f"tensor of size {list(size)} stride {list(stride)}"
        )
    return out.as_strided(size, stride)
