"""Build the OpSpec of one scheduler node.

The node's IR op is traced once through its loop body (one loop per non-unit
dim, in the op's own dim order -- Inductor's loop reordering and merging are
deliberately not used, so iteration symbols correspond to host dims: output
dims first, then reduction dims, named ``c0, c1, ...``).  A dim a loop level
tiles keeps its symbol even when its per-tile extent is 1: Inductor's default
body squeezes unit dims to the constant 0, which would leave the loop nothing
to move (every iteration would recompute tile 0).  The recorder turns the body
into the SSA program; each access becomes a TensorArg with device coordinates
from the buffer's stick layout (docs/layout_model.md §1.4).

A tiled op describes one tile, but its indices and the coordinates of every
tensor that moves with the loop are read at ``sym + i*step`` for every tile, so
they are simplified and derived over each tiled symbol's loop-wide extent (its
per-tile range times the counts of the levels tiling it), never over the
per-tile range alone; per-tile buffers, which never move, keep the per-tile one.
"""

from __future__ import annotations

import math
from typing import Any
from unittest.mock import patch

import sympy
from torch._inductor import dependencies, ir
from torch._inductor.loop_body import LoopBody
from torch._inductor.sizevars import SimplifyIndexing
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from spyre_rules.codegen.access import access_coordinates
from spyre_rules.codegen.recorder import ProgramRecorder
from spyre_rules.codegen.rigid_tiles import check_rigid_tiles
from spyre_rules.errors import CoordinateError
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.graph_state import RulesGraphState
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.loop_stamp import (
    loop_count,
    loop_reduction_remainders,
    loop_remainders,
    loop_tiled_dims,
    loop_tiled_reduction_dims,
)
from spyre_rules.ir.op_identity import is_allocation, stamped_kind
from spyre_rules.program.op_spec import IndirectIndex, OpSpec, TensorArg

__all__ = ["build_op_spec", "check_recordable", "output_positions", "spec_op_name", "tail_ranges"]


def spec_op_name(op: ir.ComputedBuffer) -> str:
    """The OpSpec ``op``: the reduction type, a restickify, or the aten op name."""
    kind = stamped_kind(op)
    if kind is not None:
        return kind
    if isinstance(op.data, ir.Reduction):
        return str(op.data.reduction_type)
    node = getattr(op.data, "origin_node", None)
    origins = [node] if node is not None else sorted(op.get_origins(), key=lambda n: n.name)
    for origin in origins:
        target = getattr(origin, "target", None)
        name = getattr(target, "__name__", None) or str(target)
        if name:
            return name.split(".")[0]
    return "pointwise"


def _coordinates(layout: Any, index: sympy.Expr, ranges: dict[Any, Any], what: str) -> list:
    try:
        return access_coordinates(
            layout.device_layout, layout.size, layout.stride, layout.offset, index, ranges
        )
    except CoordinateError as exc:
        raise UnsupportedGraph(f"{what}: {exc}") from None


def check_recordable(op: ir.ComputedBuffer) -> None:
    """Trace ``op``'s untiled loop body once, as ``build_op_spec`` will: raises the
    recorder's UnsupportedGraph (indirect indexing, scans, unknown ops, ...) before
    any code is generated, so the backend can place the op on the host."""
    if is_allocation(op):
        return  # no loop body: the Scheduler gives it no kernel, codegen none
    what = op_description(op)
    (sizes, rsizes), body, _ = op.get_default_sizes_body()
    n_out = len(sizes)
    symbols = [sympy_index_symbol(f"c{i}") for i in range(n_out + len(rsizes))]
    ranges = dict(zip(symbols, [*sizes, *rsizes]))
    recorder = ProgramRecorder(what, symbols)
    with V.set_ops_handler(SimplifyIndexing(recorder, ranges)):
        body(symbols[:n_out], symbols[n_out:])
    if recorder.store_entry is None:
        raise UnsupportedGraph(f"{what}: its loop body stores nothing")


