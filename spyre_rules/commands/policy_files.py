"""Policy test files (``*.toml``): read and validate them into :class:`PolicyTest`\\ s.

The format is documented in docs/policy_tests.md.  Everything wrong with a file
(TOML syntax, an unknown key, a value of the wrong type, two tests with one
name) is a :class:`TestFileError` naming the file and, where known, the line.
No torch import here.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["CONFIG_KEYS", "EDITS", "Edit", "GroupExpect", "OpExpect", "PolicyTest",
           "TestFileError", "load_file"]

SUFFIX = ".toml"

#: config values a test may set (spyre_rules.config names); the defaults switch
#: automatic span-overflow tiling on, as ``spyre-rules explain`` does.
CONFIG_KEYS: dict[str, type] = {
    "max_span_bytes": int,
    "sencores": int,
    "ignore_span_overflow_hints": bool,
    "ignore_wsr_hints": bool,
}

#: states a captured program never reaches through this backend, put on an op by
#: hand (as the engine's own tests do) so the policy's rules for them can be tested.
EDITS = {
    "plain_layout": "replace the op's FixedTiledLayout by a plain FixedLayout (a mutation/copy-back layout)",
    "symbolic_layout": "make the op's first layout size (an in-place write's: its target's) a symbol (dynamic shapes)",
    "opaque_data": "make the op's data neither Pointwise nor Reduction (e.g. a Scan)",
    "foreign_strides": "double the op's host strides, so no host dim has the stick's stride (stick dim unknown)",
    "gapped_strides": "double the op's host strides but the stick's, so they are no dense permutation (stick dim known)",
    "user_hint": "stamp a user spyre_hint DimHint splitting `host_dim` into `split` tiles",
    "index_value": "add the op's output index to its value (ops.index_expr, as an iota or a mask computes)",
    "unmeasured_gather": "give the op a class of its own get_read_writes (Inductor's answer: no bound of its indirect symbols)",
}

_DECISIONS = ("plan", "no_plan", "unsupported")
_TEST_KEYS = {"name", "about", "example", "program", "inputs", "config", "edits",
              "include_graph_inputs", "ops", "groups", "grouping_error", "staged",
              "layout_choices"}
_OP_KEYS = {*_DECISIONS, "rule", "grouping"}
#: a collectives test: a collective step's buffers and the chunking the policy must pick
_COLLECTIVE_KEYS = {"name", "about", "collective", "reads", "writes", "config", "chunks"}


class TestFileError(Exception):
    """A policy test file that cannot be used (exit code 2)."""

    __test__ = False  # not a pytest class


@dataclasses.dataclass(frozen=True)
class Edit:
    op: str
    make: str
    host_dim: int | None = None
    split: int | None = None


@dataclasses.dataclass(frozen=True)
class OpExpect:
    """One op's expected decision: ``decision`` is "plan", "no plan" or "unsupported"."""

    decision: str
    splits: tuple[tuple[int, int], ...] | None = None   # plan levels (host dim, split count)
    fragment: str | None = None                          # in the reason (no plan / unsupported)
    rule: str | None = None                              # deciding rule, "section.name"
    grouping: str | None = None                          # grouping rule that decided the op


@dataclasses.dataclass(frozen=True)
class GroupExpect:
    ops: tuple[str, ...]
    splits: tuple[tuple[int, int], ...]  # the first member's levels (each member tiles its own dims)
    # op -> the levels that member runs (() untiled); filled for actual groups, never compared
    member_splits: dict = dataclasses.field(default_factory=dict, compare=False)


@dataclasses.dataclass(frozen=True)
class PolicyTest:
    __test__ = False  # not a pytest class

    file: str
    line: int
    name: str
    about: str
    example: str | None
    program: str | None
    inputs: dict[str, str]
    config: dict[str, Any]
    edits: tuple[Edit, ...]
    include_graph_inputs: bool
    ops: dict[str, OpExpect]
    groups: tuple[GroupExpect, ...] | None
    grouping_error: str | None
    # a collectives test instead of a program: the step, its buffers, its chunking
    collective: str | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    chunks: tuple[int, int, int] | None = None   # (host dim, length, count); None: no chunks
    # restickified buffer -> the restickify rules that fired for it (empty: one copy);
    # such a test captures its program under its config (the backend stages while capturing)
    staged: dict[str, tuple[str, ...]] | None = None
    # buffer -> the layout_choice rules that took a remedy found for it (empty: asked, none
    # taken); captured under the test's config too (the backend asks while capturing)
    layout_choices: dict[str, tuple[str, ...]] | None = None

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def _lines_of_names(text: str) -> dict[str, int]:
    """Line of each ``name = "..."`` (tomllib keeps no positions)."""
    out: dict[str, int] = {}
    for i, line in enumerate(text.splitlines(), 1):
        m = re.match(r'\s*name\s*=\s*"([^"]*)"', line)
        if m:
            out.setdefault(m.group(1), i)
    return out


