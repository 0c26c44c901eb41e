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

A multi-field accumulator (argmax / argmin, welford: ``passes/combine.py``
``FIELDS``) has one init per field, one combine step per field
(``accumulate_fields``: each recomputes the tile's partial result and stores one
field, in an order that reads only fields not yet updated; an index reduction
ends with ``acc_count``, which adds one tile's points to its count), and a
finalise of the field the op stores (argmax's index, welford's mean / m2 /
weight) or of a formula of its fields (softmax_values: ``acc / sum``).

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
from spyre_rules.codegen.accumulate_fields import count_step, finalize_step
from spyre_rules.codegen.accumulate_fields import steps as field_steps
from spyre_rules.errors import CoordinateError
from spyre_rules.facts.stick_layout import contiguous_strides
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.passes.combine import FIELDS
from spyre_rules.program.op_spec import OpSpec, TensorArg

__all__ = ["INIT", "FINALIZE", "COUNT", "accumulation_specs"]

INIT = "acc_init"
FINALIZE = "acc_finalize"
COUNT = "acc_count"


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _acc_arg(field: Any, is_input: bool, symbols: list[Any], ranges: dict[Any, Any],
             what: str) -> TensorArg:
    """An access of accumulator field ``field`` at the per-tile output point ``symbols``."""
    layout = field.layout
    size = [int(s) for s in layout.size]
    stride = contiguous_strides(size)
    index = sum((s * st for s, st in zip(symbols, stride) if s is not None), sympy.Integer(0))
    try:
        coords = access_coordinates(layout.device_layout, layout.size, layout.stride,
                                    layout.offset, index, ranges)
    except CoordinateError as exc:
        raise UnsupportedGraph(f"{what}: accumulator {field.name}: {exc}") from None
    dl = layout.device_layout
    return TensorArg(
        is_input=is_input,
        arg_index=-1,
        device_dtype=dl.device_dtype,
        device_size=list(dl.device_size),
        device_coordinates=coords,
        allocation=dict(layout.allocation),
        per_tile_fixed=True,
        name=field.name,
    )


def _outer(spec: OpSpec, n_levels: int, first_level: int) -> tuple[list, list | None]:
    """tiled_symbols / tiled_steps of the levels outside the reduction levels."""
    drop = n_levels - first_level  # innermost-first lists: the reduction levels lead
    symbols = [list(level) for level in spec.tiled_symbols[drop:]]
    steps = None if spec.tiled_steps is None else [list(r) for r in spec.tiled_steps[drop:]]
    return symbols, steps


def _stored_field(acc: Any, program: list[dict[str, Any]], store: dict[str, Any], at: int | None,
                  what: str) -> str:
    """The accumulator field the op's output is (finalise): its reduction's value, or
    one element of a tuple-valued partial (welford's getitem)."""
    if at is not None and store["value"] == at == len(program) - 1:
        return {"argmax": "index", "argmin": "index", "softmax_values": "acc"}.get(
            acc.reduction, "value")
    tail = [] if at is None else program[at + 1:]
    if (at is not None and len(acc.fields) > 1 and store["value"] > at and tail
            and all(e["op"] == "getitem" and e["in"] == [at] for e in tail)):
        return FIELDS[acc.reduction][program[store["value"]]["index"]]
    raise UnsupportedGraph(
        f"{what}: a reduction level needs the op to store its reduction's value "
        "directly (nothing computed after the reduction)"
    )


def _combine_spec(spec: OpSpec, acc: Any, step: Any, base: list[dict[str, Any]],
                  access: Any) -> OpSpec:
    """One combine step of a multi-field accumulator (``accumulate_fields``)."""
    store = spec.op_info["store"]
    field = acc.field(step.role)
    combine = copy.copy(spec)
    combine.args = list(spec.args)
    combine.args[store["arg"]] = access(field, False)
    entries = [dict(e) for e in step.entries]
    first = len(base)
    for at, role in step.loads.items():
        combine.args.append(access(acc.field(role), True))
        entries[at - first]["arg"] = len(combine.args) - 1
    program = [*base, *entries]
    combine.op_info = {
        **spec.op_info,
        "program": program,
        "store": {"arg": store["arg"], "value": len(program) - 1,
                  "dtype": _dtype_name(field.dtype)},
        "accumulate": {"step": "combine", "accumulator": acc.name, "field": field.name,
                       "reduction": acc.reduction, "combine": acc.combine},
    }
    return combine


def _count_spec(acc: Any, space: dict[Any, Any], access: Any, tiled: tuple[list, list | None],
                red_levels: int) -> OpSpec:
    """``count += points of one tile`` inside the loop (an index reduction's last step):
    no tiled symbol of its own in the reduction levels, the accumulator never moves."""
    step = count_step(acc.index_map.tile)
    field = acc.field("count")
    entries = [dict(e) for e in step.entries]
    (at,) = step.loads
    entries[at]["arg"] = 1
    symbols, steps = tiled
    return OpSpec(
        op=COUNT,
        is_reduction=False,
        iteration_space=dict(space),
        args=[access(field, False), access(field, True)],
        op_info={
            "program": entries,
            "store": {"arg": 0, "value": step.value, "dtype": "int64"},
            "reduction_symbols": [],
            "accumulate": {"step": "combine", "accumulator": acc.name, "field": field.name,
                           "reduction": acc.reduction, "combine": "add",
                           "points": acc.index_map.tile},
        },
        tiled_symbols=[[] for _ in range(red_levels)] + symbols,
        tiled_steps=None if steps is None else [[] for _ in range(red_levels)] + steps,
    )


def accumulation_specs(
    spec: OpSpec, acc: Any, out_dims: list[int | None], n_levels: int, what: str
) -> tuple[list[OpSpec], list[OpSpec], OpSpec]:
    """``(inits, combines, finalise)`` of ``spec`` (the traced reduction, module doc):
    one init per accumulator field, the combine steps in run order.

    ``out_dims``: per host dim of the op's per-tile output, its iteration symbol's
    position in ``spec.iteration_space`` (None: a unit dim without a symbol).
    """
    program = spec.op_info["program"]
    store = spec.op_info["store"]
    at = next((i for i, e in enumerate(program) if e["op"] == "reduction"), None)
    stored = _stored_field(acc, program, store, at, what)
    symbols = list(spec.iteration_space)
    reduction_symbols = set(spec.op_info["reduction_symbols"])
    out_symbols = [s for s in symbols if s not in reduction_symbols]
    out_ranges = {s: spec.iteration_space[s][0] for s in out_symbols}
    point = [None if p is None else symbols[p] for p in out_dims]
    outer_symbols, outer_steps = _outer(spec, n_levels, acc.first_level)
    out_arg = spec.args[store["arg"]]
    space = {s: spec.iteration_space[s] for s in out_symbols}

    def access(field: Any, is_input: bool) -> TensorArg:
        return _acc_arg(field, is_input, point, out_ranges, what)

    inits = [OpSpec(
        op=INIT,
        is_reduction=False,
        iteration_space=dict(space),
        args=[access(field, False)],
        op_info={
            "program": [{"op": "constant", "value": field.identity,
                         "dtype": _dtype_name(field.dtype)}],
            "store": {"arg": 0, "value": 0, "dtype": _dtype_name(field.dtype)},
            "reduction_symbols": [],
            "accumulate": {"step": "init", "accumulator": acc.name, "reduction": acc.reduction,
                           "identity": field.identity,
                           **({"field": field.name} if len(acc.fields) > 1 else {})},
        },
        tiled_symbols=outer_symbols,
        tiled_steps=outer_steps,
    ) for field in acc.fields]

    if len(acc.fields) == 1:
        combines = [_single_combine(spec, acc, access(acc.fields[0], False),
                                    access(acc.fields[0], True), at)]
    else:
        if acc.index_map is not None and len(program[at]["in"]) != 1:
            # Inductor's logical index of a non-contiguous input: a value of the tile's
            # own symbols, not the position the accumulator's count offsets
            raise UnsupportedGraph(
                f"{what}: a {acc.reduction} with a computed (logical) index cannot accumulate "
                "across tiles of its reduction dim")
        base = [*program[:at], {**program[at], "partial": True}]
        dtypes = {f.role: _dtype_name(f.dtype) for f in acc.fields}
        combines = [_combine_spec(spec, acc, step, base, access)
                    for step in field_steps(acc.reduction, at, acc, dtypes)]
        if acc.index_map is not None:
            combines.append(_count_spec(acc, space, access, (outer_symbols, outer_steps),
                                        n_levels - acc.first_level))

    field = acc.field(stored)
    formula = finalize_step(acc.reduction, {f.role: _dtype_name(f.dtype) for f in acc.fields})
    if formula is None:
        final_args = [access(field, True), out_arg]
        final_program = [{"op": "load", "arg": 0, "dtype": _dtype_name(field.dtype)}]
    else:  # the output is a formula of the fields (softmax_values: acc / sum)
        final_args, final_program = [], [dict(e) for e in formula.entries]
        for at_load, role in formula.loads.items():
            final_args.append(access(acc.field(role), True))
            final_program[at_load]["arg"] = len(final_args) - 1
        final_args.append(out_arg)
    finalize = OpSpec(
        op=FINALIZE,
        is_reduction=False,
        iteration_space=dict(space),
        args=final_args,
        op_info={
            "program": final_program,
            "store": {"arg": len(final_args) - 1, "value": len(final_program) - 1,
                      "dtype": store["dtype"]},
            "reduction_symbols": [],
            "accumulate": {"step": "finalize", "accumulator": acc.name,
                           "reduction": acc.reduction, "dtype": store["dtype"],
                           **({"field": field.name} if len(acc.fields) > 1 else {})},
        },
        tiled_symbols=outer_symbols,
        tiled_steps=outer_steps,
    )
    return inits, combines, finalize


def _single_combine(spec: OpSpec, acc: Any, out: TensorArg, load: TensorArg, at: int) -> OpSpec:
    """The combine step of a one-field accumulator: the traced program, then
    ``acc = combine(acc, reduction)`` in the accumulator's dtype."""
    program = spec.op_info["program"]
    store = spec.op_info["store"]
    acc_dtype = _dtype_name(acc.dtype)
    combine = copy.copy(spec)
    combine.args = list(spec.args)
    combine.args[store["arg"]] = out
    combine.args.append(load)
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
    return combine
