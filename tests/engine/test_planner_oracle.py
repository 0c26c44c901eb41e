"""Planner oracle: the planner's answer is the first combination the verifier accepts.

Over seeded random ops (Pointwise ops over permuted inputs and reductions over
every axis, fp16/fp32, ranks 1-4, limits 1-64 KiB), the planner's decision must
equal a brute force written here that knows nothing of the policy's facts: it
walks every combination of the legal split counts of the host dims the search
considers, in the policy's cost order, and accepts the first one the
independent verifier (``verify_spans``, enumeration) accepts on every access the
tiled code performs:

* the per-tile output buffer;
* each tile's write into the full output buffer (the output may be read outside
  the loop), per tile at its shifted symbols;
* each tile's input reads over the whole inner device extent, every
  coordinate included: one driven by reduction symbols is measured per tile
  when a reduction level splits them (split dim ``rank + r``), over the whole
  reduction range otherwise (an accepted plan is span-safe for every access).

and whose every tile is a rigid translation of the first for the full-buffer
write and each read (each element's offset enumerated: tile t is tile 0 moved
by one constant stride per tiled dim, what the loop's affine offsets do), so
every plan the planner accepts is one codegen can address.

The planner is ``Unsupported`` exactly when no combination of any of the op's
split dims (output dims and reduction dims, not only those its candidates named)
exists, or when more dims overflow than its bounded search tries (the policy's
``too_many_dims``, refused by name); an op left without a plan must fit untiled or have no split of any of its
dims that fits.  The 256 random ops (at least 250) are captured eight to a graph
(independent ops, one capture), each graph planned at its own random limit, so
the test stays within about a minute of CPU.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest
import torch

import spyre_rules
import spyre_rules.engine
from spyre_rules import config
from spyre_rules.engine.api import evaluator
from spyre_rules.facts.coordinates import access_coordinates, device_coordinates
from spyre_rules.facts import op_facts as facts
from spyre_rules.facts.op_facts import op_facts
from spyre_rules.facts.per_tile import split_by_symbol
from spyre_rules.facts.stick_layout import dtype_info

from helpers import _check_coords, by_name, plan_translates, span_problems, tile_of

#: 32 graphs of 8 independent random ops: 256 ops, each planned at its graph's random limit
GRAPHS = 32
OPS_PER_GRAPH = 8
LIMITS_PER_GRAPH = 1
LIMITS = [1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152, 65536]
SIZES = [1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64, 96, 128]


def _program(seed: int):
    rng = random.Random(seed)
    dtype = rng.choice([torch.float16, torch.float32])
    rank = rng.randint(1, 4)
    while True:
        shape = [rng.choice(SIZES) for _ in range(rank - 1)] + [rng.choice([64, 128, 32, 96] + SIZES)]
        if 256 <= math.prod(shape) * dtype.itemsize <= 96 * 1024:
            break
    perm = list(range(rank))
    rng.shuffle(perm)
    kind = rng.choice(["pointwise", "add_permuted", "reduction"] if rank > 1 else ["pointwise"])
    x = torch.randn(*shape).to(dtype)
    if kind == "pointwise":
        return f"x.permute({perm}) * 2 on {shape} {dtype}", (lambda t: t.permute(perm) * 2.0), (x,)
    if kind == "add_permuted":
        y = torch.randn(*[shape[p] for p in perm]).to(dtype)
        return (f"x.permute({perm}) + y on {shape} {dtype}",
                (lambda a, b: a.permute(perm) + b), (x, y))
    dim = rng.randrange(rank)
    op = rng.choice(["sum", "amax"])
    fn = (lambda t: t.permute(perm).sum(dim=dim)) if op == "sum" else \
        (lambda t: t.permute(perm).amax(dim=dim))
    return f"x.permute({perm}).{op}(dim={dim}) on {shape} {dtype}", fn, (x,)


# ------------------------------------------------------------------ the verifier side


def _problems(op, key, limit):
    """Every access the tiled code performs, measured by the verifier (empty: fits)."""
    facts = op_facts(op)
    view = facts.output_view(key)
    if not view:
        return [f"no per-tile view: {view}"]
    problems = _check_coords("per-tile buffer", view.device_layout.device_size, view.coords,
                             view.range_map, view.itemsize, limit, {})
    layout, write = op.layout, facts.write
    per_symbol = split_by_symbol(facts.split_dims, key)
    coords = device_coordinates(layout.device_layout, write.index, write.ranges)
    ranges = {s: tile_of(r, per_symbol.get(s, 1)) for s, r in write.ranges.items()}
    steps = {s: (ranges[s], k) for s, k in per_symbol.items() if s in ranges}
    problems += _check_coords("full-buffer write", layout.device_layout.device_size, coords,
                              ranges, dtype_info(layout.dtype).itemsize, limit, steps)
    for read in facts.input_reads():
        dep, rl = facts.dep_of(read), read.layout
        coords = access_coordinates(rl.device_layout, rl.size, rl.stride, rl.offset,
                                    dep.index, dep.ranges)
        # Every coordinate counts, reduction-driven ones too (a reduction level
        # splits them: measured per tile; otherwise over the whole reduction range).
        ranges = {s: tile_of(r, per_symbol.get(s, 1)) for s, r in dep.ranges.items()}
        steps = {s: (ranges[s], k) for s, k in per_symbol.items() if s in ranges}
        problems += _check_coords(f"read of {read.buffer}", rl.device_layout.device_size, coords,
                                  ranges, dtype_info(rl.dtype).itemsize, limit, steps)
    return problems


def _cost(counts):
    return (math.prod(counts), sum(1 for k in counts if k > 1), max(counts), list(counts))


def brute_force(op, dims, limit, ev):
    """The first combination, in cost order, the verifier accepts (None: none does)."""
    lists = [ev.legal_splits(op, d) for d in dims]
    for counts in sorted(itertools.product(*lists), key=_cost):
        if all(k == 1 for k in counts):
            continue
        key = tuple(sorted((d, k) for d, k in zip(dims, counts) if k > 1))
        if not _problems(op, key, limit) and plan_translates(op, key):
            return key
    return None


def _search_dims(decision):
    """The host dims the search considered: those of the emitted candidates, by pressure."""
    pressure: dict[int, list[int]] = {}
    emits = [(s.values["host_dim"], s.values["span_bytes"]) for s in decision.trace
             if s.section == "candidates" and s.outcome == "emit"]
    for i, (d, span) in enumerate(emits):
        entry = pressure.setdefault(d, [span, i])
        entry[0] = max(entry[0], span)
    return sorted(pressure, key=lambda d: (-pressure[d][0], pressure[d][1]))


def _split_dims(op) -> list[int]:
    """Every split dim of ``op``: its output dims, then ``rank + r`` per reduction dim."""
    facts = op_facts(op)
    return sorted(set(range(len(op.data.ranges))) | set(facts.reduction_dims.values()))


_CAPTURED: dict[int, tuple] = {}


def _captured(graph):
    """Graph ``graph``: the ``OPS_PER_GRAPH`` programs ``graph * OPS_PER_GRAPH + j``,
    independent (no shared input), captured as one graph -- one capture for many
    ops.  Returns the programs' descriptions, the ops, and per graph-input name
    (``arg<i>_1``) the description of the program it feeds."""
    if graph not in _CAPTURED:
        programs = [_program(graph * OPS_PER_GRAPH + j) for j in range(OPS_PER_GRAPH)]
        owner, inputs = {}, []
        for what, _, xs in programs:
            for x in xs:
                owner[f"arg{len(inputs)}_1"] = what  # Inductor's name of graph input i
                inputs.append(x)

        def fn(*flat):
            out, at = [], 0
            for _, f, xs in programs:
                out.append(f(*flat[at:at + len(xs)]))
                at += len(xs)
            return tuple(out)

        torch._dynamo.reset()
        _CAPTURED[graph] = ([what for what, _, _ in programs],
                            spyre_rules.capture_operations(fn, *inputs), owner)
    return _CAPTURED[graph]


def _described(ops, op, owner) -> str:
    """The program ``op`` belongs to (through the buffers it reads), for messages."""
    seen, todo, found = set(), [op.get_name()], []
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in owner:
            found.append(owner[name])
            continue
        producer = next((o for o in ops if o.get_name() == name), None)
        if producer is not None:
            todo += sorted(facts.read_buffers(producer))
    return "; ".join(sorted(set(found))) or "?"


@pytest.mark.parametrize("graph", range(GRAPHS))
def test_planner_equals_verifier_brute_force(graph):
    whats, ops, owner = _captured(graph)
    for limit in random.Random(graph).sample(LIMITS, LIMITS_PER_GRAPH):
        with config.patch(max_span_bytes=limit, sencores=1):
            decisions = spyre_rules.engine.plan_graph(ops)
            ev = evaluator()
            for decision in decisions:
                op = by_name(ops, decision.op)
                with ops.graph_context(0):
                    where = (f"{_described(ops, op, owner)} at {limit} B: {decision.op} "
                             f"{decision.decision} {decision.reason}")
                    if decision.decision == "no plan":
                        # Nothing to tile: the op fits untiled, or no split of any of
                        # its dims (output or reduction) makes it fit (never a refused
                        # safe plan).
                        if op_facts(op).write is not None and _problems(op, (), limit):
                            assert brute_force(op, _split_dims(op), limit, ev) is None, where
                        continue
                    bounded = [s for s in decision.trace
                               if s.section == "search" and s.rule == "too_many_dims"]
                    if bounded:
                        # The policy's documented search bound (a permuted output tiles in
                        # its memory order, so four dims may overflow at once): refused by
                        # name, never by a wrong answer.
                        limit_dims = int(bounded[0].message.rsplit(" ", 1)[1])
                        assert decision.decision == "unsupported", where
                        assert len(_search_dims(decision)) > limit_dims, where
                        continue
                    expected = brute_force(op, _search_dims(decision), limit, ev)
                    got = decision.plan.splits if decision.plan else None
                    got = None if got is None else tuple(sorted((int(d), int(k)) for d, k in got))
                    assert got == expected, where
                    assert got is None or plan_translates(op, got), where
                    if got is None and set(_split_dims(op)) - set(_search_dims(decision)):
                        # Unsupported only when no combination of *any* of its split
                        # dims exists, not only of those the candidates named.
                        assert brute_force(op, _split_dims(op), limit, ev) is None, where


def test_the_oracle_set_is_at_least_250_random_ops_of_every_kind():
    """The random set the oracle test plans: at least 250 independent ops drawn over
    pointwise ops on permuted inputs and reductions, both dtypes, ranks 1-4, and
    limits from 1 to 64 KiB (captures not needed: the generator is pure)."""
    programs = [_program(seed) for seed in range(GRAPHS * OPS_PER_GRAPH)]
    assert len(programs) >= 250
    whats = [what for what, _, _ in programs]
    kinds = {"pointwise": " * 2 on ", "add_permuted": ") + y on ", "sum": ".sum(dim=",
             "amax": ".amax(dim="}
    assert {k: sum(needle in w for w in whats) >= 20 for k, needle in kinds.items()} == dict.fromkeys(
        kinds, True)
    assert {str(xs[0].dtype) for _, _, xs in programs} == {"torch.float16", "torch.float32"}
    assert {xs[0].dim() for _, _, xs in programs} == {1, 2, 3, 4}
    assert any("permute([" in w and w.split("permute(")[1].split(")")[0] !=
               str(list(range(xs[0].dim()))) for w, (_, _, xs) in zip(whats, programs))
    # reductions over every axis of every rank
    reduced = {(xs[0].dim(), int(w.split("(dim=")[1].split(")")[0]))
               for w, (_, _, xs) in zip(whats, programs) if "(dim=" in w}
    assert reduced == {(r, d) for r in (2, 3, 4) for d in range(r)}
    limits = {lim for g in range(GRAPHS) for lim in random.Random(g).sample(LIMITS, LIMITS_PER_GRAPH)}
    assert min(limits) == 1024 and max(limits) == 65536


def test_a_plan_the_old_full_buffer_rule_refused():
    """(96, 192) fp16 at 4 KiB, one core: {0: 3, 1: 3} leaves the stick-tile coordinate
    one value per tile; the full-buffer write fits by the verifier."""
    x, y = torch.randn(96, 192).half(), torch.randn(96, 192).half()
    torch._dynamo.reset()
    ops = spyre_rules.capture_operations(lambda a, b: a + b, x, y)
    with config.patch(max_span_bytes=4096, sencores=1):
        (decision,) = spyre_rules.engine.plan_graph(ops)
        assert decision.decision == "plan"
        assert tuple(decision.plan.splits) == ((0, 3), (1, 3))
        with ops.graph_context(0):
            assert _problems(by_name(ops, decision.op), ((0, 3), (1, 3)), 4096) == []


REDUCTION_PROGRAMS = [
    ("x.sum(-1) on (4, 4096) fp16", lambda t: t.sum(-1), (torch.randn(4, 4096).half(),)),
    ("x.amax(0) on (256, 32) fp32", lambda t: t.amax(0), (torch.randn(256, 32),)),
    ("x.permute(1, 0).sum(-1) on (512, 24) fp16", lambda t: t.permute(1, 0).sum(-1),
     (torch.randn(512, 24).half(),)),
]


@pytest.mark.parametrize("index", range(len(REDUCTION_PROGRAMS)))
def test_reduction_levels_equal_verifier_brute_force(index):
    """Spans only a reduction symbol drives: the planner's reduction level (split dim
    rank + r) is the first combination the verifier accepts, at every limit."""
    what, fn, inputs = REDUCTION_PROGRAMS[index]
    torch._dynamo.reset()
    ops = spyre_rules.capture_operations(fn, *inputs)
    reduction_plans = 0
    for limit in (1024, 2048, 4096, 8192):
        with config.patch(max_span_bytes=limit, sencores=1):
            (decision,) = spyre_rules.engine.plan_graph(ops)
            op = by_name(ops, decision.op)
            with ops.graph_context(0):
                where = f"{what} at {limit} B: {decision.decision} {decision.reason}"
                if decision.decision == "no plan":
                    assert not _problems(op, (), limit), where
                    continue
                expected = brute_force(op, _search_dims(decision), limit, evaluator())
                got = decision.plan.splits if decision.plan else None
                assert (None if got is None else tuple(sorted(got))) == expected, where
                if decision.plan is not None:
                    reduction_plans += any(lv.is_reduction for lv in decision.plan.levels)
    assert reduction_plans >= 1, what
