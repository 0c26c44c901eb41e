"""Runtime objects the generated wrapper source creates and calls.

The wrapper of one compiled graph holds::

    spyre_device = rules_device(<total HBM bytes>)
    sdsc_add_0 = rules_make_kernel('sdsc_add_0', spyre_device, [OpSpec(...), ...],
                                   stickify={0: TensorPlacement(...)},
                                   unstickify={2: TensorPlacement(...)})
    ...
    sdsc_add_0.run(arg0_1, arg1_1, buf0)

``run`` receives the host tensors in ``arg_index`` order.  Graph inputs (the
``stickify`` args) are written into their HBM segment before the program runs;
the program's OpSpecs then read and write device memory only; buffers the
caller sees (graph outputs, the ``unstickify`` args) are copied back into their
host tensors afterwards.  Intermediates never leave device memory (their host
argument is ``None``), except around a *host step* (an op that runs on the host,
backend/host_steps.py): ``rules_to_host`` unstickifies a device buffer it reads
into a fresh host tensor, ``rules_to_device`` stickifies what it wrote back::

    buf1 = rules_to_host(spyre_device, TensorPlacement(name='buf1', ...))
    buf2 = torch.ops.aten.tanh.default(buf1)
    rules_to_device(spyre_device, TensorPlacement(name='buf2', ...), buf2)

The wrapper brackets each call with ``spyre_device.begin_call()`` (its first
statement) and ``spyre_device.end_call()``: within one call a kernel skips
stickifying a graph input whose bytes are provably in its segment already
(``executor/resident.py``); every OpSpec store range and every stickify
invalidates what it overlaps.

One device memory per compiled graph: calls of the same
compiled graph must not run concurrently.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import weakref
from typing import Any

import torch

from spyre_rules.executor import dtypes, views
from spyre_rules.executor.hbm import DeviceMemory, DeviceMemoryError
from spyre_rules.executor.loops import check_affine, run_items
from spyre_rules.executor.resident import ResidentInputs, placement_key
from spyre_rules.executor.stickify import stickify, structured, unstickify
from spyre_rules.executor.write_through import mirror_writes
from spyre_rules.facts.stick_layout import SpyreTensorLayout
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorPlacement, element_bytes, iter_op_specs
from torch.utils._python_dispatch import _disable_current_modes

__all__ = [
    "GraphDevice",
    "ProgramKernel",
    "read_host_tensor",
    "recent_kernels",
    "rules_device",
    "rules_make_kernel",
    "rules_to_device",
    "rules_to_host",
    "check_resident_inputs",
    "write_host_tensor",
]

_RECENT: list[weakref.ref] = []
#: devices holding inputs their programs write in place (``check_resident_inputs``)
_WRITING_THROUGH: "weakref.WeakSet[GraphDevice]" = weakref.WeakSet()
_RECENT_LIMIT = 256
_SERIAL = itertools.count()


class GraphDevice:
    """The simulated HBM of one compiled graph (allocated on first use)."""

    def __init__(self, total_bytes: int) -> None:
        self.total_bytes = int(total_bytes)
        self._memory: DeviceMemory | None = None
        #: host step transfers (rules_to_host / rules_to_device) so far (tests)
        self.host_transfers = 0
        #: host tensors stickified into device memory, and writes skipped because
        #: the bytes were there already (tests count both)
        self.stickify_writes = 0
        self.stickify_skips = 0
        self.resident = ResidentInputs()

    def memory(self) -> DeviceMemory:
        if self._memory is None:
            self._memory = DeviceMemory(self.total_bytes)
        return self._memory

    def reset(self) -> None:
        """Drop the memory: the next call starts from zeroed HBM (tests comparing runs)."""
        self._memory = None
        self.resident.forget()

    def begin_call(self) -> None:
        """A call of the compiled graph starts: nothing is known to be resident but
        the inputs it writes in place (resident.py)."""
        self.resident.begin()

    def end_call(self) -> None:
        self.resident.end()
        if self.resident.has_persistent:
            _WRITING_THROUGH.add(self)

    def write_input(self, p: TensorPlacement, tensor: Any, who: str) -> None:
        """Stickify ``tensor`` into segment ``p`` unless its bytes are there already."""
        if self.resident.holds(p, tensor):
            self.stickify_skips += 1
            return
        self.resident.invalidate([(p.address, p.address + p.size_in_bytes)])
        write_host_tensor(self.memory(), p, tensor, who)
        self.stickify_writes += 1
        self.resident.record(p, tensor)

    def device_writes(self, ranges: list[tuple[int, int]]) -> None:
        """HBM byte ranges a kernel's stores may write (before they run)."""
        self.resident.invalidate(ranges)


