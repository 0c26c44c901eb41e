"""Facts about a restickify copy: how far one stick of either stick dim reaches.

A restickify copy (``backend/restickify.py``) reads one buffer stuck on host dim ``s`` and
writes the same host tensor stuck on host dim ``t``.  Any tile of it writes whole sticks of
``t`` and reads whole sticks of ``s``, so it reads at least one stick of ``t`` from the
source and writes at least one stick of ``s`` into its output; these facts measure both
(docs/layout_model.md §1.6).  Each is a ``@fact`` declared in ``rules/prelude.rules``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from spyre_rules.errors import LayoutError
from spyre_rules.facts.access import input_reads
from spyre_rules.facts.layout_facts import within_stick_dim
from spyre_rules.facts.op_kind import has_fixed_tiled_layout, is_pointwise, layout
from spyre_rules.facts.records import as_int
from spyre_rules.facts.registry import Op, fact
from spyre_rules.facts.stick_layout import (
    BYTES_IN_STICK, SpyreTensorLayout, generic_stick_layout,
)

__all__ = ["restickify_output_run_bytes", "restickify_source_run_bytes", "staged_restickify_layout",
           "stick_run_bytes"]


def staged_restickify_layout(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    dtype: Any,
    stick_dim: int,
    new_stick_dim: int,
) -> SpyreTensorLayout:
    """The intermediate of a restickify copy that goes in two stages (§1.6).

    Still stuck on ``stick_dim``, with ``new_stick_dim`` the device dim just outside the
    stick and the stick's tile count outside both: one stick of either dim is a short run
    of this buffer, so the first stage (same stick) and the second (the transposition)
    each read and write it in tiles as small as one stick of both dims.
    """
    size, stride = [int(v) for v in host_size], [int(v) for v in host_stride]
    s, t = int(stick_dim), int(new_stick_dim)
    if s == t:
        raise LayoutError(f"a staged restickify moves the stick: host dim {s} is already the stick")
    order = [t] + [d for d in range(len(size)) if d not in (s, t)] + [s]
    return generic_stick_layout(size, stride, dtype, order)


def stick_run_bytes(
    host_size: Sequence[int],
    host_stride: Sequence[int],
    layout: SpyreTensorLayout,
    host_dim: int,
) -> int | None:
    """Bytes ``layout`` spans over one stick's worth of host dim ``host_dim`` (§3.3).

    ``eps`` consecutive values of the dim (all of it when shorter) along the one device
    dim that holds it, measured as a coordinate's span (values x inner extent x device
    bytes per element).  None when no single non-stick device dim holds the dim (it is
    the stick dim, or the layout splits or merges it).
    """
    size, stride = [int(v) for v in host_size], [int(v) for v in host_stride]
    dim = int(host_dim)
    held = [d for d in range(layout.device_rank - 1)
            if layout.device_size[d] == size[dim] and layout.stride_map[d] == stride[dim]]
    if len(held) != 1 or size[dim] == 1:
        return None
    eps = layout.elems_per_stick
    return min(eps, size[dim]) * layout.device_strides[held[0]] * (BYTES_IN_STICK // eps)


def _host(layout_: Any) -> tuple[list[int], list[int]] | None:
    size = [as_int(v) for v in layout_.size]
    stride = [as_int(v) for v in layout_.stride]
    if any(v is None for v in size + stride):
        return None
    return size, stride  # type: ignore[return-value]


def _copy(op: Op) -> tuple[Any, Any, int, int] | None:
    """(source layout, output layout, source stick dim, output stick dim) of a one-read
    Pointwise op over one host shape whose two stick dims differ, else None."""
    if not (is_pointwise(op) and has_fixed_tiled_layout(op)):
        return None
    reads = input_reads(op)
    if len(reads) != 1:
        return None
    source, output = reads[0].layout, layout(op)
    if _host(source) is None or _host(output) is None or _host(source)[0] != _host(output)[0]:
        return None
    s, t = within_stick_dim(source), within_stick_dim(output)
    if s is None or t is None or s == t or s < 0 or t < 0:
        return None  # (< 0: one value a stick, no stick dim to measure a run of)
    return source, output, s, t


def _run(layout_: Any, dim: int) -> int | None:
    size, stride = _host(layout_)  # type: ignore[misc]
    return stick_run_bytes(size, stride, layout_.device_layout, dim)


@fact
def restickify_source_run_bytes(op: Op) -> int | None:
    found = _copy(op)
    return None if found is None else _run(found[0], found[3])


@fact
def restickify_output_run_bytes(op: Op) -> int | None:
    found = _copy(op)
    return None if found is None else _run(found[1], found[2])