def build_op_spec(snode: Any, kernel: Any, state: RulesGraphState) -> OpSpec:
    """Trace ``snode``'s op; register its buffers as ``kernel.args``."""
    op = snode.node
    what = op_description(op)
    (sizes, rsizes), body = _sizes_body(op)
    n_out = len(sizes)
    symbols = [sympy_index_symbol(f"c{i}") for i in range(n_out + len(rsizes))]
    ranges = dict(zip(symbols, [*sizes, *rsizes]))
    tiled, steps = _tiling(op, symbols[:n_out], symbols[n_out:])
    # Indices and the coordinates of a moving tensor must hold on every tile the
    # loop visits (sym + i*step), so they are derived over the loop-wide extents.
    kept = dict(zip(_kept_dims(op), symbols))
    kept_red = dict(zip(_kept_reduction_dims(op), symbols[n_out:]))
    loop_ranges = {
        **ranges,
        **{kept[d]: sympy.Integer(e) for d, e in _loop_extents(op).items()},
        **{kept_red[r]: sympy.Integer(e) for r, e in _loop_reduction_extents(op).items()},
    }
    recorder = ProgramRecorder(what, symbols)
    with V.set_ops_handler(SimplifyIndexing(recorder, loop_ranges)):
        body(symbols[:n_out], symbols[n_out:])
    if recorder.store_entry is None:
        raise UnsupportedGraph(f"{what}: its loop body stores nothing")

    args = []
    for access in recorder.accesses:
        layout = state.layouts.get(access.buffer)
        if layout is None:
            raise UnsupportedGraph(f"{what}: buffer {access.buffer} has no Spyre layout")
        # A region of a concatenation is an access of the concatenation buffer; an
        # in-place write one of the buffer it writes (backend/in_place.py).
        buffer = state.regions.get(access.buffer) or state.in_place.get(access.buffer,
                                                                        access.buffer)
        if access.is_input:
            kernel.args.input(buffer)
        else:
            kernel.args.output(buffer)
        dl = layout.device_layout
        fixed = bool(getattr(layout, "per_tile_fixed", False))
        moves = not fixed and "lx" not in layout.allocation
        indirect = [
            IndirectIndex(sym, size, recorder.index_source(sym))
            for sym, (_, size) in recorder.indirect.items()
            if sym in access.index.free_symbols
        ]
        extra = {ind.symbol: sympy.Integer(ind.size) for ind in indirect}
        args.append(TensorArg(
            is_input=access.is_input,
            arg_index=-1,  # set once the kernel's argument list is complete
            device_dtype=dl.device_dtype,
            device_size=list(dl.device_size),
            device_coordinates=_coordinates(
                layout, access.index + state.region_offsets.get(access.buffer, 0),
                {**(loop_ranges if moves else ranges), **extra}, what
            ),
            allocation=dict(layout.allocation),
            per_tile_fixed=fixed,
            name=buffer,
            indirect=indirect,
        ))
    spec = OpSpec(
        op=spec_op_name(op),
        is_reduction=isinstance(op.data, ir.Reduction),
        iteration_space={s: (sympy.Integer(int(r)), 1) for s, r in ranges.items()},
        args=args,
        op_info={
            "program": recorder.program,
            "store": recorder.store_entry,
            "reduction_symbols": symbols[n_out:],
        },
        tiled_symbols=tiled,
        tiled_steps=steps,
    )
    base = state.regions.get(op.get_name())
    if base is not None:
        # The store names the concatenation buffer; messages name the op itself.
        spec.op_info["region"] = {"op": op.get_name(), "of": base}
    target = state.in_place.get(op.get_name())
    if target is not None:
        spec.op_info["in_place"] = {"op": op.get_name(), "of": target}
        if target in state.host_input_set():
            spec.op_info["in_place"]["write_through"] = True
    if tiled:
        host_dims = dict(zip(symbols, _kept_dims(op)))
        check_rigid_tiles(spec, [int(c) for c in loop_count(op)], what, host_dims)
    return spec


