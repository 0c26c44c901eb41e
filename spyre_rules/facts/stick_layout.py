"""The Spyre physical (stick) layout model: facts only, no thresholds, no decisions.

Spec: ``docs/layout_model.md`` §1 (SpyreTensorLayout, stick sizes, the generic
constructor), §2.2 (``_resize_device_layout``) and §4.5 (within-stick host dim).

This module is pure Python on purpose: ``spyre-rules check`` and the rule
language must be able to reason about layouts without importing torch.  A dtype
is accepted as a ``torch.dtype`` or as its name (``"float16"``); both are mapped
through ``str(dtype).removeprefix("torch.")`` so torch never has to be imported.

Every invalid request raises :class:`LayoutError` naming the offending value:
a wrong layout silently produces wrong addresses, so nothing here is guessed.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import numbers
from collections.abc import Sequence
from typing import Any

from spyre_rules.errors import LayoutError
from spyre_rules.facts.tile_extent import tile_extent

__all__ = [
    "BYTES_IN_STICK",
    "MAX_GENERIC_DIM_ORDER",
    "DataFormat",
    "ElementArrangement",
    "DTypeInfo",
    "dtype_info",
    "SpyreTensorLayout",
    "contiguous_strides",
    "generic_stick_layout",
    "restickify_layout",
    "resize_device_layout",
    "within_stick_host_dim",
    "splits_stick",
]

#: Every device tensor is stored in 128-byte sticks (csrc ``BYTES_IN_STICK``).
BYTES_IN_STICK = 128

#: The generic constructor builds dim maps for dim orders of at most this length (§1.3).
MAX_GENERIC_DIM_ORDER = 6


class DataFormat(enum.Enum):
    """Device data formats (the csrc ``DataFormats`` values we model)."""

    SEN169_FP16 = "SEN169_FP16"
    IEEE_FP32 = "IEEE_FP32"
    IEEE_INT32 = "IEEE_INT32"
    SEN143_FP8 = "SEN143_FP8"

    @property
    def elems_per_stick(self) -> int:
        return _EPS[self]

    def __str__(self) -> str:
        return self.name


# fp32 = 32 is inferred from 128-byte sticks (docs/layout_model.md §7.7); int32 is hard-coded 32.
_EPS: dict[DataFormat, int] = {
    DataFormat.SEN169_FP16: 64,
    DataFormat.IEEE_FP32: 32,
    DataFormat.IEEE_INT32: 32,
    DataFormat.SEN143_FP8: 128,
}


class ElementArrangement(enum.IntEnum):
    """Order of elements inside a stick; resizes copy it verbatim."""

    STANDARD = 0
    DL16_TO_FP32 = 1
    QFP8CH = 2
    EXX2 = 3

    def __str__(self) -> str:
        return self.name


@dataclasses.dataclass(frozen=True)
class DTypeInfo:
    """Host dtype facts.  ``itemsize`` is the bytes one element occupies in device
    memory (128 / elements per stick: a bool is one 2-byte fp16 value, an int64 one
    4-byte int32), what span arithmetic multiplies by -- the span check measures
    the same bytes (docs/layout_model.md §1.2); ``host_itemsize`` is the host's."""

    name: str
    host_itemsize: int
    device_dtype: DataFormat
    elems_per_stick: int

    @property
    def itemsize(self) -> int:
        return BYTES_IN_STICK // self.elems_per_stick


def _info(name: str, host_itemsize: int, df: DataFormat) -> DTypeInfo:
    return DTypeInfo(name, host_itemsize, df, df.elems_per_stick)


_DTYPES: dict[str, DTypeInfo] = {
    "float16": _info("float16", 2, DataFormat.SEN169_FP16),
    "bfloat16": _info("bfloat16", 2, DataFormat.SEN169_FP16),
    "bool": _info("bool", 1, DataFormat.SEN169_FP16),
    "float32": _info("float32", 4, DataFormat.IEEE_FP32),
    "int32": _info("int32", 4, DataFormat.IEEE_INT32),
    "int64": _info("int64", 8, DataFormat.IEEE_INT32),
    "float8_e4m3fn": _info("float8_e4m3fn", 1, DataFormat.SEN143_FP8),
}


def dtype_info(dtype: Any) -> DTypeInfo:
    """Host->device dtype facts (docs/layout_model.md §1.2) for a torch.dtype or its name."""
    if isinstance(dtype, DTypeInfo):
        return dtype
    name = str(dtype).removeprefix("torch.")
    info = _DTYPES.get(name)
    if info is None:
        raise LayoutError(
            f"unsupported dtype {dtype!r} for a Spyre stick layout "
            f"(supported: {', '.join(_DTYPES)})"
        )
    return info


