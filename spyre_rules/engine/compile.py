"""Compile checked ``.rules`` expressions into Python closures.

The checker has proven the policy well typed and resolved every name and
template (``lang/resolved.py``), so compilation only picks an operation per
node and reads the checker's resolution; each expression becomes one closure
``f(env) -> value``.  Nothing here looks a name up in a scope or parses a
template.  Compiling once per policy (not walking the AST per op) is
what lets a graph of thousands of ops plan quickly.

The environment ``env`` is a dict: engine bindings (``op``, ``tile``, ...) under
their names, everything the rules bind (``let``, ``for``, binders) under the
integer slot the checker gave that declaration (``Binding.slot``) -- so a
binding that shadows another can never read or clobber it -- and the evaluation
context under :data:`CTX`.

Nothing here can run Python from a ``.rules`` file: a call is either a
builtin of ``lang/builtins.py`` or a fact bound by the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.builtins import BUILTINS, Builtin, BuiltinError
from spyre_rules.lang.consts import UNITS
from spyre_rules.lang.resolved import ConfigValue, ConstRef, GeneratorRef, Placeholder, Resolution
from spyre_rules.lang.templates import is_reserved_name
from spyre_rules.engine.invariant import env_cached, fixed_ref, worth_keeping
from spyre_rules.engine.values import NamesSoFar, as_set, iteration_order, render

__all__ = ["CTX", "BASE", "EvalError", "Lazy", "ExprCompiler", "read_field"]

CTX = "__ctx__"    # env key of the evaluation context (config snapshot, sections, trace)
BASE = "__base__"  # env key of the enclosing env whose lets a per-split env may fill
_MISSING = object()

Fn = Callable[[dict], Any]


class EvalError(Exception):
    """An operation failed on the values it met (``//`` by zero, ``min`` of nothing)."""

    def __init__(self, what: str, span: A.Span) -> None:
        super().__init__(f"{what} at {span.file}:{span.line}:{span.col}")
        self.what = what
        self.span = span


class Lazy:
    """An engine binding computed the first time a rule reads it (grouping's ``plan``)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn


# ------------------------------------------------------------------- getters


def _implicit_getter(key: str) -> Fn:
    def get(env: dict) -> Any:
        value = env[key]
        if type(value) is Lazy:
            value = env[key] = value.fn()
        return value
    return get


def _let_getter(key: int, fn: Fn, shared: bool) -> Fn:
    """A section ``let``: evaluated at most once per section evaluation.

    ``shared``: the let does not depend on a per-split binding, so a value
    computed inside a per-split env is stored in the enclosing env as well.
    """
    def get(env: dict) -> Any:
        value = env.get(key, _MISSING)
        if value is _MISSING:
            value = env[key] = fn(env)
            if shared:
                base = env.get(BASE)
                if base is not None:
                    base[key] = value
        return value
    return get


def _as_is(values: list) -> list:
    return values


def _conjunction(conds: list[Fn]) -> Fn | None:
    """All of ``conds`` hold, evaluated in order up to the first that does not
    (None: there are none)."""
    if not conds:
        return None
    if len(conds) == 1:
        return conds[0]
    return lambda env: all(c(env) for c in conds)


# ------------------------------------------------------------------ builtins


def _builtin_call(builtin: Builtin, args: list[Fn], span: A.Span) -> Fn:
    """A call of a builtin: its one implementation (``lang/builtins.py``) applied
    to the argument values, the planner first if it needs it; a value the
    builtin cannot work on is an evaluation error at the call."""
    run = builtin.run
    if builtin.context:
        def call(env: dict) -> Any:
            values = [f(env) for f in args]
            try:
                return run(env[CTX], *values)
            except BuiltinError as exc:
                raise EvalError(exc.what, span) from None
    elif len(args) == 1:
        (x,) = args

        def call(env: dict) -> Any:
            value = x(env)
            try:
                return run(value)
            except BuiltinError as exc:
                raise EvalError(exc.what, span) from None
    else:
        def call(env: dict) -> Any:
            values = [f(env) for f in args]
            try:
                return run(*values)
            except BuiltinError as exc:
                raise EvalError(exc.what, span) from None
    return call


def _is_context_builtin(name: str) -> bool:
    builtin = BUILTINS.get(name)
    return builtin is not None and builtin.context


class ExprCompiler:
    """Compiles expressions of one checked policy.

    ``facts``: fact name -> Python callable; ``records``: plain record name ->
    dataclass; ``resolution``: the checker's :class:`Resolution`;
    ``generator_ref(name)`` returns a closure evaluating a candidates generator
    on the current env (validation).
    """

    def __init__(self, facts: dict[str, Callable], records: dict[str, type],
                 resolution: Resolution, generator_ref: Callable[[str], Fn] | None) -> None:
        self.facts = facts
        self.records = records
        self.resolution = resolution
        self.generator_ref = generator_ref
        # section lets: slot -> (value, shared), defined before any name reads them
        self.lets: dict[int, tuple[Fn, bool]] = {}
        self._keeping = True  # see expr

    def define_let(self, ident: A.Ident, fn: Fn, shared: bool) -> None:
        self.lets[self.resolution.binding(ident).slot] = (fn, shared)

    def slot(self, ident: A.Ident) -> Any:
        """The env key of the binding ``ident`` declares."""
        return self.resolution.binding(ident).slot

    # -------------------------------------------------------------- names
    def getter(self, ref: Any) -> Fn:
        """The value of what a resolved name names."""
        if isinstance(ref, ConstRef):
            value = ref.value
            return lambda env: value
        if isinstance(ref, GeneratorRef):
            return self.generator_ref(ref.name)
        if isinstance(ref, ConfigValue):
            name = ref.name
            return lambda env: env[CTX].config[name]
        key = ref.slot
        if ref.kind == "implicit":
            return _implicit_getter(key)
        let = self.lets.get(key)
        if let is not None:
            return _let_getter(key, *let)
        return lambda env: env[key]

    # -------------------------------------------------------- expressions
    def expr(self, e: A.Expr) -> Fn:
        if self._keeping and worth_keeping(e, self._fixed_name, _is_context_builtin):
            # fixed for the env: evaluated once per env (engine/invariant.py); its
            # parts need no keeping of their own
            self._keeping = False
            try:
                return env_cached(getattr(self, "c_" + type(e).__name__)(e))
            finally:
                self._keeping = True
        return getattr(self, "c_" + type(e).__name__)(e)

    def _fixed_name(self, e: A.Name) -> bool:
        return fixed_ref(self.resolution.name(e), lambda slot: self.lets.get(slot, (None, False))[1])

    def c_Num(self, e: A.Num) -> Fn:
        value = e.digits * (UNITS[e.unit.name] if e.unit is not None else 1)
        return lambda env: value

    def c_Bool(self, e: A.Bool) -> Fn:
        value = e.value
        return lambda env: value

    def c_Str(self, e: A.Str) -> Fn:
        return self.template(e)

    def c_Name(self, e: A.Name) -> Fn:
        return self.getter(self.resolution.name(e))

    def c_ConfigRef(self, e: A.ConfigRef) -> Fn:
        name = e.name.name
        return lambda env: env[CTX].config[name]

    def c_Field(self, e: A.Field) -> Fn:
        obj = self.expr(e.obj)
        name, span = e.name.name, e.span
        seen: type | None = None  # the record type this field was last read from

        def get(env: dict) -> Any:
            nonlocal seen
            value = obj(env)
            if type(value) is seen:  # one site reads one record type: skip the check
                return getattr(value, name)
            found = read_field(value, name, span)
            seen = type(value)
            return found
        return get

    def c_TupleExpr(self, e: A.TupleExpr) -> Fn:
        items = [self.expr(i) for i in e.items]
        return lambda env: tuple(f(env) for f in items)

    def c_ListExpr(self, e: A.ListExpr) -> Fn:
        items = [self.expr(i) for i in e.items]
        return lambda env: [f(env) for f in items]

    def c_SetExpr(self, e: A.SetExpr) -> Fn:
        items = [self.expr(i) for i in e.items]
        return lambda env: frozenset(f(env) for f in items)

    def c_IsKnown(self, e: A.IsKnown) -> Fn:
        operand = self.expr(e.operand)
        if e.known:
            return lambda env: operand(env) is not None
        return lambda env: operand(env) is None

    def c_Unary(self, e: A.Unary) -> Fn:
        operand = self.expr(e.operand)
        if e.op == "not":
            return lambda env: not operand(env)
        return lambda env: -operand(env)

    def c_RecordCtor(self, e: A.RecordCtor) -> Fn:
        cls = self.records[e.type_name.name]
        fields = [(f.name.name, self.expr(f.value)) for f in e.fields]
        return lambda env: cls(**{name: fn(env) for name, fn in fields})

    def c_Comprehension(self, e: A.Comprehension) -> Fn:
        out_set = e.kind == "set"
        # Build the nested loops innermost-first; each clause sees the names before it.
        clauses = []
        for clause in e.clauses:
            it = self.expr(clause.iter)
            key = self.slot(clause.var)
            conds = [self.expr(c) for c in clause.conds]
            clauses.append((it, key, _conjunction(conds)))
        elt = self.expr(e.elt)
        finish: Callable[[list], Any] = frozenset if out_set else _as_is

        # One or two clauses (nearly every comprehension of a policy) as plain loops;
        # deeper nests recurse.  The order of evaluation is the same in all three.
        if len(clauses) == 1:
            ((it, key, cond),) = clauses

            def run_one(env: dict) -> Any:
                out = []
                for value in iteration_order(it(env)):
                    env[key] = value
                    if cond is None or cond(env):
                        out.append(elt(env))
                return finish(out)
            return run_one
        if len(clauses) == 2:
            (it0, key0, cond0), (it1, key1, cond1) = clauses

            def run_two(env: dict) -> Any:
                out = []
                for value in iteration_order(it0(env)):
                    env[key0] = value
                    if cond0 is None or cond0(env):
                        for inner in iteration_order(it1(env)):
                            env[key1] = inner
                            if cond1 is None or cond1(env):
                                out.append(elt(env))
                return finish(out)
            return run_two

        def run(env: dict) -> Any:
            out: list = []

            def loop(i: int) -> None:
                if i == len(clauses):
                    out.append(elt(env))
                    return
                it, key, cond = clauses[i]
                for value in iteration_order(it(env)):
                    env[key] = value
                    if cond is None or cond(env):
                        loop(i + 1)

            loop(0)
            return finish(out)
        return run

    def c_Binary(self, e: A.Binary) -> Fn:
        op = e.op
        a = self.expr(e.left)
        b = self.expr(e.right)
        span = e.span
        if op == "and":
            return lambda env: a(env) and b(env)
        if op == "or":
            return lambda env: a(env) or b(env)
        if op in ("==", "!="):
            # An unknown value is unequal to everything (itself included).
            def eq(env: dict) -> bool:
                left, right = a(env), b(env)
                return left is not None and right is not None and left == right
            if op == "==":
                return eq
            return lambda env: not eq(env)
        if op == "&" and isinstance(e.right, A.Binary) and e.right.op == "|":
            # a & (b | c) as (a & b) | (a & c): the same set, in time of the small ``a``
            # (grouping meets an op's few reads with the ever-growing set of tiled ops).
            b_left, b_right = self.expr(e.right.left), self.expr(e.right.right)

            def meet_of_union(env: dict) -> frozenset:
                x = as_set(a(env))
                y, z = as_set(b_left(env)), as_set(b_right(env))
                return frozenset(x & y) | frozenset(x & z)
            return meet_of_union
        if op == "//" or op == "%":
            def divide(env: dict) -> int:
                left, right = a(env), b(env)
                if right == 0:
                    raise EvalError(f"`{op}` by zero ({render(left)} {op} 0)", span)
                return left // right if op == "//" else left % right
            return divide
        simple: dict[str, Callable[[Any, Any], Any]] = {
            "<": lambda x, y: x < y, "<=": lambda x, y: x <= y,
            ">": lambda x, y: x > y, ">=": lambda x, y: x >= y,
            "in": lambda x, y: x in y, "not in": lambda x, y: x not in y,
            # as_set, not frozenset(): a set that grows with the graph (grouping's
            # NamesSoFar) must not be copied per visit, and ``x & s`` only iterates x.
            "subset": lambda x, y: as_set(x) <= as_set(y),
            "|": lambda x, y: frozenset(as_set(x) | as_set(y)),
            "&": lambda x, y: frozenset(as_set(x) & as_set(y)),
            "+": lambda x, y: x + y, "*": lambda x, y: x * y,
            "-": lambda x, y: (frozenset(as_set(x) - as_set(y)))
            if isinstance(x, (frozenset, NamesSoFar)) else x - y,
        }
        fn = simple[op]
        return lambda env: fn(a(env), b(env))

    # -------------------------------------------------------------- calls
    def c_Call(self, e: A.Call) -> Fn:
        name = e.func.name
        args = [self.expr(a) for a in e.args]
        builtin = BUILTINS.get(name)
        if builtin is not None:
            return _builtin_call(builtin, args, e.span)
        fact = self.facts[name]
        if len(args) == 1:
            (x,) = args
            return lambda env: fact(x(env))
        if len(args) == 2:
            x, y = args
            return lambda env: fact(x(env), y(env))
        return lambda env: fact(*[f(env) for f in args])

    # ----------------------------------------------------------- messages
    def placeholder(self, p: Placeholder, span: A.Span) -> Fn:
        getter = self.getter(p.ref)
        if not p.fields:
            return getter
        fields = p.fields

        def get(env: dict) -> Any:
            value = getter(env)
            for name in fields:
                if value is None:
                    return None
                value = read_field(value, name, span)
            return value
        return get

    def template(self, s: A.Str) -> Fn:
        """A string literal: literal text and placeholders, rendered when evaluated."""
        pieces = self.resolution.template(s).pieces
        if all(isinstance(p, str) for p in pieces):
            text = "".join(pieces)
            return lambda env: text
        parts = [p if isinstance(p, str) else self.placeholder(p, s.span) for p in pieces]

        def run(env: dict) -> str:
            return "".join(p if isinstance(p, str) else render(p(env)) for p in parts)
        return run


def read_field(value: Any, name: str, span: A.Span) -> Any:
    """Field ``name`` of a record value.  Only declared record fields are read
    (records are dataclasses; the checker proved the field is declared): never
    an arbitrary Python attribute of a live object."""
    kind = type(value)
    readable = _READABLE.get((kind, name))
    if readable is None:
        fields = getattr(kind, "__dataclass_fields__", None)
        readable = _READABLE[(kind, name)] = (
            fields is not None and name in fields and not is_reserved_name(name))
    if not readable:
        raise EvalError(f"`.{name}` of a value that is not a record with that field", span)
    return getattr(value, name)


#: (type, field name) -> whether ``read_field`` may read it (a type's fields never change).
_READABLE: dict[tuple[type, str], bool] = {}
