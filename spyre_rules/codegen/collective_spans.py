"""Span check of a collective step's buffers, and the chunks that make them fit.

A collective step (backend/collectives.py) moves whole buffers between device memory
and the rank's process group: the all_reduce's buffer, the all_gather's input and its
gathered output, the reduce_scatter's input and its scattered output.  Each of those
device accesses is bounded like a kernel's (codegen/span_check.py): per non-stick device
dim, ``span(coordinate) x prod(device_size[d+1:]) x element_bytes`` over the host box
the access touches, with no work division assumed (docs/layout_model.md §3.4).

A collective over a buffer larger than one core may address runs in *chunks*: one host
dim cut into runs of ``length`` elements (the last one shorter), one collective call per
chunk.  Which dims a collective can be cut along is its semantics, not policy:
an all_reduce is elementwise (any dim); an all_gather concatenates and a reduce_scatter
splits along host dim 0, so they are cut along a dim above 0 only, where each rank's
chunk and the gathered or scattered chunk are the same slice.  Per such dim, the
candidate is the fewest chunks whose every chunk fits (more chunks along the same dim
only add calls), up to the policy's ``max_chunks``; the policy's ``cost``
(``rules/collectives.rules``, engine/collectives.py) picks among the dims.  A chunking
is verified chunk by chunk (a coordinate whose shift by one chunk is a constant has the
same span in every chunk; any other is bounded per chunk, up to
:data:`MAX_CHECKED_CHUNKS`).  A collective no chunking fits keeps its whole-buffer
accesses, which the span check then reports as overflows.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import sympy

from spyre_rules.codegen.span_check import DimCheck, OpCheck
from spyre_rules.engine.values import Chunking
from spyre_rules.facts.coordinates import forward_coordinates
from spyre_rules.facts.spans import coordinate_span_bound
from spyre_rules.program.op_spec import element_bytes

__all__ = ["CollectiveBuffer", "Chunking", "COLLECTIVE_KERNEL", "chunk_dims", "plan_chunks",
           "collective_checks"]

#: the ``kernel`` field of a collective step's span checks (it runs in no kernel)
COLLECTIVE_KERNEL = "collective step"

#: Chunks bounded one by one for a coordinate whose span may differ between chunks (the
#: precision of the check, not policy: past it the span is taken as the whole dim's).
MAX_CHECKED_CHUNKS = 256

#: functional collective -> the first host dim it can be cut along (module doc)
_FIRST_CHUNK_DIM = {
    "all_reduce_": 0, "all_reduce": 0,
    "all_gather_into_tensor": 1, "all_gather_into_tensor_out": 1,
    "reduce_scatter_tensor": 1,
}


@dataclasses.dataclass(frozen=True)
class CollectiveBuffer:
    """One device buffer a collective step reads (``is_input``) or writes."""

    name: str
    layout: Any  # FixedTiledLayout
    is_input: bool


def chunk_dims(collective: str, rank: int) -> list[int]:
    """The host dims ``collective`` can be cut along (none for one it cannot)."""
    first = _FIRST_CHUNK_DIM.get(collective)
    return [] if first is None else list(range(first, rank))


def _host(layout: Any) -> tuple[tuple[int, ...], tuple[int, ...]]:
    return tuple(int(s) for s in layout.size), tuple(int(s) for s in layout.stride)


def _dims(buffer: CollectiveBuffer, chunking: Chunking | None) -> list[DimCheck]:
    """The access's span per non-stick device dim, the largest over the chunks."""
    size, stride = _host(buffer.layout)
    coords, syms = forward_coordinates(buffer.layout.device_layout, size, stride)
    device = [int(s) for s in buffer.layout.device_layout.device_size]
    item = element_bytes(buffer.layout.device_layout.device_dtype)
    ranges = dict(zip(syms, size))
    starts = [0]
    if chunking is not None:
        ranges[syms[chunking.dim]] = chunking.length
        starts = list(range(0, size[chunking.dim], chunking.length))
    out = []
    for d, coord in enumerate(coords[:-1]):
        if not coord.free_symbols:
            continue
        found = _largest(coord, ranges, syms, size, chunking, starts)
        elems, exact = found if found is not None else (device[d], False)
        if elems <= 1:
            continue  # one value: a base address, not a span
        out.append(DimCheck(
            tensor=buffer.name, is_input=buffer.is_input, device_dim=d,
            span_bytes=elems * math.prod(device[d + 1:]) * item, exact=exact,
            symbols=tuple(sorted(str(s) for s in coord.free_symbols)), reduction_symbols=()))
    return out


