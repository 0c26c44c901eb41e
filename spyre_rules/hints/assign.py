"""The hint pass: ``op.dim_hints`` from hint annotations, and hint-derived groups.

``assign_dim_hints(graph)`` is a pre-scheduling pass (``fn(graph)``, after layouts,
before the automatic planner and coarse tiling).  Per op, outermost level first,
it resolves each hint level ``(dim name, count)`` against the op's named dims:

* an output dim with that name -> ``DimHint(is_reduction=False, host_dim=d)``;
* a reduction dim with that name -> ``DimHint(is_reduction=True, host_dim=r)``
  where ``r`` indexes ``op.data.reduction_ranges``: a reduction level, whose
  partial results are accumulated across tiles (``passes/accumulators.py``);
* no dim with that name -> a loop-invariant level (``loop_var=None,
  host_dim=None``): the level does not tile the op, and
  ``hints_to_coarse_tile_groups`` keeps the op out of that level's loop (the
  reference keeps it inside and reads its whole buffer as the tile).

Errors (``HintError``, naming the dim, the count and the op): an undeclared dim
name; a count that does not divide the dim (nested levels on one dim divide the
per-tile size); a name on two dims of one op; a hint whose dim is on none of its
ops (it would tile nothing).

Hint ids are renumbered densely per graph in order of first appearance, so the
groups of ``hints_to_coarse_tile_groups`` are deterministic.  User hints start at
0; the automatic planner allocates from 10000.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.virtualized import V

from spyre_rules.engine.records import GroupLevel, TileGroup
from spyre_rules.errors import CoordinateError
from spyre_rules.facts.coordinates import host_coordinates
from spyre_rules.facts.op_cache import op_facts
from spyre_rules.hints.api import declared_tensor_dims
from spyre_rules.hints.errors import HintError
from spyre_rules.ir.dim_hint import DimHint
from spyre_rules.ir.graph_state import graph_state
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.hints.named_dims import (
    HintAnnotations,
    OpDims,
    input_dim_names,
    origin_annotations,
    propagate_named_dims,
    where_name_was_lost,
)

__all__ = ["DimHint", "assign_dim_hints", "hints_to_coarse_tile_groups", "hintable_ops"]

_DONE_ATTR = "_spyre_rules_dim_hints_done"


def hintable_ops(operations: Sequence[Any]) -> list[Any]:
    """The ops hints apply to: ComputedBuffers computing a Pointwise or Reduction."""
    return [
        op for op in operations
        if isinstance(op, ir.ComputedBuffer) and isinstance(op.data, (ir.Pointwise, ir.Reduction))
    ]


def _hint_text(name: str, count: int) -> str:
    return f"spyre_hint(slices={{{name!r}: {count}}})"


def _resolve(
    op: Any,
    dims: OpDims,
    levels: tuple[tuple[int, str, int], ...],
    dense: dict[int, int],
    declared: dict[str, int],
) -> list[DimHint]:
    out_sizes = [int(s) for s in op.data.ranges]
    red_sizes = (
        [int(s) for s in op.data.reduction_ranges] if isinstance(op.data, ir.Reduction) else []
    )
    remaining = {("out", d): s for d, s in enumerate(out_sizes)}
    remaining.update({("red", r): s for r, s in enumerate(red_sizes)})
    hints: list[DimHint] = []
    for raw_id, name, count in levels:
        hint_id = dense[raw_id]
        if name not in declared:
            raise HintError(
                f"{_hint_text(name, count)} names unknown dim {name!r} (count {count}) on "
                f"{op_description(op)}; declared dims: {', '.join(sorted(declared)) or 'none'}"
            )
        places = [("out", d) for d, n in enumerate(dims.out_names) if n == name]
        places += [("red", r) for r, n in enumerate(dims.red_names) if n == name]
        if len(places) > 1:
            raise HintError(
                f"{_hint_text(name, count)}: dim {name!r} names several dims of "
                f"{op_description(op)} ({places}); cannot tell which one to split by {count}"
            )
        if not places:
            hints.append(DimHint([name], count, None, False, hint_id, None))
            continue
        kind, index = places[0]
        size = remaining[places[0]]
        if size % count:
            which = "reduction dim" if kind == "red" else "dim"
            full = out_sizes[index] if kind == "out" else red_sizes[index]
            tile = "" if size == full else f", {size} per tile of the outer hints"
            raise HintError(
                f"{_hint_text(name, count)}: count {count} does not divide dim {name!r} "
                f"({which} {index} of size {full}{tile}) of {op_description(op)}"
            )
        remaining[places[0]] = size // count
        if kind == "out":
            var = dims.out_vars[index]
        else:
            var = dims.red_vars[index]
        hints.append(DimHint([name], count, var, kind == "red", hint_id, index))
    return hints


def assign_dim_hints(graph: Any) -> None:
    """Pre-scheduling pass: name dims, then stamp ``op.dim_hints`` on hinted ops.

    Ops outside every hint get no ``dim_hints`` attribute (the automatic planner
    plans only those).  Idempotent per graph; a no-op without hints or named inputs.
    """
    if getattr(graph, _DONE_ATTR, False):
        return
    ops = hintable_ops(graph.operations)
    annotations: dict[str, HintAnnotations] = {op.get_name(): origin_annotations(op) for op in ops}
    inputs = input_dim_names(graph)
    named_in_graph = graph_state(graph).named_buffers
    if inputs or named_in_graph or \
            any(a.levels or a.named_dims is not None for a in annotations.values()):
        with V.set_graph_handler(graph):
            dims = propagate_named_dims(graph, ops, annotations, inputs, named_in_graph)
        try:
            _stamp(ops, annotations, dims)
        except _Unmatched as err:
            with V.set_graph_handler(graph):
                lost = where_name_was_lost(graph, ops, err.name, inputs, dims)
            raise HintError(err.message + (f"; {lost}" if lost else "")) from None
        with V.set_graph_handler(graph):
            _check_tiles_translate(ops)
    setattr(graph, _DONE_ATTR, True)


class _Unmatched(Exception):
    """A hint level that names no dim of its ops (re-raised as a HintError that says
    where the name was lost, when an op dropped it)."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(message)
        self.name, self.message = name, message


