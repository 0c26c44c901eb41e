"""What keeps `spyre-rules check` starting fast (issue 14) cannot regress
silently: the modules it must not import, and the hand-written classes and
argument reading that replace dataclasses and argparse on its path behave as
those would."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from spyre_rules import cli
from spyre_rules.commands import check as check_cmd
from spyre_rules.lang import ast as A
from spyre_rules.lang import types as T
from spyre_rules.lang.builtins import Builtin, Collection, Params
from spyre_rules.lang.diagnostics import Diagnostic
from spyre_rules.lang.resolved import ConfigValue, ConstRef, GeneratorRef, Placeholder, Template
from spyre_rules.lang.slotted import Frozen
from spyre_rules.lang.templates import CheckedError, CheckedPlaceholder, TemplateError

ROOT = Path(__file__).resolve().parents[2]

# Imported by `python -c pass` already (site), or cheap; everything else the check must do without.
FORBIDDEN = ("torch", "lark", "dataclasses", "inspect", "argparse", "gettext", "locale", "hashlib", "difflib",
             "json", "copy", "ast")

_PROBE = """
import atexit, json, runpy, sys
def report():
    sys.__stderr__.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
atexit.register(report)
sys.argv = ["spyre_rules", *{args!r}]
runpy.run_module("spyre_rules", run_name="__main__", alter_sys=True)
"""


def _modules_after(args: list[str], env_extra: dict[str, str] | None = None) -> tuple[int, set[str], str]:
    """Exit code and every module loaded by the end of ``python -m spyre_rules ARGS``
    (json is the probe's own, imported in the exit hook).  The check runs every
    time (no remembered report, test_check_cache.py) unless ``env_extra`` says otherwise."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPYRE_RULES_CHECK_CACHE="0", **(env_extra or {}))
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(args=args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return proc.returncode, set(json.loads(line[len("MODULES "):])), proc.stdout


@pytest.mark.parametrize("args", [["check"], ["check", "rules"],
                                  ["check", "rules/limits.rules", "rules/planner.rules", "rules/grouping.rules"]])
def test_python_m_check_imports_neither_torch_nor_dataclasses_nor_argparse(args):
    code, modules, out = _modules_after(args)
    assert code == 0 and "no problems" in out, out
    assert "spyre_rules.lang.checker" in modules and "spyre_rules.lang.shadowing" in modules  # it really checked
    roots = {m.split(".")[0] for m in modules}
    assert sorted(roots & set(FORBIDDEN) - {"json"}) == []


def test_a_check_with_diagnostics_imports_neither_torch_nor_dataclasses_nor_argparse():
    code, modules, out = _modules_after(["check", "rules/planner.rules"])  # its constants are elsewhere
    assert code == 1 and "error[E010]: unknown name `MAX_TILE_DIMS`" in out
    assert not {m.split(".")[0] for m in modules} & {"torch", "lark", "dataclasses", "inspect", "argparse"}


def test_python_m_check_with_an_option_still_reads_it_with_argparse():
    code, modules, out = _modules_after(["check", "--strict"])
    assert code == 0 and "no problems" in out
    assert "argparse" in modules and "dataclasses" not in modules and "torch" not in modules


@pytest.mark.parametrize("argv", [[], ["a.rules"], ["rules", "x/y.rules", ""], ["check"]])
def test_plain_check_arguments_are_what_argparse_gives(argv):
    fast = check_cmd.parse_plain(argv)
    slow = cli.build_parser("check").parse_args(["check", *argv])
    assert vars(fast) == vars(slow)


@pytest.mark.parametrize("argv", [["--strict"], ["a.rules", "--format", "json"], ["-h"], ["--"], ["-"],
                                  ["a", "--strict", "b"], ["--format=json"]])
def test_any_option_goes_to_argparse(argv):
    assert check_cmd.parse_plain(argv) is None


def test_usage_errors_keep_argparse_messages_and_exit_code():
    proc = subprocess.run([sys.executable, "-m", "spyre_rules", "check", "a.rules", "--strict", "b.rules"],
                          capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "spyre-rules: error: unrecognized arguments: b.rules"


# ------------------------------------------------ classes in place of dataclasses

def _as_dataclass(cls: type) -> type:
    """A real dataclass with ``cls``'s fields, as ``cls`` used to be declared."""
    frozen = issubclass(cls, Frozen)
    return dataclasses.make_dataclass(cls.__name__, list(cls._fields), frozen=frozen)


SPAN = A.Span("f.rules", 1, 2, 1, 5)
SAMPLES = [
    (Diagnostic, ("E010", "unknown name `x`", SPAN, ["help: did you mean `y`?"])),
    (Diagnostic, ("W001", "unused", SPAN, [])),
    (ConstRef, (42,)),
    (GeneratorRef, ("by_dim",)),
    (ConfigValue, ("max_span_bytes",)),
    (Placeholder, ("{op}", "op", ("name",))),
    (Template, (("Cannot tile ", "x"),)),
    (Collection, (T.INT, True)),
    (Params, (((None, "int"),),)),
    (TemplateError, ("bad brace", 1, 2)),
    (CheckedPlaceholder, (("r", "buffer"), SPAN)),
    (CheckedError, ("bad", SPAN)),
]


@pytest.mark.parametrize("cls, values", SAMPLES, ids=lambda x: getattr(x, "__name__", ""))
def test_hand_written_classes_behave_as_the_dataclasses_they_replace(cls, values):
    twin = _as_dataclass(cls)
    ours, theirs = cls(*values), twin(*values)
    assert repr(ours) == repr(theirs)
    assert ours == cls(*values) and not (ours != cls(*values))
    assert (ours == theirs) is False  # another class: NotImplemented both ways, as for dataclasses
    assert ours.__eq__(theirs) is NotImplemented
    if issubclass(cls, Frozen):
        hashable = all(isinstance(v, (str, int, tuple, A.Span, T.Type)) for v in values)
        if hashable:
            assert hash(ours) == hash(theirs) == hash(cls(*values))
        with pytest.raises(AttributeError, match=f"cannot assign to field '{cls._fields[0]}'"):
            setattr(ours, cls._fields[0], None)
        with pytest.raises(AttributeError, match=f"cannot delete field '{cls._fields[0]}'"):
            delattr(ours, cls._fields[0])
    else:
        with pytest.raises(TypeError, match="unhashable"):
            hash(ours)
        setattr(ours, cls._fields[0], "changed")
        assert getattr(ours, cls._fields[0]) == "changed"
    # keyword arguments and defaults as the dataclass had them
    assert cls(**dict(zip(cls._fields, values))) == cls(*values)


def test_defaults_are_fresh_per_instance():
    a, b = Diagnostic("E001", "m", SPAN), Diagnostic("E001", "m", SPAN)
    a.notes.append("note: x")
    assert b.notes == [] and a != b
    builtin = Builtin("f", "f() -> int", Params(()), T.INT, len)
    assert (builtin.sections, builtin.context) == (None, False)


def test_every_class_lists_its_fields_in_order():
    classes = [cls for cls, _ in SAMPLES] + [Builtin]
    from spyre_rules.lang.driver import CheckResult
    from spyre_rules.lang.prelude import ConfigInfo, FactInfo, RecordInfo, Vocabulary
    from spyre_rules.lang.sections.spec import SectionSpec, SectionState

    classes += [CheckResult, ConfigInfo, FactInfo, RecordInfo, Vocabulary, SectionSpec, SectionState]
    for cls in classes + A.node_classes():
        params = list(inspect.signature(cls.__init__).parameters)[1:]
        assert cls._fields == cls.__slots__ == tuple(cls.__annotations__) == tuple(params), cls


def test_ast_nodes_still_answer_dataclass_introspection():
    call = A.Call(SPAN, A.Ident(SPAN, "min"), [A.Num(SPAN, 1, None)])
    assert dataclasses.is_dataclass(call)
    assert [f.name for f in dataclasses.fields(call)] == ["span", "func", "args"]
    other = dataclasses.replace(call, args=[])
    assert type(other) is A.Call and other.func is call.func and other.args == [] and call.args != []
    assert call != A.Call(SPAN, call.func, call.args)  # nodes compare by identity
    assert repr(A.Ident(SPAN, "x")) == f"Ident(span={SPAN!r}, name='x')"
    assert not dataclasses.is_dataclass(A.Node) and not dataclasses.is_dataclass(A.Span)
