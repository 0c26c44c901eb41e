"""Property: on random real programs, every plan is span-safe and the cheapest legal one.

For random shapes, dtypes, permutations, reduction dims and span limits, each
captured op's decision is checked against

* the independent verifier (brute-force enumeration of the per-tile buffer and
  of every tile's full-buffer write): no accepted plan lets a span exceed the limit;
* a brute-force search written here from the documented semantics (search
  order, required split, capping, cost order, combo bound, validation): over
  the same legal splits, the first valid combination in cost order is exactly
  the plan, and when there is none the op is Unsupported.

Deterministic (derandomized, no example database) and small: each example is
one ~0.3 s capture.
"""

from __future__ import annotations

import itertools
import math

import torch
from hypothesis import HealthCheck, given, settings, strategies as st

import spyre_rules
from spyre_rules import config
from spyre_rules.engine.api import evaluator
from spyre_rules.engine.policy import get_policy
from spyre_rules.facts import op_facts as facts

from helpers import by_name, span_problems

SIZES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 40, 48, 64, 96, 128]
STICK_FRIENDLY = [64, 128, 192, 256]
DTYPES = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}


@st.composite
def programs(draw):
    rank = draw(st.integers(2, 4))
    shape = tuple(draw(st.sampled_from(SIZES)) for _ in range(rank - 1))
    shape += (draw(st.sampled_from(STICK_FRIENDLY + SIZES)),)
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    identity = tuple(range(rank))
    perm = draw(st.one_of(st.just(identity), st.permutations(identity).map(tuple)))
    kind = draw(st.sampled_from(["pointwise", "sum", "chain"]))
    dim = draw(st.integers(0, rank - 1))
    total = math.prod(shape) * DTYPES[dtype].itemsize
    divisor = draw(st.sampled_from([2, 3, 4, 6, 8, 16, 64]))
    limit = max(256, total // divisor)
    return kind, shape, dtype, perm, dim, limit


def _program(kind, perm, dim):
    if kind == "pointwise":
        return lambda x: x.permute(perm) + 1
    if kind == "sum":
        return lambda x: x.permute(perm).sum(dim=dim)
    return lambda x: (x + 1).permute(perm) * 2


# ------------------------------------------------------------ brute force


def _cost(counts):
    return (math.prod(counts), sum(1 for k in counts if k > 1), max(counts), list(counts))


def _cap(legal, required, bounds):
    if len(legal) <= bounds["max_splits_per_dim"]:
        return legal
    keep = set(legal[: bounds["keep_smallest_splits"]])
    i = next((j for j, k in enumerate(legal) if k >= required), len(legal) - 1)
    r = bounds["split_window_radius"]
    keep.update(legal[max(0, i - r): i + r + 1])
    for k in reversed(legal):
        if len(keep) >= bounds["max_splits_per_dim"]:
            break
        keep.add(k)
    return sorted(keep)[: bounds["max_splits_per_dim"]]


def _overflows(coords, out_syms, limit):
    return [c for c in coords if not c.is_stick and c.symbols and c.symbols <= out_syms
            and c.span_bytes is not None and c.span_elems > 1 and c.span_bytes > limit]


def _splittable(op):
    """The reductions the policy lets a reduction level split (planner.rules)."""
    kind = facts.reduction_type(op)
    return kind in {"sum", "batchmatmul", "max", "min", "any"} or (
        kind == "prod" and facts.output_dtype(op) in {"int32", "int64", "bool"})


def _valid(op, tile, limit, ev):
    """The documented validation, written out directly over the facts."""
    if not facts.has_output_coords(op, tile):
        return False
    out_syms = facts.output_symbols(op)
    if any(facts.output_dim(op, s) is not None
           for c in _overflows(facts.output_coords(op, tile), out_syms, limit) for s in c.symbols):
        return False
    if facts.is_reduction(op):
        for r in facts.input_reads(op):
            for c in _overflows(facts.read_coords(op, r, tile), out_syms, limit):
                dims = {facts.output_dim(op, s) for s in c.symbols} - {None}
                if any(len(ev.legal_splits(op, d)) > 1 for d in dims):
                    return False
    # input_reads_fit: every read coordinate only output symbols drive fits
    for r in facts.input_reads(op):
        for c in facts.read_coords(op, r, tile):
            if c.is_stick or not c.symbols or not c.symbols <= out_syms:
                continue
            if c.span_elems is not None and c.span_elems <= 1:
                continue
            if c.span_bytes is None or c.span_bytes > limit:
                return False
    if facts.is_reduction(op) and _splittable(op):
        for r in facts.input_reads(op):
            for c in facts.read_coords(op, r, tile):
                if (c.is_stick or not c.symbols or c.symbols & out_syms or c.span_bytes is None
                        or not c.span_elems or c.span_elems <= 1 or c.span_bytes <= limit):
                    continue
                dims = {facts.reduction_split_dim(op, s) for s in c.symbols} - {None}
                if any(len(ev.legal_splits(op, d)) > 1 for d in dims):
                    return False
    full = facts.full_output_coords(op, tile)
    return bool(full) and all(c.span_bytes is not None and c.span_bytes <= limit
                              for c in full if not c.is_stick and c.symbols and c.span_elems != 1)


def brute_force(op, decision, limit, ev):
    """The plan the documented search must find, or None if none is valid."""
    emits = [(s.values["host_dim"], s.values["span_bytes"]) for s in decision.trace
             if s.section == "candidates" and s.outcome == "emit"]
    pressure: dict[int, list[int]] = {}
    for i, (d, span) in enumerate(emits):
        entry = pressure.setdefault(d, [span, i])
        entry[0] = max(entry[0], span)
    dims = sorted(pressure, key=lambda d: (-pressure[d][0], pressure[d][1]))
    bounds = get_policy().program.search.bounds
    lists = [_cap(ev.legal_splits(op, d), max(1, -(-pressure[d][0] // limit)), bounds) for d in dims]
    combos = sorted(itertools.product(*lists), key=_cost)[: bounds["max_combos"]]
    for counts in combos:
        if all(k == 1 for k in counts):
            continue
        tile = tuple(sorted((d, k) for d, k in zip(dims, counts) if k > 1))
        if _valid(op, tile, limit, ev):
            return tile
    return None


# ----------------------------------------------------------------- property


@settings(max_examples=36, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(programs())
def test_plans_are_safe_and_cheapest(program):
    kind, shape, dtype, perm, dim, limit = program
    x = torch.randn(shape, dtype=DTYPES[dtype])
    torch._dynamo.reset()  # else Dynamo's automatic dynamic shapes kick in across examples
    ops = spyre_rules.capture_operations(_program(kind, perm, dim), x)
    with config.patch(max_span_bytes=limit):
        decisions = spyre_rules.engine.plan_graph(ops)
        ev = evaluator()
        for decision in decisions:
            op = by_name(ops, decision.op)
            with ops.graph_context(0):
                if decision.decision == "plan":
                    assert span_problems(op, decision.plan.splits, limit) == [], decision.trace
                if decision.decision == "no plan":
                    continue
                if len(decision.trace) and decision.trace[-1].rule == "too_many_dims":
                    continue  # the search never ran
                expected = brute_force(op, decision, limit, ev)
            got = decision.plan.splits if decision.plan else None
            assert got == expected, (program, decision.op, decision.reason)
