"""A checked policy compiled into per-section programs the planner runs.

Each section kind of docs/rules_language.md §6 becomes one object holding its
items as closures (``compile.py``), in the order written, with ``let``s
resolved lazily.  This module only *compiles*; ``planner.py`` and
``grouping.py`` implement the section semantics on top of it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.sections import (
    SEARCH_DECISION_BINDINGS, SEARCH_EXHAUSTED_BINDINGS, SPECS,
)
from spyre_rules.engine.compile import CTX, ExprCompiler, Fn, Scope, template_paths
from spyre_rules.engine.values import iteration_order

__all__ = ["Rule", "Requirement", "Generator", "Legality", "Search", "Program", "compile_program"]


@dataclasses.dataclass
class Rule:
    """``ACTION name [when guard] [because message];`` of a first-match section."""

    section: str
    action: str
    name: str
    guard: Fn | None
    message: Fn | None
    watch: list[tuple[str, Fn]]  # values recorded in the trace when the rule fires
    span: A.Span


@dataclasses.dataclass
class Requirement:
    """``require name: condition [because message];``"""

    section: str
    name: str
    cond: Fn
    message: Fn | None
    watch: list[tuple[str, Fn]]
    span: A.Span


@dataclasses.dataclass
class Generator:
    """A candidates generator: ``run(env, out)`` appends ``(candidate, seen)`` pairs,
    ``seen`` being the generator's own bindings at that emission (for the trace)."""

    name: str
    run: Callable[[dict, list], None]
    span: A.Span


@dataclasses.dataclass
class Legality:
    guards: list[Rule]
    splits_key: int
    splits: Fn
    requires: list[Requirement]


@dataclasses.dataclass
class Search:
    bounds: dict[str, int]
    order: tuple[int, Fn]       # (binder slot, key)
    required: tuple[int, Fn]
    cost: tuple[int, Fn]
    guards: list[Rule]
    exhausted: Fn


@dataclasses.dataclass
class Program:
    eligibility: list[Rule]
    generators: list[Generator]
    legality: Legality
    search: Search
    validation: list[Requirement]
    grouping: list[Rule]


def _watch_names(e: A.Expr | None, out: list[str]) -> None:
    """Names an expression reads (for "the values a rule saw")."""
    if e is None:
        return
    stack: list[Any] = [e]
    while stack:
        x = stack.pop()
        if isinstance(x, A.Name):
            if x.id not in out:
                out.append(x.id)
        elif dataclasses.is_dataclass(x):
            for f in dataclasses.fields(x):
                if f.name == "span":
                    continue
                v = getattr(x, f.name)
                if isinstance(v, list):
                    stack.extend(reversed(v))
                elif dataclasses.is_dataclass(v) and not isinstance(v, A.Ident):
                    stack.append(v)


