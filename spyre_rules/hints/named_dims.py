"""Named dims: from user tensors and ``spyre_hint(named_dims=...)`` to every op.

The rule is deliberately simple and exact (a wrong name would tile the wrong dim):

* Each op's loop symbols are named through its *reads*: for every read of a
  buffer whose dims are named, compute the host coordinates of the read index in
  that buffer's (size, stride); a host dim whose coordinate is *exactly* one loop
  symbol, with the symbol's range equal to the dim's size, gives that symbol the
  dim's name.  Two reads naming one symbol differently is a user error.
* Output dims are named through the op's *write*: output host dim ``d`` whose
  write coordinate is exactly symbol ``s`` gets ``s``'s name.  Reduction dims are
  the op's reduction loop symbols (``range_vars`` after the pointwise ones).

This covers pointwise ops, broadcasting (a broadcast dim's coordinate is the
constant 0, so it names nothing), reductions (the reduced symbol names a
reduction dim) and ``batchmatmul`` (m, n, k are plain symbols of the reads).
* A name lands on one dim of an op: the outermost output dim carrying it, else
  the first reduction dim (attention scores ``(.., S_q, S_k)`` are named
  ``(.., "S", None)``: a sequence hint tiles the queries).
* A concatenation's buffer takes the names its regions agree on, on the dims
  every region spans whole.

Anything that is not a plain symbol -- reshapes merging or splitting dims,
slices with an offset or a step, partial slices (range != size) -- names
nothing: the dim stays unnamed instead of guessed.

``spyre_hint(named_dims=[...])`` then names the output dims of the ops created
in the block whose rank matches (``None`` entries keep the propagated name).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.dependencies import MemoryDep

from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.hints.api import (
    LEVELS_KEY,
    NAMED_DIMS_KEY,
    bound_input_dim_names,
    declare_tensor_dim,
    declared_tensor_dims,
)
from spyre_rules.hints.errors import HintError

__all__ = [
    "OpDims",
    "HintAnnotations",
    "origin_annotations",
    "input_dim_names",
    "propagate_named_dims",
]

Names = tuple[str | None, ...]


@dataclasses.dataclass(frozen=True)
class OpDims:
    """Names and loop symbols of one op's dims (output host dims, then reduction dims)."""

    out_names: Names
    out_vars: tuple[sympy.Symbol | None, ...]
    red_names: Names
    red_vars: tuple[sympy.Symbol, ...]


@dataclasses.dataclass(frozen=True)
class HintAnnotations:
    """What an op's FX origins say: its hint levels (outer first) and named_dims."""

    levels: tuple[tuple[int, str, int], ...] = ()
    named_dims: Names | None = None


def _ints(values: Any) -> list[int] | None:
    try:
        return [int(v) for v in values]
    except TypeError:
        return None


def origin_annotations(op: Any) -> HintAnnotations:
    """The hint annotations of ``op``'s FX origins (``node.meta["custom"]``).

    The op's ``origin_node`` (the FX node whose lowering produced it) decides when
    Inductor recorded one: other origins may be views inlined from elsewhere.
    Otherwise all origins must agree on non-empty levels (a disagreement means the
    op mixes code from two hint blocks).
    """
    origin = getattr(op, "origin_node", None) or getattr(
        getattr(op, "data", None), "origin_node", None
    )
    nodes = [origin] if origin is not None else list(getattr(op, "origins", ()))
    levels: set[tuple[Any, ...]] = set()
    named: set[Names] = set()
    for node in nodes:
        custom = getattr(node, "meta", {}).get("custom") or {}
        if custom.get(LEVELS_KEY):
            levels.add(tuple(tuple(level) for level in custom[LEVELS_KEY]))
        if custom.get(NAMED_DIMS_KEY) is not None:
            named.add(tuple(custom[NAMED_DIMS_KEY]))
    if len(levels) > 1 or len(named) > 1:
        raise HintError(
            f"{op_description(op)} comes from code in different spyre_hint blocks "
            f"(levels {sorted(levels)}, named_dims {sorted(named, key=str)}); "
            "cannot tell which hint applies"
        )
    return HintAnnotations(
        levels=next(iter(levels), ()), named_dims=next(iter(named), None)
    )