def _layout(p: TensorPlacement) -> SpyreTensorLayout:
    return SpyreTensorLayout(tuple(p.device_size), tuple(p.stride_map), p.device_dtype)


def _check_host(who: str, p: TensorPlacement, tensor: Any) -> None:
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{who}: argument {p.name} is {type(tensor).__name__}, not a tensor")
    if tuple(tensor.shape) != tuple(p.host_size) or tensor.dtype != dtypes.host_dtype(p.host_dtype):
        raise ValueError(
            f"{who}: argument {p.name} is {tuple(tensor.shape)} {tensor.dtype}, "
            f"the program was compiled for {tuple(p.host_size)} {p.host_dtype}"
        )


class ProgramKernel:
    def __init__(
        self,
        name: str,
        device: GraphDevice,
        specs: list[OpSpec | LoopSpec],
        stickify: dict[int, TensorPlacement] | None = None,
        unstickify: dict[int, TensorPlacement] | None = None,
        write_through: dict[int, TensorPlacement] | None = None,
    ) -> None:
        self.name = name
        self.device = device
        self.specs = specs
        self.stickify = dict(stickify or {})
        self.unstickify = dict(unstickify or {})
        #: graph inputs the kernel writes in place (a KV cache): each element it
        #: writes is copied into the host tensor too, nothing else (write_through.py)
        self.write_through = dict(write_through or {})
        self.serial = next(_SERIAL)  # creation order, unique for the process
        self.calls = 0  # how often run() executed the program (tests prove execution)
        self.affine_checked = not any(isinstance(item, LoopSpec) for item in specs)
        self._lx: DeviceMemory | None = None

    def footprint(self) -> tuple[list[tuple[int, int]], int]:
        """The HBM byte ranges the kernel's stores may write, and the end of the LX
        bytes it uses.  A store writes only inside its arg's allocation (its bounds
        check raises before anything else is written), loop offsets included.
        Recomputed per run: OpSpecs are mutable (tests edit them), and it costs a
        few Python operations per OpSpec."""
        ranges: list[tuple[int, int]] = []
        lx_end = 0
        for spec in iter_op_specs(self.specs):
            store = spec.op_info.get("store")
            written = None if not isinstance(store, dict) else store.get("arg")
            for i, arg in enumerate(spec.args):
                if "lx" in arg.allocation:
                    lx_end = max(lx_end, int(arg.allocation["lx"]) + arg.size_in_bytes)
                if "hbm" in arg.allocation and (written is None or i == written
                                                or not arg.is_input):
                    start = int(arg.allocation["hbm"])
                    ranges.append((start, start + arg.size_in_bytes))
        return ranges, lx_end

    def _lx_memory(self, end: int) -> DeviceMemory | None:
        """The LX scratchpad: its own bounds-checked byte space, zeroed per run (LX
        contents never outlive a kernel); one buffer per kernel, sized to the
        highest LX byte used."""
        if not end:
            return None
        if self._lx is None or self._lx.total_bytes != end:
            self._lx = DeviceMemory(end)
        else:
            self._lx.clear()
        return self._lx

    def _write_input(self, p: TensorPlacement, tensor: torch.Tensor) -> None:
        self.device.write_input(p, tensor, f"kernel {self.name}")

    def _read_output(self, memory: DeviceMemory, p: TensorPlacement, tensor: torch.Tensor) -> None:
        read_host_tensor(memory, p, tensor, f"kernel {self.name}")

    def run(self, *args: Any) -> None:
        with _device_side():
            self._run(*args)

    def _run(self, *args: Any) -> None:
        self.calls += 1
        memory = self.device.memory()
        for i, p in self.stickify.items():
            self._write_input(p, args[i])
        stores, lx_end = self.footprint()
        # before the stores run: a store that raises half way has written already
        self.device.device_writes(stores)
        if not self.affine_checked:
            # Once per program: compact loop addressing == exact coordinate shifts.
            check_affine(self.specs, self.name)
            self.affine_checked = True
        if self.write_through:
            memory.log = []
        try:
            run_items(self.specs, memory, self.name, lx=self._lx_memory(lx_end))
        finally:
            written, memory.log = memory.log, None
        for i, p in self.write_through.items():
            mirror_writes(memory, p, args[i], written or [], f"kernel {self.name}")
            self.device.resident.record(p, args[i], persistent=True)
        for i, p in self.unstickify.items():
            self._read_output(memory, p, args[i])


