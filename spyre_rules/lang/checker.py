"""Semantic analysis of a policy: names, types, scopes, messages, structure.

Input: parsed files and the prelude's :class:`Vocabulary`.  Output:
diagnostics, the type of every expression, and for the engine the resolved
program (``self.resolved``, ``lang/resolved.py``: what every name means, every
template parsed), so the engine resolves and parses nothing itself.  The rules
for what a section may contain come from ``sections.py``; the shadowing and
unreachable-rule analysis lives in ``shadowing.py``.

Narrowing: a value of type ``T?`` may be used as a ``T`` where an ``is known``
test has proven it: after ``x is known and``, in later filters of the same
generator or comprehension, in rules after a first-match rule whose guard
``x is unknown`` did not fire, and in requirements after one that held.
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang import consts
from spyre_rules.lang import types as T
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.lang.prelude import Vocabulary
from spyre_rules.lang.expressions import ExpressionChecker
from spyre_rules.lang.resolved import Resolution, names_read
from spyre_rules.lang.scope import Binding, Scope
from spyre_rules.lang.sections import (
    BOUNDS, COST_BINDER, EMIT_TYPE, ITEM_WORD, ORDER_BINDER, REQUIRED_BINDER, REQUIRED_ITEMS,
    SEARCH_DECISION_BINDINGS, SEARCH_EXHAUSTED_BINDINGS, SECTION_KINDS, SPECS,
)


class ConstInfo:
    __slots__ = ("decl", "type", "value", "state", "used", "ok")

    def __init__(self, decl: A.ConstDecl) -> None:
        self.decl = decl
        self.type: T.Type = T.ERROR
        self.value = None
        self.state = "new"  # new | checking | done
        self.used = False
        self.ok = False     # type-checked cleanly and evaluated


_NO_VALUE = object()


class Checker(ExpressionChecker):
    def __init__(self, files: list[A.SourceFile], vocab: Vocabulary, diags: list[Diagnostic]) -> None:
        self.files = files
        self.vocab = vocab
        self.diags = diags
        self.consts: dict[str, ConstInfo] = {}
        self.generators: dict[str, A.Generator] = {}
        self.sections: dict[str, A.Section] = {}
        self.expr_types: dict[int, T.Type] = {}
        self.resolved = Resolution()
        self.kind = ""          # section kind being checked ("" for constants)
        self.const_mode = False
        self.depth = 0
        self.too_deep = False
        self.deep_reported = False

    # ---------------------------------------------------------------- report
    def error(self, code: str, message: str, span: A.Span, *notes: str) -> None:
        self.diags.append(Diagnostic(code, message, span, [n for n in notes if n]))

    def suggest(self, name: str, candidates) -> str:
        import difflib

        close = difflib.get_close_matches(name, sorted(set(candidates)), n=1, cutoff=0.7)
        return f"help: did you mean `{close[0]}`?" if close else ""

    # ------------------------------------------------------------------- run
    def run(self, syntax_ok: bool, complete: bool = True) -> None:
        for f in self.files:
            for item in f.items:
                if isinstance(item, A.ConstDecl):
                    self._declare_const(item)
                elif isinstance(item, A.Section):
                    self._declare_section(item)
        for info in self.consts.values():
            self._check_const(info)
        for sec in self.sections.values():
            if sec.kind.name == "candidates":
                for item in sec.items:
                    if isinstance(item, A.Generator):
                        self._declare_generator(item)
        for kind in SECTION_KINDS:
            sec = self.sections.get(kind)
            if sec is not None:
                self._check_section(sec)
        if syntax_ok:
            if complete:
                self._missing_sections()
            for name, info in self.consts.items():
                if not info.used and not name.startswith("_"):
                    self.error("W001", f"constant `{name}` is never used", info.decl.name.span)

    def _declare_const(self, decl: A.ConstDecl) -> None:
        name = decl.name.name
        first = self.consts.get(name)
        if first is not None:
            self.error("E016", f"constant `{name}` is already defined", decl.name.span,
                       f"note: first defined at {_where(first.decl.name.span)}")
            return
        self.consts[name] = ConstInfo(decl)

    def _declare_section(self, sec: A.Section) -> None:
        kind = sec.kind.name
        first = self.sections.get(kind)
        if first is not None:
            self.error("E017", f"a second `{kind}` section; a policy has one section of each kind",
                       sec.kind.span, f"note: the first `{kind}` section is at {_where(first.kind.span)}")
            return
        self.sections[kind] = sec

    def _declare_generator(self, gen: A.Generator) -> None:
        name = gen.name.name
        if name in self.generators:
            self.error("E016", f"generator `{name}` is already defined", gen.name.span,
                       f"note: first defined at {_where(self.generators[name].name.span)}")
        elif name in self.consts:
            self.error("E016", f"generator `{name}` has the name of a constant", gen.name.span,
                       f"note: the constant is defined at {_where(self.consts[name].decl.name.span)}")
        else:
            self.generators[name] = gen

    def _missing_sections(self) -> None:
        missing = [k for k in SECTION_KINDS if k not in self.sections]
        if not missing:
            return
        anchor = next((f for f in self.files if not f.is_prelude), self.files[0] if self.files else None)
        if anchor is None:
            return
        span = A.Span(anchor.path, 1, 1, 1, 2)
        names = ", ".join(f"`{k}`" for k in missing)
        self.error("E018", f"the policy has no {names} section{'s' if len(missing) > 1 else ''}; "
                   "the engine needs one section of each kind", span)

    # ------------------------------------------------------------- constants
    def _check_const(self, info: ConstInfo) -> None:
        if info.state == "done":
            return
        if info.state == "checking":
            return
        info.state = "checking"
        saved = (self.kind, self.const_mode)
        self.kind, self.const_mode = "", True
        before = len(self.diags)
        try:
            info.type = self.expr(info.decl.value, Scope())
        finally:
            self.kind, self.const_mode = saved
        info.state = "done"
        if len(self.diags) == before and info.type is not T.ERROR:
            try:
                info.value = consts.evaluate(info.decl.value, self._const_value)
                info.ok = True
            except consts.ConstError as err:
                self.error(err.code, f"constant `{info.decl.name.name}` cannot be computed: {err.message}",
                           err.span)
            except (consts.NotConstant, TypeError, ValueError, OverflowError, RecursionError):
                pass

    def _const_value(self, name: A.Name):
        info = self.consts.get(name.id)
        if info is None or not info.ok:
            raise consts.NotConstant(name)
        return info.value

    def const_fold(self, e: A.Expr):
        """The value of ``e`` if it is made of literals and constants only."""
        try:
            return consts.evaluate(e, self._const_value)
        except (consts.NotConstant, consts.ConstError, TypeError, ValueError, OverflowError, RecursionError):
            return _NO_VALUE

    # -------------------------------------------------------------- sections
    def _implicit_scope(self, names: dict[str, str]) -> Scope:
        sc = Scope()
        for name, spelling in names.items():
            sc.names[name] = Binding(name, self.vocab.parse_spelling(spelling), None, "implicit")
        return sc

    def _check_section(self, sec: A.Section) -> None:
        kind = sec.kind.name
        spec = SPECS[kind]
        self.kind = kind
        base = self._implicit_scope(spec.bindings)
        sc = base.child()
        rule_names: dict[str, A.Ident] = {}
        seen_items: dict[type, A.Span] = {}
        bounds: dict[str, A.Ident] = {}
        lets: list[Binding] = []
        extra: list[Binding] = []
        splits_seen = False
        for item in sec.items:
            word = ITEM_WORD[type(item)]
            if not isinstance(item, spec.items):
                allowed = ", ".join(f"`{ITEM_WORD[c]}`" for c in spec.items)
                self.error("E019", f"{_a(f'`{word}`')} item is not allowed in {_a(f'`{kind}`')} section (allowed: {allowed})",
                           item.span)
                continue
            name_ident = getattr(item, "name", None)
            if isinstance(item, (A.Decision, A.Require)):
                prev = rule_names.get(name_ident.name)
                if prev is not None:
                    self.error("E016", f"rule `{name_ident.name}` is already defined in this section",
                               name_ident.span, f"note: first defined at {_where(prev.span)}")
                else:
                    rule_names[name_ident.name] = name_ident
            if isinstance(item, (A.SplitsItem, A.OrderItem, A.RequiredItem, A.CostItem, A.ExhaustedItem)):
                if type(item) in seen_items:
                    self.error("E016", f"a second `{word}` item in this section",
                               item.span, f"note: the first is at {_where(seen_items[type(item)])}")
                    continue
                seen_items[type(item)] = item.span
            if kind == "legality":
                if isinstance(item, A.Decision) and splits_seen:
                    self.error("E038", "`reject` guards of a legality section come before `splits`",
                               item.action.span)
                elif isinstance(item, A.Require) and not splits_seen:
                    self.error("E038", "`require` conditions of a legality section come after `splits`",
                               item.span)
            if isinstance(item, A.LetItem):
                t = self.expr(item.value, sc)
                b = self.bind(sc, item.name, t, "let")
                lets.append(b)
            elif isinstance(item, A.Decision):
                self._decision(item, sc, spec)
            elif isinstance(item, A.Require):
                self._watch(item, item.cond, sc)
                self.cond(item.cond, sc, f"requirement `{item.name.name}`")
                if item.message is not None:
                    self.message(item.message, sc.child(self.known_when(item.cond, False, sc)))
                # later items see the narrowing (in place: a scope per requirement would make
                # name lookups walk a chain as long as the section)
                sc.known.update(self.known_when(item.cond, True, sc))
            elif isinstance(item, A.Generator):
                self._generator(item, sc)
            elif isinstance(item, A.SplitsItem):
                splits_seen = True
                t = self.expr(item.source, sc)
                elem = self.iter_elem(t, item.source, "`splits` source")
                if elem not in (T.INT, T.ERROR, T.ANY):
                    self.error("E022", f"`splits` enumerates split counts (int), found `{t}`", item.source.span)
                sc = sc.child()
                extra.append(self.bind(sc, item.var, T.INT, "splits"))
            elif isinstance(item, A.BoundItem):
                self._bound(item, sc, bounds)
            elif isinstance(item, (A.OrderItem, A.CostItem)):
                binder = ORDER_BINDER if isinstance(item, A.OrderItem) else COST_BINDER
                isc = sc.child()
                b = self.bind(isc, item.var, self.vocab.parse_spelling(binder), "binder")
                t = self.expr(item.key, isc)
                what = "an `order` key" if isinstance(item, A.OrderItem) else "a `cost` key"
                if not T.orderable(t):
                    self.error("E025", f"{what} must be orderable (int, bool, str, Sym, or a tuple/list of "
                               f"those), found `{t}`", item.key.span)
                self.unused([b])
            elif isinstance(item, A.RequiredItem):
                isc = sc.child()
                b = self.bind(isc, item.var, self.vocab.parse_spelling(REQUIRED_BINDER), "binder")
                t = self.expr(item.value, isc)
                self.expect(t, T.INT, item.value, "the `required` split count")
                self.unused([b])
            elif isinstance(item, A.ExhaustedItem):
                isc = self._extend(sc, SEARCH_EXHAUSTED_BINDINGS)
                self.message(item.message, isc)
        self.unused(lets + extra)
        missing = [f"`{word}`" for cls, word in REQUIRED_ITEMS.get(kind, ()) if cls not in seen_items]
        if missing:
            what = f"{_list(missing)} items" if len(missing) > 1 else f"{_a(missing[0])} item"
            self.error("E037", f"{_a(f'`{kind}`')} section needs {what}", sec.kind.span)
        if kind == "search":
            unset = [f"`{name}`" for name in BOUNDS if name not in bounds]
            if unset:
                self.error("E034", f"the search section does not set bound{'s' if len(unset) > 1 else ''} "
                           + _list(unset), sec.kind.span)
        from spyre_rules.lang.shadowing import analyse_section

        analyse_section(sec, spec, self)
        self.kind = ""

    def _extend(self, sc: Scope, names: dict[str, str]) -> Scope:
        isc = sc.child()
        for name, spelling in names.items():
            isc.names[name] = Binding(name, self.vocab.parse_spelling(spelling), None, "implicit")
        return isc

    def _decision(self, item: A.Decision, sc: Scope, spec) -> None:
        action = item.action.name
        if action not in spec.actions:
            allowed = ", ".join(f"`{a}`" for a in spec.actions) or "none"
            self.error("E019", f"`{action}` is not a decision of {_a(f'`{spec.kind}`')} section (allowed: {allowed})",
                       item.action.span)
        isc = self._extend(sc, SEARCH_DECISION_BINDINGS) if spec.kind == "search" else sc
        self._watch(item, item.guard, isc)
        if item.guard is not None:
            self.cond(item.guard, isc, f"the guard of rule `{item.name.name}`")
            msc = isc.child(self.known_when(item.guard, True, isc))
        else:
            msc = isc
        if item.message is not None:
            self.message(item.message, msc)
        elif action == "reject":
            self.error("E030", f"`reject {item.name.name}` has no message; say why with `because \"...\"`",
                       item.span)
        if item.guard is not None:
            sc.known.update(self.known_when(item.guard, False, isc))

    def _watch(self, item: A.Decision | A.Require, cond: A.Expr | None, sc: Scope) -> None:
        """The bindings a rule's condition reads, as its trace step shows them
        (constants are in the rules, so they are not shown)."""
        found = [(name, sc.lookup(name)) for name in names_read(cond)]
        self.resolved.watch[id(item)] = [(name, b) for name, b in found if b is not None]

    def _generator(self, gen: A.Generator, sc: Scope) -> None:
        gs = sc.child()
        made: list[Binding] = []
        for clause in gen.clauses:
            if isinstance(clause, A.GenFor):
                t = self.expr(clause.iter, gs)
                elem = self.iter_elem(t, clause.iter, "a `for` clause")
                gs = gs.child()
                made.append(self.bind(gs, clause.var, elem, "for"))
            elif isinstance(clause, A.GenIf):
                self.cond(clause.cond, gs, "an `if` filter")
                gs = gs.child(self.known_when(clause.cond, True, gs))
            else:
                t = self.expr(clause.value, gs)
                gs = gs.child()
                made.append(self.bind(gs, clause.name, t, "let"))
        t = self.expr(gen.emit, gs)
        want = self.vocab.parse_spelling(EMIT_TYPE)
        if not T.assignable(t, want):
            self.error("E022", f"`emit` produces a `{want}`, found `{t}`", gen.emit.span)
        self.unused(made)

    def _bound(self, item: A.BoundItem, sc: Scope, seen: dict[str, A.Ident]) -> None:
        name = item.name.name
        if name not in BOUNDS:
            self.error("E034", f"unknown search bound `{name}` (bounds: {', '.join(BOUNDS)})", item.name.span,
                       self.suggest(name, BOUNDS))
        elif name in seen:
            self.error("E016", f"bound `{name}` is already set", item.name.span,
                       f"note: first set at {_where(seen[name].span)}")
            return
        else:
            seen[name] = item.name
        before = len(self.diags)
        t = self.expr(item.value, sc)
        if len(self.diags) > before:
            return
        value = self.const_fold(item.value)
        if value is _NO_VALUE:
            self.error("E033", f"bound `{name}` must be a constant positive integer (literals and constants only)",
                       item.value.span)
        elif t != T.INT or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            self.error("E033", f"bound `{name}` must be a positive integer, found {_show(value)}", item.value.span)
        else:
            self.resolved.bounds[name] = value

    # --------------------------------------------------------------- bindings
    def bind(self, sc: Scope, ident: A.Ident, t: T.Type, kind: str) -> Binding:
        name = ident.name
        outer = sc.lookup(name)
        if outer is not None:
            where = f" (bound at {_where(outer.span)})" if outer.span else " (bound by the engine)"
            self.error("W005", f"`{name}` shadows an outer `{name}`{where}", ident.span)
        elif name in self.consts:
            self.error("W005", f"`{name}` shadows the constant `{name}`", ident.span,
                       f"note: the constant is defined at {_where(self.consts[name].decl.name.span)}")
        if t is T.ANY:
            t = T.ERROR
        b = Binding(name, t, ident.span, kind, self.resolved.new_slot())
        sc.names[name] = b
        self.resolved.declared[id(ident)] = b
        return b

    def unused(self, bindings: list[Binding]) -> None:
        for b in bindings:
            if not b.used and not b.name.startswith("_"):
                what = {"let": "let binding", "for": "loop variable", "splits": "split variable",
                        "binder": "binder"}[b.kind]
                self.error("W002", f"{what} `{b.name}` is never used", b.span)



def _list(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _a(word: str) -> str:
    """`word` with its indefinite article ("an `order`", "a `search`")."""
    return ("an " if word.strip("`")[:1] in "aeiou" else "a ") + word


def _where(span: A.Span | None) -> str:
    return f"{span.file}:{span.line}:{span.col}" if span else "?"


def _show(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value[:60]}..."' if len(value) > 60 else f'"{value}"'
    if isinstance(value, int):
        return consts.int_text(value)
    text = repr(value)
    return text[:60] + "..." if len(text) > 60 else text