def output_positions(op: ir.ComputedBuffer) -> list[int | None]:
    """Per output host dim of ``op``, the position of its iteration symbol in the
    OpSpec's iteration space (None: a unit dim without a symbol)."""
    kept = _kept_dims(op)
    return [kept.index(d) if d in kept else None for d in range(len(op.get_pointwise_size()))]


def _tiled_dims(op: ir.ComputedBuffer) -> set[int]:
    return {d for dims in loop_tiled_dims(op) for d in dims}


def _tiled_reduction_dims(op: ir.ComputedBuffer) -> set[int]:
    return {r for dims in loop_tiled_reduction_dims(op) for r in dims}


def _kept_dims(op: ir.ComputedBuffer) -> list[int]:
    """Output dims that get an iteration symbol: non-unit or tiled (module doc)."""
    tiled = _tiled_dims(op)
    return [d for d, r in enumerate(op.get_pointwise_size()) if r != 1 or d in tiled]


def _kept_reduction_dims(op: ir.ComputedBuffer) -> list[int]:
    """Reduction dims that get an iteration symbol: non-unit or tiled."""
    tiled = _tiled_reduction_dims(op)
    return [r for r, s in enumerate(op.get_reduction_size()) if s != 1 or r in tiled]


def _extents(sizes: list[int], levels: list[list[int]], counts: list[int]) -> dict[int, int]:
    return {
        d: sizes[d] * math.prod(c for c, dims in zip(counts, levels) if d in dims)
        for d in {d for dims in levels for d in dims}
    }


def _loop_extents(op: ir.ComputedBuffer) -> dict[int, int]:
    """Loop-wide extent of each tiled output dim: its per-tile extent times the
    counts of every level tiling it (the range its index takes over all tiles), less
    what a shorter last tile leaves out (a remainder tile: the dim's real extent)."""
    return _extents_less_remainders([int(r) for r in op.get_pointwise_size()],
                                    loop_tiled_dims(op), op, loop_remainders(op))


def tail_ranges(op: ir.ComputedBuffer) -> list[dict[Any, int]]:
    """Per loop level (outermost first), ``{iteration symbol: last tile extent}`` of
    the op's dims the level tiles with a shorter last tile (the symbols are the
    OpSpec's ``c0, c1, ...``); codegen runs that level's last iteration with them."""
    kept, kept_red = _kept_dims(op), _kept_reduction_dims(op)
    reductions = loop_reduction_remainders(op) or [{} for _ in loop_remainders(op)]
    return [{**{sympy_index_symbol(f"c{kept.index(d)}"): last for d, last in level.items()},
             **{sympy_index_symbol(f"c{len(kept) + kept_red.index(r)}"): last
                for r, last in red.items()}}
            for level, red in zip(loop_remainders(op), reductions)]


def _loop_reduction_extents(op: ir.ComputedBuffer) -> dict[int, int]:
    """The same for each tiled reduction dim (a reduction level walks the whole range,
    less what a shorter last tile leaves out)."""
    return _extents_less_remainders([int(r) for r in op.get_reduction_size()],
                                    loop_tiled_reduction_dims(op), op,
                                    loop_reduction_remainders(op))


def _extents_less_remainders(sizes: list[int], tiled: Any, op: ir.ComputedBuffer,
                             remainders: list[dict[int, int]]) -> dict[int, int]:
    extents = _extents(sizes, tiled, [int(c) for c in loop_count(op)])
    for level in remainders:
        for d, last in level.items():
            extents[d] -= sizes[d] - last
    return extents