def _device_side() -> Any:
    """What a kernel does is the device's work, not host tensor ops: no Python
    dispatch mode sees it.  AOTAutograd runs the first call of every compiled graph
    under one (``_AnalyzeCustomOpInputOutputMode``, torch/_functorch/_aot_autograd/
    runtime_wrappers.py, its custom-op aliasing check), which costs every one of the
    executor's many small tensor ops a Python dispatch: five times the executor's time
    on a first call of a program of many tiles (a 131072-tile copy: 127 s, 24 s without)."""
    if not torch._C._len_torch_dispatch_stack() and \
            not torch._ops._len_torch_dispatch_stack_pre_dispatch():
        return contextlib.nullcontext()
    return _disable_current_modes()


class _Transfer:
    """A placement's structured transfer, derived once per placement, host strides and
    memory size (``_transfer``): everything but the copies themselves."""

    __slots__ = ("host", "storage", "plan", "padding")

    def __init__(self, host: torch.dtype, storage: torch.dtype, plan: views.Plan,
                 padding: torch.Tensor | bool) -> None:
        self.host = host
        self.storage = storage
        self.plan = plan
        #: the segment's padding elements (no host element maps there), which a write
        #: zeroes: False (none), True (zero the whole segment first: most of it is
        #: padding), or their element indices relative to the segment
        self.padding = padding


#: a write zeroes padding element by element only while it is at most this share of
#: the segment (index_fill_ per element vs one memset of the whole segment)
_PADDING_BY_INDEX = 1 / 8


#: (placement_key, host strides, memory bytes) -> _Transfer, or None for the general
#: path.  Every input of ``structured`` is in the key, so an entry never goes stale.
_TRANSFERS: dict[tuple, _Transfer | None] = {}
_TRANSFERS_LIMIT = 4096


def _transfer(memory: DeviceMemory, p: TensorPlacement, host_stride: tuple[int, ...]) -> _Transfer | None:
    if views.FORCE_GENERAL:
        return None
    key = (placement_key(p), host_stride, memory.total_bytes)
    hit = _TRANSFERS.get(key, False)
    if hit is False:
        if len(_TRANSFERS) >= _TRANSFERS_LIMIT:
            _TRANSFERS.clear()
        hit = _TRANSFERS[key] = _derive_transfer(memory, p, host_stride)
    return hit


