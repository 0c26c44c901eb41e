"""A checked policy compiled into per-section programs the planner runs.

Each section kind of docs/rules_language.md §6 becomes one object holding its
items as closures (``compile.py``), in the order written, with ``let``s
resolved lazily.  Each kind has one module holding its compilation and its
evaluation (:data:`SECTION_MODULES`); this module holds what they share: the
records of rules, requirements and generators, and the compiler of the items
every kind may contain.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.resolved import Resolution
from spyre_rules.engine.compile import CTX, ExprCompiler, Fn

__all__ = ["ItemCompiler", "Rule", "Requirement", "Generator", "Program", "SECTION_MODULES",
           "compile_program"]


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
class Program:
    """One compiled program per section kind (``SECTION_MODULES``)."""

    eligibility: list[Rule]
    generators: list[Generator]
    legality: Any       # engine/legality.py Legality
    search: Any         # engine/search.py Search
    validation: list[Requirement]
    grouping: list[Rule]
    collectives: Any    # engine/collectives.py Collectives
    restickify: list[Rule]
    layout_choice: list[Rule]


class ItemCompiler:
    """Compiles the items every section kind shares (``let``, first-match rules,
    requirements) from the checker's resolution: a name's meaning, a binder's
    slot and a template's pieces are all looked up there.  Each section kind's
    own items are compiled by its module (``SECTION_MODULES``)."""

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


def _peek(key: Any) -> Fn:
    return lambda env: env.get(key, _NOT_SEEN)


class _NotSeen:
    def __repr__(self) -> str:
        return "<not evaluated>"


_NOT_SEEN = _NotSeen()


#: section kind -> the engine module that compiles and runs it (``compile_<kind>``,
#: ``<Kind>Evaluation``) and names its check, the kind's record ``lang/sections/<kind>.py`` ``SPEC``.
SECTION_MODULES = {
    "eligibility": "spyre_rules.engine.eligibility",
    "candidates": "spyre_rules.engine.candidates",
    "legality": "spyre_rules.engine.legality",
    "search": "spyre_rules.engine.search",
    "validation": "spyre_rules.engine.validation",
    "grouping": "spyre_rules.engine.grouping",
    "collectives": "spyre_rules.engine.collectives",
    "restickify": "spyre_rules.engine.restickify",
    "layout_choice": "spyre_rules.engine.layout_choice",
}


def compile_program(sections: dict[str, A.Section], facts: dict[str, Callable],
                    records: dict[str, type], resolution: Resolution) -> Program:
    """Compile the sections of a checked policy from the checker's resolution,
    each by its section kind's module."""
    import importlib

    generators: dict[str, Generator] = {}

    def generator_ref(name: str) -> Fn:
        # validation: a generator's name is the list of candidates it emits on
        # the per-tile view of the current (op, tile)
        return lambda env: env[CTX].rerun_generator(generators[name], env)

    ic = ItemCompiler(ExprCompiler(facts, records, resolution, generator_ref))

    def compiled(kind: str) -> Any:
        module = importlib.import_module(SECTION_MODULES[kind])
        return getattr(module, f"compile_{kind}")(ic, sections[kind])

    gens = compiled("candidates")
    generators.update((g.name, g) for g in gens)
    return Program(
        eligibility=compiled("eligibility"),
        generators=gens,
        legality=compiled("legality"),
        search=compiled("search"),
        validation=compiled("validation"),
        grouping=compiled("grouping"),
        collectives=compiled("collectives"),
        restickify=compiled("restickify"),
        layout_choice=compiled("layout_choice"),
    )
