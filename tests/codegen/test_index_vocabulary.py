"""The index vocabulary (program/index_eval.py) is one definition: the recorder records an
``index_expr`` only when the executor's evaluator compiles it, so an expression the
executor cannot evaluate refuses the op by name at compile time (the backend can still
put it on the host) instead of failing when the program runs (issue 41's reflect pad)."""

from __future__ import annotations

import pytest
import sympy
import torch
from torch._inductor.utils import sympy_index_symbol

from spyre_rules.codegen.recorder import ProgramRecorder
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.program.index_eval import evaluate

c0, c1 = sympy_index_symbol("c0"), sympy_index_symbol("c1")


def test_abs_evaluates_exactly_on_integer_grids_and_on_ints():
    grid = torch.arange(44)
    reflected = evaluate(39 - sympy.Abs(sympy.Abs(c0 - 2) - 39), {"c0": grid})
    assert reflected.tolist() == [2, 1, *range(40), 38, 37]
    assert evaluate(sympy.Abs(c0 - 5), {"c0": 3}) == 2


def test_an_index_expression_the_executor_can_evaluate_is_recorded():
    recorder = ProgramRecorder("buf4 (aten ops: sub.Tensor)", [c0])
    recorder.index_expr(39 - sympy.Abs(sympy.Abs(c0 - 2) - 39), torch.int64)
    assert [entry["op"] for entry in recorder.program] == ["index_expr"]


def test_an_index_expression_outside_the_vocabulary_refuses_the_op_by_name():
    recorder = ProgramRecorder("buf4 (aten ops: sign.default)", [c0])
    with pytest.raises(UnsupportedGraph) as caught:
        recorder.index_expr(sympy.sign(c0 - 3), torch.int64)
    assert str(caught.value) == (
        "buf4 (aten ops: sign.default): cannot evaluate sign in index expression sign(c0 - 3)")


def test_an_index_expression_over_a_symbol_no_loop_binds_refuses_the_op_by_name():
    recorder = ProgramRecorder("buf3 (aten ops: mul.Tensor)", [c0, c1])
    u0 = sympy.Symbol("u0", integer=True)
    with pytest.raises(UnsupportedGraph) as caught:
        recorder.index_expr(c0 + u0, torch.int64)
    assert str(caught.value) == (
        "buf3 (aten ops: mul.Tensor): index expression c0 + u0 depends on u0, which no loop "
        "binds: a value known only when the graph runs (data-dependent)")
