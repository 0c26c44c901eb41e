"""Expressions whose value is fixed for one evaluation env, evaluated once per env.

A rule often asks the same question of the op inside a loop:
``c.symbols subset output_symbols(op)`` for every coordinate, ``input_reads(op)``
and ``within_stick_dim(out)`` once per split count of legality, a set literal
per test.  Such an expression reads only names that do not change while one env
lives -- the engine bindings ``op``, ``tile``, ``dim`` and ``dims`` (set when the
env is made, never rebound in it), constants, ``config`` and section ``let``\\ s
shared across split counts (themselves computed at most once per env) -- and
calls only facts and pure builtins, which answer the same for the same values
(planning reads the IR, never edits it: docs/rules_language.md §6.0).  So its
value is kept in the env under a key of its own the first time it is evaluated:
it is evaluated exactly when, and in the order, it was before (``and`` / ``or``
still short-circuit around it), and later evaluations read the kept value.

A per-split env (legality) hands the value to its base env too, so the next
split count finds it; it cannot depend on the split variable, which is a
rule-made binding.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.lang import ast as A
from spyre_rules.lang.resolved import ConstRef

__all__ = ["FIXED_ENGINE_NAMES", "env_cached", "fixed_ref", "worth_keeping"]

#: Engine bindings an env never rebinds (``Lazy`` ones such as grouping's ``plan`` are left out).
FIXED_ENGINE_NAMES = frozenset({"op", "tile", "dim", "dims"})

_BASE = "__base__"  # compile.BASE (not imported: compile imports this module)
_MISSING = object()

Fn = Callable[[dict], Any]

#: Nodes that cost more to evaluate than one env lookup.
_COMPOUND = (A.Call, A.Binary, A.Unary, A.IsKnown, A.Field, A.SetExpr, A.ListExpr, A.TupleExpr,
             A.RecordCtor)


def worth_keeping(e: A.Expr, fixed_name: Callable[[A.Name], bool],
                  is_context_builtin: Callable[[str], bool]) -> bool:
    """A compound expression that reads only fixed names (``fixed_name``) and calls
    no builtin that needs the planner (``is_context_builtin``)."""
    return isinstance(e, _COMPOUND) and _fixed(e, fixed_name, is_context_builtin)


def _fixed(e: A.Expr, fixed_name: Callable[[A.Name], bool],
           is_context_builtin: Callable[[str], bool]) -> bool:
    def walk(node: A.Expr) -> bool:
        if isinstance(node, (A.Num, A.Bool, A.ConfigRef)):
            return True
        if isinstance(node, A.Name):
            return fixed_name(node)
        if isinstance(node, A.Field):
            return walk(node.obj)
        if isinstance(node, (A.TupleExpr, A.ListExpr, A.SetExpr)):
            return all(walk(i) for i in node.items)
        if isinstance(node, (A.Unary, A.IsKnown)):
            return walk(node.operand)
        if isinstance(node, A.Binary):
            return walk(node.left) and walk(node.right)
        if isinstance(node, A.RecordCtor):
            return all(walk(f.value) for f in node.fields)
        if isinstance(node, A.Call):
            return not is_context_builtin(node.func.name) and all(walk(a) for a in node.args)
        return False  # strings (templates), comprehensions (they bind names), anything new
    return walk(e)


def fixed_ref(ref: Any, shared_let: Callable[[Any], bool]) -> bool:
    """Whether a resolved name names a value fixed for one env."""
    if isinstance(ref, ConstRef):
        return True
    kind = getattr(ref, "kind", None)
    if kind == "implicit":
        return ref.slot in FIXED_ENGINE_NAMES
    if kind == "let":
        return shared_let(ref.slot)
    return False


def env_cached(fn: Fn) -> Fn:
    """``fn``, evaluated once per env (and its base env, for a per-split env)."""
    key = object()

    def get(env: dict) -> Any:
        value = env.get(key, _MISSING)
        if value is _MISSING:
            value = env[key] = fn(env)
            base = env.get(_BASE)
            if base is not None:
                base[key] = value
        return value
    return get
