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
from spyre_rules.lang.resolved import Resolution
from spyre_rules.engine.compile import CTX, ExprCompiler, Fn
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


class _SectionCompiler:
    """Compiles the items of each section from the checker's resolution: a name's
    meaning, a binder's slot and a template's pieces are all looked up there."""

    def __init__(self, compiler: ExprCompiler) -> None:
        self.c = compiler
        self.resolution = compiler.resolution

    def watch(self, item: A.Decision | A.Require, message: A.Str | None) -> list[tuple[str, Fn]]:
        """Getters of the values a rule saw: bindings its condition reads that are
        already computed (no extra evaluation, so recording never fails) and the
        placeholders of its message."""
        out: list[tuple[str, Fn]] = [(name, _peek(b.slot)) for name, b in self.resolution.watch[id(item)]]
        if message is not None:
            for p in self.resolution.template(message).placeholders:
                if any(p.label == n for n, _ in out):
                    continue
                out.append((p.label, self.c.placeholder(p, message.span)))
        return out

    def let(self, item: A.LetItem, shared: bool = True) -> None:
        self.c.define_let(item.name, self.c.expr(item.value), shared)

    def rule(self, kind: str, item: A.Decision) -> Rule:
        guard = self.c.expr(item.guard) if item.guard is not None else None
        message = self.c.template(item.message) if item.message is not None else None
        return Rule(kind, item.action.name, item.name.name, guard, message,
                    self.watch(item, item.message), item.span)

    def require(self, kind: str, item: A.Require) -> Requirement:
        return Requirement(kind, item.name.name, self.c.expr(item.cond),
                           self.c.template(item.message) if item.message is not None else None,
                           self.watch(item, item.message), item.span)

    # ------------------------------------------------------------ sections
    def first_match(self, sec: A.Section) -> list[Rule]:
        kind = sec.kind.name
        rules = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                self.let(item)
            elif isinstance(item, A.Decision):
                rules.append(self.rule(kind, item))
        return rules

    def requirements(self, sec: A.Section) -> list[Requirement]:
        out = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                self.let(item)
            elif isinstance(item, A.Require):
                out.append(self.require(sec.kind.name, item))
        return out

    def candidates(self, sec: A.Section) -> list[Generator]:
        gens = []
        for item in sec.items:
            if isinstance(item, A.LetItem):
                self.let(item)
            elif isinstance(item, A.Generator):
                gens.append(self.generator(item))
        return gens

    def generator(self, gen: A.Generator) -> Generator:
        steps: list[tuple[str, Any]] = []
        seen: list[tuple[str, Any]] = []
        for clause in gen.clauses:
            if isinstance(clause, A.GenFor):
                it = self.c.expr(clause.iter)
                key = self.c.slot(clause.var)
                seen.append((clause.var.name, key))
                steps.append(("for", (it, key)))
            elif isinstance(clause, A.GenIf):
                steps.append(("if", self.c.expr(clause.cond)))
            else:
                fn = self.c.expr(clause.value)
                key = self.c.slot(clause.name)
                seen.append((clause.name.name, key))
                steps.append(("let", (fn, key)))
        emit = self.c.expr(gen.emit)
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
        guards: list[Rule] = []
        requires: list[Requirement] = []
        splits_key, splits = -1, None
        after_splits = False
        for item in sec.items:
            if isinstance(item, A.LetItem):
                # a let after `splits` may read the split variable: never share it
                self.let(item, shared=not after_splits)
            elif isinstance(item, A.Decision):
                guards.append(self.rule("legality", item))
            elif isinstance(item, A.SplitsItem):
                splits = self.c.expr(item.source)
                splits_key = self.c.slot(item.var)
                after_splits = True
            elif isinstance(item, A.Require):
                requires.append(self.require("legality", item))
        assert splits is not None  # the checker requires one `splits` item
        return Legality(guards, splits_key, splits, requires)

    def search(self, sec: A.Section) -> Search:
        guards: list[Rule] = []
        binders: dict[type, tuple[Any, Fn]] = {}
        exhausted: Fn | None = None
        for item in sec.items:
            if isinstance(item, A.LetItem):
                self.let(item)
            elif isinstance(item, (A.OrderItem, A.RequiredItem, A.CostItem)):
                value = item.key if not isinstance(item, A.RequiredItem) else item.value
                binders[type(item)] = (self.c.slot(item.var), self.c.expr(value))
            elif isinstance(item, A.Decision):
                guards.append(self.rule("search", item))
            elif isinstance(item, A.ExhaustedItem):
                exhausted = self.c.template(item.message)
        assert exhausted is not None
        return Search(dict(self.resolution.bounds), binders[A.OrderItem], binders[A.RequiredItem],
                      binders[A.CostItem], guards, exhausted)


def _peek(key: Any) -> Fn:
    return lambda env: env.get(key, _NOT_SEEN)


class _NotSeen:
    def __repr__(self) -> str:
        return "<not evaluated>"


_NOT_SEEN = _NotSeen()


def compile_program(sections: dict[str, A.Section], facts: dict[str, Callable],
                    records: dict[str, type], resolution: Resolution) -> Program:
    """Compile the six sections of a checked policy from the checker's resolution."""
    generators: dict[str, Generator] = {}

    def generator_ref(name: str) -> Fn:
        # validation: a generator's name is the list of candidates it emits on
        # the per-tile view of the current (op, tile)
        return lambda env: env[CTX].rerun_generator(generators[name], env)

    sc = _SectionCompiler(ExprCompiler(facts, records, resolution, generator_ref))
    gens = sc.candidates(sections["candidates"])
    generators.update((g.name, g) for g in gens)
    return Program(
        eligibility=sc.first_match(sections["eligibility"]),
        generators=gens,
        legality=sc.legality(sections["legality"]),
        search=sc.search(sections["search"]),
        validation=sc.requirements(sections["validation"]),
        grouping=sc.first_match(sections["grouping"]),
    )
