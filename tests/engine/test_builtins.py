"""The checker and the engine know the same builtins, with the same types.

Both read the one table ``spyre_rules/lang/builtins.py``: every builtin is
called once in a checked grouping section, the checker's type of the call is
the table's, and the engine, compiling that same call, returns a value of that
type.  Nothing else in ``lang/`` or ``engine/`` may define builtins (no
``i_*`` / ``b_*`` methods dispatched by name prefix, no list of their names).
"""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest

from spyre_rules.engine.compile import CTX, EvalError, ExprCompiler
from spyre_rules.engine.values import Run, Tiling
from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.builtins import BUILTINS, SAME_LIST, Collection
from spyre_rules.lang.driver import check_sources
from spyre_rules.resources import rules_dir

PACKAGE = Path(__file__).resolve().parents[2] / "spyre_rules"
PRELUDE = (rules_dir() / "prelude.rules").read_text()

# one well-typed call per way of calling each builtin -> the value the engine must return
CALLS = {
    "len([4, 5, 6])": 3,
    "min([4, 2])": 2, "min(4, 2, 7)": 2,
    "max({4, 2})": 4, "max(4, 9)": 9,
    "sum({1, 2})": 3,
    "product([2, 3])": 6,
    "count([true, false, true])": 2,
    "all([true, false])": False,
    "any([false, true])": True,
    "sorted({3, 1, 2})": [1, 2, 3],
    "ceil_div(7, 2)": 4,
    "legal_splits(op, 1)": [1, 5],
    "conforms(op, run.tiling)": True,
    "loop_local_output(op)": True,
    'loop_local_buffer("buf3")': False,
}


class FakePlanner:
    """The evaluation context of the builtins that run other sections."""

    def legal_splits(self, op, dim):
        assert (op, dim) == ("buf0", 1)
        return [1, 5]

    def conforms(self, op, tiling):
        assert (op, tiling) == ("buf0", Tiling.of([(1, 5)]))
        return True

    def loop_local_output(self, op):
        return op == "buf0"

    def loop_local_buffer(self, name):
        assert name == "buf3"
        return False


def checked_calls():
    lets = "".join(f"  let v{i} = {call};\n" for i, call in enumerate(CALLS))
    text = textwrap.dedent("""\
        grouping {
        %s  single all_own
            because "{op} %s";
        }
        """) % (lets, " ".join("{v%d}" % i for i in range(len(CALLS))))
    result = check_sources([("rules/prelude.rules", PRELUDE), ("t.rules", text)], complete=False)
    assert [d for d in result.diagnostics if not d.is_warning] == []
    (section,) = [f for f in result.files if f.path == "t.rules"][0].items
    lets = [item for item in section.items if isinstance(item, A.LetItem)]
    assert len(lets) == len(CALLS)
    return result.checker, [let.value for let in lets]


def has_type(value, t: T.Type) -> bool:
    if t == T.INT:
        return type(value) is int
    if t == T.BOOL:
        return type(value) is bool
    if isinstance(t, T.ListT):
        return type(value) is list and all(has_type(v, t.elem) for v in value)
    raise AssertionError(f"no sample check for {t}")


def test_checker_and_engine_run_every_builtin_of_the_one_table_with_its_type():
    checker, calls = checked_calls()
    assert {c.func.name for c in calls} == set(BUILTINS)
    compiler = ExprCompiler({}, {}, checker.resolved, generator_ref=None)
    env = {"op": "buf0", "run": Run(True, frozenset(), [], Tiling.of([(1, 5)])), CTX: FakePlanner()}
    for call, (text, expected) in zip(calls, CALLS.items()):
        b = BUILTINS[call.func.name]
        typed = checker.expr_types[id(call)]
        if b.result == SAME_LIST:
            assert typed == T.ListT(checker.expr_types[id(call.args[0])].elem), text
        else:
            assert typed == b.result, text
        value = compiler.expr(call)(env)
        assert value == expected and has_type(value, typed), text


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_arity_error_quotes_the_table_signature(name):
    b = BUILTINS[name]
    n = 3 if isinstance(b.args, Collection) and not b.args.or_ints else 0
    args = ", ".join(["1"] * n)
    text = "grouping {\n  let x = %s(%s);\n  single s because \"{x}\";\n}\n" % (name, args)
    result = check_sources([("rules/prelude.rules", PRELUDE), ("t.rules", text)], complete=False)
    (diag,) = [d for d in result.diagnostics if d.code == "E021"]
    assert diag.notes == [f"note: {b.signature}"]


def test_a_builtin_error_is_an_evaluation_error_at_the_call():
    checker, calls = checked_calls()
    empty_min = dataclasses.replace(calls[1], args=[A.ListExpr(calls[1].args[0].span, [])])
    fn = ExprCompiler({}, {}, checker.resolved, generator_ref=None).expr(empty_min)
    with pytest.raises(EvalError) as err:
        fn({})
    assert err.value.what == "`min` of an empty collection" and err.value.span == empty_min.span


def _sources(*layers: str):
    for layer in layers:
        for path in sorted((PACKAGE / layer).glob("*.py")):
            yield path, ast.parse(path.read_text())


def test_nothing_else_in_lang_or_engine_defines_builtins():
    names = set(BUILTINS)
    offenders = []
    for path, tree in _sources("lang", "engine"):
        if path.name == "builtins.py" and path.parent.name == "lang":
            continue
        for node in ast.walk(tree):
            where = f"{path.relative_to(PACKAGE)}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name[:2] in ("i_", "b_"):
                offenders.append(f"{where} defines {node.name}")
            if isinstance(node, ast.Constant) and node.value in ("i_", "b_"):
                offenders.append(f"{where} dispatches by the prefix {node.value!r}")
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                listed = {i.value for i in items if isinstance(i, ast.Constant) and i.value in names}
                if len(listed) >= 2:
                    offenders.append(f"{where} lists builtins {sorted(listed)}")
    assert offenders == []