def input_dim_names(graph: Any) -> dict[str, Names]:
    """Graph input name -> dim names bound by ``bind_input_dim_names`` (by position)."""
    bound = bound_input_dim_names()
    if not bound or all(names is None for names in bound):
        return {}
    placeholders = list(graph.graph_input_names)
    if len(placeholders) != len(bound):
        raise HintError(
            f"cannot map named input tensors to the graph: {len(bound)} example inputs but "
            f"the graph has {len(placeholders)} inputs {placeholders}; named dims are matched "
            "by position"
        )
    declared = declared_tensor_dims()
    result: dict[str, Names] = {}
    for i, (name, names) in enumerate(zip(placeholders, bound)):
        if names is None:
            continue
        value = graph.graph_inputs.get(name)
        size = _ints(value.get_size()) if isinstance(value, ir.IRNode) else None
        if (
            size is None
            or len(size) != len(names)
            or any(n is not None and declared.get(n) != s for n, s in zip(names, size))
        ):
            raise HintError(
                f"graph input {i} ({name}, size {size}) does not match the dim names "
                f"{list(names)} of example input {i}"
            )
        result[name] = tuple(names)
    return result


def _buffer_geometry(graph: Any, name: str) -> tuple[list[int], list[int]] | None:
    buf = graph.try_get_buffer(name)
    if buf is None:
        return None
    try:
        size, stride = _ints(buf.get_size()), _ints(buf.get_stride())
    except (AttributeError, NotImplementedError, TypeError):
        return None
    if size is None or stride is None:
        return None
    return size, stride


def _coords(size: list[int], stride: list[int], dep: MemoryDep) -> list[Any] | None:
    try:
        return host_coordinates(size, stride, dep.index, dep.ranges)
    except CoordinateError:
        return None


def _bare_symbol(coord: Any, ranges: Mapping[Any, Any]) -> sympy.Symbol | None:
    return coord if isinstance(coord, sympy.Symbol) and coord in ranges else None


def _symbol_names(graph: Any, op: Any, reads: Any, known: Mapping[str, Names]) -> dict[Any, str]:
    """Loop symbol -> dim name, from the reads of named buffers.

    A symbol two reads name differently (q's ``Lq`` and v's ``Lk`` on one loop dim of
    ``q + v``) gets no name: only a dim a hint tiles needs one, and a hint naming
    either then matches no dim of this op (that error names the op)."""
    names_of: dict[Any, str] = {}
    disputed: set[Any] = set()
    for dep in reads:
        if not isinstance(dep, MemoryDep) or dep.name not in known:
            continue
        geometry = _buffer_geometry(graph, dep.name)
        if geometry is None:
            continue
        size, stride = geometry
        names = known[dep.name]
        coords = _coords(size, stride, dep) if len(names) == len(size) else None
        if coords is None:
            continue
        ranges = dep.ranges
        for d, (coord, name) in enumerate(zip(coords, names)):
            sym = _bare_symbol(coord, ranges)
            if name is None or sym is None or int(ranges[sym]) != size[d]:
                continue
            previous = names_of.setdefault(sym, name)
            if previous != name:
                disputed.add(sym)
    return {sym: name for sym, name in names_of.items() if sym not in disputed}


