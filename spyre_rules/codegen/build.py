"""Build the OpSpec of one scheduler node.

The node's IR op is traced once through its default loop body (one loop per
non-unit dim, in the op's own dim order -- Inductor's loop reordering and
merging are deliberately not used, so iteration symbols correspond to host
dims: output dims first, then reduction dims, named ``c0, c1, ...``).  The
recorder turns the body into the SSA program; each access becomes a TensorArg
with device coordinates from the buffer's stick layout (layout_model §1.4).
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch._inductor.sizevars import SimplifyIndexing
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from spyre_rules.backend.errors import UnsupportedGraph
from spyre_rules.backend.graph_state import RulesGraphState
from spyre_rules.backend.ir_edit import op_description
from spyre_rules.codegen.access import access_coordinates
from spyre_rules.codegen.op_spec import OpSpec, TensorArg
from spyre_rules.codegen.recorder import ProgramRecorder
from spyre_rules.errors import CoordinateError

__all__ = ["build_op_spec", "op_name"]


def op_name(op: ir.ComputedBuffer) -> str:
    """The OpSpec ``op``: the reduction type, a restickify, or the aten op name."""
    kind = getattr(op, "spyre_rules_kind", None)
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


def build_op_spec(snode: Any, kernel: Any, state: RulesGraphState) -> OpSpec:
    """Trace ``snode``'s op; register its buffers as ``kernel.args``."""
    op = snode.node
    what = op_description(op)
    (sizes, rsizes), body, _ = op.get_default_sizes_body()
    n_out = len(sizes)
    symbols = [sympy_index_symbol(f"c{i}") for i in range(n_out + len(rsizes))]
    ranges = dict(zip(symbols, [*sizes, *rsizes]))
    recorder = ProgramRecorder(what)
    with V.set_ops_handler(SimplifyIndexing(recorder, ranges)):
        body(symbols[:n_out], symbols[n_out:])
    if recorder.store_entry is None:
        raise UnsupportedGraph(f"{what}: its loop body stores nothing")

    full_ranges = _full_ranges(op, symbols[:n_out], ranges)
    args = []
    for access in recorder.accesses:
        layout = state.layouts.get(access.buffer)
        if layout is None:
            raise UnsupportedGraph(f"{what}: buffer {access.buffer} has no Spyre layout")
        if access.is_input:
            kernel.args.input(access.buffer)
        else:
            kernel.args.output(access.buffer)
        dl = layout.device_layout
        fixed = bool(getattr(layout, "per_tile_fixed", False))
        # A moving tensor is addressed at sym + i*T by the loop, so its coordinates
        # must hold over the tiled symbols' full ranges: derived over the per-tile
        # range, floor(c/T) folds to 0 and Mod(c, T) to c, and the shift leaves the
        # tensor (codegen/loops.py: a fixed or LX tensor never moves).
        moving = not fixed and "lx" not in layout.allocation
        args.append(TensorArg(
            is_input=access.is_input,
            arg_index=-1,  # set once the kernel's argument list is complete
            device_dtype=dl.device_dtype,
            device_size=list(dl.device_size),
            device_coordinates=_coordinates(
                layout, access.index, full_ranges if moving else ranges, what),
            allocation=dict(layout.allocation),
            per_tile_fixed=fixed,
            name=access.buffer,
        ))
    return OpSpec(
        op=op_name(op),
        is_reduction=isinstance(op.data, ir.Reduction),
        iteration_space={s: (sympy.Integer(int(r)), 1) for s, r in ranges.items()},
        args=args,
        op_info={
            "program": recorder.program,
            "store": recorder.store_entry,
            "reduction_symbols": symbols[n_out:],
        },
        tiled_symbols=_tiled_symbols(op, symbols[:n_out]),
    )


def _symbol_positions(op: ir.ComputedBuffer, out_symbols: list[Any]) -> list[int | None]:
    """Per position in ``op.data.ranges``, the index of its iteration symbol (None: a
    unit range the loop body dropped)."""
    ranges = [int(r) for r in op.data.ranges]
    if len(ranges) == len(out_symbols):
        return list(range(len(ranges)))
    kept = [d for d, r in enumerate(ranges) if r != 1]
    return [kept.index(d) if d in kept else None for d in range(len(ranges))]


def _full_ranges(op: ir.ComputedBuffer, out_symbols: list[Any],
                 ranges: dict[Any, Any]) -> dict[Any, Any]:
    """The iteration ranges before tiling: each tiled symbol's per-tile range times
    the counts of every loop level that divides it (``loop_count``, outermost first)."""
    levels = getattr(op, "loop_tiled_dims", None) or []
    counts = getattr(op, "loop_count", None) or []
    full = dict(ranges)
    position = _symbol_positions(op, out_symbols) if levels else []
    for count, dims in zip(counts, levels):
        for d in dims:
            if position[d] is not None:
                sym = out_symbols[position[d]]
                full[sym] = full[sym] * int(count)
    return full


def _tiled_symbols(op: ir.ComputedBuffer, out_symbols: list[Any]) -> list[list[Any]]:
    """``op.loop_tiled_dims`` (positions in ``data.ranges``, outermost level first) as
    iteration symbols, **innermost level first** (op_spec.py).  The loop body keeps
    one loop per range (the backend disables loop merging), so position = symbol;
    should unit ranges ever be dropped, positions are mapped past them."""
    levels = getattr(op, "loop_tiled_dims", None)
    if not levels:
        return []
    position = _symbol_positions(op, out_symbols)
    out = []
    for dims in levels:
        syms = [out_symbols[position[d]] for d in dims if position[d] is not None]
        out.append(syms)
    return list(reversed(out))
