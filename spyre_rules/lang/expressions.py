"""Typing of expressions, built-in calls and message templates.

The half of the checker that works below the item level: it gives every
expression its type, reports type errors, tracks which ``T?`` values are proven
known (narrowing), and checks placeholders.  :class:`Checker` (``checker.py``)
mixes it in and provides ``error``, ``suggest``, the constants and the
vocabulary.
"""

from __future__ import annotations

from spyre_rules.lang import ast as A
from spyre_rules.lang import consts
from spyre_rules.lang import types as T
from spyre_rules.lang.builtins import BUILTINS, SAME_LIST, Builtin, Params
from spyre_rules.lang.scope import MAX_DEPTH, Scope
from spyre_rules.lang.scope import where as _where
from spyre_rules.lang.consts import UNITS
from spyre_rules.lang.sections.spec import EMIT_TYPE
from spyre_rules.lang.resolved import ConfigValue, ConstRef, GeneratorRef, Placeholder, Template
from spyre_rules.lang.templates import is_reserved_name, parse_template_pieces, unescape

#: AST node class -> its ``ExpressionChecker.x_<Class>`` method, looked up once per class
#: (building the name and looking it up for every node showed in the profile of `check`).
_CHECK_OF: dict[type, object] = {}


class ExpressionChecker:
    """Expression-level checks; the state lives on the :class:`Checker` it is mixed into."""

    # ------------------------------------------------------------- narrowing
    def key(self, e: A.Expr, sc: Scope, depth: int = 0):
        """A key naming the value of ``e`` (equal keys: equal values), or None."""
        if depth > MAX_DEPTH:
            return None
        if isinstance(e, A.Name):
            b = sc.lookup(e.id)
            if b is not None:
                return ("n", id(b))
            if e.id in self.consts:
                return ("c", e.id)
            return None
        if isinstance(e, A.Field):
            k = self.key(e.obj, sc, depth + 1)
            return None if k is None else (k, e.name.name)
        if isinstance(e, A.ConfigRef):
            return ("cfg", e.name.name)
        if isinstance(e, A.Call) and e.func.name in self.vocab.facts:
            ks = tuple(self.key(a, sc, depth + 1) for a in e.args)
            return None if any(k is None for k in ks) else ("f", e.func.name, ks)
        if isinstance(e, (A.Num, A.Bool)):
            return ("lit", repr(getattr(e, "digits", getattr(e, "value", None))),
                    e.unit.name if isinstance(e, A.Num) and e.unit else None)
        if isinstance(e, A.Str):
            return ("lit", e.value)
        return None

    def known_when(self, e: A.Expr, truth: bool, sc: Scope, depth: int = 0) -> set:
        """Keys of values proven known when ``e`` evaluates to ``truth``."""
        if depth > MAX_DEPTH:
            return set()
        if isinstance(e, A.IsKnown):
            if truth == e.known:
                k = self.key(e.operand, sc)
                return {k} if k is not None else set()
            return set()
        if isinstance(e, A.Unary) and e.op == "not":
            return self.known_when(e.operand, not truth, sc, depth + 1)
        if isinstance(e, A.Binary) and e.op in ("and", "or"):
            # (keys name values structurally, so the right operand needs no narrowed scope)
            left = self.known_when(e.left, truth, sc, depth + 1)
            right = self.known_when(e.right, truth, sc, depth + 1)
            if (e.op == "and") == truth:
                return left | right
            return left & right
        return set()

    # ------------------------------------------------------------ expressions
    def expr(self, e: A.Expr, sc: Scope) -> T.Type:
        if self.depth == 0:
            self.deep_reported = False  # one report per top-level expression
        elif self.depth >= MAX_DEPTH:
            self.too_deep = True
            if not self.deep_reported:
                self.deep_reported = True
                self.error("E040", f"expression nested more than {MAX_DEPTH} levels deep; split it with `let`",
                           e.span)
            return T.ERROR
        self.depth += 1
        check = _CHECK_OF.get(type(e))
        if check is None:
            check = _CHECK_OF[type(e)] = getattr(ExpressionChecker, "x_" + type(e).__name__)
        try:
            t = check(self, e, sc)
        finally:
            self.depth -= 1
        if isinstance(t, T.OptT):
            k = self.key(e, sc)
            if k is not None and sc.is_known(k):
                t = t.inner
        self.expr_types[id(e)] = t
        return t

    def cond(self, e: A.Expr, sc: Scope, what: str) -> None:
        t = self.expr(e, sc)
        if isinstance(t, T.OptT) and t.inner == T.BOOL:
            self.error("E024", f"{what} may be unknown (`{t}`); test it with `is known` first", e.span)
        elif t not in (T.BOOL, T.ERROR):
            self.error("E023", f"{what} must be a bool, found `{t}`", e.span)

    def expect(self, t: T.Type, want: T.Type, e: A.Expr, what: str) -> None:
        if isinstance(t, T.OptT) and not isinstance(want, T.OptT) and T.assignable(t.inner, want):
            self.error("E024", f"{what} may be unknown (`{t}`); test it with `is known` first", e.span)
        elif not T.assignable(t, want):
            self.error("E022", f"{what} must be `{want}`, found `{t}`", e.span)

    def iter_elem(self, t: T.Type, e: A.Expr, what: str) -> T.Type:
        if t is T.ERROR:
            return T.ERROR
        if isinstance(t, T.OptT) and T.is_collection(t.inner):
            self.error("E024", f"{what} iterates over a value that may be unknown (`{t}`)", e.span)
            return t.inner.elem
        if not T.is_collection(t):
            self.error("E022", f"{what} needs a list or set to iterate over, found `{t}`", e.span)
            return T.ERROR
        return t.elem

    def x_Num(self, e: A.Num, sc: Scope) -> T.Type:
        if e.unit is not None and e.unit.name not in UNITS:
            self.error("E006", f"unknown unit `{e.unit.name}` (units: {', '.join(UNITS)})", e.unit.span,
                       self.suggest(e.unit.name, UNITS))
        elif not consts.fits(e.digits * (UNITS[e.unit.name] if e.unit is not None else 1)):
            self.error("E042", f"integer literal out of range (integers lie within +/-({consts.INT_LIMIT_TEXT}))",
                       e.span)
        return T.INT

    def x_Str(self, e: A.Str, sc: Scope) -> T.Type:
        self.message(e, sc)
        return T.STR

    def x_Bool(self, e: A.Bool, sc: Scope) -> T.Type:
        return T.BOOL

    def x_Name(self, e: A.Name, sc: Scope) -> T.Type:
        name = e.id
        b = sc.lookup(name)
        if b is not None:
            b.used = True
            self.resolved.names[id(e)] = b
            return b.type
        info = self.consts.get(name)
        if info is not None:
            info.used = True
            self.resolved.names[id(e)] = ConstRef(info)
            if info.state == "checking":
                self.error("E036", f"constant `{name}` depends on itself", e.span,
                           f"note: `{name}` is defined at {_where(info.decl.name.span)}")
                return T.ERROR
            if info.state == "new":
                self._check_const(info)
            return info.type
        gen = self.generators.get(name)
        if gen is not None and not self.const_mode:
            if self.kind == "validation":
                self.resolved.names[id(e)] = GeneratorRef(name)
                return T.ListT(self.vocab.parse_spelling(EMIT_TYPE))
            self.error("E019", f"generator `{name}` stands for its candidates only in a `validation` section",
                       e.span)
            return T.ERROR
        if self.const_mode:
            if name in self.vocab.facts:
                self.error("E035", f"a constant cannot use the fact `{name}`", e.span)
                return T.ERROR
            self.error("E010", f"unknown name `{name}` (a constant may use only literals and other constants)",
                       e.span, self.suggest(name, self.consts))
            return T.ERROR
        if name in self.vocab.facts:
            self.error("E010", f"`{name}` is a fact, not a value; call it: `{name}(...)`", e.span)
            return T.ERROR
        names = [*self.consts, *self._scope_names(sc)]
        if self.kind == "validation":
            names += list(self.generators)
        self.error("E010", f"unknown name `{name}`", e.span, self.suggest(name, names))
        return T.ERROR

    @staticmethod
    def _scope_names(sc: Scope) -> list[str]:
        out = []
        s = sc
        while s is not None:
            out.extend(s.names)
            s = s.parent
        return out

    def x_ConfigRef(self, e: A.ConfigRef, sc: Scope) -> T.Type:
        if self.const_mode:
            self.error("E035", "a constant cannot read config (config values are read when the rules run)",
                       e.span)
            return T.ERROR
        info = self.vocab.config.get(e.name.name)
        if info is None:
            self.error("E013", f"unknown config value `config.{e.name.name}`", e.name.span,
                       self.suggest(e.name.name, self.vocab.config))
            return T.ERROR
        return info.type

    def x_Field(self, e: A.Field, sc: Scope) -> T.Type:
        t = self.expr(e.obj, sc)
        fname = e.name.name
        if t is T.ERROR:
            return T.ERROR
        if isinstance(t, T.OptT) and isinstance(t.inner, T.RecordT):
            self.error("E024", f"`.{fname}` of a value that may be unknown (`{t}`); test it with `is known` first",
                       e.span)
            t = t.inner
        if not isinstance(t, T.RecordT):
            self.error("E020", f"a value of type `{t}` has no fields (`.{fname}`)", e.name.span)
            return T.ERROR
        info = self.vocab.records.get(t.name)
        if info is None:
            return T.ERROR
        ft = info.fields.get(fname)
        if ft is None:
            self.error("E012", f"record `{t.name}` has no field `{fname}`", e.name.span,
                       self.suggest(fname, info.fields))
            return T.ERROR
        return ft

    def x_Call(self, e: A.Call, sc: Scope) -> T.Type:
        name = e.func.name
        if self.const_mode:
            self.error("E035", f"a constant cannot call `{name}`", e.func.span)
            for a in e.args:
                self.expr(a, sc)
            return T.ERROR
        builtin = BUILTINS.get(name)
        if builtin is not None:
            return self.builtin_call(builtin, e, sc)
        fact = self.vocab.facts.get(name)
        if fact is None:
            for a in e.args:
                self.expr(a, sc)
            if sc.lookup(name) is not None or name in self.consts:
                self.error("E011", f"`{name}` is a value, not a function", e.func.span)
            else:
                self.error("E011", f"unknown function `{name}` (not a declared fact or a builtin)", e.func.span,
                           self.suggest(name, [*self.vocab.facts, *sorted(BUILTINS)]))
            return T.ERROR
        if len(e.args) != len(fact.params):
            self.error("E021", f"`{name}` takes {len(fact.params)} argument{'s' if len(fact.params) != 1 else ''}"
                       f", got {len(e.args)}", e.span, f"note: {fact.signature()}")
            for a in e.args:
                self.expr(a, sc)
            return fact.result
        for a, (pname, ptype) in zip(e.args, fact.params):
            t = self.expr(a, sc)
            self.expect(t, ptype, a, f"argument `{pname}` of `{name}`")
        return fact.result

    def x_Comprehension(self, e: A.Comprehension, sc: Scope) -> T.Type:
        cs = sc
        made = []
        for clause in e.clauses:
            t = self.expr(clause.iter, cs)
            elem = self.iter_elem(t, clause.iter, "a `for` clause")
            cs = cs.child()
            made.append(self.bind(cs, clause.var, elem, "for"))
            for c in clause.conds:
                self.cond(c, cs, "an `if` filter")
                cs = cs.child(self.known_when(c, True, cs))
        t = self.expr(e.elt, cs)
        self.unused(made)
        if isinstance(t, T.OptT):
            self.error("E024", f"a collection cannot hold values that may be unknown (`{t}`)", e.elt.span)
            t = t.inner
        return T.SetT(t) if e.kind == "set" else T.ListT(t)

    def x_RecordCtor(self, e: A.RecordCtor, sc: Scope) -> T.Type:
        name = e.type_name.name
        info = self.vocab.records.get(name)
        if info is None:
            for f in e.fields:
                self.expr(f.value, sc)
            self.error("E014", f"unknown record `{name}`", e.type_name.span,
                       self.suggest(name, self.vocab.records))
            return T.ERROR
        if info.extern:
            self.error("E026", f"`{name}` is an extern record: the engine builds it, rules cannot",
                       e.type_name.span)
        seen: dict[str, A.FieldInit] = {}
        for f in e.fields:
            t = self.expr(f.value, sc)
            fname = f.name.name
            if fname in seen:
                self.error("E016", f"field `{fname}` is given twice", f.name.span)
                continue
            seen[fname] = f
            ft = info.fields.get(fname)
            if ft is None:
                self.error("E012", f"record `{name}` has no field `{fname}`", f.name.span,
                           self.suggest(fname, info.fields))
                continue
            self.expect(t, ft, f.value, f"field `{fname}` of `{name}`")
        missing = [f for f in info.fields if f not in seen]
        if missing and not info.extern:
            self.error("E026", f"`{name}` is missing field{'s' if len(missing) > 1 else ''} "
                       + ", ".join(f"`{m}`" for m in missing), e.type_name.span)
        return T.RecordT(name)

    def x_TupleExpr(self, e: A.TupleExpr, sc: Scope) -> T.Type:
        return T.TupleT(tuple(self.expr(i, sc) for i in e.items))

    def _elements(self, e, sc: Scope, what: str) -> T.Type:
        elem: T.Type = T.ANY
        for item in e.items:
            t = self.expr(item, sc)
            if isinstance(t, T.OptT):
                self.error("E024", f"a {what} cannot hold values that may be unknown (`{t}`)", item.span)
                t = t.inner
            u = T.unify(elem, t)
            if u is None:
                self.error("E022", f"{what} elements must have one type: `{elem}` and `{t}`", item.span)
                elem = T.ERROR
            else:
                elem = u
        return elem

    def x_ListExpr(self, e: A.ListExpr, sc: Scope) -> T.Type:
        return T.ListT(self._elements(e, sc, "list"))

    def x_SetExpr(self, e: A.SetExpr, sc: Scope) -> T.Type:
        return T.SetT(self._elements(e, sc, "set"))

    def x_Unary(self, e: A.Unary, sc: Scope) -> T.Type:
        t = self.expr(e.operand, sc)
        if e.op == "not":
            self._operand(t, T.BOOL, e.operand, "`not`")
            return T.BOOL
        self._operand(t, T.INT, e.operand, "unary `-`")
        return T.INT

    def _operand(self, t: T.Type, want: T.Type, e: A.Expr, what: str) -> bool:
        if t is T.ERROR or t == want:
            return True
        if isinstance(t, T.OptT) and t.inner == want:
            self.error("E024", f"{what} needs a known `{want}`; this value may be unknown (`{t}`)", e.span)
        else:
            self.error("E020", f"{what} needs `{want}` operands, found `{t}`", e.span)
        return False

    def x_Binary(self, e: A.Binary, sc: Scope) -> T.Type:
        op = e.op
        lt = self.expr(e.left, sc)
        if op in ("and", "or"):
            rsc = sc.child(self.known_when(e.left, op == "and", sc))
            rt = self.expr(e.right, rsc)
            self._operand(lt, T.BOOL, e.left, f"`{op}`")
            self._operand(rt, T.BOOL, e.right, f"`{op}`")
            return T.BOOL
        rt = self.expr(e.right, sc)
        if lt is T.ERROR or rt is T.ERROR:
            return T.ERROR if op in ("|", "&", "-", "+", "*", "//", "%") else T.BOOL
        if op in ("==", "!="):
            if not T.compatible(lt, rt):
                self.error("E020", f"`{op}` compares values of different types: `{lt}` and `{rt}`", e.span)
            return T.BOOL
        if op in ("<", "<=", ">", ">="):
            base_l, base_r = T.strip_opt(lt), T.strip_opt(rt)
            if base_l == base_r and base_l in (T.INT, T.STR):
                for t, side in ((lt, e.left), (rt, e.right)):
                    if isinstance(t, T.OptT):
                        self.error("E024", f"`{op}` needs a known value; this one may be unknown (`{t}`)",
                                   side.span, "help: test it with `is known` first")
            else:
                self.error("E020", f"`{op}` orders two ints or two strs, found `{lt}` and `{rt}`", e.span)
            return T.BOOL
        if op in ("in", "not in"):
            elem = self.iter_elem(rt, e.right, f"the right side of `{op}`")
            if elem is not T.ERROR and not T.compatible(lt, elem):
                self.error("E020", f"`{op}` looks for a `{lt}` in a collection of `{elem}`", e.span)
            return T.BOOL
        if op in ("subset", "|", "&") or (op == "-" and isinstance(T.strip_opt(lt), T.SetT)):
            ok = True
            for t, side in ((lt, e.left), (rt, e.right)):
                if isinstance(t, T.OptT) and isinstance(t.inner, T.SetT):
                    self.error("E024", f"`{op}` needs a known set; this one may be unknown (`{t}`)", side.span)
                    ok = False
                elif not isinstance(t, T.SetT):
                    self.error("E020", f"`{op}` needs two sets, found `{t}`", side.span)
                    ok = False
            if not ok:
                return T.BOOL if op == "subset" else T.ERROR
            u = T.unify(lt, rt)
            if u is None:
                self.error("E020", f"`{op}` combines sets of different types: `{lt}` and `{rt}`", e.span)
                u = T.ERROR
            return T.BOOL if op == "subset" else u
        # arithmetic
        a = self._operand(lt, T.INT, e.left, f"`{op}`")
        b = self._operand(rt, T.INT, e.right, f"`{op}`")
        return T.INT if a and b else T.ERROR

    def x_IsKnown(self, e: A.IsKnown, sc: Scope) -> T.Type:
        t = getattr(self, "x_" + type(e.operand).__name__)(e.operand, sc)  # the declared, un-narrowed type
        self.expr_types[id(e.operand)] = t
        word = "known" if e.known else "unknown"
        if t is not T.ERROR and not isinstance(t, T.OptT):
            self.error("E027", f"`is {word}` on a value of type `{t}`, which is never unknown", e.span)
        return T.BOOL

    # ------------------------------------------------------------- builtins
    def builtin_call(self, b: Builtin, e: A.Call, sc: Scope) -> T.Type:
        """Type a call of builtin ``b`` by its record's type rule (``lang/builtins.py``)."""
        name = e.func.name
        if b.sections is not None and self.kind not in b.sections:
            self.error("E019", f"`{name}` can be used only in a " + " or ".join(f"`{k}`" for k in b.sections)
                       + " section", e.func.span)
        if isinstance(b.args, Params):
            ts = [self.expr(a, sc) for a in e.args]
            if self._arity(e, len(b.args.params), b.signature):
                for t, a, (pname, spelling) in zip(ts, e.args, b.args.params):
                    what = f"argument of `{name}`" if pname is None else f"argument `{pname}` of `{name}`"
                    self.expect(t, self.vocab.parse_spelling(spelling), a, what)
            return b.result
        if b.args.or_ints and len(e.args) >= 2:
            for a in e.args:
                self.expect(self.expr(a, sc), T.INT, a, f"argument of `{name}`")
            return b.result
        elem = self._collection_arg(e, sc, b.args.elem, b.signature)
        if b.result != SAME_LIST:
            return b.result
        if not T.orderable(elem):
            self.error("E025", f"`{name}` needs orderable elements (int, bool, str, Sym, tuples), found `{elem}`",
                       e.args[0].span)
            return T.ERROR
        return T.ListT(elem)

    def _arity(self, e: A.Call, n: int, sig: str) -> bool:
        if len(e.args) != n:
            self.error("E021", f"`{e.func.name}` takes {n} argument{'s' if n != 1 else ''}, got {len(e.args)}",
                       e.span, f"note: {sig}")
            return False
        return True

    def _collection_arg(self, e: A.Call, sc: Scope, elem_want: T.Type | None, sig: str) -> T.Type:
        ts = [self.expr(a, sc) for a in e.args]
        if not self._arity(e, 1, sig):
            return T.ERROR
        elem = self.iter_elem(ts[0], e.args[0], f"`{e.func.name}`")
        if elem_want is not None and elem not in (T.ERROR, T.ANY) and elem != elem_want:
            self.error("E022", f"`{e.func.name}` needs a collection of `{elem_want}`, found `{ts[0]}`",
                       e.args[0].span, f"note: {sig}")
        return elem

    # --------------------------------------------------------------- messages
    def message(self, s: A.Str, sc: Scope) -> None:
        """Check a string literal's template and hand the engine its parsed,
        resolved form (``self.resolved.templates``): the only place it is parsed."""
        if "{" not in s.raw and "}" not in s.raw:
            self.resolved.templates[id(s)] = Template((unescape(s.raw),) if s.raw else ())
            return
        pieces, errors = parse_template_pieces(s)
        for err in errors:
            self.error("E032", err.message, err.span)
        out: list = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                out.append(self._placeholder(piece, sc))
        self.resolved.templates[id(s)] = Template(tuple(out))

    def _placeholder(self, h, sc: Scope) -> Placeholder | None:
        head, rest = h.path[0], h.path[1:]
        text = "{" + ".".join(h.path) + "}"
        label = ".".join(h.path)
        if any(is_reserved_name(part) for part in h.path):
            self.error("E031", f"placeholder `{text}` names a Python attribute; a placeholder names only "
                       "values in scope and declared record fields", h.span)
            return None
        if head == "config" and not self.const_mode:
            if len(rest) != 1 or rest[0] not in self.vocab.config:
                self.error("E031", f"placeholder `{text}` names no config value", h.span,
                           self.suggest(rest[0], self.vocab.config) if rest else "")
                return None
            return Placeholder(label, ConfigValue(rest[0]), ())
        b = sc.lookup(head)
        if b is not None:
            b.used = True
            t = b.type
            ref: object = b
        elif head in self.consts:
            self.consts[head].used = True
            t = self.consts[head].type
            ref = ConstRef(self.consts[head])
        elif head in self.generators and self.kind == "validation":
            t = T.ListT(self.vocab.parse_spelling(EMIT_TYPE))
            ref = GeneratorRef(head)
        else:
            names = [*self._scope_names(sc), *self.consts]
            self.error("E031", f"placeholder `{text}` names nothing in scope", h.span, self.suggest(head, names))
            return None
        for fname in rest:
            t = T.strip_opt(t)
            if t is T.ERROR:
                return None
            info = self.vocab.records.get(t.name) if isinstance(t, T.RecordT) else None
            if info is None or fname not in info.fields:
                self.error("E031", f"placeholder `{text}`: `{t}` has no field `{fname}`", h.span,
                           self.suggest(fname, info.fields) if info else "")
                return None
            t = info.fields[fname]
        return Placeholder(label, ref, tuple(rest))

