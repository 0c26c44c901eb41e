"""The per-op planner: docs/rules_language.md §6.0 (the planner as a whole).

An :class:`Evaluator` runs one policy under one configuration snapshot; each
section kind's semantics (§6.1-§6.5) is in its own module, mixed in here
(``eligibility.py``, ``candidates.py``, ``legality.py``, ``search.py``,
``validation.py``; grouping is ``grouping.py``).  It is
the evaluation context rules see (``legal_splits``, ``conforms`` and a
generator's name in validation call back into it) and it caches, per op,
legality per host dim, validation per tiling and generator re-runs per tiling,
so a decision asks each question once.  Facts cache their own measurements
per op snapshot (``spyre_rules.facts.op_facts``).

Everything the planner decides comes from the policy: bounds, orders, costs,
conditions and messages.  The section modules implement only the fixed
algorithm of each section kind.
"""

from __future__ import annotations

from typing import Any

from spyre_rules.errors import Unsupported, exception_chain
from spyre_rules.engine.candidates import CandidatesEvaluation
from spyre_rules.engine.compile import CTX, EvalError
from spyre_rules.engine.eligibility import EligibilityEvaluation
from spyre_rules.engine.layout_choice import LayoutChoiceEvaluation
from spyre_rules.engine.legality import LegalityEvaluation
from spyre_rules.engine.policy import Policy
from spyre_rules.engine.program import Requirement, Rule
from spyre_rules.engine.restickify import RestickifyEvaluation
from spyre_rules.engine.records import NO_PLAN, PLAN, UNSUPPORTED, OpDecision, SpanOverflowTilePlan, TraceStep
from spyre_rules.engine.search import SearchEvaluation, cap_splits
from spyre_rules.engine.validation import ValidationEvaluation
from spyre_rules.engine.values import Level, PlanRecord, Tiling
from spyre_rules.facts import memo
from spyre_rules.ir.op_identity import ir_class, op_name

__all__ = ["Evaluator", "cap_splits"]


class Evaluator(EligibilityEvaluation, CandidatesEvaluation, LegalityEvaluation, SearchEvaluation,
                ValidationEvaluation, RestickifyEvaluation, LayoutChoiceEvaluation):
    """Runs the policy's sections for ops under one configuration snapshot (each
    section kind's evaluation is its module's mixin: ``program.SECTION_MODULES``)."""

    def __init__(self, policy: Policy, config: dict[str, Any]) -> None:
        self.policy = policy
        self.program = policy.program
        self.config = config
        self.trace: list[TraceStep] = []
        self._legality: dict[tuple[int, int], Any] = {}  # legality.py
        self._validation: dict[tuple[int, Tiling, frozenset], tuple[bool, Requirement | None]] = {}
        self._reruns: dict[tuple[int, str, Tiling], list] = {}
        self._vetoes: dict[tuple[int, Tiling, frozenset], list[str]] = {}
        # The veto's limit is the hardware setting itself, whatever the prelude declares.
        from spyre_rules import config as settings

        self.span_limit = int(settings.config.max_span_bytes)
        self._keep: list[Any] = []  # ops keyed by id() above stay alive while cached
        # Products of joint plans (grouping): buffers written as a per-tile buffer of a
        # loop that their one point-for-point reader shares; grouping adds to it and
        # checks, when the loop closes, that the reader is in it with the same levels.
        self.loop_local: frozenset[str] = frozenset()

    def loop_local_output(self, op: Any) -> bool:
        """The ``loop_local_output`` builtin."""
        return op.get_name() in self.loop_local

    def loop_local_buffer(self, name: str) -> bool:
        """The ``loop_local_buffer`` builtin."""
        return name in self.loop_local

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

    def _keep_alive(self, op: Any) -> None:
        if not self._keep or self._keep[-1] is not op:
            self._keep.append(op)

    # ------------------------------------------------------------------ veto
    def veto(self, op: Any, tile: Tiling, accepted_by: str) -> None:
        """Raise Unsupported unless the independent span verifier accepts every
        access of ``op`` tiled by ``tile`` (``engine/veto.py``); ``accepted_by``
        names the rule that accepted the plan."""
        from spyre_rules.engine.veto import plan_problems

        key = (id(op), tile, self.loop_local)
        if key not in self._vetoes:
            self._keep_alive(op)
            self._vetoes[key] = plan_problems(op, tile, self.span_limit, self.loop_local)
        problems = self._vetoes[key]
        if problems:
            self.record("veto", "span_verifier", "refuse", "; ".join(problems), op=op, tile=tile)
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise Unsupported(f"Cannot auto-tile {op_name(op)}: the span verifier refuses split {tile!r}, "
                              f"which {accepted_by} accepted: {problems[0]}{more}")

    # ---------------------------------------------------------------- one op
    def decide(self, op: Any) -> OpDecision:
        """The op's decision and trace; an Unsupported is recorded, not raised."""
        start = len(self.trace)
        name, kind = op_name(op), ir_class(op)
        try:
            with memo.stable():  # deciding reads the IR, never edits it
                plan, reason = self._decide(op)
        except Unsupported as err:
            return OpDecision(name, kind, UNSUPPORTED, None, str(err), self.trace[start:],
                              _without_tracebacks(err))
        decision = PLAN if plan is not None else NO_PLAN
        return OpDecision(name, kind, decision, plan, reason, self.trace[start:])

    def _decide(self, op: Any) -> tuple[SpanOverflowTilePlan | None, str | None]:
        skipped = self.skipped(op)
        if skipped is not None:
            return None, skipped
        found = self.candidates(op)
        if not found:
            self.record("candidates", "none", "no plan", "no span exceeds the limit")
            return None, "no span exceeds the limit"
        plan = self.search(op, found)
        self.record("search", "plan", "plan", plan.reason, levels=list(plan.splits))
        return plan, plan.reason


def _without_tracebacks(err: BaseException) -> BaseException:
    """``err`` (and every exception chained to it: ``exception_chain``) without its traceback: a recorded
    error is a value, its message names the deciding rule.

    A traceback holds the frames it passed through, and each frame its caller's
    (``f_back``), up to ``plan_graph`` / ``decide_groups``, whose frames hold the
    list of decisions this error is recorded in: a reference cycle.  With it, a
    graph's decisions, traces and facts outlived their last user as cyclic
    garbage until the next full collection (rare: a large heap postpones it), and
    the garbage of repeated planning runs slowed the later runs (a benchmark's
    grouping 30-50% dearer per op after a few runs of 5,000 ops).  Re-raising a
    recorded error (``plan_span_overflow_tile``, grouping) starts a new traceback
    at the re-raise; the chain (``__cause__`` / ``__context__``) is kept."""
    for exc in exception_chain(err):
        exc.__traceback__ = None
    return err


def plan_record(plan: SpanOverflowTilePlan) -> PlanRecord:
    """The ``Plan`` value rules see in grouping."""
    levels = [Level(lv.selected_host_dim, lv.split_count, lv.is_reduction) for lv in plan.levels]
    return PlanRecord(levels, Tiling.of(plan.splits), plan.reason or "")
