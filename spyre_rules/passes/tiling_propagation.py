"""``insert_tiling_propagation``: what the rest of the graph sees of a tiled op.

Spec: docs/layout_model.md §5.3.  After
``coarse_tile`` every op of a group computes one tile per innermost iteration
into a *per-tile* buffer (its layout was resized in place).  That is right for
readers inside the same loop, wrong for everybody else.  Per tiled op:

* **loop-invariant** (no level tiles any of its output or reduction dims; hint groups never hold
  one, explicit groups may): its buffer is the full buffer, rewritten whole in
  every iteration, so it is *not* ``per_tile_fixed``: a tiled reader in the loop
  moves over it with its own tile like over any full buffer.  (Marking it fixed
  made every iteration re-read the first tile's rows.)
* **loop-internal** (no reader outside its top-level loop and not a graph
  output): ``layout.per_tile_fixed = True`` -- the per-tile buffer is rewritten
  every iteration at a fixed address (codegen/executor never move it).
* **Case 2, read only outside**: the op writes the full buffer directly.  Its
  layout is restored to the full-size FixedTiledLayout (same object, so the
  backend's ``graph_state.layouts`` stays consistent) while its ranges stay
  per-tile: its store index then uses full strides, and the loop moves the tile.
  Readers keep the same buffer name, nothing else changes.
* **Case 1, read inside and outside**: the op keeps its per-tile buffer
  (``per_tile_fixed``) for the readers inside; a new full-size buffer is
  registered with Inductor (``graph.register_buffer`` / ``register_operation``,
  so ``graph.buffers`` and ``name_to_buffer`` know it) and filled by an identity
  Pointwise copy op inserted right after the op with the same loop attributes.
  Outside readers are renamed to the full buffer, graph outputs re-pointed.

Why renaming needs more than a name swap: Inductor resolves a load lazily --
``Buffer.make_loader`` computes ``self.layout.make_indexer()`` only when the
reader's body is traced -- so an outside reader of op ``X`` would compute its
index from ``X``'s *per-tile* strides.  ``_read_full`` therefore wraps the
reader's ``inner_fn``: while it is traced, ``X.layout`` is temporarily the full
layout and loads of ``X`` are renamed to the full buffer.

``tile_groups(graph, groups)`` = ``coarse_tile`` + this pass + re-indexing the
reads of per-tile buffers inside their loop (``passes/tile_reads.py``: a read
through a view or a restickified copy arrives with full-buffer strides; it is
rebuilt per tile, or refused when it would leave the tile): the single entry
for user-hint groups and the automatic planner.  ``coarse_tile`` validates every
group (non-dividing counts, non-contiguous groups, tiled reduction dims) before
touching any op, so those errors leave the IR and memory map untouched.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules.passes.host_boundaries import read_names
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.ir.ir_edit import RenameLoads, drop_caches, op_description, set_frozen
from spyre_rules.ir.loop_stamp import (
    LoopStamp,
    loop_count,
    loop_group_id,
    loop_stamp,
    loop_remainders,
    loop_tiled_dims,
    loop_tiled_reduction_dims,
    set_loop_stamp,
)
from spyre_rules.ir.op_identity import set_op_kind
from spyre_rules.passes.accumulators import attach_accumulators
from spyre_rules.passes.coarse_tile import CoarseTileError, coarse_tile, normalize_group
from spyre_rules.passes.plan_record import LoopRecord
from spyre_rules.passes.tile_reads import TileBuffer, reindex_loop_reads

__all__ = [
    "COPY_KIND",
    "insert_tiling_propagation",
    "tile_groups",
]

#: The stamped kind (``set_op_kind``) of the copy ops (codegen names their OpSpecs ``copy``).
COPY_KIND = "copy"


@dataclasses.dataclass(frozen=True)
class _FullLayout:
    size: list[Any]
    stride: list[Any]
    device_layout: Any


def _snapshot(op: Any) -> _FullLayout | None:
    layout = getattr(op, "layout", None)
    if not isinstance(layout, FixedTiledLayout):
        return None
    return _FullLayout(list(layout.size), list(layout.stride), layout.device_layout)


def _graph_of(operations: Any) -> Any:
    return operations if hasattr(operations, "operations") else V.graph


def _is_output(graph: Any, name: str) -> bool:
    return name in graph_state(graph).host_outputs


def _readers_by_name(graph: Any) -> dict[str, list[Any]]:
    """Buffer name -> the ComputedBuffers reading it, in graph order: one pass over
    the graph instead of one per tiled op.  Valid for the whole propagation: a copy
    inserted for op X reads only X, and renaming a reader's loads of X to X's full
    buffer changes only X's entry, which nobody asks for again (each op is
    propagated once)."""
    readers: dict[str, list[Any]] = {}
    host = graph_state(graph).host_steps
    for op in graph.operations:
        # A host step (backend/host_steps.py) is a reader outside every loop.
        if isinstance(op, ir.ComputedBuffer) or op.get_name() in host:
            for name in read_names(op):
                readers.setdefault(name, []).append(op)
    return readers


def _top(op: Any) -> Any:
    gid = loop_group_id(op)
    return None if gid is None else gid[0]


def _full_tiled_layout(op: Any, full: _FullLayout) -> FixedTiledLayout:
    layout = op.layout
    return FixedTiledLayout(
        layout.device, layout.dtype, list(full.size), list(full.stride),
        device_layout=full.device_layout,
    )


def _read_full(reader: Any, src: Any, full_name: str, full_layout: Any) -> None:
    """Make ``reader`` load ``full_name`` (full strides) wherever it loaded ``src``."""
    data = reader.data
    fn = data.inner_fn
    renames = {src.get_name(): full_name}

    def inner_fn(*args: Any) -> Any:
        saved = src.layout
        src.layout = full_layout  # the lazy loader of src indexes with full strides
        try:
            with V.set_ops_handler(RenameLoads(V.get_ops_handler(), renames)):
                return fn(*args)
        finally:
            src.layout = saved

    set_frozen(data, "inner_fn", inner_fn)
    drop_caches(reader)


def _repointed(node: Any, old: Any, new: Any) -> Any:
    """``node`` (a graph output) holding ``new`` where it held ``old``: the boxes and views
    on the way are copies, the originals stay as they are (``node`` itself when it does
    not hold ``old``)."""
    if isinstance(node, ir.StorageBox):
        return ir.StorageBox(new) if node.data is old else node
    if not isinstance(node, (ir.TensorBox, ir.BaseView)):
        return node
    inner = _repointed(node.data, old, new)
    if inner is node.data:
        return node
    rebuilt = copy.copy(node)
    object.__setattr__(rebuilt, "data", inner)
    drop_caches(rebuilt)
    return rebuilt


def _repoint_outputs(graph: Any, old: Any, new: Any) -> None:
    """The graph outputs that hold ``old`` hold its full copy ``new``.

    Only the outputs change: the StorageBox of ``old`` is shared with every view an
    in-graph reader loads ``old`` through, and a ``ReinterpretView`` names the buffer
    its box holds when the reader is traced.  Editing that box in place sent the
    readers inside the loop to the full copy, past the restickified copy they were
    renamed to (whose plan record then claimed a loop no kernel ran, fuzz 6120:95
    ``t0.t().contiguous()`` of a hinted output ``t0``) and past the per-tile
    re-indexing and its in-tile proof (``tile_reads``).
    """
    graph.graph_outputs[:] = [_repointed(out, old, new) for out in graph.graph_outputs]
    state = graph_state(graph)
    if old.get_name() in state.host_outputs:
        state.host_outputs.discard(old.get_name())
        state.host_outputs.add(new.get_name())


def _insert_copy(graph: Any, op: Any, full: _FullLayout) -> Any:
    """Register the full buffer + identity copy of ``op``'s tile (``_place_copies`` puts
    it right after ``op``)."""
    layout = _full_tiled_layout(op, full)
    loader = op.make_loader()  # lazy: indexes op with its per-tile layout
    data = ir.Pointwise(
        device=op.get_device(), dtype=op.get_dtype(), inner_fn=loader,
        ranges=list(op.data.ranges),
    )
    buf = ir.ComputedBuffer(name=None, layout=layout, data=data)
    name = graph.register_buffer(buf, set_name=True)
    # Registered at the end of graph.operations (its name counts the ops); moved right
    # after ``op`` by ``_place_copies`` once every op is propagated: moving it here
    # scanned the list once per copy.
    graph.register_operation(buf)
    buf.origins = type(op.origins)(op.origins)
    set_op_kind(buf, COPY_KIND)
    # The op's value is final only after its reduction levels (the finalise step),
    # so the copy runs in the enclosing output levels only.
    stamp = loop_stamp(op)
    depth = next(
        (level for level, dims in enumerate(stamp.tiled_reduction_dims) if dims),
        stamp.depth,
    )
    set_loop_stamp(buf, LoopStamp(group_id=stamp.group_id[:depth], counts=stamp.counts[:depth],
                                  tiled_dims=stamp.tiled_dims[:depth],
                                  tiled_reduction_dims=[[] for _ in range(depth)],
                                  last_tiles=stamp.last_tiles[:depth]))
    state = graph_state(graph)
    state.layouts[name] = layout
    description = f"{name} (copy of the {op.get_name()} tile into a full buffer)"
    tiled = state.plan.get(op.get_name())
    if tiled is not None:
        state.plan[name] = tiled.copied_as(name, description, COPY_KIND)
    return buf


def _propagate(graph: Any, op: Any, full: _FullLayout | None, readers: list[Any],
               copies: dict[int, Any]) -> str:
    name = op.get_name()
    layout = op.layout
    if not any(loop_tiled_dims(op)) and not any(loop_tiled_reduction_dims(op)):
        return "loop-invariant"
    outside = [r for r in readers if _top(r) != _top(op)]
    inside = [r for r in readers if _top(r) == _top(op)]
    if inside and any(loop_tiled_reduction_dims(op)):
        raise CoarseTileError(
            f"insert_tiling_propagation: {[r.get_name() for r in inside]} read "
            f"{op_description(op)} inside its reduction loop, where it holds a partial "
            "result (its value is final only after the loop); put them in a group of "
            "their own"
        )
    if isinstance(layout, ir.NonOwningLayout):
        # a concatenation's region: its tiles go straight into the (untiled) result
        return f"writes its tiles into {layout.view.get_name()}"
    if isinstance(layout, ir.MutationLayoutSHOULDREMOVE):
        # an in-place write: its tiles go straight into its target (facts/in_place.py)
        return f"writes its tiles in place into {layout.get_buffer().get_name()}"
    if not outside and not _is_output(graph, name):
        layout.per_tile_fixed = True
        return "loop-internal"
    if full is None:
        raise CoarseTileError(
            f"insert_tiling_propagation: {op_description(op)} is read outside its loop but "
            "its full-size layout is unknown (call tile_groups, which records it)"
        )
    if not inside:
        layout.size, layout.stride = list(full.size), list(full.stride)
        layout.device_layout = full.device_layout
        drop_caches(op)
        return "writes full buffer"
    layout.per_tile_fixed = True
    copy = copies[id(op)] = _insert_copy(graph, op, full)
    for reader in outside:
        if isinstance(reader, ir.ComputedBuffer):
            _read_full(reader, op, copy.get_name(), copy.layout)
        else:  # a host step: it unstickifies the full copy in place of the tile
            graph_state(graph).host_renames[name] = copy.get_name()
    _repoint_outputs(graph, op, copy)
    return f"copied to {copy.get_name()}"


def insert_tiling_propagation(
    operations: Any, groups: Sequence[Any], full_layouts: dict[str, _FullLayout] | None = None
) -> dict[str, str]:
    """Propagate tiled groups to their readers (see module docstring).

    ``operations`` is the graph (or ``graph.operations`` under ``V.graph``);
    ``full_layouts`` maps op name -> its pre-tiling layout (``tile_groups``
    records it).  Returns ``{op name: what was done}`` for plan records.
    """
    graph = _graph_of(operations)
    full_layouts = full_layouts or {}
    done: dict[str, str] = {}
    readers = _readers_by_name(graph)
    copies: dict[int, Any] = {}  # id(op) -> its copy, still at the end of graph.operations
    try:
        for index, group in enumerate(groups):
            ops, _ = normalize_group(index, group)
            for op in ops:
                if loop_group_id(op) is None:
                    raise CoarseTileError(
                        f"insert_tiling_propagation: {op_description(op)} of group {index} was "
                        "not tiled (run coarse_tile first)"
                    )
                name = op.get_name()
                done[name] = _propagate(graph, op, full_layouts.get(name), readers.get(name, []),
                                        copies)
    finally:
        _place_copies(graph, copies)
    return done


def _place_copies(graph: Any, copies: dict[int, Any]) -> None:
    """Move every copy from the end of ``graph.operations`` to right after its op (one
    pass over the list, in place: callers hold the list)."""
    if not copies:
        return
    moved = {id(copy) for copy in copies.values()}
    order = []
    for op in graph.operations:
        if id(op) in moved:
            continue
        order.append(op)
        copy = copies.get(id(op))
        if copy is not None:
            order.append(copy)
    graph.operations[:] = order


def tile_groups(graph: Any, groups: Sequence[Any]) -> dict[str, str]:
    """``coarse_tile`` + ``insert_tiling_propagation`` on ``graph`` (one entry point)."""
    if not groups:
        return {}
    full = {}
    for index, group in enumerate(groups):
        for op in normalize_group(index, group)[0]:
            snap = _snapshot(op)
            if snap is not None:
                full[op.get_name()] = snap
    coarse_tile(graph.operations, groups)
    done = insert_tiling_propagation(graph, groups, full)
    _reindex_reads_inside_loops(graph, full)
    state = graph_state(graph)
    for name, what in done.items():
        op = graph.get_buffer(name)
        record = state.plan.get(name)
        if record is not None:
            state.plan[name] = record.with_loop(LoopRecord(
                loop_group_id=tuple(loop_group_id(op)),
                loop_count=tuple(int(c) for c in loop_count(op)),
                loop_tiled_dims=tuple(tuple(d) for d in loop_tiled_dims(op)),
                loop_tiled_reduction_dims=tuple(tuple(d) for d in loop_tiled_reduction_dims(op)),
                propagation=what,
                loop_last_tiles=tuple(
                    tuple((d, int(op.data.ranges[d]), last) for d, last in level.items())
                    for level in loop_remainders(op)),
            ))
    attach_accumulators(graph, [graph.get_buffer(name) for name in done])
    return done


def _reindex_reads_inside_loops(graph: Any, full: dict[str, _FullLayout]) -> None:
    """Reads of per-tile buffers by the ops of their loop, re-indexed (``tile_reads``)."""
    loops: dict[Any, list[Any]] = {}
    tiles: dict[Any, dict[str, TileBuffer]] = {}
    for op in graph.operations:
        top = _top(op)
        if top is None:
            continue
        loops.setdefault(top, []).append(op)
        layout = getattr(op, "layout", None)
        snap = full.get(op.get_name())
        if snap is None or not getattr(layout, "per_tile_fixed", False) or not any(
            loop_tiled_dims(op)
        ):
            continue
        tiles.setdefault(top, {})[op.get_name()] = TileBuffer(
            op=op,
            full_layout=_full_tiled_layout(op, snap),
            tile_size=tuple(int(v) for v in layout.size),
            tile_stride=tuple(int(v) for v in layout.stride),
        )
    reindex_loop_reads(loops, tiles)
