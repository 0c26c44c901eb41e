"""The ``search`` section: the cheapest legal, validated tiling of an op (docs/rules_language.md §6.4).

The section kind's check is its record ``SPEC`` (``lang/sections/search.py``:
``BOUNDS``, the ``order`` / ``required`` / ``cost`` binders and ``exhausted``);
this module compiles it and runs it.

The candidates' host dims are grouped and ordered by ``order``; a ``reject``
guard may refuse the op; each dim's legal split counts are capped around its
``required`` count (:func:`cap_splits`); the combinations are tried cheapest
``cost`` first, up to ``max_combos``, and the first one validation accepts (and
the span verifier does not veto) is the plan.  None: with the optional bound
``widen_to_dims``, the op's other output host dims join and the combinations that
split one of them are tried the same way; none again: ``exhausted``.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

from spyre_rules.errors import Unsupported
from spyre_rules.lang import ast as A
from spyre_rules.engine.compile import EvalError, Fn
from spyre_rules.lang.sections.search import BOUNDS, OPTIONAL_BOUNDS, SPEC
from spyre_rules.engine.program import ItemCompiler, Rule
from spyre_rules.engine.records import ChunkingInfo, SpanOverflowTileLevel, SpanOverflowTilePlan
from spyre_rules.engine.span_floor import below_floor, read_floors, viable_counts
from spyre_rules.engine.values import Combo, DimGroup, Tiling, sort_key

__all__ = ["SPEC", "Search", "SearchEvaluation", "cap_splits", "compile_search"]


@dataclasses.dataclass
class Search:
    bounds: dict[str, int]
    order: tuple[Any, Fn]       # (binder slot, key)
    required: tuple[Any, Fn]
    cost: tuple[Any, Fn]
    guards: list[Rule]
    exhausted: Fn


def compile_search(ic: ItemCompiler, sec: A.Section) -> Search:
    guards: list[Rule] = []
    binders: dict[type, tuple[Any, Fn]] = {}
    exhausted: Fn | None = None
    for item in sec.items:
        if isinstance(item, A.LetItem):
            ic.let(item)
        elif isinstance(item, (A.OrderItem, A.RequiredItem, A.CostItem)):
            value = item.key if not isinstance(item, A.RequiredItem) else item.value
            binders[type(item)] = (ic.c.slot(item.var), ic.c.expr(value))
        elif isinstance(item, A.Decision):
            guards.append(ic.rule("search", item))
        elif isinstance(item, A.ExhaustedItem):
            exhausted = ic.c.template(item.message)
    assert exhausted is not None
    bounds = {k: v for k, v in ic.resolution.bounds.items() if k in BOUNDS + OPTIONAL_BOUNDS}
    return Search(bounds, binders[A.OrderItem], binders[A.RequiredItem],
                  binders[A.CostItem], guards, exhausted)


def cap_splits(legal: list[int], required: int, max_splits: int, keep_smallest: int,
               radius: int) -> list[int]:
    """The split counts kept for one dim when there are too many (docs/layout_model.md §4.4):
    the smallest ones, a window around the first count >= ``required``, then the
    largest ones, in ascending order."""
    if len(legal) <= max_splits:
        return list(legal)
    last = len(legal) - 1
    selected = set(legal[:keep_smallest])
    i = next((j for j, k in enumerate(legal) if k >= required), last)
    selected.update(legal[max(0, i - radius): min(last, i + radius) + 1])
    for k in reversed(legal):
        if len(selected) >= max_splits:
            break
        selected.add(k)
    return sorted(selected)[:max_splits]


class SearchEvaluation:
    """The planner's search (mixed into ``planner.Evaluator``)."""

    def search(self, op: Any, found: list[tuple[str, Any]]) -> SpanOverflowTilePlan:
        search = self.program.search
        groups: dict[int, DimGroup] = {}
        for index, (_, cand) in enumerate(found):
            g = groups.get(cand.host_dim)
            if g is None:
                groups[cand.host_dim] = DimGroup(cand.host_dim, cand.span_bytes, index, [cand])
            else:
                groups[cand.host_dim] = DimGroup(g.dim, max(g.max_span_bytes, cand.span_bytes),
                                                 g.first_index, [*g.spans, cand])
        slot, order_key = search.order
        try:
            ordered = sorted(groups.values(),
                             key=lambda g: sort_key(order_key(self.env(op=op) | {slot: g})))
        except EvalError as err:
            raise self._fail(op, "search.order", err) from None
        dims = [g.dim for g in ordered]
        self.record("search", "order", "dims", None, dims=dims)
        floors = read_floors(found, lambda d: _split_extent(op, d), lambda s: _symbol_dim(op, s))
        fired = self.first_match(
            search.guards, self.env(op=op, **self._guard_bindings(op, ordered, floors)), op)
        if fired is not None:
            raise Unsupported(fired[1] or fired[0].name)

        bounds = search.bounds
        per_dim: list[list[int]] = []
        slot, required_fn = search.required
        for g in ordered:
            try:
                required = required_fn(self.env(op=op) | {slot: g})
            except EvalError as err:
                raise self._fail(op, "search.required", err) from None
            result = self.legality(op, g.dim)
            if result.guard is not None:
                raise Unsupported(result.guard[1])
            kept = cap_splits(result.legal, required, bounds["max_splits_per_dim"],
                              bounds["keep_smallest_splits"], bounds["split_window_radius"])
            # a count below a read floor whatever the other dims do is never the plan
            kept = viable_counts(floors, g.dim, kept, self.span_limit) or kept
            self.record("search", "required", "splits", None, dim=g.dim, required=required, kept=kept)
            per_dim.append(kept)

        slot, cost_fn = search.cost
        combos = [Combo(list(dims), list(counts)) for counts in itertools.product(*per_dim)]
        try:
            combos.sort(key=lambda c: sort_key(cost_fn(self.env(op=op) | {slot: c})))
        except EvalError as err:
            raise self._fail(op, "search.cost", err) from None
        state = {"tried": 0, "last_failure": "no combination splits anything",
                 "floors": floors}
        plan = self._first_accepted(op, found, combos, bounds["max_combos"], state)
        if plan is not None:
            return plan
        # Widening (bound widen_to_dims): the scan's dims cannot fit; the op's other
        # output host dims with a legal split join the search, up to that many dims in
        # all (a span whose inner extent another dim drives shrinks when it is split too).
        extra = self._widening_dims(op, dims, bounds.get("widen_to_dims", 0))
        if extra:
            narrow = len(dims)
            dims = [*dims, *(d for d, _ in extra)]
            self.record("search", "widen", "dims", None, dims=dims)
            per_dim = [*per_dim, *(kept for _, kept in extra)]
            combos = [Combo(list(dims), list(counts)) for counts in itertools.product(*per_dim)
                      if any(k > 1 for k in counts[narrow:])]  # the others were tried
            try:
                combos.sort(key=lambda c: sort_key(cost_fn(self.env(op=op) | {slot: c})))
            except EvalError as err:
                raise self._fail(op, "search.cost", err) from None
            plan = self._first_accepted(op, found, combos, bounds["max_combos"], state)
            if plan is not None:
                return plan
        tried, last_failure = state["tried"], state["last_failure"]
        combinations = f"{tried} combination{'' if tried == 1 else 's'}"
        message = search.exhausted(self.env(op=op, dims=dims, tried=tried, combinations=combinations,
                                            last_failure=last_failure))
        self.record("search", "exhausted", "reject", message, dims=dims, tried=tried)
        raise Unsupported(message)

    def _first_accepted(self, op: Any, found: list[tuple[str, Any]], combos: list[Combo],
                        limit: int, state: dict[str, Any]) -> SpanOverflowTilePlan | None:
        """The plan of the first of ``combos[:limit]`` validation accepts (and the span
        verifier does not veto), where a combination below a read's floor
        (``span_floor.py``) is skipped and takes no place among the ``limit``; ``state``
        counts the combinations tried and keeps the last failure's message."""
        spent, floored = 0, None
        for combo in combos:
            if below_floor(state["floors"], combo.dims, combo.counts, self.span_limit):
                if floored is None and any(k > 1 for k in combo.counts):
                    floored = combo
                continue  # a read it cannot shrink enough: never the plan
            spent += 1
            if spent > limit:
                break
            if all(k == 1 for k in combo.counts):
                continue
            plan = self._try_combo(op, found, combo, state)
            if plan is not None:
                return plan
        if state["tried"] == 0 and floored is not None:
            # every combination was below a floor: the cheapest one is validated for the
            # policy's own refusal message (it cannot be accepted; if it were, it would be
            # validated and verified like any plan)
            return self._try_combo(op, found, floored, state)
        return None

    def _try_combo(self, op: Any, found: list[tuple[str, Any]], combo: Combo,
                   state: dict[str, Any]) -> SpanOverflowTilePlan | None:
        """Validate (and verify) one combination: its plan, or None with the refusing
        requirement's message kept in ``state``."""
        tile = Tiling.of(zip(combo.dims, combo.counts))
        state["tried"] += 1
        accepted, req = self.validate(op, tile)
        if accepted:
            self.veto(op, tile, self.accepted_by())
            return _plan(op, found, tile)
        if req is not None:
            state["last_failure"] = self._message(req, self.env(op=op, tile=tile))
        return None

    def _widening_dims(self, op: Any, dims: list[int], widen_to: int) -> list[tuple[int, list[int]]]:
        """The output host dims not in ``dims`` that may join a widened search, ascending,
        at most ``widen_to - len(dims)``, each with its kept split counts (capped around
        1: no span asks for a split of it).  A dim legality refuses (a guard) or that has no
        legal split above 1 stays out."""
        bounds = self.program.search.bounds
        rank = len(getattr(getattr(op, "data", None), "ranges", None) or ())
        extra: list[tuple[int, list[int]]] = []
        for d in range(rank):
            if len(dims) + len(extra) >= widen_to:
                break
            if d in dims:
                continue
            result = self.legality(op, d)
            if result.guard is not None or result.legal == [1]:
                continue
            extra.append((d, cap_splits(result.legal, 1, bounds["max_splits_per_dim"],
                                        bounds["keep_smallest_splits"], bounds["split_window_radius"])))
        return extra

    def _guard_bindings(self, op: Any, ordered: list[DimGroup], floors: list[Any]) -> dict[str, Any]:
        """The values a search guard sees (``lang/sections/search.py`` DECISION_BINDINGS)."""
        fixed = [g for g in ordered if self.legality(op, g.dim).guard is not None
                 or self.legality(op, g.dim).legal == [1]]
        open_dims = []
        for g in ordered:
            result = self.legality(op, g.dim)
            if result.guard is not None:
                continue
            counts = viable_counts(floors, g.dim, result.legal, self.span_limit) or result.legal
            if len(counts) > 1:
                open_dims.append(g.dim)
        return {
            "dims": [g.dim for g in ordered],
            "open_dims": open_dims,
            "groups": list(ordered),
            "unshrunk": "; ".join(dict.fromkeys(_access_text(c) for g in fixed for c in g.spans)),
            "refusals": "; ".join(self.legality(op, g.dim).refusals(g.dim) for g in fixed),
            "gathered": "; ".join(dict.fromkeys(_access_text(c) for g in ordered for c in g.spans
                                                if _gathered_rows(c))),
        }