def _op_dims(graph: Any, op: Any, known: Mapping[str, Names]) -> OpDims:
    data = op.data
    n_out = len(data.ranges)
    rw = op.get_read_writes()
    range_vars = list(rw.range_vars or [])
    red_vars = tuple(range_vars[n_out:]) if isinstance(data, ir.Reduction) else ()
    names_of = _symbol_names(graph, op, rw.reads, known)
    size, stride = _ints(op.get_size()), _ints(op.get_stride())
    out_vars: list[sympy.Symbol | None] = [None] * len(size or [])
    writes = [dep for dep in rw.writes if isinstance(dep, MemoryDep)]
    if size is not None and stride is not None and len(writes) == 1:
        coords = _coords(size, stride, writes[0]) or []
        for d, coord in enumerate(coords):
            out_vars[d] = _bare_symbol(coord, writes[0].ranges)
    out_names, red_names = _one_dim_per_name(
        [names_of.get(v) if v is not None else None for v in out_vars],
        [names_of.get(v) for v in red_vars],
    )
    return OpDims(
        out_names=out_names, out_vars=tuple(out_vars), red_names=red_names, red_vars=red_vars
    )


def _one_dim_per_name(out: list[str | None], red: list[str | None]) -> tuple[Names, Names]:
    """Keep each name on one dim: the outermost output dim carrying it, else the
    first reduction dim.  Attention scores ``q @ k^T`` read the sequence dim of
    ``q`` and of ``k``: the query dim keeps the name, the key dim stays unnamed,
    and ``p @ v`` keeps it on its rows, not on the contracted key dim -- so a hint
    on the sequence tiles the queries, and every tile reads all keys."""
    seen: set[str] = set()
    kept: list[list[str | None]] = []
    for names in (out, red):
        kept.append([])
        for name in names:
            kept[-1].append(None if name in seen else name)
            if name is not None:
                seen.add(name)
    return tuple(kept[0]), tuple(kept[1])


def _region_base(op: Any) -> str | None:
    """The concatenation whose region ``op`` writes (a NonOwningLayout), if any."""
    layout = getattr(op, "layout", None)
    return layout.view.get_name() if isinstance(layout, ir.NonOwningLayout) else None


def _concatenation_names(graph: Any, base: str, regions: list[tuple[Any, Names]]) -> Names:
    """Names of a concatenation's dims, from its regions (docs/layout_model.md §5.10):
    a dim every region spans whole and names alike; the concatenated dim (each
    region covers part of it) stays unnamed."""
    size = _ints(graph.get_buffer(base).get_size()) or []
    names: list[str | None] = []
    for d, full in enumerate(size):
        found: set[str | None] = set()
        for op, region_names in regions:
            region_size = _ints(op.get_size()) or []
            spans_whole = d < len(region_size) and region_size[d] == full
            found.add(region_names[d] if spans_whole and d < len(region_names) else None)
        names.append(found.pop() if len(found) == 1 else None)
    return tuple(names)


def _apply_named_dims(op: Any, dims: OpDims, named: Names) -> OpDims:
    declared = declared_tensor_dims()
    sizes = _ints(op.get_size()) or []
    out = list(dims.out_names)
    for d, name in enumerate(named):
        if name is None:
            continue
        if name not in declared and d < len(sizes):
            # a name never declared is registered with the size it names (as
            # declare_tensor_dim would): named_dims alone is enough to hint it
            declare_tensor_dim(name, sizes[d])
            declared[name] = sizes[d]
        if declared[name] != sizes[d]:
            raise HintError(
                f"spyre_hint(named_dims={list(named)}) names dim {d} of {op_description(op)} "
                f"{name!r}, but that dim has size {sizes[d]} and {name!r} is declared with "
                f"size {declared[name]}"
            )
        # the explicit name wins over a propagated one on another dim
        out = [None if n == name else n for n in out]
        out[d] = name
    red = [None if n in named else n for n in dims.red_names]
    return dataclasses.replace(dims, out_names=tuple(out), red_names=tuple(red))


