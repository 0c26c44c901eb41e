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
tiled symbol ``s`` of level ``l`` replaced by ``s + i_l * T_s`` (``T_s`` the
elements it advances per iteration, ``codegen.loops.level_steps``: its per-tile
range unless ``tiled_steps`` says otherwise; the executor cross-checks that this
is exactly the byte offset it applies).  ``i_l`` takes the loop's real
iteration values, ``first .. first + count - 1``: a peeled last tile
(``LoopSpec(count=1, first=N-1)``) is bounded where it runs, with its own
shorter range.  A coordinate whose shift by one step is a constant has the
same span in every iteration; any other is bounded per iteration (up to
``MAX_ENUMERATED_ITERATIONS``), else over the union of all iterations (still
sound, less tight).  A per-tile buffer (``per_tile_fixed``) or an LX tensor
does not move: its domain is the per-tile space.

A coordinate that takes one value in the checked domain picks a base address
and is not a span (as ``verify_spans`` ignores it); a coordinate no span fact
can bound is bounded by its device dim size (an in-bounds coordinate cannot
leave it; the executor refuses out-of-bounds ones).

*Indirect reads.*  The gathered read of an embedding / index_select / gather
(a TensorArg carrying an ``IndirectIndex``) is bounded like any access, its
indirect symbols over the whole dim they index, and enforced like any access:
the planner measures it the same way and tiles the op along the dims its other
coordinates follow (an embedding's hidden dim).  Only when the planner left the
op to the indirect-access path (``rules/planner.rules``: the rule
:data:`DEFERRING_RULE`, a gathered read it cannot measure) is an overflow of
that one access *deferred*, not enforced: it is reported under its own status
and warning (:class:`IndirectReadSpanWarning`, also under ``span_check =
"error"``), naming the access as an indirect read.  Every other access of the
same op (its index read, its write) is checked as usual.

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

from spyre_rules.codegen.loops import arg_moves, level_steps
from spyre_rules.engine.records import NO_PLAN
from spyre_rules.errors import SpyreRulesError
from spyre_rules.facts.spans import coordinate_span_bound
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, element_bytes, output_name

__all__ = [
    "DimCheck",
    "IndirectReadSpanWarning",
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


class IndirectReadSpanWarning(SpanOverflowWarning):
    """An indirect (gather) read overflows the span limit: deferred to the
    indirect-access path, reported under ``warn`` and ``error`` alike."""


#: ``span_check.status`` of an op whose only overflows are deferred indirect reads.
DEFERRED_STATUS = "indirect read deferred"

#: The planner rule that leaves an op to the indirect-access path: only then is
#: an overflow of its gathered read deferred rather than enforced.
DEFERRING_RULE = "eligibility.indirect_reads"


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
    #: the access's data-dependent symbols: non-empty for an indirect (gather) read
    indirect_symbols: tuple[str, ...] = ()
    #: an indirect read the planner left to the indirect-access path (module doc)
    deferred: bool = False

    @property
    def access(self) -> str:
        if self.indirect_symbols:
            return "indirect read" if self.is_input else "indirect write"
        return "read" if self.is_input else "write"

    def as_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor,
            "access": self.access,
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
        """Accesses over the limit that ``span_check`` enforces (every one but indirect reads)."""
        return [d for d in self.dims if d.span_bytes > self.limit and not d.deferred]

    @property
    def deferred(self) -> list[DimCheck]:
        """Indirect reads over the limit the planner left to the indirect-access path (module doc)."""
        return [d for d in self.dims if d.span_bytes > self.limit and d.deferred]

    def as_dict(self) -> dict[str, Any]:
        out = {"kernel": self.kernel, **_summary([self]),
               "overflows": [d.as_dict() for d in self.overflows]}
        if self.deferred:
            out["deferred"] = [d.as_dict() for d in self.deferred]
        return out


def _status(checks: list[OpCheck]) -> str:
    if any(c.overflows for c in checks):
        return "overflow"
    return DEFERRED_STATUS if any(c.deferred for c in checks) else "fits"


def _summary(checks: list[OpCheck]) -> dict[str, Any]:
    """Status, largest span and limit of one op's checks (one per kernel it runs in)."""
    return {
        "status": _status(checks),
        "max_span_bytes": max(c.max_span_bytes for c in checks),
        "limit_bytes": checks[0].limit,
    }


# --------------------------------------------------------------------------- bounds


def _core_ranges(spec: OpSpec) -> dict[Any, int]:
    """One core's range per iteration symbol: the range divided by its work split."""
    return {s: -(-int(r) // max(int(split), 1)) for s, (r, split) in spec.iteration_space.items()}


def _shift_levels(spec: OpSpec, arg: TensorArg, levels: list[range]) -> dict[Any, list[tuple[int, int]]]:
    """Tiled symbol -> ``(level, elements per iteration)`` for each enclosing level
    (an index into ``levels``) that shifts it."""
    if not levels or not arg_moves(arg):
        return {}
    shifts: dict[Any, list[tuple[int, int]]] = {}
    for level, steps in enumerate(level_steps(spec, len(levels))):
        for s, step in steps.items():
            shifts.setdefault(s, []).append((level, int(step)))
    return shifts


def _shift_invariant(coord: sympy.Expr, syms: list[Any], shifts: dict[Any, list[tuple[int, int]]]) -> bool:
    """Shifting by one step moves the coordinate by a constant (sympy folds integer
    offsets out of floor/Mod), so every iteration's shift does; anything not proven
    so is bounded per iteration."""
    for s in syms:
        for _, step in shifts[s]:
            if (coord.xreplace({s: s + step}) - coord).free_symbols:
                return False
    return True


def _bound(coord: sympy.Expr, ranges: dict[Any, int]) -> tuple[int, bool] | None:
    bound = coordinate_span_bound(coord, ranges)
    return None if bound is None else (bound.elems, bound.exact)


def _per_iteration_bound(
    coord: sympy.Expr, ranges: dict[Any, int], shifts: dict[Any, list[tuple[int, int]]],
    levels: list[range],
) -> tuple[int, bool] | None:
    """The largest span of ``coord`` over any single iteration of the enclosing loops
    (``levels``: each loop's iteration values, outermost first)."""
    moved = [s for s in coord.free_symbols if s in shifts]
    if not moved or _shift_invariant(coord, moved, shifts):
        return _bound(coord, ranges)
    active = sorted({lv for s in moved for lv, _ in shifts[s]})
    combos = math.prod(len(levels[lv]) for lv in active)
    if combos > MAX_ENUMERATED_ITERATIONS:
        # The union of every iteration's domain holds each one: a sound bound.  It is
        # one interval from the lowest shift to the highest shift plus the range.
        union, offsets = dict(ranges), {}
        for s in moved:
            ends = [(levels[lv][0] * step, levels[lv][-1] * step) for lv, step in shifts[s]]
            low = sum(min(e) for e in ends)
            offsets[s] = s + low
            union[s] = ranges[s] + sum(max(e) for e in ends) - low
        found = _bound(coord.xreplace(offsets), union)
        return None if found is None else (found[0], False)
    best: tuple[int, bool] | None = None
    for iteration in itertools.product(*(levels[lv] for lv in active)):
        at = dict(zip(active, iteration))
        shifted = coord.xreplace(
            {s: s + sum(at[lv] * step for lv, step in shifts[s]) for s in moved}
        )
        found = _bound(shifted, ranges)
        if found is None:
            return None
        if best is None or found[0] > best[0]:
            best = found
    return best


def _arg_dims(spec: OpSpec, arg: TensorArg, levels: list[range],
              defer_indirect: bool = False) -> list[DimCheck]:
    # an indirect symbol may take any value of the dim it indexes (whole range)
    ranges = {**_core_ranges(spec), **arg.indirect_ranges()}
    shifts = _shift_levels(spec, arg, levels)
    reduction = {str(s) for s in spec.op_info.get("reduction_symbols", [])}
    size = [int(s) for s in arg.device_size]
    item = element_bytes(arg.device_dtype)
    indirect = tuple(str(i.symbol) for i in arg.indirect)
    out = []
    for d, raw in enumerate(arg.device_coordinates[:-1]):
        coord = sympy.sympify(raw)
        if not coord.free_symbols:
            continue
        found = _per_iteration_bound(coord, ranges, shifts, levels)
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
            indirect_symbols=indirect,
            deferred=bool(indirect) and defer_indirect and arg.is_input,
        ))
    return out


def _left_to_indirect_path(record: Any) -> bool:
    decision = getattr(record, "decision", None)
    return getattr(decision, "rule", None) == DEFERRING_RULE


def check_kernel(kernel: str, items: list[Any], limit: int,
                 plan: dict[str, Any] | None = None) -> list[OpCheck]:
    """Bound every access of every OpSpec of one kernel (LoopSpecs as written, not
    unrolled); ``plan``: the graph's plan records (which ops' gathered reads are deferred)."""
    out: list[OpCheck] = []

    def walk(body: list[Any], levels: list[range]) -> None:
        for item in body:
            if isinstance(item, LoopSpec):
                first = int(item.first)
                walk(item.body, [*levels, range(first, first + int(item.count))])
                continue
            name = output_name(item)
            defer = _left_to_indirect_path((plan or {}).get(name))
            dims = [d for arg in item.args for d in _arg_dims(item, arg, levels, defer)]
            out.append(OpCheck(kernel=kernel, op=name, kind=item.op,
                               limit=limit, dims=dims))

    walk(items, [])
    return out


# --------------------------------------------------------------------------- reporting


def _planner_decision(record: Any, dim: DimCheck) -> str:
    """What the planner decided for the op (its plan record), plus why no output
    tiling can help when only reduction symbols move the coordinate."""
    if record is None:
        text = "the op has no plan record"
    else:
        decision = record.decision.decision
        reason = record.decision.reason or None
        text = f"{decision}: {reason}" if reason else str(decision)
    if dim.symbols and set(dim.symbols) <= set(dim.reduction_symbols):
        text += "; reduction-controlled span: needs reduction-range tiling"
    return text


def overflow_message(graph: str, check: OpCheck, dim: DimCheck,
                     record: Any) -> str:
    bound = "" if dim.exact else "at most "
    how = "gathered" if dim.is_input else "scattered"
    gathered = (f" ({how} through {', '.join(dim.indirect_symbols)})"
                if dim.indirect_symbols else "")
    text = (
        f"spyre_rules span check: graph {graph}, kernel {check.kernel}, op {check.op} "
        f"({check.kind}): {dim.access} of tensor {dim.tensor}{gathered}, device dim "
        f"{dim.device_dim} spans {bound}{dim.span_bytes} bytes, over the limit of "
        f"{check.limit} bytes (max_span_bytes); planner decision: {_planner_decision(record, dim)}"
    )
    if dim.deferred:
        text += "; deferred to the indirect-access path (span_check does not enforce indirect reads)"
    return text


def record_results(checks: list[OpCheck], plan: dict[str, Any], mode: str) -> None:
    """Each op's result into its plan record (``plan.json``): ``span_check``."""
    merged: dict[str, list[OpCheck]] = {}
    for check in checks:
        merged.setdefault(check.op, []).append(check)
    for name, record in plan.items():
        found = merged.get(name)
        if mode == "off":
            result: dict[str, Any] = {"status": "off"}
        elif not found:
            result = {"status": "no generated access"}
        elif len(found) == 1:
            result = found[0].as_dict()
        else:
            result = {**_summary(found), "kernels": [c.as_dict() for c in found]}
        plan[name] = record.with_span_check(result)


def enforce(graph: str, checks: list[OpCheck], plan: dict[str, Any],
            mode: str) -> list[str]:
    """Act on every overflowing access per ``mode``; returns the messages.

    ``warn``: one ``SpanOverflowWarning`` and one CRITICAL log record per
    overflowing access; ``error``: one ``SpanCheckError`` listing them all;
    ``off``: nothing.  An overflowing indirect read (``warn`` and ``error``):
    one ``IndirectReadSpanWarning`` and one WARNING record, before the error.
    """
    if mode == "off":
        return []
    deferred = [(c, d) for c in checks for d in c.deferred]
    found = [(c, d) for c in checks for d in c.overflows]
    messages = [overflow_message(graph, c, d, plan.get(c.op)) for c, d in found]
    deferred_messages = [overflow_message(graph, c, d, plan.get(c.op)) for c, d in deferred]
    for (check, dim), message in zip(deferred, deferred_messages):
        warnings.warn(message, IndirectReadSpanWarning, stacklevel=2)
        logger.warning(message, extra={"span_check": _log_fields(graph, check, dim, plan)})
    if mode == "error" and messages:
        raise SpanCheckError("\n".join(messages))
    for (check, dim), message in zip(found, messages):
        warnings.warn(message, SpanOverflowWarning, stacklevel=2)
        # the same facts as fields, for log consumers that do not parse text
        logger.critical(message, extra={"span_check": _log_fields(graph, check, dim, plan)})
    return deferred_messages + messages


def _log_fields(graph: str, check: OpCheck, dim: DimCheck, plan: dict[str, Any]) -> dict[str, Any]:
    return {
        "graph": graph, "kernel": check.kernel, "op": check.op, "tensor": dim.tensor,
        "access": dim.access, "device_dim": dim.device_dim, "span_bytes": dim.span_bytes,
        "limit_bytes": check.limit,
        "planner_decision": _planner_decision(plan.get(check.op), dim)}