def _largest(coord: sympy.Expr, ranges: dict[Any, int], syms: Sequence[Any],
             size: Sequence[int], chunking: Chunking | None,
             starts: list[int]) -> tuple[int, bool] | None:
    if chunking is None or syms[chunking.dim] not in coord.free_symbols:
        bound = coordinate_span_bound(coord, ranges)
        return None if bound is None else (bound.elems, bound.exact)
    s, length = syms[chunking.dim], chunking.length
    if not (coord.xreplace({s: s + length}) - coord).free_symbols:
        starts = starts[:1]  # every chunk spans what the first one does (the last is shorter)
    elif len(starts) > MAX_CHECKED_CHUNKS:
        return None
    best: tuple[int, bool] | None = None
    for start in starts:
        here = dict(ranges)
        here[s] = min(length, size[chunking.dim] - start)
        bound = coordinate_span_bound(coord.xreplace({s: s + start}), here)
        if bound is None:
            return None
        if best is None or bound.elems > best[0]:
            best = (bound.elems, bound.exact)
    return best


def collective_checks(op: str, collective: str, buffers: Sequence[CollectiveBuffer],
                      chunking: Chunking | None, limit: int) -> list[OpCheck]:
    """The span check of the collective step ``op`` (one OpCheck, as a kernel op's)."""
    dims = [d for b in buffers for d in _dims(b, chunking)]
    return [OpCheck(kernel=COLLECTIVE_KERNEL, op=op, kind=collective, limit=limit, dims=dims)]


def _fits(buffers: Sequence[CollectiveBuffer], chunking: Chunking | None, limit: int) -> bool:
    return all(d.span_bytes <= limit for b in buffers for d in _dims(b, chunking))


def plan_chunks(collective: str, buffers: Sequence[CollectiveBuffer], limit: int,
                policy: Any = None, trace: list[Any] | None = None) -> Chunking | None:
    """None when every whole-buffer access fits or no chunking does; else the chunking
    the policy's ``collectives`` section picks among each dim's fewest fitting chunks
    (module doc).  ``policy``: a loaded policy (default: the configured one); the
    policy's choice is appended to ``trace`` when one is given."""
    if not buffers or _fits(buffers, None, limit):
        return None
    rank = len(buffers[0].layout.size)
    extents = {d: int(buffers[0].layout.size[d]) for d in chunk_dims(collective, rank)}
    if any(len(b.layout.size) != rank or any(int(b.layout.size[d]) != n for d, n in extents.items())
           for b in buffers):
        return None  # the buffers disagree on a dim: no common slice
    if policy is None:
        from spyre_rules.engine.policy import get_policy

        policy = get_policy()
    rules = policy.program.collectives
    candidates = [found for dim, n in extents.items()
                  if (found := _fewest(buffers, dim, n, limit, rules.max_chunks)) is not None]
    return rules.choose(collective, candidates, policy.config_snapshot(), trace)


def _fewest(buffers: Sequence[CollectiveBuffer], dim: int, n: int, limit: int,
            max_chunks: int) -> Chunking | None:
    """The fewest chunks along ``dim``, at most ``max_chunks``, that all fit: ``k = 2, 3,
    ...`` chunks of ``ceil(n / k)`` (spans are not monotone in the length -- a chunk that
    straddles a stick boundary spans two sticks -- so every count is tried).  A chunk
    contains a one-element chunk, so its spans are at least those: when a one-element
    chunking has an exact span over the limit, no count is tried."""
    if n < 2 or _unit_chunks_overflow(buffers, dim, n, limit):
        return None
    tried = set()
    for count in range(2, min(n, max_chunks) + 1):
        length = -(-n // count)
        if length in tried:
            continue
        tried.add(length)
        chunking = Chunking(dim, length, -(-n // length))
        if _fits(buffers, chunking, limit):
            return chunking
    return None


def _unit_chunks_overflow(buffers: Sequence[CollectiveBuffer], dim: int, n: int, limit: int) -> bool:
    unit = Chunking(dim, 1, n)
    return any(d.exact and d.span_bytes > limit for b in buffers for d in _dims(b, unit))