def propagate_named_dims(
    graph: Any,
    ops: list[Any],
    annotations: Mapping[str, HintAnnotations],
    inputs: Mapping[str, Names],
    named_buffers: Mapping[str, Names] | None = None,
) -> dict[str, OpDims]:
    """Name the dims of ``ops`` (topological order); needs ``V.graph`` set to ``graph``.

    ``inputs`` are the named graph inputs, ``named_buffers`` the buffers
    ``name_tensor_dims`` named inside compiled code (their names win over
    propagated ones).  Stamps ``op.dim_names`` (output dims) and
    ``op.reduction_dim_names`` on ops with at least one named dim.  Returns op
    name -> OpDims for every op.
    """
    named_buffers = dict(named_buffers or {})
    known: dict[str, Names] = {**inputs, **named_buffers}
    result: dict[str, OpDims] = {}
    matched_named: dict[Names, bool] = {}
    regions: dict[str, list[Any]] = {}
    for op in ops:
        name = op.get_name()
        dims = _op_dims(graph, op, known)
        if name in named_buffers:
            dims = _apply_named_dims(op, dims, named_buffers[name])
        base = _region_base(op)
        if base is not None:
            regions.setdefault(base, []).append((op, dims.out_names))
            concat_names = _concatenation_names(graph, base, regions[base])
            if base not in named_buffers and any(n is not None for n in concat_names):
                known[base] = concat_names
        named = annotations[name].named_dims
        if named is not None:
            fits = len(named) == len(dims.out_names)
            matched_named[named] = matched_named.get(named, False) or fits
            if fits:
                dims = _apply_named_dims(op, dims, named)
        result[name] = dims
        if any(n is not None for n in dims.out_names + dims.red_names):
            known[name] = dims.out_names
            op.dim_names = list(dims.out_names)
            op.reduction_dim_names = list(dims.red_names)
    for named, matched in matched_named.items():
        if not matched:
            ranks = sorted(
                {len(result[op.get_name()].out_names) for op in ops
                 if annotations[op.get_name()].named_dims == named}
            )
            raise HintError(
                f"spyre_hint(named_dims={list(named)}) has {len(named)} names but the ops "
                f"created in it have rank {', '.join(map(str, ranks))}"
            )
    return result


def where_name_was_lost(graph: Any, ops: list[Any], name: str, inputs: Mapping[str, Names],
                        dims: Mapping[str, OpDims]) -> str | None:
    """The first op (graph order) that reads a dim named ``name`` and carries no dim of
    that name, and why: it reads only part of the dim (a slice) or through an index that
    mixes it with other dims (a view, a reshape).  None when no op drops it.  Needs
    ``V.graph`` set to ``graph``."""
    known: dict[str, Names] = dict(inputs)
    for op in ops:
        own = dims.get(op.get_name())
        for dep in op.get_read_writes().reads:
            names = known.get(getattr(dep, "name", None))
            if not isinstance(dep, MemoryDep) or names is None or name not in names:
                continue
            if own is not None and name in own.out_names + own.red_names:
                continue
            d = names.index(name)
            geometry = _buffer_geometry(graph, dep.name)
            coords = _coords(*geometry, dep) if geometry is not None else None
            size = geometry[0][d] if geometry is not None else None
            coord = coords[d] if coords is not None and d < len(coords) else None
            sym = _bare_symbol(coord, dep.ranges) if coord is not None else None
            if sym is not None and size is not None and int(dep.ranges[sym]) != size:
                why = (f"it reads {int(dep.ranges[sym])} of its {size} values (a slice keeps no "
                       "name: the tiles would not be the named dim's)")
            elif sym is None and coord is not None:
                why = (f"it reads it through {coord}, an index that is not the dim itself (a "
                       "view, reshape or offset slice keeps no name)")
            else:
                why = "its loop dims cannot be matched to that dim"
            return (f"the name {name!r} was lost at {op_description(op)}, reading dim {d} of "
                    f"{dep.name}: {why}")
        if own is not None and any(n is not None for n in own.out_names):
            known[op.get_name()] = own.out_names
    return None
