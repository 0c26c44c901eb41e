"""The ``candidates`` section: the overflowing spans a plan must answer (docs/rules_language.md §6.2).

The section kind's check is its record ``SPEC`` (``lang/sections/candidates.py``;
every ``emit`` produces a ``Candidate``); this module compiles the generators and
runs them.

Each generator is a nest of ``for`` / ``if`` / ``let`` clauses ending in ``emit``;
it runs on the op untiled for the planner, and again on the per-tile view of a
tiling when validation names it (re-runs are cached per (op, generator, tiling)).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.engine.compile import EvalError
from spyre_rules.lang.sections.candidates import SPEC
from spyre_rules.engine.program import Generator, ItemCompiler
from spyre_rules.engine.values import Tiling, iteration_order

__all__ = ["SPEC", "CandidatesEvaluation", "compile_candidates", "UNTILED"]

UNTILED = Tiling(())


def compile_candidates(ic: ItemCompiler, sec: A.Section) -> list[Generator]:
    gens = []
    for item in sec.items:
        if isinstance(item, A.LetItem):
            ic.let(item)
        elif isinstance(item, A.Generator):
            gens.append(_generator(ic, item))
    return gens


def _generator(ic: ItemCompiler, gen: A.Generator) -> Generator:
    steps: list[tuple[str, Any]] = []
    seen: list[tuple[str, Any]] = []
    for clause in gen.clauses:
        if isinstance(clause, A.GenFor):
            it = ic.c.expr(clause.iter)
            key = ic.c.slot(clause.var)
            seen.append((clause.var.name, key))
            steps.append(("for", (it, key)))
        elif isinstance(clause, A.GenIf):
            steps.append(("if", ic.c.expr(clause.cond)))
        else:
            fn = ic.c.expr(clause.value)
            key = ic.c.slot(clause.name)
            seen.append((clause.name.name, key))
            steps.append(("let", (fn, key)))
    emit = ic.c.expr(gen.emit)
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


class CandidatesEvaluation:
    """The planner's candidates (mixed into ``planner.Evaluator``)."""

    _reruns: dict[tuple[int, str, Tiling], list]

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
            for cand, seen in self.run_generator(gen, op, UNTILED):
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