def _sizes_body(op: ir.ComputedBuffer) -> tuple[tuple[list[Any], list[Any]], LoopBody]:
    """Per-tile sizes and the loop body, as ``op.get_default_sizes_body()`` except for
    a tiled op: the body simplifies its indices over each tiled var's loop-wide
    extent (they must hold on every tile, sym + i*step, not only on the first),
    and a tiled unit dim keeps its var (Inductor's squeeze would make it 0)."""
    extents = _loop_extents(op)
    red_extents = _loop_reduction_extents(op)
    if not extents and not red_extents:
        (out, red), body, _ = op.get_default_sizes_body()
        return (out, red), body
    sizes = list(op.get_pointwise_size())
    rsizes = list(op.get_reduction_size())
    kept = set(_kept_dims(op))
    kept_red = set(_kept_reduction_dims(op))
    var_ranges, add_var = dependencies.var_builder("q")
    index = [
        add_var(sympy.Integer(extents[d]) if d in extents else s) if d in kept else sympy.S.Zero
        for d, s in enumerate(sizes)
    ]
    # A unit reduction dim no level tiles gets index 0, not no index: the
    # reduction's loader takes one index per reduced dim (Inductor's squeeze too).
    reduction_index = [
        add_var(sympy.Integer(red_extents[r]) if r in red_extents else s)
        if r in kept_red else sympy.S.Zero
        for r, s in enumerate(rsizes)
    ]
    reduction = [v for v in reduction_index if isinstance(v, sympy.Symbol)]
    with patch.object(ir.ConstantBuffer, "override_device", op.get_device()):
        body = LoopBody(
            op.get_store_function(),
            [index, reduction_index] if op.get_reduction_type() else [index],
            var_ranges,
            [v for v in index if isinstance(v, sympy.Symbol)],
            [v for v in reduction if isinstance(v, sympy.Symbol)],
        )
    return (
        [sizes[d] for d in sorted(kept)], [rsizes[r] for r in sorted(kept_red)]
    ), body


def _tiling(
    op: ir.ComputedBuffer, out_symbols: list[Any], red_symbols: list[Any]
) -> tuple[list[list[Any]], list[list[int]] | None]:
    """``(tiled_symbols, tiled_steps)`` of a tiled op (OpSpec fields, op_spec.py).

    ``loop_tiled_dims(op)`` holds positions in ``data.ranges`` and
    ``loop_tiled_reduction_dims(op)`` positions in ``reduction_ranges``, outermost
    level first; OpSpec lists are **innermost level first**, output symbols then
    reduction symbols.  Unit dims that no level tiles have no symbol
    (``_kept_dims``): positions map past them.  A dim tiled at several levels
    advances, per iteration of level ``l``, by its per-tile extent times the counts
    of the deeper levels tiling it.  ``tiled_steps`` is None when every step is the
    per-tile extent.
    """
    levels = loop_tiled_dims(op)
    if not levels:
        return [], None
    red_levels = loop_tiled_reduction_dims(op)
    counts = [int(c) for c in loop_count(op)]
    tile = [int(r) for r in op.get_pointwise_size()]
    rtile = [int(r) for r in op.get_reduction_size()]
    kept, kept_red = _kept_dims(op), _kept_reduction_dims(op)

    def step(sizes: list[int], per_level: list[list[int]], level: int, d: int) -> int:
        return sizes[d] * math.prod(counts[deeper] for deeper in range(level + 1, len(levels))
                                    if d in per_level[deeper])

    symbols, steps = [], []
    plain = True
    for level in reversed(range(len(levels))):
        row_syms = [out_symbols[kept.index(d)] for d in levels[level]]
        row_syms += [red_symbols[kept_red.index(r)] for r in red_levels[level]]
        row = [step(tile, levels, level, d) for d in levels[level]]
        row += [step(rtile, red_levels, level, r) for r in red_levels[level]]
        plain = plain and row == [tile[d] for d in levels[level]] + [
            rtile[r] for r in red_levels[level]]
        symbols.append(row_syms)
        steps.append(row)
    return symbols, None if plain else steps
