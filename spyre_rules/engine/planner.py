"""The per-op planner: the section semantics of docs/rules_language.md §6.0-§6.5.

An :class:`Evaluator` runs one policy under one configuration snapshot.  It is
the evaluation context rules see (``legal_splits``, ``conforms`` and a
generator's name in validation call back into it) and it caches, per op,
legality per host dim, validation per tiling and generator re-runs per tiling,
so a decision asks each question once.  Facts cache their own measurements
per op snapshot (``spyre_rules.facts.op_facts``).

Everything this module decides comes from the policy: bounds, orders, costs,
conditions and messages.  It implements only the fixed algorithm of each
section kind.
"""

from __future__ import annotations

import itertools
from typing import Any

from spyre_rules.errors import Unsupported
from spyre_rules.engine.compile import BASE, CTX, EvalError
from spyre_rules.engine.policy import Policy
from spyre_rules.engine.program import Generator, Requirement, Rule
from spyre_rules.engine.records import (
    NO_PLAN, PLAN, UNSUPPORTED, ChunkingInfo, OpDecision, SpanOverflowTileLevel,
    SpanOverflowTilePlan, TraceStep,
)
from spyre_rules.engine.values import Combo, DimGroup, Level, PlanRecord, Tiling, sort_key
from spyre_rules.ir.op_identity import ir_class, op_name

__all__ = ["Evaluator", "cap_splits"]

_UNTILED = Tiling(())


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


class _Legality:
    __slots__ = ("legal", "rejected", "guard")

    def __init__(self, legal: list[int], rejected: dict[int, str], guard: tuple[str, str] | None):
        self.legal = legal
        self.rejected = rejected
        self.guard = guard  # (rule, message) of a reject guard that fired


