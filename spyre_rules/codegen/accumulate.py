"""The three OpSpecs of a reduction level: init, combine, finalise (``passes/accumulators.py``).

``build_op_spec`` traces a reduction op with a tiled reduction dim as usual: one
OpSpec that reduces one tile and stores the result through the op's output arg.
``accumulation_specs`` turns it into

* ``acc_init`` -- stores the identity into the accumulator (output symbols only);
* the op itself, now the **combine** step: the same program, then
  ``load`` of the accumulator and the combine op (``add``, ``mul``, ``maximum``,
  ``minimum``, ``logical_or``) of it with the tile's reduction, stored back into
  the accumulator in its dtype (no rounding to the op's dtype);
* ``acc_finalize`` -- loads the accumulator and stores it through the op's
  output arg in the op's dtype (the one rounding of a half-precision result).

The accumulator's args are ``per_tile_fixed`` and not kernel arguments
(``arg_index`` -1: device-only, like the LX scratchpad).  Each spec says what it
is in ``op_info["accumulate"]`` (step, accumulator, reduction, combine op or
identity), which the wrapper source and ``sdsc_N.json`` print.  Codegen places
``acc_init`` right before and ``acc_finalize`` right after the loop of the op's
outermost reduction level (``backend/scheduling.py``), so nested under an output
level both run once per outer tile.
"""

from __future__ import annotations

import copy
from typing import Any

import sympy

from spyre_rules.codegen.access import access_coordinates
from spyre_rules.errors import CoordinateError
from spyre_rules.facts.stick_layout import contiguous_strides
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.program.op_spec import OpSpec, TensorArg

__all__ = ["INIT", "FINALIZE", "accumulation_specs"]

INIT = "acc_init"
FINALIZE = "acc_finalize"


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _acc_arg(acc: Any, is_input: bool, symbols: list[Any], ranges: dict[Any, Any],
             what: str) -> TensorArg:
    """An access of the accumulator at the per-tile output point ``symbols``."""
    layout = acc.layout
    size = [int(s) for s in layout.size]
    stride = contiguous_strides(size)
    index = sum((s * st for s, st in zip(symbols, stride) if s is not None), sympy.Integer(0))
    try:
        coords = access_coordinates(layout.device_layout, layout.size, layout.stride,
                                    layout.offset, index, ranges)
    except CoordinateError as exc:
        raise UnsupportedGraph(f"{what}: accumulator {acc.name}: {exc}") from None
    dl = layout.device_layout
    return TensorArg(
        is_input=is_input,
        arg_index=-1,
        device_dtype=dl.device_dtype,
        device_size=list(dl.device_size),
        device_coordinates=coords,
        allocation=dict(layout.allocation),
        per_tile_fixed=True,
        name=acc.name,
    )


def _outer(spec: OpSpec, n_levels: int, first_level: int) -> tuple[list, list | None]:
    """tiled_symbols / tiled_steps of the levels outside the reduction levels."""
    drop = n_levels - first_level  # innermost-first lists: the reduction levels lead
    symbols = [list(level) for level in spec.tiled_symbols[drop:]]
    steps = None if spec.tiled_steps is None else [list(r) for r in spec.tiled_steps[drop:]]
    return symbols, steps


def accumulation_specs(
    spec: OpSpec, acc: Any, out_dims: list[int | None], n_levels: int, what: str
) -> tuple[OpSpec, OpSpec, OpSpec]:
    """``(init, combine, finalise)`` of ``spec`` (the traced reduction, module doc).

    ``out_dims``: per host dim of the op's per-tile output, its iteration symbol's
    position in ``spec.iteration_space`` (None: a unit dim without a symbol).
    """
    program = spec.op_info["program"]
    store = spec.op_info["store"]
    at = next((i for i, e in enumerate(program) if e["op"] == "reduction"), None)
    if at is None or store["value"] != at or at != len(program) - 1:
        raise UnsupportedGraph(
            f"{what}: a reduction level needs the op to store its reduction's value "
            "directly (nothing computed after the reduction)"
        )
    symbols = list(spec.iteration_space)
    reduction_symbols = set(spec.op_info["reduction_symbols"])
    out_symbols = [s for s in symbols if s not in reduction_symbols]
    out_ranges = {s: spec.iteration_space[s][0] for s in out_symbols}
    point = [None if p is None else symbols[p] for p in out_dims]
    acc_dtype = _dtype_name(acc.dtype)
    outer_symbols, outer_steps = _outer(spec, n_levels, acc.first_level)
    out_arg = spec.args[store["arg"]]
    space = {s: spec.iteration_space[s] for s in out_symbols}

    init = OpSpec(
        op=INIT,
        is_reduction=False,
        iteration_space=dict(space),
        args=[_acc_arg(acc, False, point, out_ranges, what)],
        op_info={
            "program": [{"op": "constant", "value": acc.identity, "dtype": acc_dtype}],
            "store": {"arg": 0, "value": 0, "dtype": acc_dtype},
            "reduction_symbols": [],
            "accumulate": {"step": "init", "accumulator": acc.name, "reduction": acc.reduction,
                           "identity": acc.identity},
        },
        tiled_symbols=outer_symbols,
        tiled_steps=outer_steps,
    )

    combine = copy.copy(spec)
    combine.args = list(spec.args)
    combine.args[store["arg"]] = _acc_arg(acc, False, point, out_ranges, what)
    combine.args.append(_acc_arg(acc, True, point, out_ranges, what))
    combined = [
        *program,
        {"op": "load", "arg": len(combine.args) - 1, "dtype": acc_dtype},
        {"op": acc.combine, "in": [len(program), at]},
    ]
    combine.op_info = {
        **spec.op_info,
        "program": combined,
        "store": {"arg": store["arg"], "value": len(combined) - 1, "dtype": acc_dtype},
        "accumulate": {"step": "combine", "accumulator": acc.name, "reduction": acc.reduction,
                       "combine": acc.combine},
    }

    finalize = OpSpec(
        op=FINALIZE,
        is_reduction=False,
        iteration_space=dict(space),
        args=[_acc_arg(acc, True, point, out_ranges, what), out_arg],
        op_info={
            "program": [{"op": "load", "arg": 0, "dtype": acc_dtype}],
            "store": {"arg": 1, "value": 0, "dtype": store["dtype"]},
            "reduction_symbols": [],
            "accumulate": {"step": "finalize", "accumulator": acc.name,
                           "reduction": acc.reduction, "dtype": store["dtype"]},
        },
        tiled_symbols=outer_symbols,
        tiled_steps=outer_steps,
    )
    return init, combine, finalize