class _Reader:
    def __init__(self, file: str, line: int, name: str) -> None:
        self.file, self.line, self.name = file, line, name

    def error(self, what: str) -> TestFileError:
        return TestFileError(f"{self.file}:{self.line}: test {self.name!r}: {what}")

    def typed(self, value: Any, kind: type | tuple[type, ...], what: str) -> Any:
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
            raise self.error(f"{what} must be {names}, got {value!r}")
        return value

    def rules_by_buffer(self, raw: dict[str, Any], key: str,
                        section: str) -> dict[str, tuple[str, ...]] | None:
        """``key = { BUFFER = ["SECTION.RULE", ...] }`` (``staged``, ``layout_choices``)."""
        table = raw.get(key)
        if table is None:
            return None
        self.typed(table, dict, key)
        for name, rules in table.items():
            if not (isinstance(rules, list) and all(isinstance(r, str) for r in rules)):
                raise self.error(f"{key}.{name} is a list of \"{section}.RULE\" names, got {rules!r}")
        return {name: tuple(rules) for name, rules in table.items()}

    def splits(self, value: Any, what: str) -> tuple[tuple[int, int], ...]:
        ok = isinstance(value, list) and all(
            isinstance(p, list) and len(p) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                         for v in p) for p in value)
        if not ok:
            raise self.error(f"{what} must be a list of [host_dim, split] pairs, got {value!r}")
        return tuple((int(d), int(k)) for d, k in value)

    def op_expect(self, op: str, table: Any) -> OpExpect:
        table = self.typed(table, dict, f"ops.{op}")
        unknown = set(table) - _OP_KEYS
        if unknown:
            raise self.error(f"ops.{op}: unknown key(s) {sorted(unknown)} (known: {sorted(_OP_KEYS)})")
        given = [k for k in _DECISIONS if k in table]
        if len(given) != 1:
            raise self.error(f"ops.{op}: give exactly one of plan, no_plan, unsupported")
        kind = given[0]
        rule = table.get("rule")
        grouping = table.get("grouping")
        for key, value in (("rule", rule), ("grouping", grouping)):
            if value is not None:
                self.typed(value, str, f"ops.{op}.{key}")
        if kind == "plan":
            return OpExpect("plan", splits=self.splits(table["plan"], f"ops.{op}.plan"),
                            rule=rule, grouping=grouping)
        fragment = self.typed(table[kind], str, f"ops.{op}.{kind}")
        return OpExpect(kind.replace("_", " "), fragment=fragment, rule=rule, grouping=grouping)

    def edit(self, raw: Any) -> Edit:
        raw = self.typed(raw, dict, "each edit")
        op, make = raw.get("op"), raw.get("make")
        if not isinstance(op, str) or make not in EDITS:
            raise self.error(f"an edit needs op = \"bufN\" and make = one of {sorted(EDITS)}; got {raw!r}")
        unknown = set(raw) - {"op", "make", "host_dim", "split"}
        if unknown:
            raise self.error(f"edit of {op}: unknown key(s) {sorted(unknown)}")
        if make == "user_hint":
            dim = self.typed(raw.get("host_dim"), int, f"edit {make} of {op}: host_dim")
            split = self.typed(raw.get("split"), int, f"edit {make} of {op}: split")
            return Edit(op, make, dim, split)
        return Edit(op, make)

    def config(self, raw: dict[str, Any]) -> dict[str, Any]:
        config = self.typed(raw.get("config", {}), dict, "config")
        for key, value in config.items():
            if key not in CONFIG_KEYS:
                raise self.error(f"config.{key}: unknown (known: {sorted(CONFIG_KEYS)})")
            self.typed(value, CONFIG_KEYS[key], f"config.{key}")
        return dict(config)

    def collective_test(self, raw: dict[str, Any]) -> PolicyTest:
        unknown = set(raw) - _COLLECTIVE_KEYS
        if unknown:
            raise self.error(f"unknown key(s) {sorted(unknown)} in a collectives test "
                             f"(known: {sorted(_COLLECTIVE_KEYS)})")
        buffers = {}
        for key in ("reads", "writes"):
            value = self.typed(raw.get(key, []), list, key)
            buffers[key] = tuple(self.typed(v, str, f"each of {key}") for v in value)
        if not buffers["reads"] and not buffers["writes"]:
            raise self.error("a collectives test needs reads = [\"DTYPE[SHAPE]\", ...] and/or writes")
        if "chunks" not in raw:
            raise self.error("a collectives test expects chunks = [host_dim, length, count] or [] (none)")
        chunks = raw["chunks"]
        if not (isinstance(chunks, list) and len(chunks) in (0, 3)
                and all(isinstance(v, int) and not isinstance(v, bool) for v in chunks)):
            raise self.error(f"chunks must be [host_dim, length, count] or [], got {chunks!r}")
        return PolicyTest(
            file=self.file, line=self.line, name=self.name,
            about=self.typed(raw.get("about", ""), str, "about"), example=None, program=None,
            inputs={}, config=self.config(raw), edits=(), include_graph_inputs=False, ops={},
            groups=None, grouping_error=None,
            collective=self.typed(raw["collective"], str, "collective"),
            reads=buffers["reads"], writes=buffers["writes"],
            chunks=tuple(chunks) if chunks else None)

    def test(self, raw: dict[str, Any]) -> PolicyTest:
        if "collective" in raw:
            return self.collective_test(raw)
        unknown = set(raw) - _TEST_KEYS
        if unknown:
            raise self.error(f"unknown key(s) {sorted(unknown)} (known: {sorted(_TEST_KEYS)})")
        example, program = raw.get("example"), raw.get("program")
        if (example is None) == (program is None):
            raise self.error("give either example = \"NAME\" or program = \"...\" with inputs")
        inputs = raw.get("inputs", {})
        self.typed(inputs, dict, "inputs")
        if program is not None:
            self.typed(program, str, "program")
            if not inputs:
                raise self.error("a program needs inputs = { NAME = \"DTYPE[SHAPE]\", ... }")
        elif inputs:
            raise self.error("an example brings its own inputs; drop inputs")
        for name, decl in inputs.items():
            self.typed(decl, str, f"inputs.{name}")
        config = self.config(raw)
        ops = self.typed(raw.get("ops", {}), dict, "ops")
        groups = raw.get("groups")
        if groups is not None:
            self.typed(groups, list, "groups")
            parsed = []
            for g in groups:
                g = self.typed(g, dict, "each group")
                if set(g) != {"ops", "splits"} or not isinstance(g["ops"], list) \
                        or not all(isinstance(o, str) for o in g["ops"]):
                    raise self.error(f"a group is {{ ops = [\"bufN\", ...], splits = [[dim, k], ...] }}, got {g!r}")
                parsed.append(GroupExpect(tuple(g["ops"]), self.splits(g["splits"], "group splits")))
            groups = tuple(parsed)
        grouping_error = raw.get("grouping_error")
        if grouping_error is not None:
            self.typed(grouping_error, str, "grouping_error")
            if groups is not None:
                raise self.error("give groups or grouping_error, not both")
        staged = self.rules_by_buffer(raw, "staged", "restickify")
        layout_choices = self.rules_by_buffer(raw, "layout_choices", "layout_choice")
        if not ops and groups is None and grouping_error is None and staged is None \
                and layout_choices is None:
            raise self.error("expects nothing: add ops.NAME, groups, grouping_error, staged or "
                             "layout_choices")
        return PolicyTest(
            file=self.file, line=self.line, name=self.name,
            about=self.typed(raw.get("about", ""), str, "about"),
            example=None if example is None else self.typed(example, str, "example"),
            program=program, inputs=dict(inputs), config=config,
            edits=tuple(self.edit(e) for e in self.typed(raw.get("edits", []), list, "edits")),
            include_graph_inputs=self.typed(raw.get("include_graph_inputs", False), bool,
                                            "include_graph_inputs"),
            ops={op: self.op_expect(op, table) for op, table in ops.items()},
            groups=groups, grouping_error=grouping_error, staged=staged, layout_choices=layout_choices,
        )


def load_file(path: Path, shown: str) -> list[PolicyTest]:
    """The tests of one file (``shown``: the path as printed)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise TestFileError(f"{shown}: cannot read: {err}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise TestFileError(f"{shown}: {err}") from None
    if set(doc) - {"test"} or not isinstance(doc.get("test"), list):
        raise TestFileError(f"{shown}: a policy test file holds [[test]] tables only")
    lines = _lines_of_names(text)
    tests: list[PolicyTest] = []
    seen: set[str] = set()
    for i, raw in enumerate(doc["test"], 1):
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise TestFileError(f"{shown}: test #{i} has no name = \"...\"")
        reader = _Reader(shown, lines.get(name, 1), name)
        if name in seen:
            raise reader.error("a second test with this name in the file")
        seen.add(name)
        tests.append(reader.test(raw))
    return tests