# --------------------------------------------------------------------------- helpers


def _is_int(value: Any) -> bool:
    # bool is an Integral but a size of True is always a bug; sympy.Integer is Integral,
    # sympy symbols are not, so symbolic sizes are refused here.
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int_tuple(values: Any, what: str, *, minimum: int) -> tuple[int, ...]:
    if isinstance(values, (str, bytes)):
        raise LayoutError(f"{what} must be a sequence of integers, got {values!r}")
    try:
        values = list(values)
    except TypeError:
        raise LayoutError(f"{what} must be a sequence of integers, got {values!r}") from None
    out = []
    for i, v in enumerate(values):
        if not _is_int(v):
            raise LayoutError(f"{what}[{i}] = {v!r} is not an integer (in {what} {list(values)!r})")
        iv = int(v)
        if iv < minimum:
            bound = "positive" if minimum == 1 else f">= {minimum}"
            raise LayoutError(f"{what}[{i}] = {iv} must be {bound} (in {what} {list(values)!r})")
        out.append(iv)
    return tuple(out)


def _dim_index(value: Any, rank: int, what: str) -> int:
    if not _is_int(value) or not 0 <= int(value) < rank:
        raise LayoutError(f"{what} = {value!r} is not a host dim in range(0, {rank})")
    return int(value)


def _prod(values: Sequence[int]) -> int:
    return math.prod(values)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def contiguous_strides(size: Sequence[int]) -> tuple[int, ...]:
    """Row-major element strides; the resize rules compare against these (§2.2)."""
    sizes = _int_tuple(size, "size", minimum=0)
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * sizes[d + 1]
    return tuple(strides)


# --------------------------------------------------------------------------- the layout


@dataclasses.dataclass(frozen=True)
class SpyreTensorLayout:
    """A device tensor: padded row-major ``device_size`` plus host offsets per device step.

    ``stride_map[d]`` is the host element offset of a +1 step along device dim ``d``
    (-1: the dim has no host stride), so ``host_offset = dot(coords, stride_map)``.
    The last device dim is always the stick and holds exactly ``elems_per_stick``.
    """

    device_size: tuple[int, ...]
    stride_map: tuple[int, ...]
    device_dtype: DataFormat
    element_arrangement: ElementArrangement = ElementArrangement.STANDARD

    def __post_init__(self) -> None:
        if not isinstance(self.device_dtype, DataFormat):
            raise LayoutError(f"device_dtype {self.device_dtype!r} is not a DataFormat")
        try:
            arrangement = ElementArrangement(self.element_arrangement)
        except ValueError:
            raise LayoutError(
                f"element_arrangement {self.element_arrangement!r} is not an ElementArrangement"
            ) from None
        size = _int_tuple(self.device_size, "device_size", minimum=1)
        smap = _int_tuple(self.stride_map, "stride_map", minimum=-1)
        if not size:
            raise LayoutError("device_size () is empty: a device tensor has at least a stick dim")
        if len(size) != len(smap):
            raise LayoutError(
                f"device_size {list(size)} and stride_map {list(smap)} differ in length "
                f"({len(size)} != {len(smap)})"
            )
        eps = self.device_dtype.elems_per_stick
        if size[-1] != eps:
            raise LayoutError(
                f"device_size {list(size)}: last (stick) dim is {size[-1]}, "
                f"but {self.device_dtype} holds {eps} elements per stick"
            )
        object.__setattr__(self, "device_size", size)
        object.__setattr__(self, "stride_map", smap)
        object.__setattr__(self, "element_arrangement", arrangement)

    @property
    def elems_per_stick(self) -> int:
        return self.device_dtype.elems_per_stick

    @property
    def device_rank(self) -> int:
        return len(self.device_size)

    @property
    def device_strides(self) -> tuple[int, ...]:
        """Implicit device element strides: the device tensor is dense row-major."""
        return contiguous_strides(self.device_size)

    @property
    def size_in_bytes(self) -> int:
        return BYTES_IN_STICK * _prod(self.device_size[:-1])

    def host_offset(self, coords: Sequence[Any]) -> Any:
        """Host element offset of device ``coords`` (dims with stride_map -1 add nothing)."""
        if len(coords) != self.device_rank:
            raise LayoutError(
                f"coordinates {list(coords)!r} have {len(coords)} entries, "
                f"device rank is {self.device_rank}"
            )
        total: Any = 0
        for c, s in zip(coords, self.stride_map):
            if s != -1:
                total = total + c * s
        return total

    def with_element_arrangement(self, arrangement: ElementArrangement) -> SpyreTensorLayout:
        return dataclasses.replace(self, element_arrangement=ElementArrangement(arrangement))

    def __str__(self) -> str:
        extra = ""
        if self.element_arrangement is not ElementArrangement.STANDARD:
            extra = f", {self.element_arrangement}"
        return (
            f"SpyreTensorLayout(device_size={list(self.device_size)}, "
            f"stride_map={list(self.stride_map)}, {self.device_dtype}{extra})"
        )


