"""``coarse_tile(operations, groups)``: stamp counted loops on ops and shrink them to one tile.

Spec: docs/layout_model.md §5.1 (group forms) and §5.2.
Per group ``g`` with levels ``[(count_0, dims_0), ...]`` (outermost first), every op
of the group gets a ``LoopStamp`` (``ir/loop_stamp.py``; read it with
``loop_group_id(op)``, ``loop_count(op)``, ``loop_tiled_dims(op)``):

* ``group_id``   -- nesting path ``(g, 0, ..., 0)``, one entry per level;
* ``counts``     -- ``sympy.Integer(count_l)`` per level, outermost first;
* ``tiled_dims`` -- per level, the positions in ``op.data.ranges`` it divides;
* ``tiled_reduction_dims`` -- per level, positions in ``reduction_ranges``
  (a *reduction level*: the loop accumulates the op's partial results, see
  ``passes/accumulators.py``; read with ``loop_tiled_reduction_dims(op)``);

and its ``data.ranges`` (and ``reduction_ranges``) are divided exactly, level by
level, so the op describes the work of one innermost iteration.  Its layout becomes the per-tile buffer: host
size = per-tile ranges, strides dense in the full buffer's memory order (a
transposed copy stays transposed tile by tile), and the FixedTiledLayout's device
layout is rebuilt by ``resize_device_layout`` over the dims in that memory order
(stick host dim given explicitly).  Strides that are not a dense permutation are
refused.

Group forms (all may be mixed in one list):

* ``(ops, K)``                 -- one level, divides dim 0 (or ``tiled_dims=``);
* ``(ops, K, [d])``            -- one level, divides dim d by K;
* ``(ops, [(K1, [d]), (K2, [e])])`` -- nested levels with explicit dims (a level
  tiles one dim per op: its iterations take tile i of every dim it lists, so two
  dims in one level would cover only the diagonal tiles, and are refused);
* ``(ops, [(hint_id, K, is_reduction_level), ...])`` -- levels resolved per op
  through ``op.dim_hints`` (``DimHint.host_dim``): the group record
  ``TileGroup(ops, [GroupLevel, ...])`` (engine/records.py) that
  ``hints_to_coarse_tile_groups`` and the automatic grouping produce (``(hint_id, K)``
  pairs too).  The op's DimHint decides the dim (``is_reduction`` included) and
  must agree on K; a DimHint without a dim (``host_dim`` None) keeps the op
  loop-invariant in that level.

Explicit dims index ``ranges + reduction_ranges``, so an index past the output
ranges of a Reduction names a reduction dim.

Everything is validated for *all* groups before the first op is touched, so an
error (``CoarseTileError``: a ``RuntimeError`` naming the op, dim and count)
leaves the IR as it was: non-contiguous group, op in two groups or already tiled,
count not dividing a dim (a planner level -- ``GroupLevel`` -- on an output dim
one level tiles may leave a shorter last tile instead: ``facts/tile_extent.py``,
stamped as ``LoopStamp.last_tiles``; codegen peels it), a reduction dim of a reduction whose partial results
cannot be combined (``passes/combine.py``), a reduction level outside an output
level of the same op (the accumulator would have to hold every outer tile), an
argmax / argmin tiled on two different reduction dims (its tile offsets are one
count), unknown
hint id, a device layout that cannot be rebuilt.  A count of 1 on a reduction dim
is one tile over the whole dim: nothing to accumulate, the level leaves it whole.

Edits follow docs/inductor_integration.md §3: ``Loops`` are frozen, so ranges
are written with ``object.__setattr__`` and Inductor's ``cache_on_self`` results
on the op and its data are dropped (``ir_edit.set_frozen``/``drop_caches``).  The
layout object is edited in place because the backend's per-graph state
(``graph_state(graph).layouts``, memory planning) holds the same object.

Not done here: ``insert_tiling_propagation`` (full buffers for consumers outside
the loop, copy ops, ``per_tile_fixed``) is a separate pass that must run right
after this one; until it does, a consumer outside a group reads a per-tile buffer.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules.engine.records import GroupLevel
from spyre_rules.errors import LayoutError, SpyreRulesError
from spyre_rules.ir.ir_edit import drop_caches, op_description, set_frozen
from spyre_rules.ir.loop_stamp import LoopStamp, loop_group_id, set_loop_stamp
from spyre_rules.ir.op_identity import op_name
from spyre_rules.facts.in_place import in_place_target, spans_in_place_target_whole
from spyre_rules.facts.layout_facts import within_stick_dim
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.facts.regions import region_start
from spyre_rules.facts.memory_order import memory_order, ordered_dense_strides, resize_in_memory_order
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.facts.tiled_layout import FixedTiledLayout
from spyre_rules.passes.combine import FIELDS, combines, combining_kinds

__all__ = ["coarse_tile", "CoarseTileError", "normalize_group"]


class CoarseTileError(SpyreRulesError, RuntimeError):
    """A coarse-tile request cannot be applied exactly (names the op, dim and count)."""


@dataclasses.dataclass(frozen=True)
class _Explicit:
    """A level given by explicit dims (the ``(ops, K[, dims])`` and ``(K, [dims])`` forms)."""

    split: int
    dims: tuple[int, ...]


# A level resolved per op through its DimHint is the group record's own GroupLevel
# (engine/records.py), its split normalised to an int.
_Level = _Explicit | GroupLevel


@dataclasses.dataclass
class _OpPlan:
    op: Any
    group_id: tuple[int, ...]
    counts: list[sympy.Integer]
    tiled: list[list[int]]
    tiled_reduction: list[list[int]]
    last_tiles: list[list[int]]  # per level, aligned with ``tiled``: the last tile's extent
    last_reduction_tiles: list[list[int]]  # the same, aligned with ``tiled_reduction``
    shorter: list[int]  # the dims (reduction dims past the ranges) whose last tile is shorter
    ranges: list[int]
    reduction_ranges: list[int]
    layout: tuple[list[int], list[int], Any] | None  # size, stride, device layout


#: ``_OpPlan.layout`` of a concatenation's region op: ranges per tile, layout kept.
KEEP_LAYOUT: Any = ("keep",)


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not (
        isinstance(value, int) or getattr(value, "is_Integer", False)
    ):
        raise CoarseTileError(f"coarse_tile: {where}: count {value!r} is not an integer")
    if int(value) < 1:
        raise CoarseTileError(f"coarse_tile: {where}: count {value!r} must be positive")
    return int(value)


def _is_count(value: Any) -> bool:
    return not isinstance(value, bool) and (
        isinstance(value, int) or bool(getattr(value, "is_Integer", False))
    )


def _dims(value: Any, where: str) -> tuple[int, ...]:
    if value is None:
        return (0,)
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(d, int) and not isinstance(d, bool) for d in value
    ):
        raise CoarseTileError(f"coarse_tile: {where}: tiled dims {value!r} are not a list of ints")
    return tuple(value)


def normalize_group(
    index: int, group: Any, tiled_dims: Sequence[int] | None = None
) -> tuple[list[Any], list[_Level]]:
    """``(ops, levels)`` for any accepted group form (see module docstring)."""
    where = f"group {index}"
    if not isinstance(group, (list, tuple)) or len(group) not in (2, 3):
        raise CoarseTileError(
            f"coarse_tile: {where} {group!r} is not (ops, K[, dims]) or (ops, levels)"
        )
    ops = list(group[0])
    if not ops:
        raise CoarseTileError(f"coarse_tile: {where} has no ops")
    spec = group[1]
    if _is_count(spec):
        dims = group[2] if len(group) == 3 else tiled_dims
        return ops, [_Explicit(_count(spec, where), _dims(dims, where))]
    if len(group) == 3 or not isinstance(spec, (list, tuple)) or not spec:
        raise CoarseTileError(f"coarse_tile: {where}: levels {spec!r} are not a non-empty list")
    levels: list[_Level] = []
    for li, entry in enumerate(spec):
        at = f"{where} level {li}"
        if isinstance(entry, (list, tuple)) and len(entry) == 2 and (
            entry[1] is None or isinstance(entry[1], (list, tuple))
        ):
            levels.append(_Explicit(_count(entry[0], at), _dims(entry[1], at)))
        elif isinstance(entry, (list, tuple)) and len(entry) in (2, 3) and _is_count(entry[1]):
            levels.append(GroupLevel(entry[0], _count(entry[1], at),
                                     bool(entry[2]) if len(entry) == 3 else False))
        else:
            raise CoarseTileError(
                f"coarse_tile: {at}: {entry!r} is neither (count, [dims]) nor "
                "(hint_id, count, is_reduction_level)"
            )
    return ops, levels


def _check_contiguous(
    index: int, ops: list[Any], position: dict[int, int], ops_list: list[Any]
) -> list[Any]:
    missing = [op for op in ops if id(op) not in position]
    if missing:
        raise CoarseTileError(
            f"coarse_tile: group {index} ops {[op_name(op) for op in missing]} are not in "
            "the operations"
        )
    ordered = sorted(ops, key=lambda op: position[id(op)])
    first, last = position[id(ordered[0])], position[id(ordered[-1])]
    if last - first + 1 != len(ops):
        members = {id(op) for op in ops}
        gap = [op_name(op) for op in ops_list[first:last + 1] if id(op) not in members]
        raise CoarseTileError(
            f"coarse_tile: group {index} ops {[op_name(op) for op in ordered]} are not a "
            f"contiguous slice of the operations ({gap} sit between them)"
        )
    return ordered


def _dim_hint(op: Any, hint_id: Any, where: str) -> Any:
    for hint in getattr(op, "dim_hints", None) or ():
        if hint.hint_id == hint_id:
            return hint
    raise CoarseTileError(
        f"coarse_tile: {where}: {op_description(op)} has no DimHint with hint id {hint_id!r}"
    )


def _reduction_error(
    op: Any, r: int, size: Any, count: int, where: str, names: Any = None
) -> CoarseTileError | None:
    """Why ``op`` cannot accumulate over a tiled reduction dim (None: it can)."""
    kind = str(op.data.reduction_type)
    if combines(kind):
        return None
    named = f" ({', '.join(names)})" if names else ""
    return CoarseTileError(
        f"coarse_tile: {where}: cannot tile reduction {op_description(op)} on its reduction "
        f"dim {r}{named} of size {size} by {count}: its partial results cannot be combined "
        f"across tiles (reduction {kind!r}; accumulation supports {', '.join(combining_kinds())})"
    )


def _level_dims(
    op: Any, level: _Level, n_out: int, red: list[int], where: str
) -> tuple[list[int], list[int]]:
    """``(positions in op.data.ranges, positions in reduction_ranges)`` tiled by ``level``."""
    if isinstance(level, GroupLevel):
        hint = _dim_hint(op, level.hint_id, where)
        if int(hint.split_count) != level.split:
            raise CoarseTileError(
                f"coarse_tile: {where}: count {level.split} disagrees with the DimHint of "
                f"{op_description(op)} for hint id {level.hint_id!r} (count {hint.split_count})"
            )
        if hint.host_dim is None:
            return [], []
        if hint.is_reduction and level.split == 1:
            return [], []  # one tile covers the whole reduction: nothing to accumulate
        if hint.is_reduction:
            if not 0 <= hint.host_dim < len(red):
                raise CoarseTileError(
                    f"coarse_tile: {where}: reduction dim {hint.host_dim} is out of range for "
                    f"{op_description(op)} with {len(red)} reduction dims"
                )
            error = _reduction_error(op, hint.host_dim, red[hint.host_dim], level.split, where,
                                     hint.dim_names)
            if error is not None:
                raise error
            return [], [hint.host_dim]
        dims: tuple[int, ...] = (hint.host_dim,)
    else:
        dims = level.dims
    if level.split == 1:  # one tile covers a reduction dim whole: nothing to accumulate
        dims = tuple(d for d in dims if not n_out <= d < n_out + len(red))
    for d in dims:
        if n_out <= d < n_out + len(red):
            error = _reduction_error(op, d - n_out, red[d - n_out], level.split, where)
            if error is not None:
                raise error
        elif not 0 <= d < n_out:
            raise CoarseTileError(
                f"coarse_tile: {where}: dim {d} is out of range for {op_description(op)} "
                f"with {n_out} output dims and {len(red)} reduction dims"
            )
    if len(set(dims)) != len(dims):
        raise CoarseTileError(f"coarse_tile: {where}: dims {list(dims)} repeat a dim")
    if len(dims) > 1 and level.split > 1:
        # Iteration i of a level takes tile i of every dim it tiles, so tiling two
        # dims of one op in one level would run only the diagonal tiles.
        raise CoarseTileError(
            f"coarse_tile: {where}: one loop level cannot tile several dims {list(dims)} of "
            f"{op_description(op)} by {level.split}: its {level.split} iterations would cover "
            f"only the diagonal tiles; give each dim its own level"
        )
    return [d for d in dims if d < n_out], [d - n_out for d in dims if d >= n_out]


def _static(values: Any, what: str, op: Any) -> list[int]:
    try:
        return [int(v) for v in values]
    except TypeError:
        raise CoarseTileError(
            f"coarse_tile: {op_description(op)} has symbolic {what} {list(values)}; "
            "only static shapes can be tiled"
        ) from None


def _check_region(op: Any, old: list[int], new: list[int], loop_names: frozenset[str]) -> None:
    """A concatenation's region op keeps its layout, a view of the whole result
    (docs/layout_model.md §5.10): each iteration writes its tile of the region
    straight into the result, like a tiled op writing its full buffer.  That is
    exact when every tiled dim is one the region spans whole: tile ``t`` of every
    region is then tile ``t`` of the result.  Along the concatenated dim the
    regions' tiles would not line up with the result's, which matters when the
    result or a reader of it shares the loop (``loop_names``: the group's ops and
    what they read; a user hint loop).  An automatic group never holds one (the
    concatenation closes the grouping's run): a region may then split the
    concatenated dim when that is not the stick dim, each tile whole rows of its
    window, or when it is, in tiles of whole sticks from a window that starts on a
    stick boundary (planner.rules ``concat_dims_whole``)."""
    view = op.layout.view
    base = V.graph.get_buffer(view.get_name())
    full = _static(base.get_size(), "concatenation size", op)
    alone = view.get_name() not in loop_names
    stick = within_stick_dim(base.get_layout()) if alone else None
    for d, (before, after) in enumerate(zip(old, new)):
        if alone and stick is not None and d != stick:
            continue
        if alone and d == stick and _whole_sticks_of(op, base.get_layout(), d, after):
            continue
        if before != after and (d >= len(full) or full[d] != before):
            raise CoarseTileError(
                f"coarse_tile: {op_description(op)} writes a region of the concatenation "
                f"{view.get_name()} (cat, pad) that covers {before} of its {full[d] if d < len(full) else '?'} "
                f"elements along dim {d}: dim {d} is the concatenated dim, and tiling it would "
                "split the regions unevenly; tile another dim, or keep the concatenation "
                "outside the tiled block"
            )


def _whole_sticks_of(op: Any, layout: Any, dim: int, tile: int) -> bool:
    """Whether a region's tiles of ``tile`` elements along the concatenation's stick dim
    ``dim`` are whole sticks of it: its window starts on a stick boundary and each tile
    (the last one may be shorter: it ends where the window does) is whole sticks."""
    if not isinstance(layout, FixedTiledLayout):
        return False
    start, elems = region_start(op, dim), layout.device_layout.elems_per_stick
    return start is not None and start % elems == 0 and tile % elems == 0


def _tile(op: Any, level: _Level, what: str, size: int, full: int, where: str, d: int) -> int:
    """The tile extent of ``size`` under ``level``: for a planner's level
    (``GroupLevel``) on a dim (output or reduction) no outer level tiles,
    ``tile_extent(size, count)`` (the tiles the planner measured: a shorter last one
    when they overshoot, also for a count that divides ``size`` into tiles that would
    cut sticks); else an exact division (an explicit level, an inner level on a dim)."""
    count = level.split
    tile = tile_extent(size, count)
    if isinstance(level, GroupLevel) and size == full and tile is not None:
        return tile
    if size % count == 0:
        return size // count
    extra = "" if size == full else f" per tile of the outer levels (full size {full})"
    raise CoarseTileError(
        f"coarse_tile: {where}: count {count} does not divide {what} {d} "
        f"(size {size}{extra}) of {op_description(op)}"
    )


def _loop_names(ops: Sequence[Any]) -> frozenset[str]:
    """The buffers a loop's ops write or read (a concatenation in it is shared)."""
    names = {op.get_name() for op in ops}
    for op in ops:
        names.update(getattr(op, "get_read_names", lambda: ())())
    return frozenset(names)


def _check_in_place(op: Any, old: list[int], new: list[int]) -> None:
    """An in-place write (facts/in_place.py) keeps its MutationLayout: each iteration
    writes its tile straight into the target's own buffer, never a per-tile copy.
    Exact along a dim the op covers whole and addresses by its loop symbol alone;
    along the indexed dim (the token's row) a tile is no slab of the target."""
    if in_place_target(op) is None:
        raise CoarseTileError(
            f"coarse_tile: {op_description(op)} writes in place into a buffer with no "
            "FixedTiledLayout; it cannot be tiled")
    facts = op_facts(op)
    for d, (before, after) in enumerate(zip(old, new)):
        if before != after and not spans_in_place_target_whole(op, d, facts.write,
                                                                 facts.position_vars):
            raise CoarseTileError(
                f"coarse_tile: {op_description(op)} writes in place along dim {d} through an "
                "index or over part of its target; tiling it there would not write slabs "
                "of the target; tile another dim")


def _plan_layout(op: Any, old: list[int], new: list[int],
                 loop_names: frozenset[str]) -> tuple[list[int], list[int], Any]:
    layout = op.layout
    if isinstance(layout, ir.NonOwningLayout):
        _check_region(op, old, new, loop_names)
        return KEEP_LAYOUT
    if isinstance(layout, ir.MutationLayoutSHOULDREMOVE):
        _check_in_place(op, old, new)
        return KEEP_LAYOUT
    if not isinstance(layout, ir.FixedLayout):
        raise CoarseTileError(
            f"coarse_tile: {op_description(op)} has a {type(layout).__name__}, not a fixed "
            "layout; only ops with a FixedLayout/FixedTiledLayout can be tiled"
        )
    size = _static(layout.size, "layout size", op)
    if size != old:
        raise CoarseTileError(
            f"coarse_tile: {op_description(op)} has layout size {size} but ranges {old}; "
            "cannot derive its per-tile layout"
        )
    stride = _static(layout.stride, "layout stride", op)
    order = memory_order(size, stride)
    if order is None:
        raise CoarseTileError(
            f"coarse_tile: {op_description(op)} has host strides {stride} for size {size}, "
            "which are not a dense permutation; cannot derive its per-tile layout"
        )
    # The per-tile buffer keeps the full buffer's memory order (memory_order.py), as
    # the planner's per-tile view assumed.
    new_stride = list(ordered_dense_strides(new, order))
    if not isinstance(layout, FixedTiledLayout):
        return new, new_stride, None
    try:
        device = resize_in_memory_order(layout.device_layout, size, stride, new, order)
    except LayoutError as exc:
        raise CoarseTileError(
            f"coarse_tile: per-tile device layout of {op_description(op)} "
            f"({old} -> {new}) cannot be rebuilt: {exc}"
        ) from None
    return new, new_stride, device


def _plan_op(op: Any, index: int, levels: list[_Level], loop_names: frozenset[str]) -> _OpPlan:
    if isinstance(op, ir.ConcatKernel):
        # computes nothing: a member so that the loop stays contiguous, tiling none
        # of its dims (its regions write their tiles into it; see _check_region)
        return _OpPlan(op=op, group_id=(index,) + (0,) * (len(levels) - 1),
                       counts=[sympy.Integer(level.split) for level in levels],
                       tiled=[[] for _ in levels], tiled_reduction=[[] for _ in levels],
                       last_tiles=[[] for _ in levels], last_reduction_tiles=[[] for _ in levels],
                       shorter=[], ranges=[], reduction_ranges=[],
                       layout=None)
    data = getattr(op, "data", None)
    if not isinstance(op, ir.ComputedBuffer) or not isinstance(data, (ir.Pointwise, ir.Reduction)):
        raise CoarseTileError(
            f"coarse_tile: group {index}: {op_description(op)} is not a Pointwise or "
            "Reduction ComputedBuffer"
        )
    if loop_group_id(op) is not None:
        raise CoarseTileError(
            f"coarse_tile: group {index}: {op_description(op)} is already tiled "
            f"(loop_group_id {loop_group_id(op)})"
        )
    ranges = _static(op.data.ranges, "ranges", op)
    red = (
        _static(op.data.reduction_ranges, "reduction ranges", op)
        if isinstance(op.data, ir.Reduction) else []
    )
    old = list(ranges)
    old_red = list(red)
    tiled: list[list[int]] = []
    tiled_red: list[list[int]] = []
    last_tiles: list[list[int]] = []
    last_red_tiles: list[list[int]] = []
    shorter: list[int] = []  # dims with a remainder tile
    shorter_red: list[int] = []  # reduction dims with a remainder tile
    for li, level in enumerate(levels):
        where = f"group {index} level {li}"
        dims, red_dims = _level_dims(op, level, len(ranges), red, where)
        if dims and any(tiled_red):
            # The accumulator holds one output tile; an output level inside a
            # reduction level would need every output tile's partial result at once.
            raise CoarseTileError(
                f"coarse_tile: {where}: {op_description(op)} tiles its output dim {dims[0]} "
                f"inside a loop over its reduction dim {next(r for t in tiled_red for r in t)}; "
                "put the reduction level innermost (an outer output level, then the reduction)"
            )
        earlier = {r for t in tiled_red for r in t}
        if red_dims and earlier - set(red_dims) and "index" in FIELDS.get(
                str(op.data.reduction_type), ()):
            # The accumulator turns a tile's local index into the whole range's from
            # the points combined so far: tiles must walk one reduction dim in order.
            raise CoarseTileError(
                f"coarse_tile: {where}: {op_description(op)} ({op.data.reduction_type}) tiles "
                f"its reduction dim {red_dims[0]} inside a loop over its reduction dim "
                f"{min(earlier)}; an index reduction accumulates over one tiled reduction dim"
            )
        lasts: dict[str, list[int]] = {"dim": [], "reduction dim": []}
        for sizes, full, positions, what, gone in (
            (ranges, old, dims, "dim", shorter), (red, old_red, red_dims, "reduction dim", shorter_red),
        ):
            for d in positions:
                tile = _tile(op, level, what, sizes[d], full[d], where, d)
                lasts[what].append(sizes[d] - (level.split - 1) * tile)
                if lasts[what][-1] != tile:
                    gone.append(d)
                sizes[d] = tile
        tiled.append(dims)
        tiled_red.append(red_dims)
        last_tiles.append(lasts["dim"])
        last_red_tiles.append(lasts["reduction dim"])
    if shorter_red and str(op.data.reduction_type) in FIELDS:
        # a multi-field combine counts whole tiles (argmax's index offset, welford's weight)
        raise CoarseTileError(
            f"coarse_tile: group {index}: {op_description(op)} ({op.data.reduction_type}) "
            f"tiles reduction dim {shorter_red[0]} with a shorter last tile; its accumulator "
            "combines whole tiles only")
    for d, levels_of, size in ([(d, tiled, old[d]) for d in shorter]
                               + [(d, tiled_red, old_red[d]) for d in shorter_red]):
        if sum(d in dims for dims in levels_of) > 1:
            # the peeled last iteration clips one level; a dim two levels walk
            # would leave a different last tile per outer iteration
            raise CoarseTileError(
                f"coarse_tile: group {index}: {op_description(op)} tiles dim {d} (size {size}) "
                "at several levels with a shorter last tile; a dim with a remainder tile is "
                "tiled by one level")
    layout = _plan_layout(op, old, ranges, loop_names) if ranges != old else None
    return _OpPlan(
        op=op,
        group_id=(index,) + (0,) * (len(levels) - 1),
        counts=[sympy.Integer(level.split) for level in levels],
        tiled=tiled,
        tiled_reduction=tiled_red,
        last_tiles=last_tiles,
        last_reduction_tiles=last_red_tiles,
        shorter=shorter + [len(ranges) + d for d in shorter_red],
        ranges=ranges,
        reduction_ranges=red,
        layout=layout,
    )


def _apply(plan: _OpPlan) -> None:
    op = plan.op
    if plan.layout is KEEP_LAYOUT:
        set_frozen(op.data, "ranges", [sympy.Integer(r) for r in plan.ranges])
    elif plan.layout is not None:
        set_frozen(op.data, "ranges", [sympy.Integer(r) for r in plan.ranges])
        size, stride, device = plan.layout
        layout = op.layout
        layout.size = [sympy.Integer(s) for s in size]
        layout.stride = [sympy.Integer(s) for s in stride]
        if device is not None:
            layout.device_layout = device
    if any(plan.tiled_reduction):
        set_frozen(op.data, "reduction_ranges",
                   [sympy.Integer(r) for r in plan.reduction_ranges])
    if not isinstance(op, ir.ConcatKernel):
        drop_caches(op, op.data)
    remainder = bool(plan.shorter)
    set_loop_stamp(op, LoopStamp(group_id=plan.group_id, counts=plan.counts,
                                 tiled_dims=plan.tiled,
                                 tiled_reduction_dims=plan.tiled_reduction,
                                 last_tiles=plan.last_tiles if remainder else (),
                                 last_reduction_tiles=plan.last_reduction_tiles if remainder else ()))


def coarse_tile(
    operations: Any,
    groups: Sequence[Any],
    *,
    tiled_dims: Sequence[int] | None = None,
) -> None:
    """Tile each group's ops in a counted loop (in place; see the module docstring).

    ``operations`` is the op list (``graph.operations``; a graph is accepted too).
    ``tiled_dims`` is the default dim list of the flat ``(ops, K)`` form (dim 0).
    """
    ops_list = list(getattr(operations, "operations", operations))
    position = {id(op): i for i, op in enumerate(ops_list)}
    owner: dict[int, int] = {}
    plans: list[_OpPlan] = []
    for index, group in enumerate(groups):
        ops, levels = normalize_group(index, group, tiled_dims)
        members = _check_contiguous(index, ops, position, ops_list)
        loop_names = _loop_names(members)
        for op in members:
            if id(op) in owner:
                raise CoarseTileError(
                    f"coarse_tile: {op_description(op)} is in group {owner[id(op)]} and "
                    f"group {index}"
                )
            owner[id(op)] = index
            plans.append(_plan_op(op, index, levels, loop_names))
    for plan in plans:
        _apply(plan)