class _SectionCompiler:
    def __init__(self, compiler: ExprCompiler, consts: dict[str, Any]) -> None:
        self.c = compiler
        self.consts = consts

    def base_scope(self, kind: str, extra: dict[str, str] | None = None) -> Scope:
        scope = Scope()
        for name in {**SPECS[kind].bindings, **(extra or {})}:
            scope.names[name] = ("implicit", name)
        return scope

    def watch(self, exprs: list[A.Expr | None], message: A.Str | None, scope: Scope,
              span: A.Span) -> list[tuple[str, Fn]]:
        """Getters of the values a rule saw: bindings its condition reads that are
        already computed (no extra evaluation, so recording never fails) and the
        placeholders of its message."""
        names: list[str] = []
        for e in exprs:
            _watch_names(e, names)
        out: list[tuple[str, Fn]] = []
        for name in names:
            found = scope.lookup(name)
            if found is None:
                continue  # a constant: its value is in the rules
            kind, payload = found
            if kind in ("implicit", "slot"):
                out.append((name, _peek(payload)))
            elif kind == "let":
                out.append((name, _peek(payload[0])))
        if message is not None:
            for path in template_paths(message):
                label = ".".join(path)
                if any(label == n for n, _ in out):
                    continue
                out.append((label, self.c.placeholder(path, scope, message.span)))
        return out

    def let(self, item: A.LetItem, scope: Scope, shared: bool = True) -> Scope:
        fn = self.c.expr(item.value, scope)
        key = self.c.new_slot()
        scope = scope.child()
        scope.names[item.name.name] = ("let", (key, fn, shared))
        return scope

    def rule(self, kind: str, item: A.Decision, scope: Scope) -> Rule:
        guard = self.c.expr(item.guard, scope) if item.guard is not None else None
        message = self.c.template(item.message, scope) if item.message is not None else None
        return Rule(kind, item.action.name, item.name.name, guard, message,
                    self.watch([item.guard], item.message, scope, item.span), item.span)

    def require(self, kind: str, item: A.Require, scope: Scope) -> Requirement:
        return Requirement(kind, item.name.name, self.c.expr(item.cond, scope),
                           self.c.template(item.message, scope) if item.message is not None else None,
                           self.watch([item.cond], item.message, scope, item.span), item.span)

    # ------------------------------------------------------------ sections
    def first_match(self, sec: A.Section) -> list[Rule]:
        kind = sec.kind.name
        scope = self.base_scope(kind)
        rules = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                scope = self.let(item, scope)
            elif isinstance(item, A.Decision):
                rules.append(self.rule(kind, item, scope))
        return rules

    def requirements(self, sec: A.Section) -> list[Requirement]:
        scope = self.base_scope("validation")
        out = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                scope = self.let(item, scope)
            elif isinstance(item, A.Require):
                out.append(self.require("validation", item, scope))
        return out

    def candidates(self, sec: A.Section) -> list[Generator]:
        scope = self.base_scope("candidates")
        gens = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                scope = self.let(item, scope)
            elif isinstance(item, A.Generator):
                gens.append(self.generator(item, scope))
        return gens

    def generator(self, gen: A.Generator, scope: Scope) -> Generator:
        steps: list[tuple[str, Any]] = []
        seen: list[tuple[str, int]] = []
        for clause in gen.clauses:
            if isinstance(clause, A.GenFor):
                it = self.c.expr(clause.iter, scope)
                key = self.c.new_slot()
                scope = scope.child()
                scope.names[clause.var.name] = ("slot", key)
                seen.append((clause.var.name, key))
                steps.append(("for", (it, key)))
            elif isinstance(clause, A.GenIf):
                steps.append(("if", self.c.expr(clause.cond, scope)))
            else:
                fn = self.c.expr(clause.value, scope)
                key = self.c.new_slot()
                scope = scope.child()
                scope.names[clause.name.name] = ("slot", key)
                seen.append((clause.name.name, key))
                steps.append(("let", (fn, key)))
        emit = self.c.expr(gen.emit, scope)
        final_seen = list(seen)

        def build(i: int) -> Callable[[dict, list], None]:
            if i == len(steps):
                def do_emit(env: dict, out: list) -> None:
                    out.append((emit(env), {name: env[key] for name, key in final_seen}))
                return do_emit
            kind, payload = steps[i]
            nxt = build(i + 1)
            if kind == "for":
                it, key = payload

                def do_for(env: dict, out: list) -> None:
                    for value in iteration_order(it(env)):
                        env[key] = value
                        nxt(env, out)
                return do_for
            if kind == "if":
                cond = payload

                def do_if(env: dict, out: list) -> None:
                    if cond(env):
                        nxt(env, out)
                return do_if
            fn, key = payload

            def do_let(env: dict, out: list) -> None:
                env[key] = fn(env)
                nxt(env, out)
            return do_let

        return Generator(gen.name.name, build(0), gen.span)

    def legality(self, sec: A.Section) -> Legality:
        scope = self.base_scope("legality")
        guards: list[Rule] = []
        requires: list[Requirement] = []
        splits_key, splits = -1, None
        after_splits = False
        for item in sec.items:
            if isinstance(item, A.LetItem):
                # a let after `splits` may read the split variable: never share it
                scope = self.let(item, scope, shared=not after_splits)
            elif isinstance(item, A.Decision):
                guards.append(self.rule("legality", item, scope))
            elif isinstance(item, A.SplitsItem):
                splits = self.c.expr(item.source, scope)
                splits_key = self.c.new_slot()
                scope = scope.child()
                scope.names[item.var.name] = ("slot", splits_key)
                after_splits = True
            elif isinstance(item, A.Require):
                requires.append(self.require("legality", item, scope))
        assert splits is not None  # the checker requires one `splits` item
        return Legality(guards, splits_key, splits, requires)

    def search(self, sec: A.Section) -> Search:
        scope = self.base_scope("search")
        bounds: dict[str, int] = {}
        guards: list[Rule] = []
        binders: dict[type, tuple[int, Fn]] = {}
        exhausted: Fn | None = None
        for item in sec.items:
            if isinstance(item, A.LetItem):
                scope = self.let(item, scope)
            elif isinstance(item, A.BoundItem):
                from spyre_rules.lang import consts as K

                bounds[item.name.name] = K.evaluate(item.value, lambda n: self.consts[n.id])
            elif isinstance(item, (A.OrderItem, A.RequiredItem, A.CostItem)):
                key = self.c.new_slot()
                inner = scope.child()
                inner.names[item.var.name] = ("slot", key)
                value = item.key if not isinstance(item, A.RequiredItem) else item.value
                binders[type(item)] = (key, self.c.expr(value, inner))
            elif isinstance(item, A.Decision):
                inner = scope.child()
                for name in SEARCH_DECISION_BINDINGS:
                    inner.names[name] = ("implicit", name)
                guards.append(self.rule("search", item, inner))
            elif isinstance(item, A.ExhaustedItem):
                inner = scope.child()
                for name in SEARCH_EXHAUSTED_BINDINGS:
                    inner.names[name] = ("implicit", name)
                exhausted = self.c.template(item.message, inner)
        assert exhausted is not None
        return Search(bounds, binders[A.OrderItem], binders[A.RequiredItem], binders[A.CostItem],
                      guards, exhausted)


