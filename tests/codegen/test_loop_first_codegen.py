"""A LoopSpec starting at iteration ``first`` in the artefacts: the span check bounds a
peeled tile where it runs, bundle.mlir starts its ``scf.for`` there, the wrapper
source prints ``first=`` and evaluates back to the same program (the wrapper's
kernel then runs equal to x + y), sdsc_N.json states the tail's step."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import sympy
import torch

TESTS = Path(__file__).resolve().parent.parent
if str(TESTS / "executor") not in sys.path:
    sys.path.insert(0, str(TESTS / "executor"))

import peeled_loops as pl  # noqa: E402

from spyre_rules.codegen import op_spec as op_spec_module  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle, sdsc_files  # noqa: E402
from spyre_rules.codegen.source import IMPORTS, format_program, kernel_definition  # noqa: E402
from spyre_rules.codegen.rigid_tiles import TileTranslationError, check_rigid_tiles  # noqa: E402
from spyre_rules.codegen.span_check import check_kernel  # noqa: E402
from spyre_rules.commands.demo import _program_shape  # noqa: E402
from spyre_rules.executor.runtime import rules_device  # noqa: E402
from spyre_rules.program.op_spec import (  # noqa: E402
    DataFormats,
    LoopSpec,
    OpSpec,
    TensorArg,
    TensorPlacement,
)

c0, c1 = pl.c0, pl.c1


def _dims(items):
    return [(c.op, d.tensor, d.device_dim, d.span_bytes, d.exact)
            for c in check_kernel("k", items, 8192) for d in c.dims]


def test_the_span_check_bounds_the_peeled_rows_with_their_own_range():
    # (300, 64) fp16 rows: a main tile spans 64 rows of 128 bytes, the tail 44
    assert _dims(pl.peeled(pl.CASES[0])) == [
        *[("out", t, 1, 64 * 128, True) for t in ("x", "y", "out")],
        *[("out", t, 1, 44 * 128, True) for t in ("x", "y", "out")]]


def _floor_op(extent, step, rows=8):
    # floor(c0/48) moves by a different amount per 32-element step: bounded per iteration
    out = TensorArg(False, 0, DataFormats.SEN169_FP16, [rows, 64], [sympy.floor(c0 / 48), c1],
                    {"hbm": 0}, name="buf0")
    return OpSpec(op="add", is_reduction=False,
                  iteration_space={c0: (sympy.Integer(extent), 1), c1: (sympy.Integer(64), 1)},
                  args=[out], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[[c0]], tiled_steps=[[step]])


@pytest.mark.parametrize("first,straddles", [(0, False), (3, False), (4, True), (5, False),
                                             (6, False), (7, True)])
def test_a_peeled_tile_is_bounded_at_its_real_offset(first, straddles):
    # 20 elements from c0 = 32 * first: [128, 148) and [224, 244) cross a multiple of
    # 48 (two values of the floor: a span of two rows), the others one value (no span)
    loop = LoopSpec(sympy.Integer(1), [_floor_op(20, 32)], first=first)
    assert _dims([loop]) == ([("buf0", "buf0", 0, 2 * 64 * 2, True)] if straddles else [])


def test_a_peeled_tile_steps_by_its_tiled_step_not_its_range():
    # range 20, step 32, iteration 2: [64, 84) (one row: 64 // 48 == 83 // 48 == 1); a
    # step of 20 would put it at [40, 60) (two rows: 40 // 48 == 0, 59 // 48 == 1)
    assert _dims([LoopSpec(sympy.Integer(1), [_floor_op(20, 32)], first=2)]) == []
    assert _dims([LoopSpec(sympy.Integer(1), [_floor_op(20, 20)], first=2)]) == [
        ("buf0", "buf0", 0, 2 * 64 * 2, True)]


@pytest.mark.parametrize("first,values", [(0, 200), (10, 201)])
def test_the_union_bound_starts_at_the_first_iteration(first, values):
    # 300 iterations > MAX_ENUMERATED_ITERATIONS: the union of their domains, c0 over
    # [32 * first, 32 * (first + 300)): floor(c0/48) takes 0..199 from 0, 6..206 from 10
    loop = LoopSpec(sympy.Integer(300), [_floor_op(32, 32, rows=210)], first=first)
    assert _dims([loop]) == [("buf0", "buf0", 0, values * 64 * 2, False)]


@pytest.mark.parametrize("form", ["custom", "generic"])
def test_bundle_starts_the_peeled_loop_at_its_first_iteration(form):
    text = generate_bundle(pl.peeled(pl.CASES[0]), form=form)
    assert "    %loop_bound_0 = arith.constant 4 : index\n" \
           "    %loop_first_1 = arith.constant 4 : index\n" \
           "    %loop_bound_1 = arith.constant 5 : index\n" in text
    assert "scf.for %i_0 = %c0 to %loop_bound_0 step %c1 {" in text
    assert "scf.for %i_1 = %loop_first_1 to %loop_bound_1 step %c1 {" in text
    # the tail moves by the main tile's 8192 bytes per iteration: one shared map
    assert text.startswith("#map_0 = affine_map<(d0)[s0] -> (s0 + 8192*d0)>\nmodule {")
    assert "#map_1" not in text


def test_a_loop_from_zero_prints_no_lower_bound_constant():
    text = generate_bundle([LoopSpec(sympy.Integer(4), [pl.add_spec(pl.CASES[0], 64)])])
    assert "loop_first" not in text
    assert "scf.for %i_0 = %c0 to %loop_bound_0 step %c1 {" in text


def test_the_generic_bundle_parses_and_verifies():
    ir = pytest.importorskip("iree.compiler.ir")
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    module = ir.Module.parse(generate_bundle(pl.peeled(pl.CASES[0]), form="generic"), ctx)
    assert module.operation.verify()


def _exec(source_expr: str):
    namespace = {name: getattr(op_spec_module, name) for name in op_spec_module.__all__}
    return eval(source_expr, namespace)  # noqa: S307 - our own generated source


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_source_prints_first_and_round_trips(case):
    items = pl.peeled(case)
    text = "[\n" + "\n".join(format_program(items)) + "\n]"
    assert text.count("first=") == 1
    assert "    LoopSpec(\n        count=sympify('1'),\n        first=4,\n        body=[\n" in text
    assert "tiled_steps=[[64]]" in text
    rebuilt = _exec(text)
    assert rebuilt == items and rebuilt[1].first == 4 and rebuilt[0].first == 0


def _placement(case, name, index):
    layout = case.layout
    return TensorPlacement(name=name, host_size=case.host, host_stride=(case.host[1], 1),
                           host_dtype="float16", device_size=tuple(layout.device_size),
                           stride_map=tuple(layout.stride_map), device_dtype=layout.device_dtype,
                           address=index * layout.size_in_bytes)


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_the_wrapper_kernel_definition_runs_equal_to_eager(case):
    # the definition as the wrapper module spells it, evaluated with the wrapper's imports
    stickify = {0: _placement(case, "x", 0), 1: _placement(case, "y", 1)}
    unstickify = {2: _placement(case, "out", 2)}
    text = kernel_definition("sdsc_add_0", "spyre_device", pl.peeled(case), stickify, unstickify)
    namespace: dict = {}
    exec("\n".join(IMPORTS), namespace)  # noqa: S102 - our own generated source
    namespace["spyre_device"] = rules_device(3 * case.layout.size_in_bytes)
    kernel = eval(text, namespace)  # noqa: S307
    assert kernel.specs == pl.peeled(case)
    x, y = pl.inputs(case)
    out = torch.zeros(case.host, dtype=torch.float16)
    kernel.run(x, y, out)  # checks the affine addressing first, then runs
    assert kernel.affine_checked
    assert torch.equal(out, x + y)


def test_sdsc_json_states_the_tail_step_and_demo_shape_states_first():
    files = sdsc_files(pl.peeled(pl.CASES[0]))
    assert "tiled_steps" not in files["sdsc_0.json"]
    assert files["sdsc_1.json"]["tiled_steps"] == [[64]]
    assert files["sdsc_1.json"]["iteration_space"]["c0"] == ["44", 1]
    assert _program_shape(pl.peeled(pl.CASES[0])) == [
        {"loop": 4, "body": ["add"]}, {"loop": 1, "first": 4, "body": ["add"]}]


def test_bundle_of_a_peeled_tile_inside_an_outer_loop():
    text = generate_bundle(pl.nested(pl.NESTED), form="generic")
    assert "    %loop_bound_0 = arith.constant 2 : index\n" \
           "    %loop_bound_1 = arith.constant 4 : index\n" \
           "    %loop_first_2 = arith.constant 4 : index\n" \
           "    %loop_bound_2 = arith.constant 5 : index\n" in text
    assert "      scf.for %i_2 = %loop_first_2 to %loop_bound_2 step %c1 {\n" \
           "        %addr_3 = affine.apply #map_0(%i_0, %i_2)[%sym_4]\n" in text
    # outer level first: 8 rows (1024 bytes), then one column tile (2048 bytes)
    assert text.startswith("#map_0 = affine_map<(d0, d1)[s0] -> (s0 + 1024*d0 + 2048*d1)>\n")
    ir = pytest.importorskip("iree.compiler.ir")
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    assert ir.Module.parse(text, ctx).operation.verify()


@pytest.mark.parametrize("case", pl.CASES, ids=lambda c: c.name)
def test_the_compile_time_proof_of_a_peeled_tile(case):
    # proven over iterations 0 .. first + count - 1 (rigid_tiles' doc); a column tail
    # left to step by its own 44 elements is not a whole stick: refused by name
    tail = pl.peeled(case)[1].body[0]
    check_rigid_tiles(tail, [5], "op add", {case.tiled: 1})
    tail.tiled_steps = None
    if case.name == "rows":
        check_rigid_tiles(tail, [5], "op add", {case.tiled: 1})  # rigid, at the wrong rows
        return
    with pytest.raises(TileTranslationError, match="44 elements per iteration is not a whole "
                       "number of 64-element sticks"):
        check_rigid_tiles(tail, [5], "op add", {case.tiled: 1})
