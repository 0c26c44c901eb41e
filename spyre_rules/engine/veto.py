"""The verifier's veto: no automatic plan is applied unless the independent span
verifier accepts every access the tiled code performs.

The policy (``rules/``) decides which plan to try; safety must not depend on it.
Before a plan (or a coarse-tile group's conformed split) is applied, this
module measures, with ``spyre_rules.facts.verifier.verify_spans`` (brute-force
enumeration, sharing no reasoning with the span facts the rules read):

* the per-tile output buffer the tiled kernel writes;
* every tile's write into the full output buffer (a tiled output read outside
  its loop is copied tile by tile into it; the planner cannot see the
  consumers, so it is always measured);
* every input read, every tile, over the whole inner device extent, the
  coordinates driven by a reduction symbol included (over the whole reduction
  range unless a reduction level splits it, then per tile like an output
  symbol): an accepted plan is span-safe for every access the code performs.

Each non-stick device coordinate is measured on its own over its own symbols,
for every tile (tile ``t`` reads a tiled symbol at ``s + t * R/k``; one tile
suffices when a tile step moves the coordinate by a constant).  A coordinate
that takes one value picks a base address and is not charged (the verifier's
``varies``).  When enumeration is too large, the exact analytic bound of the
span facts (``coordinate_span_bound`` over every tile's values) stands in.
Anything that cannot be measured is a refusal, never a pass.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import sympy

from spyre_rules.facts.memo import structural
from spyre_rules.facts.records import by_str

__all__ = ["plan_problems"]

# Work bounds of the verifier, not policy (the veto is independent of rules/ by design):
# beyond them the sound analytic bound over every tile's values stands in.
MAX_TILE_COMBOS = 256       # tiles enumerated one by one per coordinate
MAX_POINTS = 4_194_304      # points (2**22) enumerated per coordinate and tile


def _measure(device_size, coord, d: int, ranges: dict, itemsize: int) -> int | None:
    """True span in bytes of coordinate ``d`` alone (others held at 0) over
    ``ranges``; 0 when it takes one value; None when it cannot be measured."""
    from spyre_rules.errors import VerifierError
    from spyre_rules.facts.spans import coordinate_span_bound
    from spyre_rules.facts.verifier import verify_spans

    only = [coord if j == d else sympy.Integer(0) for j in range(len(device_size))]
    points = math.prod(ranges.values()) if ranges else 1
    if points <= MAX_POINTS:
        try:
            report = verify_spans(device_size, only, ranges, itemsize, max_points=MAX_POINTS)
        except VerifierError:
            report = None
        if report is not None:
            dim = report.dims[d]
            return dim.span_bytes if dim.varies else 0
    bound = coordinate_span_bound(coord, ranges)
    if bound is None:
        return None
    inner = math.prod(int(s) for s in device_size[d + 1:])
    return 0 if bound.elems <= 1 else bound.elems * inner * itemsize


def _shift_invariant(coord, sym, step: int) -> bool:
    return not (coord.subs(sym, sym + step) - coord).free_symbols


def _check(what: str, device_size, coords, ranges: dict, itemsize: int, limit: int,
           steps: dict) -> list[str]:
    """Problems of one access: every non-stick coordinate, every tile, within ``limit``.
    ``steps``: tiled symbol -> (per-tile range, number of tiles).

    A pure function of its values, memoised on them: ops that perform the same
    access (same coordinates, ranges and device size) are measured once."""
    found = _check_values(tuple(int(s) for s in device_size), tuple(sympy.sympify(c) for c in coords),
                          tuple(ranges.items()), int(itemsize), int(limit), tuple(steps.items()))
    return [f"{what}: {problem}" for problem in found]


@structural()
def _check_values(device_size: tuple, coords: tuple, range_items: tuple, itemsize: int,
                  limit: int, step_items: tuple) -> tuple[str, ...]:
    """``_check``'s problems without the access's name in front."""
    problems: list[str] = []
    ranges, steps = dict(range_items), dict(step_items)
    for d, coord in enumerate(coords[:-1]):
        coord = sympy.sympify(coord)
        syms = sorted((s for s in coord.free_symbols if s in ranges), key=by_str)
        if not syms:
            continue
        own = {s: ranges[s] for s in syms}
        tiled = [s for s in syms if s in steps and not _shift_invariant(coord, s, steps[s][0])]
        combos = math.prod(steps[s][1] for s in tiled)
        if combos > MAX_TILE_COMBOS:
            # every tile's values lie in the full range of the tiled symbols: a sound measure
            full = {s: own[s] * (steps[s][1] if s in tiled else 1) for s in syms}
            shifted_list = [(None, coord, full)]
        else:
            shifted_list = [(tiles, coord.subs({s: s + t * steps[s][0] for s, t in zip(tiled, tiles)}), own)
                            for tiles in itertools.product(*(range(steps[s][1]) for s in tiled))]
        for tiles, shifted, rng in shifted_list:
            span = _measure(device_size, shifted, d, rng, itemsize)
            if span is not None and span <= limit:
                continue
            where = f"device dim {d} ({coord})" + (f" tile {tiles}" if tiles else "")
            if span is None:
                problems.append(f"{where}: its span cannot be measured")
                break
            if span > limit:
                problems.append(f"{where} spans {span} bytes > {limit}")
                break
    return tuple(problems)


def plan_problems(op: Any, tiling: Any, limit: int, loop_local: frozenset = frozenset()) -> list[str]:
    """Every access of ``op`` tiled by ``tiling`` (pairs ``(host_dim, split)``)
    whose true span exceeds ``limit`` bytes, or that cannot be measured; empty
    when the plan is span-safe.

    ``loop_local``: buffers of joint plans (grouping), per-tile buffers of a loop their
    one reader shares with the same split: such a buffer has no full-buffer write, and
    its reader's read of it is the per-tile output buffer its producer's veto measures."""
    from spyre_rules.facts.op_facts import op_facts
    from spyre_rules.facts.per_tile import split_by_symbol
    from spyre_rules.facts.tile_accesses import tiled_accesses

    facts = op_facts(op)
    key = tuple(sorted((int(d), int(k)) for d, k in tiling if int(k) > 1))
    view = facts.output_view(key)
    if not view:
        return [f"the per-tile output cannot be rebuilt: {getattr(view, 'reason', view)}"]
    problems = _check("per-tile output buffer", view.device_layout.device_size, view.coords,
                      view.range_map, view.itemsize, limit, {})
    per_symbol = split_by_symbol(facts.split_dims, key)
    try:
        accesses, found = tiled_accesses(op, per_symbol, reads=True, zero_reduction=False)
        problems += found
        if accesses and facts.name in loop_local:
            accesses = accesses[1:]  # the full-buffer write comes first
        local_reads = {f"read of {name}" for name in loop_local}
        for access, ranges, steps in accesses:
            if access.what in local_reads:
                continue
            problems += _check(access.what, access.device_size, access.coords, ranges,
                               access.itemsize, limit, steps)
    except Exception as exc:  # noqa: BLE001 - an access that cannot be measured is refused
        problems.append(f"the accesses cannot be measured: {type(exc).__name__}: {exc}")
    return problems