# --------------------------------------------------------------------------- constructors


def _dim_map(order: Sequence[int]) -> list[int]:
    # §1.3 step 2: middle host dims, then the stick's tile count, then the outermost
    # host dim moved next to the stick, then the stick itself.
    if len(order) == 1:
        return [order[0], order[0]]
    return [*order[1:], order[0], order[-1]]


def _check_host(host_size: Any, host_stride: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    size = _int_tuple(host_size, "host_size", minimum=1)
    stride = _int_tuple(host_stride, "host_stride", minimum=0)
    if len(size) != len(stride):
        raise LayoutError(
            f"host_stride {list(stride)} has {len(stride)} entries but host_size "
            f"{list(size)} has {len(size)}"
        )
    return size, stride


def _check_dim_order(dim_order: Any, rank: int, sparse: bool) -> tuple[int, ...]:
    if dim_order is None:
        order = list(range(rank))
    else:
        if isinstance(dim_order, (str, bytes)):
            raise LayoutError(f"dim_order {dim_order!r} is not a sequence of host dims")
        order = list(dim_order)
        for i, d in enumerate(order):
            if not _is_int(d):
                raise LayoutError(f"dim_order[{i}] = {d!r} is not an integer (in {order!r})")
        order = [int(d) for d in order]
    if order and order[-1] == -1:
        sparse = True
        dims = order[:-1]
    else:
        dims = order
    if sorted(dims) != list(range(rank)):
        raise LayoutError(
            f"dim_order {order!r} is not a permutation of the host dims 0..{rank - 1}"
            + (" (optionally followed by -1 for a sparse layout)" if rank else "")
        )
    full = (*dims, -1) if sparse else tuple(dims)
    if len(full) > MAX_GENERIC_DIM_ORDER:
        raise LayoutError(
            f"dim_order {list(full)!r} has {len(full)} entries; the generic stick layout "
            f"supports at most {MAX_GENERIC_DIM_ORDER} (host rank {rank}"
            + (", sparse)" if sparse else ")")
        )
    return full


def generic_stick_layout(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    dtype: Any,
    dim_order: Sequence[int] | None = None,
    sparse: bool = False,
) -> SpyreTensorLayout:
    """The default device layout for a host view (docs/layout_model.md §1.3).

    ``dim_order`` lists host dims outermost first; its last entry is the stick host dim
    (default: identity, stick = last host dim).  A trailing ``-1`` (or ``sparse=True``)
    asks for a sparse layout: one element per stick.
    """
    info = dtype_info(dtype)
    eps = info.elems_per_stick
    size, stride = _check_host(host_size, host_stride)
    if not isinstance(sparse, bool):
        raise LayoutError(f"sparse = {sparse!r} must be a bool")
    if not size:
        if dim_order not in (None, (), [], [-1], (-1,)):
            raise LayoutError(f"dim_order {list(dim_order)!r} given for a scalar host tensor")
        return SpyreTensorLayout((1, eps), (-1, -1), info.device_dtype)
    order = _check_dim_order(dim_order, len(size), sparse)
    is_sparse = order[-1] == -1
    dim_map = _dim_map(order)
    stick = dim_map[-1]

    device_size = []
    for host_dim in dim_map[:-1]:
        if host_dim == stick:
            device_size.append(1 if is_sparse else _ceil_div(size[stick], eps))
        else:
            device_size.append(size[host_dim])
    device_size.append(eps)

    stride_map = [0] * len(dim_map)
    running: dict[int, int] = {}
    for i in range(len(dim_map) - 1, -1, -1):
        host_dim = dim_map[i]
        if host_dim == -1 or size[host_dim] == 1:
            stride_map[i] = -1
        elif host_dim not in running:
            stride_map[i] = stride[host_dim]
            running[host_dim] = stride[host_dim] * device_size[i]
        else:
            stride_map[i] = running[host_dim]
            running[host_dim] *= device_size[i]
    return SpyreTensorLayout(tuple(device_size), tuple(stride_map), info.device_dtype)


def restickify_layout(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    dtype: Any,
    new_stick_dim: int,
    held_dims: Sequence[int] = (),
) -> SpyreTensorLayout:
    """Layout of a buffer restickified so host dim ``new_stick_dim`` is the stick.

    The host shape is kept (restickify changes only the device layout, §1.5); the
    other host dims keep their relative order, outermost first, except that the
    ``held_dims`` (dims the reader holds at one value: an expert's weights selected
    from a stack) go outermost on the device: the generic layout moves the first dim
    of its order just before the stick, inside every other, so the first dim the
    reader walks takes that place and a step of the dims it walks never strides over
    the values it does not read (§1.6).
    """
    size, stride = _check_host(host_size, host_stride)
    if not size:
        raise LayoutError("cannot restickify a scalar: it has no host dim to stick on")
    n = _dim_index(new_stick_dim, len(size), "new_stick_dim")
    others = [d for d in range(len(size)) if d != n]
    held = [d for d in others if d in set(held_dims)]
    walked = [d for d in others if d not in held]
    order = (walked[:1] + held + walked[1:] if held and walked else others) + [n]
    return generic_stick_layout(size, stride, dtype, order)


# --------------------------------------------------------------------------- resize (§2.2)


def _unique(values: list[int]) -> int | None:
    return values[0] if len(values) == 1 else None


def _stick_candidate(unmatched_hosts: list[int], old: Sequence[int]) -> int | None:
    """The unique unmatched host dim of size > 1, else the unique unmatched dim."""
    big = [p for p in unmatched_hosts if old[p] > 1]
    if big:
        return _unique(big)
    return _unique(unmatched_hosts)


def resize_device_layout(
    layout: SpyreTensorLayout,
    old_host_size: Sequence[int],
    new_host_size: Sequence[int],
    stick_host_dim: int | None = None,
) -> SpyreTensorLayout:
    """Rebuild ``layout`` for a shrunk (per-tile) or grown host size, keeping its dim order.

    Follows docs/layout_model.md §2.2 pass by pass.  Wherever the reference raises
    RuntimeError the answer would be a guess, so this raises LayoutError with the reason.
    """
    if not isinstance(layout, SpyreTensorLayout):
        raise LayoutError(f"layout {layout!r} is not a SpyreTensorLayout")
    old = _int_tuple(old_host_size, "old_host_size", minimum=1)
    new = _int_tuple(new_host_size, "new_host_size", minimum=1)
    if len(old) != len(new):
        raise LayoutError(
            f"old_host_size {list(old)} and new_host_size {list(new)} differ in rank"
        )
    ds = list(layout.device_size)
    sm = list(layout.stride_map)
    eps = layout.elems_per_stick
    old_hs = contiguous_strides(old)
    new_hs = contiguous_strides(new)
    rank = len(old)
    inner = len(ds) - 1  # J: the stick dim
    where = f"resizing {layout} from host {list(old)} to {list(new)}"

    # A caller's stick dim is used only when its tile count is really in the layout.
    if stick_host_dim is not None:
        if not _is_int(stick_host_dim):
            raise LayoutError(f"stick_host_dim = {stick_host_dim!r} is not an integer")
        s = int(stick_host_dim)
        if 0 <= s < rank and _ceil_div(old[s], eps) in ds[:-1]:
            stick_host_dim = s
        else:
            stick_host_dim = None

    # Pass 1: match non-stick device dims to host dims by size.
    matched: dict[int, int] = {}
    unmatched: list[int] = []
    for j in range(inner):
        if ds[j] == 1:
            ones = [p for p in range(rank) if old[p] == 1 and p != stick_host_dim]
            if len(ones) == 1:
                matched[j] = ones[0]
            continue  # ambiguous size-1 dims are left alone (docs/layout_model.md §7.8)
        cands = [p for p in range(rank) if old[p] == ds[j] and p != stick_host_dim]
        if len(cands) > 1:
            cands = [p for p in cands if old_hs[p] == sm[j]]
        if len(cands) == 1:
            matched[j] = cands[0]
        else:
            unmatched.append(j)

    def unmatched_hosts() -> list[int]:
        claimed = set(matched.values())
        return [p for p in range(rank) if p not in claimed]

    # Provisional stick dim; an explicit caller stick dim is exact knowledge, so it wins.
    provisional = (
        stick_host_dim if stick_host_dim is not None
        else _stick_candidate(unmatched_hosts(), old)
    )

    # Pass 1b: a size match that is really the stick's tile count is unmatched again.
    if provisional is not None:
        tiles = _ceil_div(old[provisional], eps)
        for j in sorted(matched):
            p = matched[j]
            if ds[j] > 1 and sm[j] != old_hs[p] and ds[j] == tiles:
                del matched[j]
                unmatched.append(j)
        unmatched.sort()

    # Final stick host dim.
    free_hosts = unmatched_hosts()
    if stick_host_dim is not None:
        if stick_host_dim not in free_hosts:
            raise LayoutError(
                f"{where}: stick_host_dim {stick_host_dim} was matched to a non-stick device dim"
            )
        stick: int | None = stick_host_dim
    elif not free_hosts:
        stick = None
        if unmatched:
            raise LayoutError(
                f"{where}: every host dim is matched (the stick was reduced away) "
                f"but device dims {unmatched} are unclaimed"
            )
    else:
        stick = _stick_candidate(free_hosts, old)
        if stick is None:
            raise LayoutError(
                f"{where}: cannot uniquely identify the stick host dim "
                f"(unmatched host dims {free_hosts})"
            )

    # Pass 2: matched dims take the new host size; contiguous strides follow the resize.
    for j, p in matched.items():
        ds[j] = new[p]
        if new[p] == 1:
            sm[j] = -1
        elif sm[j] == old_hs[p] or sm[j] == -1:
            sm[j] = new_hs[p]

    if stick is not None:
        # Pass 3: unmatched dims must be the stick's tile count.
        old_tiles = _ceil_div(old[stick], eps)
        for j in unmatched:
            if ds[j] != old_tiles:
                raise LayoutError(
                    f"{where}: device dim {j} (size {ds[j]}) matches no host dim and is not "
                    f"the tile count {old_tiles} of stick host dim {stick}"
                )
            ds[j] = _ceil_div(new[stick], eps)
            if new[stick] == 1:
                sm[j] = -1
            elif sm[j] == eps * old_hs[stick] or sm[j] == -1:
                sm[j] = eps * new_hs[stick]
        # Pass 4: the stick dim keeps eps elements; its stride follows a contiguous resize.
        if new[stick] == 1:
            sm[inner] = -1
        elif sm[inner] == old_hs[stick] or sm[inner] == -1:
            sm[inner] = new_hs[stick]

    return SpyreTensorLayout(
        tuple(ds), tuple(sm), layout.device_dtype, layout.element_arrangement
    )


# --------------------------------------------------------------------------- stick facts (§4.5)


def within_stick_host_dim(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    layout: SpyreTensorLayout,
) -> int | None:
    """First host dim whose stride equals the stick's host stride; None = unknown.

    None (no exact match) means "cannot verify"; callers must not fall back to a guess.
    A stick on a size-1 host dim (stride ``-1``, one value a stick) is the last size-1 dim.
    """
    size, stride = _check_host(host_size, host_stride)
    target = layout.stride_map[-1]
    for d, s in enumerate(stride):
        if s == target:
            return d
    units, outer = [d for d, n in enumerate(size) if n == 1], set(layout.stride_map[:-1])
    # (every dim above 1 an outer device dim: the layout is this view's)
    ok = target == -1 and units and all(stride[d] in outer for d, n in enumerate(size) if n > 1)
    return units[-1] if ok else None


def splits_stick(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    layout: SpyreTensorLayout,
    host_dim: int,
    split: int,
) -> bool | None:
    """Whether ``split`` equal tiles of ``host_dim`` cut through a stick (None = unknown).

    Only the within-stick host dim can be cut; its per-tile extent must stay a whole
    number of sticks.
    """
    size, _ = _check_host(host_size, host_stride)
    dim = _dim_index(host_dim, len(size), "host_dim")
    if not _is_int(split) or int(split) < 1:
        raise LayoutError(f"split = {split!r} must be a positive integer")
    k = int(split)
    tile = tile_extent(size[dim], k)
    if tile is None:
        raise LayoutError(f"split = {k} leaves an empty tile of host dim {dim} of size {size[dim]}")
    if k == 1:
        return False
    within = within_stick_host_dim(host_size, host_stride, layout)
    if within is None:
        return None
    if dim != within:
        return False
    return tile % layout.elems_per_stick != 0