def _peek(key: Any) -> Fn:
    return lambda env: env.get(key, _NOT_SEEN)


class _NotSeen:
    def __repr__(self) -> str:
        return "<not evaluated>"


_NOT_SEEN = _NotSeen()


def compile_program(sections: dict[str, A.Section], facts: dict[str, Callable],
                    records: dict[str, type], consts: dict[str, Any]) -> Program:
    """Compile the six sections of a checked policy."""
    generators: dict[str, Generator] = {}

    def generator_ref(name: str) -> Fn:
        # validation: a generator's name is the list of candidates it emits on
        # the per-tile view of the current (op, tile)
        return lambda env: env[CTX].rerun_generator(generators[name], env)

    compiler = ExprCompiler(facts, records, consts, generator_ref)
    sc = _SectionCompiler(compiler, consts)
    gens = sc.candidates(sections["candidates"])
    generators.update((g.name, g) for g in gens)
    validation_scope_gens = sections["validation"]
    program = Program(
        eligibility=sc.first_match(sections["eligibility"]),
        generators=gens,
        legality=sc.legality(sections["legality"]),
        search=sc.search(sections["search"]),
        validation=_validation(sc, validation_scope_gens, list(generators)),
        grouping=sc.first_match(sections["grouping"]),
    )
    return program


def _validation(sc: _SectionCompiler, sec: A.Section, generator_names: list[str]) -> list[Requirement]:
    scope = sc.base_scope("validation")
    inner = scope.child()
    for name in generator_names:
        if scope.lookup(name) is None:
            inner.names[name] = ("gen", name)
    out = []
    for item in sec.items:
        if isinstance(item, A.LetItem):
            inner = sc.let(item, inner)
        elif isinstance(item, A.Require):
            out.append(sc.require("validation", item, inner))
    return out