def _derive_transfer(memory: DeviceMemory, p: TensorPlacement,
                     host_stride: tuple[int, ...]) -> _Transfer | None:
    host = dtypes.host_dtype(p.host_dtype)
    storage = dtypes.storage_dtype(p.device_dtype, host)
    width = element_bytes(p.device_dtype)
    nbytes = math.prod(p.device_size) * width
    if nbytes != p.size_in_bytes or p.address + nbytes > memory.total_bytes or p.address % width:
        return None
    plan = structured(_layout(p), p.host_size, host_stride, p.address // width)
    if plan is None:
        return None
    return _Transfer(host, storage, plan, _padding(plan, p.address // width, nbytes // width))


def _padding(plan: views.Plan, base: int, count: int) -> torch.Tensor | bool:
    """Which of the segment's ``count`` elements no host element is written to."""
    real = math.prod(plan.shape)
    if real == count:
        return False  # the plan writes every point once (an injective layout)
    if count - real > count * _PADDING_BY_INDEX:
        return True
    written = torch.zeros(count, dtype=torch.bool)
    views.copy_out(written, plan.at(plan.base - base), torch.ones((), dtype=torch.bool))
    return torch.nonzero(~written).reshape(-1)


def write_host_tensor(memory: DeviceMemory, p: TensorPlacement, tensor: torch.Tensor,
                      who: str) -> None:
    """Stickify host ``tensor`` into its segment ``p`` of device memory."""
    _check_host(who, p, tensor)
    if _write_structured(memory, p, tensor):
        return
    data = stickify(tensor, _layout(p)).reshape(-1).view(torch.uint8)
    if data.numel() != p.size_in_bytes or p.address + data.numel() > memory.total_bytes:
        raise DeviceMemoryError(
            f"{who}: stickified {p.name} is {data.numel()} bytes, its "
            f"segment at {p.address} holds {p.size_in_bytes}"
        )
    memory.write_bytes(p.address, data)


def _write_structured(memory: DeviceMemory, p: TensorPlacement, tensor: torch.Tensor) -> bool:
    """Stickify straight into the segment through strided views (same bytes as
    ``stickify`` + ``write_bytes``); False when the layout is not structured."""
    transfer = _transfer(memory, p, tuple(tensor.stride()))
    if transfer is None:
        return False
    storage = transfer.storage
    padding = transfer.padding  # the segment is zero there
    if padding is True:
        memory.read_bytes(p.address, p.size_in_bytes).zero_()
    elif padding is not False:
        memory.view(storage)[p.address // element_bytes(p.device_dtype):].index_fill_(0, padding, 0)
    # no conversion: copy the host tensor itself.  A conversion runs on the contiguous
    # host tensor first: converting inside a strided copy_ is slower (torch 2.13 CPU)
    values = tensor if tensor.dtype == storage else \
        dtypes.to_storage(tensor, tensor.dtype, storage, "stickify")
    views.copy_out(memory.view(storage), transfer.plan, values.reshape(transfer.plan.shape))
    return True


def read_host_tensor(memory: DeviceMemory, p: TensorPlacement, tensor: torch.Tensor,
                     who: str) -> None:
    """Unstickify segment ``p`` of device memory into host ``tensor``."""
    _check_host(who, p, tensor)
    transfer = _transfer(memory, p, tuple(p.host_stride))
    if transfer is not None:
        host, storage, plan = transfer.host, transfer.storage, transfer.plan
        if storage == host or (storage, host) == (torch.int32, torch.int64):
            # an exact conversion (or none): read straight into the caller's tensor
            views.copy_into(memory.view(storage), plan, tensor.view(plan.shape))
            return
        raw = views.copy_in(memory.view(storage), plan)
        tensor.copy_(dtypes.from_storage(raw, host).reshape(tuple(p.host_size)))
        return
    host = dtypes.host_dtype(p.host_dtype)
    storage = dtypes.storage_dtype(p.device_dtype, host)
    raw = memory.read_bytes(p.address, p.size_in_bytes).view(storage)
    value = unstickify(raw, _layout(p), p.host_size, p.host_stride, host)
    tensor.copy_(value)


def rules_to_host(device: GraphDevice, p: TensorPlacement) -> torch.Tensor:
    """A host step's input: a fresh host tensor holding the device buffer ``p``."""
    tensor = torch.empty_strided(tuple(p.host_size), tuple(p.host_stride),
                                 dtype=dtypes.host_dtype(p.host_dtype))
    read_host_tensor(device.memory(), p, tensor, f"host step input {p.name}")
    device.host_transfers += 1
    return tensor


def rules_to_device(device: GraphDevice, p: TensorPlacement, tensor: torch.Tensor) -> None:
    """A host step's output: stickified into its device segment for the Spyre ops."""
    device.write_input(p, tensor, f"host step output {p.name}")
    device.host_transfers += 1


def check_resident_inputs() -> None:
    """Called by the backend right before a compiled graph's runtime wrapper runs: the
    inputs programs wrote in place stay resident into this call if nothing changed
    them since (``ResidentInputs.check_before_call``)."""
    for device in list(_WRITING_THROUGH):
        device.resident.check_before_call()


def rules_device(total_bytes: int) -> GraphDevice:
    return GraphDevice(total_bytes)


def rules_make_kernel(
    name: str,
    device: GraphDevice,
    specs: list[OpSpec | LoopSpec],
    stickify: dict[int, TensorPlacement] | None = None,
    unstickify: dict[int, TensorPlacement] | None = None,
    write_through: dict[int, TensorPlacement] | None = None,
) -> ProgramKernel:
    kernel = ProgramKernel(name, device, specs, stickify, unstickify, write_through)
    _RECENT.append(weakref.ref(kernel))
    del _RECENT[:-_RECENT_LIMIT]
    return kernel


def recent_kernels() -> list[ProgramKernel]:
    """Kernels created by generated wrappers, oldest first (for tests and tools)."""
    return [k for k in (r() for r in _RECENT) if k is not None]
