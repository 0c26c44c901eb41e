"""Span check of a generated program: every access of every OpSpec, bounded analytically.

After codegen, each TensorArg of each OpSpec gets a sound upper bound on the
per-core span of every non-stick device dim (``facts/spans``):
``span(coordinate) x prod(device_size[d+1:]) x element_bytes``, the same
measure as the independent verifier (``facts/verifier.verify_spans``), which
the tests use to check the bound.

*The checked domain.*  An op outside any loop is checked over its iteration
space (each range divided by its work split: one core's share).  Inside
``LoopSpec``s, a moving arg (``codegen/loops.arg_moves``) at iteration ``i_l``
of level ``l`` touches the coordinates shifted by its affine offset, i.e. each
tiled symbol ``s`` of level ``l`` replaced by ``s + i_l * T_s`` (``T_s`` its
per-tile range; the executor cross-checks that this is exactly the byte offset
it applies).  A coordinate whose shift by one tile is a constant has the same
span in every iteration; any other is bounded per iteration (up to
``MAX_ENUMERATED_ITERATIONS``), else over the union of all iterations (still
sound, less tight).  A per-tile buffer (``per_tile_fixed``) or an LX tensor
does not move: its domain is the per-tile space.

A coordinate that takes one value in the checked domain picks a base address
and is not a span (as ``verify_spans`` ignores it); a coordinate no span fact
can bound is bounded by its device dim size (an in-bounds coordinate cannot
leave it; the executor refuses out-of-bounds ones).

This module measures and reports.  What happens to an overflow is
``config.span_check`` (``warn`` / ``error`` / ``off``), applied by the backend
with :func:`enforce` once every kernel of the graph is generated.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import warnings
from typing import Any

import sympy

from spyre_rules.codegen.loops import arg_moves, level_symbols
from spyre_rules.engine.records import NO_PLAN
from spyre_rules.errors import SpyreRulesError
from spyre_rules.facts.spans import coordinate_span_bound
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes

__all__ = [
    "DimCheck",
    "OpCheck",
    "SpanCheckError",
    "SpanOverflowWarning",
    "check_kernel",
    "enforce",
    "overflow_message",
    "record_results",
]

#: Iteration combinations bounded one by one for a coordinate that is not
#: shift-invariant; beyond this the union of all iterations is bounded instead.
MAX_ENUMERATED_ITERATIONS = 256

logger = logging.getLogger("spyre_rules.span_check")


class SpanCheckError(SpyreRulesError):
    """``config.span_check == 'error'`` and a generated access overflows the span limit."""


class SpanOverflowWarning(UserWarning):
    """A generated access overflows the span limit (``config.span_check == 'warn'``)."""


@dataclasses.dataclass(frozen=True)
class DimCheck:
    """The bound of one device dim of one access (a span candidate: it varies)."""

    tensor: str
    is_input: bool
    device_dim: int
    span_bytes: int
    exact: bool
    #: the symbols that move the coordinate, and those of them that are reduction symbols
    symbols: tuple[str, ...]
    reduction_symbols: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor,
            "access": "read" if self.is_input else "write",
            "device_dim": self.device_dim,
            "span_bytes": self.span_bytes,
            "exact": self.exact,
            "symbols": list(self.symbols),
        }


@dataclasses.dataclass
class OpCheck:
    """Every span candidate of one op (its output buffer names it) in one kernel."""

    kernel: str
    op: str
    kind: str
    limit: int
    dims: list[DimCheck]

    @property
    def max_span_bytes(self) -> int:
        return max((d.span_bytes for d in self.dims), default=0)

    @property
    def overflows(self) -> list[DimCheck]:
        return [d for d in self.dims if d.span_bytes > self.limit]

    def as_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "status": "overflow" if self.overflows else "fits",
            "max_span_bytes": self.max_span_bytes,
            "limit_bytes": self.limit,
            "overflows": [d.as_dict() for d in self.overflows],
        }


# --------------------------------------------------------------------------- bounds


def _core_ranges(spec: OpSpec) -> dict[Any, int]:
    """One core's range per iteration symbol: the range divided by its work split."""
    return {s: -(-int(r) // max(int(split), 1)) for s, (r, split) in spec.iteration_space.items()}


def _shift_levels(spec: OpSpec, arg: TensorArg, counts: list[int]) -> dict[Any, list[int]]:
    """Tiled symbol -> the enclosing levels (indices into ``counts``) that shift it."""
    if not counts or not arg_moves(arg):
        return {}
    shifts: dict[Any, list[int]] = {}
    for level, syms in enumerate(level_symbols(spec, len(counts))):
        for s in syms:
            shifts.setdefault(s, []).append(level)
    return shifts


def _shift_invariant(coord: sympy.Expr, syms: list[Any], ranges: dict[Any, int]) -> bool:
    """Shifting by one tile moves the coordinate by a constant (sympy folds integer
    offsets out of floor/Mod); anything not proven so is bounded per iteration."""
    for s in syms:
        if (coord.xreplace({s: s + ranges[s]}) - coord).free_symbols:
            return False
    return True


def _bound(coord: sympy.Expr, ranges: dict[Any, int]) -> tuple[int, bool] | None:
    bound = coordinate_span_bound(coord, ranges)
    return None if bound is None else (bound.elems, bound.exact)


def _per_iteration_bound(
    coord: sympy.Expr, ranges: dict[Any, int], shifts: dict[Any, list[int]], counts: list[int]
) -> tuple[int, bool] | None:
    """The largest span of ``coord`` over any single iteration of the enclosing loops."""
    moved = [s for s in coord.free_symbols if s in shifts]
    if not moved or _shift_invariant(coord, moved, ranges):
        return _bound(coord, ranges)
    levels = sorted({lv for s in moved for lv in shifts[s]})
    combos = math.prod(counts[lv] for lv in levels)
    if combos > MAX_ENUMERATED_ITERATIONS:
        # The union of every iteration's domain holds each one: a sound bound.
        union = dict(ranges)
        for s in moved:
            union[s] = ranges[s] * (1 + sum(counts[lv] - 1 for lv in shifts[s]))
        found = _bound(coord, union)
        return None if found is None else (found[0], False)
    best: tuple[int, bool] | None = None
    for iteration in itertools.product(*(range(counts[lv]) for lv in levels)):
        at = dict(zip(levels, iteration))
        shifted = coord.xreplace(
            {s: s + ranges[s] * sum(at[lv] for lv in shifts[s]) for s in moved}
        )
        found = _bound(shifted, ranges)
        if found is None:
            return None
        if best is None or found[0] > best[0]:
            best = found
    return best


def _arg_dims(spec: OpSpec, arg: TensorArg, counts: list[int]) -> list[DimCheck]:
    # an indirect symbol may take any value of the dim it indexes (whole range)
    ranges = {**_core_ranges(spec), **arg.indirect_ranges()}
    shifts = _shift_levels(spec, arg, counts)
    reduction = {str(s) for s in spec.op_info.get("reduction_symbols", [])}
    size = [int(s) for s in arg.device_size]
    item = element_bytes(arg.device_dtype)
    out = []
    for d, raw in enumerate(arg.device_coordinates[:-1]):
        coord = sympy.sympify(raw)
        if not coord.free_symbols:
            continue
        found = _per_iteration_bound(coord, ranges, shifts, counts)
        elems, exact = found if found is not None else (size[d], False)
        if elems <= 1:
            continue  # one value: a base address, not a span
        symbols = tuple(sorted(str(s) for s in coord.free_symbols))
        out.append(DimCheck(
            tensor=arg.name or f"arg{arg.arg_index}",
            is_input=arg.is_input,
            device_dim=d,
            span_bytes=elems * math.prod(size[d + 1:]) * item,
            exact=exact,
            symbols=symbols,
            reduction_symbols=tuple(s for s in symbols if s in reduction),
        ))
    return out


def _op_name(spec: OpSpec) -> str:
    """The op's output buffer (what ``store`` writes through): the plan record's key.

    A region of a concatenation stores into the concatenation buffer; its own name
    is in ``op_info["region"]``."""
    region = spec.op_info.get("region")
    if region:
        return region["op"]
    index = (spec.op_info.get("store") or {}).get("arg")
    if isinstance(index, int) and 0 <= index < len(spec.args) and spec.args[index].name:
        return spec.args[index].name
    return next((a.name for a in spec.args if not a.is_input and a.name), spec.op)


def check_kernel(kernel: str, items: list[Any], limit: int) -> list[OpCheck]:
    """Bound every access of every OpSpec of one kernel (LoopSpecs as written, not unrolled)."""
    out: list[OpCheck] = []

    def walk(body: list[Any], counts: list[int]) -> None:
        for item in body:
            if isinstance(item, LoopSpec):
                walk(item.body, [*counts, int(item.count)])
                continue
            dims = [d for arg in item.args for d in _arg_dims(item, arg, counts)]
            out.append(OpCheck(kernel=kernel, op=_op_name(item), kind=item.op,
                               limit=limit, dims=dims))

    walk(items, [])
    return out


# --------------------------------------------------------------------------- reporting


def _planner_decision(record: dict[str, Any] | None, dim: DimCheck) -> str:
    """What the planner decided for the op (its plan record), plus why no output
    tiling can help when only reduction symbols move the coordinate."""
    if record is None:
        text = "the op has no plan record"
    else:
        decision = record.get("decision", NO_PLAN)
        reason = record.get("reason")
        text = f"{decision}: {reason}" if reason else str(decision)
    if dim.symbols and set(dim.symbols) <= set(dim.reduction_symbols):
        text += "; reduction-controlled span: needs reduction-range tiling"
    return text


def overflow_message(graph: str, check: OpCheck, dim: DimCheck,
                     record: dict[str, Any] | None) -> str:
    access = "read of" if dim.is_input else "write of"
    bound = "" if dim.exact else "at most "
    return (
        f"spyre_rules span check: graph {graph}, kernel {check.kernel}, op {check.op} "
        f"({check.kind}): {access} tensor {dim.tensor}, device dim {dim.device_dim} spans "
        f"{bound}{dim.span_bytes} bytes, over the limit of {check.limit} bytes "
        f"(max_span_bytes); planner decision: {_planner_decision(record, dim)}"
    )


def record_results(checks: list[OpCheck], plan: dict[str, dict[str, Any]], mode: str) -> None:
    """Each op's result into its plan record (``plan.json``): ``span_check``."""
    merged: dict[str, list[OpCheck]] = {}
    for check in checks:
        merged.setdefault(check.op, []).append(check)
    for name, record in plan.items():
        found = merged.get(name)
        if mode == "off":
            record["span_check"] = {"status": "off"}
        elif not found:
            record["span_check"] = {"status": "no generated access"}
        elif len(found) == 1:
            record["span_check"] = found[0].as_dict()
        else:
            results = [c.as_dict() for c in found]
            record["span_check"] = {
                "status": "overflow" if any(c.overflows for c in found) else "fits",
                "max_span_bytes": max(c.max_span_bytes for c in found),
                "limit_bytes": found[0].limit,
                "kernels": results,
            }


def enforce(graph: str, checks: list[OpCheck], plan: dict[str, dict[str, Any]],
            mode: str) -> list[str]:
    """Act on every overflowing access per ``mode``; returns the messages.

    ``warn``: one ``SpanOverflowWarning`` and one CRITICAL log record per
    overflowing access; ``error``: one ``SpanCheckError`` listing them all;
    ``off``: nothing.
    """
    if mode == "off":
        return []
    found = [(c, d) for c in checks for d in c.overflows]
    messages = [overflow_message(graph, c, d, plan.get(c.op)) for c, d in found]
    if mode == "error" and messages:
        raise SpanCheckError("\n".join(messages))
    for (check, dim), message in zip(found, messages):
        warnings.warn(message, SpanOverflowWarning, stacklevel=2)
        # the same facts as fields, for log consumers that do not parse text
        logger.critical(message, extra={"span_check": {
            "graph": graph, "kernel": check.kernel, "op": check.op, "tensor": dim.tensor,
            "device_dim": dim.device_dim, "span_bytes": dim.span_bytes,
            "limit_bytes": check.limit,
            "planner_decision": _planner_decision(plan.get(check.op), dim)}})
    return messages