def _split_extent(op: Any, dim: int) -> int | None:
    from spyre_rules.facts.reduction_facts import split_extent

    return split_extent(op, dim)


def _symbol_dim(op: Any, symbol: str) -> int | None:
    """The host dim a loop symbol walks: its output dim, else its reduction's split dim."""
    from spyre_rules.facts.access import output_dim, reduction_symbols
    from spyre_rules.facts.reduction_facts import reduction_split_dim

    dim = output_dim(op, symbol)
    if dim is not None:
        return dim
    found = [s for s in reduction_symbols(op) if str(s) == str(symbol)]
    return reduction_split_dim(op, found[0]) if len(found) == 1 else None


def _gathered_rows(cand: Any) -> bool:
    """The candidate's coordinate is driven by an indirect symbol (a gathered row)."""
    from torch._inductor.dependencies import is_indirect

    coord = getattr(cand, "coord", None)
    return coord is not None and any(is_indirect(str(s)) for s in coord.symbols)


def _access_text(cand: Any) -> str:
    """One candidate's access: its reason (rules' text) and the span it measures."""
    coord = getattr(cand, "coord", None)
    where = f"device dim {coord.dim} ({coord.expr}) " if coord is not None else ""
    return f"{cand.reason}: {where}spans {cand.span_bytes} bytes"


def _plan(op: Any, found: list[tuple[str, Any]], tile: Tiling) -> SpanOverflowTilePlan:
    # a split dim past the output dims is a reduction dim: a reduction level
    rank = len(getattr(getattr(op, "data", None), "ranges", None) or ())
    levels = tuple(SpanOverflowTileLevel(d, k, d >= rank) for d, k in tile)
    infos = []
    for _, cand in found:
        coord = getattr(cand, "coord", None)
        infos.append(ChunkingInfo(
            total_bytes=getattr(coord, "total_bytes", None),
            per_core_span=cand.span_bytes,
            core_split_estimate=1,  # no work division help assumed (docs/layout_model.md §3.4)
            selected_device_dim_size=getattr(coord, "span_elems", None),
            selected_device_span_stride_elems=getattr(coord, "inner_elems", None),
            selected_host_dim=cand.host_dim,
            stick_elems=getattr(coord, "stick_elems", None),
            reason=cand.reason,
        ))
    reason = "; ".join(sorted({c.reason for _, c in found}))
    return SpanOverflowTilePlan(levels, tuple(infos), reason)