class Evaluator:
    """Runs the policy's sections for ops under one configuration snapshot."""

    def __init__(self, policy: Policy, config: dict[str, Any]) -> None:
        self.policy = policy
        self.program = policy.program
        self.config = config
        self.trace: list[TraceStep] = []
        self._legality: dict[tuple[int, int], _Legality] = {}
        self._validation: dict[tuple[int, Tiling], tuple[bool, Requirement | None]] = {}
        self._reruns: dict[tuple[int, str, Tiling], list] = {}
        self._vetoes: dict[tuple[int, Tiling], list[str]] = {}
        # The veto's limit is the hardware setting itself, whatever the prelude declares.
        from spyre_rules import config as settings

        self.span_limit = int(settings.config.max_span_bytes)
        self._keep: list[Any] = []  # ops keyed by id() above stay alive while cached

    # ---------------------------------------------------------------- helpers
    def env(self, **names: Any) -> dict:
        env = dict(names)
        env[CTX] = self
        return env

    def record(self, section: str, rule: str, outcome: str, message: str | None = None,
               **values: Any) -> None:
        self.trace.append(TraceStep(section, rule, outcome, message, values))

    def _fail(self, op: Any, where: str, err: EvalError) -> Unsupported:
        return Unsupported(f"Cannot plan {op_name(op)}: rule {where} failed: {err}")

    def fire(self, rule: Rule, env: dict) -> tuple[str | None, dict[str, Any]]:
        """Message and watched values of a rule that fired."""
        message = rule.message(env) if rule.message is not None else None
        return message, {label: get(env) for label, get in rule.watch}

    def first_match(self, rules: list[Rule], env: dict, op: Any) -> tuple[Rule, str | None] | None:
        """The first rule whose guard holds (recorded in the trace), or None."""
        for rule in rules:
            try:
                if rule.guard is None or rule.guard(env):
                    message, values = self.fire(rule, env)
                    self.trace.append(TraceStep(rule.section, rule.name, rule.action, message, values))
                    return rule, message
            except EvalError as err:
                raise self._fail(op, f"{rule.section}.{rule.name}", err) from None
        return None

    def failing(self, requires: list[Requirement], env: dict, op: Any) -> Requirement | None:
        """The first requirement that does not hold, or None if all hold."""
        for req in requires:
            try:
                if not req.cond(env):
                    return req
            except EvalError as err:
                raise self._fail(op, f"{req.section}.{req.name}", err) from None
        return None

    def _message(self, req: Requirement, env: dict) -> str:
        return req.message(env) if req.message is not None else req.name

    def _keep_alive(self, op: Any) -> None:
        if not self._keep or self._keep[-1] is not op:
            self._keep.append(op)

    # ------------------------------------------------------------- candidates
    def run_generator(self, gen: Generator, op: Any, tile: Tiling) -> list[tuple[Any, dict]]:
        out: list[tuple[Any, dict]] = []
        try:
            gen.run(self.env(op=op, tile=tile), out)
        except EvalError as err:
            raise self._fail(op, f"candidates.{gen.name}", err) from None
        return out

    def candidates(self, op: Any) -> list[tuple[str, Any]]:
        found = []
        for gen in self.program.generators:
            for cand, seen in self.run_generator(gen, op, _UNTILED):
                self.record("candidates", gen.name, "emit", getattr(cand, "reason", None),
                            host_dim=cand.host_dim, span_bytes=cand.span_bytes, **{
                                k: v for k, v in seen.items() if k not in ("host_dim", "span_bytes")})
                found.append((gen.name, cand))
        return found

    def rerun_generator(self, gen: Generator, env: dict) -> list:
        """A generator's candidates on the per-tile view of ``env``'s (op, tile)."""
        op, tile = env["op"], Tiling(env["tile"])
        key = (id(op), gen.name, tile)
        if key not in self._reruns:
            self._keep_alive(op)
            self._reruns[key] = [c for c, _ in self.run_generator(gen, op, tile)]
        return self._reruns[key]

    # --------------------------------------------------------------- legality
    def legality(self, op: Any, dim: int) -> _Legality:
        key = (id(op), dim)
        found = self._legality.get(key)
        if found is not None:
            return found
        self._keep_alive(op)
        leg = self.program.legality
        env = self.env(op=op, dim=dim)
        fired = self.first_match(leg.guards, env, op)
        if fired is not None:
            result = _Legality([], {}, (fired[0].name, fired[1] or fired[0].name))
        else:
            try:
                values = leg.splits(env)
            except EvalError as err:
                raise self._fail(op, "legality.splits", err) from None
            legal, rejected = [1], {}
            for k in sorted({v for v in values if v > 1}):
                kenv = dict(env)
                kenv[BASE] = env
                kenv[leg.splits_key] = k
                req = self.failing(leg.requires, kenv, op)
                if req is None:
                    legal.append(k)
                else:
                    rejected[k] = req.name
            result = _Legality(legal, rejected, None)
            self.record("legality", "splits", "legal", None, op=op, dim=dim, legal=legal,
                        rejected=[f"{k}: {r}" for k, r in rejected.items()])
        self._legality[key] = result
        return result

    def legal_splits(self, op: Any, dim: int) -> list[int]:
        """The ``legal_splits`` builtin: ``[]`` when a legality guard fires."""
        result = self.legality(op, dim)
        return [] if result.guard is not None else list(result.legal)

    # ------------------------------------------------------------- validation
    def validate(self, op: Any, tile: Tiling) -> tuple[bool, Requirement | None]:
        key = (id(op), tile)
        if key not in self._validation:
            self._keep_alive(op)
            env = self.env(op=op, tile=tile)
            req = self.failing(self.program.validation, env, op)
            if req is None:
                self.record("validation", "accepted", "accept", None, op=op, tile=tile)
            else:
                self.record("validation", req.name, "fail", self._message(req, env), op=op, tile=tile)
            self._validation[key] = (req is None, req)
        return self._validation[key]

    def conforms(self, op: Any, tiling: Tiling) -> bool:
        """The ``conforms`` builtin: every split legal and the tiling validates."""
        for dim, k in tiling:
            result = self.legality(op, dim)
            if result.guard is not None or k not in result.legal:
                self.record("grouping", "conforms", "false", None, op=op, tiling=tiling,
                            dim=dim, split=k)
                return False
        accepted, _ = self.validate(op, tiling)
        return accepted

    # ------------------------------------------------------------------ veto
    def veto(self, op: Any, tile: Tiling, accepted_by: str) -> None:
        """Raise Unsupported unless the independent span verifier accepts every
        access of ``op`` tiled by ``tile`` (``engine/veto.py``); ``accepted_by``
        names the rule that accepted the plan."""
        from spyre_rules.engine.veto import plan_problems

        key = (id(op), tile)
        if key not in self._vetoes:
            self._keep_alive(op)
            self._vetoes[key] = plan_problems(op, tile, self.span_limit)
        problems = self._vetoes[key]
        if problems:
            self.record("veto", "span_verifier", "refuse", "; ".join(problems), op=op, tile=tile)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise Unsupported(f"Cannot auto-tile {op_name(op)}: the span verifier refuses split {tile!r}, "
                              f"which {accepted_by} accepted: {problems[0]}{more}")

    def accepted_by(self) -> str:
        names = ", ".join(f"`{r.name}`" for r in self.program.validation)
        return f"the `validation` section (requirements {names or 'none'} held)"

    # ----------------------------------------------------------------- search
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
        fired = self.first_match(search.guards, self.env(op=op, dims=dims), op)
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
            self.record("search", "required", "splits", None, dim=g.dim, required=required, kept=kept)
            per_dim.append(kept)

        slot, cost_fn = search.cost
        combos = [Combo(list(dims), list(counts)) for counts in itertools.product(*per_dim)]
        try:
            combos.sort(key=lambda c: sort_key(cost_fn(self.env(op=op) | {slot: c})))
        except EvalError as err:
            raise self._fail(op, "search.cost", err) from None
        tried = 0
        for combo in combos[: bounds["max_combos"]]:
            if all(k == 1 for k in combo.counts):
                continue
            tile = Tiling.of(zip(combo.dims, combo.counts))
            tried += 1
            accepted, _ = self.validate(op, tile)
            if accepted:
                self.veto(op, tile, self.accepted_by())
                return self._plan(op, found, tile)
        message = search.exhausted(self.env(op=op, dims=dims, tried=tried))
        self.record("search", "exhausted", "reject", message, dims=dims, tried=tried)
        raise Unsupported(message)

    def _plan(self, op: Any, found: list[tuple[str, Any]], tile: Tiling) -> SpanOverflowTilePlan:
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

    # ---------------------------------------------------------------- one op
    def decide(self, op: Any) -> OpDecision:
        """The op's decision and trace; an Unsupported is recorded, not raised."""
        start = len(self.trace)
        name, kind = op_name(op), ir_class(op)
        try:
            plan, reason = self._decide(op)
        except Unsupported as err:
            return OpDecision(name, kind, UNSUPPORTED, None, str(err), self.trace[start:], err)
        decision = PLAN if plan is not None else NO_PLAN
        return OpDecision(name, kind, decision, plan, reason, self.trace[start:])

    def _decide(self, op: Any) -> tuple[SpanOverflowTilePlan | None, str | None]:
        fired = self.first_match(self.program.eligibility, self.env(op=op), op)
        if fired is not None:
            rule, message = fired
            if rule.action == "reject":
                raise Unsupported(message or rule.name)
            return None, message or rule.name
        found = self.candidates(op)
        if not found:
            self.record("candidates", "none", "no plan", "no span exceeds the limit")
            return None, "no span exceeds the limit"
        plan = self.search(op, found)
        self.record("search", "plan", "plan", plan.reason, levels=list(plan.splits))
        return plan, plan.reason


def plan_record(plan: SpanOverflowTilePlan) -> PlanRecord:
    """The ``Plan`` value rules see in grouping."""
    levels = [Level(lv.selected_host_dim, lv.split_count, lv.is_reduction) for lv in plan.levels]
    return PlanRecord(levels, Tiling.of(plan.splits), plan.reason or "")