def _loops(levels: tuple[tuple[int, str, int], ...]) -> tuple[tuple[int, str, int], ...]:
    """The levels that loop: a split of 1 is no loop (``slices={"B": 1}`` on a size-1 dim
    Inductor squeezed away names nothing and needs nothing)."""
    return tuple(lv for lv in levels if lv[2] != 1)


def _stamp(
    ops: list[Any], annotations: dict[str, HintAnnotations], dims: dict[str, OpDims]
) -> None:
    dense: dict[int, int] = {}
    for op in ops:
        for raw_id, _, _ in _loops(annotations[op.get_name()].levels):
            dense.setdefault(raw_id, len(dense))
    declared = declared_tensor_dims()
    resolved: dict[int, bool] = {}
    members: dict[int, list[str]] = {}
    levels_of: dict[int, tuple[str, int]] = {}
    for op in ops:
        levels = _loops(annotations[op.get_name()].levels)
        if not levels:
            continue
        hints = _resolve(op, dims[op.get_name()], levels, dense, declared)
        op.dim_hints = hints
        for hint, (_, name, count) in zip(hints, levels):
            resolved[hint.hint_id] = resolved.get(hint.hint_id, False) or hint.loop_var is not None
            members.setdefault(hint.hint_id, []).append(op.get_name())
            levels_of[hint.hint_id] = (name, count)
    for hint_id, ok in resolved.items():
        if not ok:
            name, count = levels_of[hint_id]
            raise _Unmatched(name,
                f"{_hint_text(name, count)} matches no dim named {name!r} on its ops "
                f"{members[hint_id]}; name the input dims with name_tensor_dims or "
                "spyre_hint(named_dims=...)"
            )


def _check_tiles_translate(ops: list[Any]) -> None:
    """Refuse a hint whose tiles the loop cannot address, before anything is lowered.

    Every tile of a counted loop must be a rigid translation of the first
    (``facts.translation``, the condition codegen proves on the emitted program).
    Checked here for what always moves with the loop: the reads of buffers no
    hinted op produces (graph inputs, untiled producers), and values computed from
    a tiled index.  Reads of hinted producers may be per-tile buffers of the same
    loop, and reduction levels are coarse tiling's; codegen still proves those.
    """
    hinted = {op.get_name() for op in ops if getattr(op, "dim_hints", None)}
    for op in ops:
        hints = getattr(op, "dim_hints", None) or []
        if not hints or any(h.is_reduction for h in hints):
            continue
        if isinstance(op.layout, ir.NonOwningLayout):
            continue  # a concatenation's region: coarse_tile refuses it by name
        levels = [{h.host_dim: int(h.split_count)} if h.loop_var is not None else {}
                  for h in hints]
        if not any(levels):
            continue
        facts = op_facts(op)
        outside = {r.buffer for r in facts.input_reads()} - hinted
        found = facts.untranslated(levels, write=False, reads=outside)
        if found is None:
            continue
        text = ", ".join(_hint_text(h.dim_names[0], int(h.split_count))
                         for h in hints if h.loop_var is not None)
        if found == "index":
            why = ("it computes a value from its index along a tiled dim (an iota or a mask), "
                   "which every tile would restart at 0; leave that dim untiled")
        else:
            why = (f"its tiles of {found} are not rigid translations of the first tile (a "
                   "split through part of a stick, or a read that wraps), so no constant "
                   "per-iteration stride addresses them; choose a split whose tiles the "
                   "layout can express")
        raise HintError(f"{op_description(op)}: {text} cannot be tiled: {why}")


