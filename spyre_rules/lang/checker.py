"""Semantic analysis of a policy: names, types, scopes, messages, structure.

Input: parsed files and the prelude's :class:`Vocabulary`.  Output:
diagnostics, the type of every expression, and for the engine the resolved
program (``self.resolved``, ``lang/resolved.py``: what every name means, every
template parsed), so the engine resolves and parses nothing itself.  The shared
items of a section (``let``, decisions, ``require``) are checked here; what a
section kind may contain and the checks of its own items are that kind's
record in ``sections/<kind>.py``; the shadowing and unreachable-rule analysis
lives in ``shadowing.py``.

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
from spyre_rules.lang.scope import where as _where
from spyre_rules.lang.sections import ITEM_WORD, SECTION_KINDS, SPECS, SectionState
from spyre_rules.lang.sections.spec import and_list, is_fallback, item_word, with_article


class ConstInfo:
    __slots__ = ("decl", "type", "value", "state", "used", "ok")

    def __init__(self, decl: A.ConstDecl) -> None:
        self.decl = decl
        self.type: T.Type = T.ERROR
        self.value = None
        self.state = "new"  # new | checking | done
        self.used = False
        self.ok = False     # type-checked cleanly and evaluated


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
            return consts.NO_VALUE

    # -------------------------------------------------------------- sections
    def _check_section(self, sec: A.Section) -> None:
        """The items every kind shares are checked here; a kind's own items, where
        its items may stand and what it must set, by its record (``sections/<kind>.py``)."""
        kind = sec.kind.name
        spec = SPECS[kind]
        self.kind = kind
        state = SectionState(self.extend(Scope(), spec.bindings).child())
        once = {cls for cls, _ in spec.required_items}
        rule_names: dict[str, A.Ident] = {}
        lets: list[Binding] = []
        for item in sec.items:
            word = item_word(item)
            if not isinstance(item, spec.items):
                allowed = ", ".join(f"`{ITEM_WORD[c]}`" for c in spec.items)
                self.error("E019", f"{with_article(f'`{word}`')} item is not allowed in "
                           f"{with_article(f'`{kind}`')} section (allowed: {allowed})", item.span)
                continue
            if isinstance(item, (A.Decision, A.Require)):
                name_ident = item.name
                prev = rule_names.get(name_ident.name)
                if prev is not None:
                    self.error("E016", f"rule `{name_ident.name}` is already defined in this section",
                               name_ident.span, f"note: first defined at {_where(prev.span)}")
                else:
                    rule_names[name_ident.name] = name_ident
            # `otherwise splits` is not a second `splits`: its section's order check places it
            if type(item) in once and not is_fallback(item):
                if type(item) in state.seen:
                    self.error("E016", f"a second `{word}` item in this section",
                               item.span, f"note: the first is at {_where(state.seen[type(item)])}")
                    continue
                state.seen[type(item)] = item.span
            if spec.order_check is not None:
                spec.order_check(self, item, state)
            sc = state.scope
            if isinstance(item, A.LetItem):
                t = self.expr(item.value, sc)
                lets.append(self.bind(sc, item.name, t, "let"))
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
            else:
                spec.item_checks[type(item)](self, item, state)
            state.previous = item
        self.unused(lets + state.unused)
        missing = [f"`{word}`" for cls, word in spec.required_items if cls not in state.seen]
        if missing:
            what = f"{and_list(missing)} items" if len(missing) > 1 else f"{with_article(missing[0])} item"
            self.error("E037", f"{with_article(f'`{kind}`')} section needs {what}", sec.kind.span)
        if spec.finish is not None:
            spec.finish(self, sec, state)
        from spyre_rules.lang.shadowing import analyse_section

        analyse_section(sec, spec, self)
        self.kind = ""

    def extend(self, sc: Scope, names: dict[str, str]) -> Scope:
        """A child of ``sc`` that also binds ``names`` (name -> type spelling)."""
        isc = sc.child()
        for name, spelling in names.items():
            isc.names[name] = Binding(name, self.vocab.parse_spelling(spelling), None, "implicit")
        return isc

    def _decision(self, item: A.Decision, sc: Scope, spec) -> None:
        action = item.action.name
        if action not in spec.actions:
            allowed = ", ".join(f"`{a}`" for a in spec.actions) or "none"
            self.error("E019", f"`{action}` is not a decision of {with_article(f'`{spec.kind}`')} section "
                       f"(allowed: {allowed})", item.action.span)
        isc = self.extend(sc, spec.decision_bindings) if spec.decision_bindings else sc
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
