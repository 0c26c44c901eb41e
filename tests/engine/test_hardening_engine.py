"""Engine side of the hardened toolchain (issue 10): config declarations must
match the real settings, templates render as the checker read them, and field
access reaches declared record fields only."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from spyre_rules import config
from spyre_rules.engine import plan_graph
from spyre_rules.engine.binding import BindingError
from spyre_rules.engine.compile import EvalError, read_field
from spyre_rules.engine.policy import load_policy
from spyre_rules.lang.ast import Span

from helpers import FP16, capture
from test_policy_loading import rules_copy


@pytest.mark.parametrize("declaration, problem", [
    ("config dump_dir: int;", "config value `dump_dir` is declared `int`, but the setting may be unset"),
    ("config dump_dir: str;", "config value `dump_dir` is declared `str`, but the setting may be unset"),
    ("config rules_path: str;", "config value `rules_path` is declared `str`, but the setting may be unset"),
    ("config fallback: int;", "config value `fallback` is declared `int`, the setting is `str`"),
    ("config unroll_loops: int;", "config value `unroll_loops` is declared `int`, the setting is `bool`"),
])
def test_config_declarations_must_match_the_settings(tmp_path, declaration, problem):
    target = rules_copy(tmp_path, {"prelude.rules": [("config sencores: int;",
                                                      "config sencores: int;\n" + declaration)]})
    with pytest.raises(BindingError) as info:
        load_policy([str(target)])
    assert [p for p in info.value.problems if p.startswith(problem)], info.value.problems


def test_config_declaration_of_the_right_type_loads(tmp_path):
    target = rules_copy(tmp_path, {"prelude.rules": [("config sencores: int;",
                                                      "config sencores: int;\nconfig fallback: str;")]})
    assert "fallback" in load_policy([str(target)]).config_names


def test_messages_render_as_the_checker_reads_them(tmp_path, monkeypatch):
    rule = ('  skip braces when is_computed_buffer(op)\n'
            '    because "{op}: {{literal}} \\\\ {config.sencores} {{{op}}}";\n')
    target = rules_copy(tmp_path, {"planner.rules": [("eligibility {\n", "eligibility {\n" + rule)]})
    monkeypatch.setenv("SPYRE_RULES_PATH", str(target))
    ops = capture("add_small", lambda a, b: a + b, torch.randn(1, 20, 16, 64, dtype=FP16),
                  torch.randn(1, 20, 16, 64, dtype=FP16))
    with config.patch(max_span_bytes=8192):
        decision = {d.op: d for d in plan_graph(ops)}["buf0"]
    assert decision.reason == "buf0: {literal} \\ 32 {buf0}"


def test_field_reads_reach_declared_record_fields_only():
    span = Span("t.rules", 1, 1, 1, 2)

    @dataclasses.dataclass(frozen=True)
    class Rec:
        size: int

    assert read_field(Rec(3), "size", span) == 3
    for value, name in ((Rec(3), "__class__"), (Rec(3), "__dict__"), (object(), "size"), (3, "real")):
        with pytest.raises(EvalError):
            read_field(value, name, span)