def _reads_across_tiles(op: Any, run: Sequence[Any]) -> bool:
    """Whether ``op`` reads a tiled dim of a member of ``run`` not with its own tile.

    Attention scores tiled on the query sequence read every key: the key
    projection's tile ``t`` alone is not what tile ``t`` of the scores needs, so
    the scores start a loop of their own after the projection's loop, which
    writes the projection's full buffer (loop fission).  Only reads whose
    coordinate on the member's tiled dim ignores ``op``'s loop variable of that
    level count; a read that moves with the loop is left to ``passes/tile_reads``,
    which proves it stays inside the tile or refuses it.
    """
    tiled: dict[str, list[DimHint]] = {}
    concatenations: set[str] = set()
    for member in run:
        written = member.get_name()
        layout = getattr(member, "layout", None)
        if isinstance(layout, ir.NonOwningLayout):
            # a concatenation's buffer is tiled as its regions are
            written = layout.view.get_name()
            concatenations.add(written)
        tiled.setdefault(written, []).extend(getattr(member, "dim_hints", ()))
    if not tiled:
        return False
    # a reduction level moves with the loop too (a k-tiled matmul reads the tile of
    # its restickified weight that the same iteration wrote)
    own = {h.hint_id: h.loop_var for h in op.dim_hints if h.host_dim is not None}
    facts = op_facts(op)
    for dep in facts.memory_reads:
        hints = tiled.get(dep.name)
        layout = facts.buffer_layout(dep.name) if hints else None
        if layout is None:
            continue
        try:
            coords = host_coordinates(layout.size, layout.stride, dep.index, dep.ranges)
        except (CoordinateError, AttributeError, TypeError):
            continue
        for hint in hints:
            if hint.host_dim is None or hint.is_reduction or hint.host_dim >= len(coords):
                continue
            var = own.get(hint.hint_id)
            if var is None or var not in coords[hint.host_dim].free_symbols:
                return True
            if dep.name in concatenations and (
                    coords[hint.host_dim] != var
                    or int(dep.ranges[var]) != int(layout.size[hint.host_dim])):
                # a concatenation is not a per-tile buffer, so no later proof checks
                # the read stays in its tile: only a read of exactly the tile's own
                # rows shares the loop
                return True
    return False


def _regions_in(concat: Any, run: Sequence[Any]) -> bool:
    """Whether every region op of ``concat`` is in ``run``."""
    name = concat.get_name()
    inputs = [getattr(x, "get_name", lambda: None)() for x in getattr(concat, "inputs", ())]
    members = {m.get_name() for m in run}
    return bool(inputs) and all(n in members for n in inputs) and any(
        isinstance(getattr(m, "layout", None), ir.NonOwningLayout)
        and m.layout.view.get_name() == name for m in run)


def hints_to_coarse_tile_groups(operations: Sequence[Any]) -> list[TileGroup]:
    """Groups for ``coarse_tile`` from ``op.dim_hints``: ``[TileGroup(ops, [GroupLevel(hint_id,
    count, is_red)])]`` (``engine/records.py``: the one representation of a group).

    An op's levels are the hint levels that tile one of its dims (outermost
    first); a level whose dim the op does not have leaves it out.  A group is a
    maximal contiguous run of ops with the same levels (hint ids and counts).
    ``is_reduction_level`` is True when the level is a reduction dim of any op of
    the group (coarse_tile then refuses that op).  An op with other levels (in the
    outer hint only, or without the dim of a level) starts its own group, i.e. its
    own top-level loop, and an op no level tiles runs once, outside every loop:
    its result is the same in every iteration, and inside a loop its whole buffer
    would be read as if it were the tile.  An op with a reduction level ends its
    group: its value is final only after the loop, so the ops after it (readers
    included) start a new loop.  An op that reads a tiled dim of a member across
    tiles (``_reads_across_tiles``: attention scores reading every key) starts a
    new loop too.  A concatenation whose regions are all in the run joins it.
    The loops are independent, so this loop fission keeps the semantics.  Call this before the automatic groups'
    synthetic ``dim_hints`` are stamped (``hints/automatic.py``).
    """
    groups: list[TileGroup] = []
    run: list[Any] = []
    run_key: tuple[Any, ...] | None = None

    def flush() -> None:
        if run and run_key:
            levels = [
                GroupLevel(hint_id, count, any(
                    h.is_reduction for op in run for h in getattr(op, "dim_hints", ())
                    if h.hint_id == hint_id
                ))
                for hint_id, count in run_key
            ]
            groups.append(TileGroup(list(run), levels))

    for op in operations:
        if isinstance(op, ir.ConcatKernel) and run and _regions_in(op, run):
            # computes nothing; inside the loop so that the loop stays contiguous
            # (its regions write their tiles straight into its buffer)
            run.append(op)
            continue
        hints = getattr(op, "dim_hints", None) or []
        key = tuple((h.hint_id, h.split_count) for h in hints if h.host_dim is not None) or None
        if key != run_key or key is None or _reads_across_tiles(op, run):
            flush()
            run, run_key = [], key
        if key is not None:
            run.append(op)
        if any(h.is_reduction and h.host_dim is not None and int(h.split_count) > 1
               for h in hints):
            # A reduction level's value is final only after its loop: the ops after
            # it (its readers among them) run in a loop of their own.
            flush()
            run, run_key = [], None
    flush()
    return groups
