"""One TensorArg's accesses in one op: addresses, bounds checks, structured views.

Works in *element* units of the arg's device format (byte address = ``element *
element_bytes``; segments are 128-byte aligned, so an allocation is a whole number
of elements).  A structured access (``views``) reads and writes a block through a
few strided views after one exact bounds check on the block's coordinate extremes;
anything else is the general gather/scatter, whose addresses are checked point by
point and whose errors name the first bad byte address.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_rules.executor import views
from spyre_rules.executor.hbm import DeviceMemory, DeviceMemoryError
from spyre_rules.program.index_eval import evaluate
from spyre_rules.program.op_spec import TensorArg, element_bytes

__all__ = ["Access", "device_strides", "structure"]


def device_strides(size: list[int]) -> list[int]:
    strides = [1] * len(size)
    for d in range(len(size) - 2, -1, -1):
        strides[d] = strides[d + 1] * int(size[d + 1])
    return strides


#: id(TensorArg) -> (the arg, the coordinates and strides analysed, their structure or
#: None); the arg is kept so ids stay unique, the key re-checked because args are mutable.
_STRUCTURES: dict[int, tuple[TensorArg, tuple, views.Structure | None]] = {}
_STRUCTURES_LIMIT = 1 << 14


def structure(arg: TensorArg, strides: list[int]) -> views.Structure | None:
    if arg.indirect:
        return None  # data-dependent coordinates: the general gather, bounds-checked per point
    key = (tuple(arg.device_coordinates), tuple(strides))
    hit = _STRUCTURES.get(id(arg))
    if hit is not None and hit[0] is arg and hit[1] == key:
        return hit[2]
    if len(_STRUCTURES) >= _STRUCTURES_LIMIT:
        _STRUCTURES.clear()
    structure = views.analyse(list(arg.device_coordinates), strides)
    _STRUCTURES[id(arg)] = (arg, key, structure)
    return structure


class Access:
    """Address computation and bounds checks of one TensorArg in one op.

    Works in *element* units of the arg's device format (byte address =
    ``element * element_bytes``; segments are 128-byte aligned, so the base is a
    whole number of elements).  Checks, cheapest first:

    1. every device coordinate lies in ``[0, device_size[d])`` -- evaluated on the
       coordinate's own (small, broadcastable) grid;
    2. the address range implied by the coordinates' extremes lies in the
       allocation ``[base, base + size_in_bytes)``; only if that bound fails is
       every address checked to report the first bad one.
    Masked-off lanes (loads under ``masked``) are exempt and read the base.
    """

    def __init__(self, op: str, arg: TensorArg, memories: dict[str, DeviceMemory],
                 shift: int = 0) -> None:
        self.arg = arg
        #: the memory the arg is allocated in ("hbm" or "lx"; None: neither, an error)
        self.kind = next((k for k in ("hbm", "lx") if k in arg.allocation), None)
        if self.kind is not None:
            self.width = element_bytes(arg.device_dtype)
            self.base = int(arg.allocation[self.kind])
            self.end = self.base + arg.size_in_bytes
            #: accessible elements relative to base: the allocation, narrowed to the
            #: whole buffer's segment when the allocation is one unrolled tile of it
            self.low_limit, self.limit = 0, (self.end - self.base) // self.width
            if arg.segment is not None:
                self.low_limit = max(0, (int(arg.segment[0]) - self.base) // self.width)
                self.limit = min(self.limit, (int(arg.segment[1]) - self.base) // self.width)
            self.strides = device_strides(arg.device_size)
            self.structure = structure(arg, self.strides)
        self._extents: dict[int, tuple[list, int, int, bool]] = {}
        #: the store check of ``evaluate._Program.store_plan`` (None: not yet made)
        self.injective_store: bool | None = None
        self.bind(op, memories, shift)

    def bind(self, op: str, memories: dict[str, DeviceMemory], shift: int = 0) -> None:
        """Point the access at this run's memory and loop offset (everything else
        depends on the arg only, so a compiled program keeps it across runs)."""
        self.op = op
        if self.kind is None or self.kind not in memories:
            raise DeviceMemoryError(
                f"op {op}: tensor {self.arg.name} has no HBM or LX allocation ({self.arg.allocation})"
            )
        self.memory = memories[self.kind]
        self.move(shift)

    def move(self, shift: int) -> None:
        """A new loop offset (bytes) for the bound run."""
        if self.base % self.width or shift % self.width:
            raise DeviceMemoryError(
                f"op {self.op}: tensor {self.arg.name} allocation {self.base} (+ loop offset "
                f"{shift}) is not aligned to its {self.width}-byte elements"
            )
        #: loop offset in elements (counted loops move the tile inside the allocation)
        self.shift = shift // self.width

    def view_plan(self, box: views.Box, rank: int) -> views.Plan | None:
        """The block's strided views, if the access is structured and every point of
        the block is in bounds (else the general path decides, with its exact errors)."""
        if views.FORCE_GENERAL or self.structure is None:
            return None
        plan = views.plan(self.structure, box, rank, self.base // self.width + self.shift)
        if plan is None:
            return None
        extent = self._extents.get(id(plan.views))
        if extent is None or extent[0] is not plan.views:
            # per block (the plan's views are shared by every run): the element offsets
            # of its lowest and highest points, and whether every coordinate is in range
            extent = (plan.views, sum(c * s for c, s in zip(plan.low, self.strides)),
                      sum(c * s for c, s in zip(plan.high, self.strides)),
                      all(lo >= 0 and hi < int(size)
                          for lo, hi, size in zip(plan.low, plan.high, self.arg.device_size)))
            if len(self._extents) >= 256:
                self._extents.clear()
            self._extents[id(plan.views)] = extent
        _, low, high, inside = extent
        if not inside or self.shift + low < self.low_limit or self.shift + high >= self.limit:
            return None
        return plan

    def _fail(self, access: str, offset: Any, bad: torch.Tensor, detail: str) -> DeviceMemoryError:
        offset, bad = torch.broadcast_tensors(torch.as_tensor(offset), bad)
        element = offset[bad].flatten()[0]
        address = self.base + int(element) * self.width
        segment = ""
        if self.arg.segment is not None:
            segment = f" of the buffer [{int(self.arg.segment[0])}, {int(self.arg.segment[1])})"
        return DeviceMemoryError(
            f"op {self.op}: {access} of tensor {self.arg.name} at byte address {address} "
            f"{detail} (allocation [{self.base}, {self.end}){segment})"
        )

    def elements(self, env: dict[str, Any], active: torch.Tensor | None, access: str) -> torch.Tensor:
        """Global element indices (into the HBM view of this arg's storage dtype)."""
        offset: Any = self.shift
        low = high = self.shift
        for d, (expr, stride) in enumerate(zip(self.arg.device_coordinates, self.strides)):
            coord = torch.as_tensor(evaluate(expr, env), dtype=torch.int64)
            size = int(self.arg.device_size[d])
            outside = (coord < 0) | (coord >= size)
            if active is not None:
                outside = outside & active
            if bool(outside.any()):
                raise self._fail(access, offset + coord * stride, outside,
                                 f"has device coordinate {d} = {expr} outside [0, {size})")
            if coord.numel():
                low += int(coord.min()) * stride
                high += int(coord.max()) * stride
            offset = offset + coord * stride
        offset = torch.as_tensor(offset, dtype=torch.int64)
        if low < self.low_limit or high >= self.limit:  # cheap bound failed: find the culprit
            bad = (offset < self.low_limit) | (offset >= self.limit)
            if active is not None:
                bad = bad & active
            if bool(bad.any()):
                raise self._fail(access, offset, bad, "is outside its allocation")
        if active is not None:
            offset = torch.where(active, offset, 0)
        return offset + self.base // self.width

