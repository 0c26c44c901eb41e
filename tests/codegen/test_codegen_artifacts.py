"""Wrapper source, sdsc_N.json, bundle.mlir, the memory map and the dump directory."""

from __future__ import annotations

import json
import os

import pytest
import sympy
import torch
import torch.nn.functional as F

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")

import spyre_rules  # noqa: E402,F401
from spyre_rules import config  # noqa: E402
from spyre_rules.codegen import op_spec as op_spec_module  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle, sdsc_files  # noqa: E402
from spyre_rules.codegen.source import format_program, kernel_definition  # noqa: E402
from spyre_rules.program.memory_map import MemoryMap  # noqa: E402
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg  # noqa: E402

c0, c1 = sympy.symbols("c0 c1")


def _spec(op="add", tiled=()):
    arg = TensorArg(True, 0, DataFormats.SEN169_FP16, [64, 1024, 64],
                    [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)], {"hbm": 4096}, name="a")
    out = TensorArg(False, 1, DataFormats.SEN169_FP16, [16, 512, 64],
                    [sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)], {"hbm": 0}, per_tile_fixed=True,
                    name="y")
    return OpSpec(
        op=op, is_reduction=False,
        iteration_space={c0: (sympy.Integer(512), 32), c1: (sympy.Integer(1024), 1)},
        args=[arg, out],
        op_info={"program": [{"op": "load", "arg": 0, "dtype": "float16"},
                             {"op": "constant", "value": float("-inf"), "dtype": "float16"},
                             {"op": "maximum", "in": [0, 1]}],
                 "store": {"arg": 1, "value": 2, "dtype": "float16"},
                 "reduction_symbols": []},
        tiled_symbols=list(tiled),
    )


def _exec(source_expr: str):
    namespace = {name: getattr(op_spec_module, name) for name in op_spec_module.__all__}
    return eval(source_expr, namespace)  # noqa: S307 - our own generated source


def test_program_source_round_trips_and_prints_sympify():
    items = [_spec(), LoopSpec(sympy.Integer(4), [_spec("mul", tiled=[[c0], [c1]])])]
    text = "[\n" + "\n".join(format_program(items)) + "\n]"
    assert "sympify('floor(c1/64)')" in text
    assert "tiled_symbols=[[sympify('c0')], [sympify('c1')]]" in text
    assert text.count("tiled_symbols") == 1  # omitted when empty
    assert "per_tile_fixed=True" in text and "float('-inf')" in text
    rebuilt = _exec(text)
    assert rebuilt[0] == items[0]
    assert rebuilt[1].count == 4 and rebuilt[1].body == items[1].body


def test_kernel_definition_snapshot(text_snapshot):
    assert kernel_definition("sdsc_add_0", "spyre_device", [_spec()], {}, {}) == text_snapshot


def test_sdsc_json_and_bundle_numbering():
    items = [_spec("add"), LoopSpec(sympy.Integer(2), [_spec("mul"), _spec("sub")])]
    files = sdsc_files(items)
    assert list(files) == ["sdsc_0.json", "sdsc_1.json", "sdsc_2.json"]
    assert [f["op"] for f in files.values()] == ["add", "mul", "sub"]
    assert files["sdsc_0.json"]["args"][0]["device_coordinates"] == [
        "floor(c1/64)", "c0", "Mod(c1, 64)"]
    json.dumps(files)  # serialisable
    bundle = generate_bundle([_spec("add"), _spec("mul")])
    assert bundle == (
        "module {\n"
        "  func.func @sdsc_bundle() {\n"
        '    sdscbundle.sdsc_execute () {sdsc_filename="sdsc_0.json"}\n'
        '    sdscbundle.sdsc_execute () {sdsc_filename="sdsc_1.json"}\n'
        "    return\n"
        "  }\n"
        "}\n"
    )
    # A kernel with a LoopSpec gets the compact scf.for bundle (codegen/bundle_loops.py;
    # snapshots in tests/tiling): the untiled ops' args do not move, so no affine map.
    looped = generate_bundle(items)
    assert "scf.for %i_0 = %c0 to %loop_bound_0 step %c1 {" in looped
    assert "affine_map" not in looped


def test_memory_map_alignment():
    memory = MemoryMap()
    a = memory.allocate("a", 200)
    b = memory.allocate("b", 128)
    assert (a.address, b.address, memory.total_bytes) == (0, 256, 384)
    with pytest.raises(ValueError, match="already"):
        memory.allocate("a", 1)


def test_dump_dir(tmp_path):
    torch._dynamo.reset()
    x, w, b = torch.randn(4, 37), torch.randn(16, 37), torch.randn(16)
    with config.patch(fallback="error", dump_dir=str(tmp_path)), torch.no_grad():
        torch.compile(lambda x, w, b: F.linear(x, w, b), backend="spyre_rules")(x, w, b)
    (graph,) = list(tmp_path.iterdir())
    assert graph.name == "graph_0"
    wrapper = (graph / "wrapper.py").read_text()
    assert "rules_make_kernel(" in wrapper and "OpSpec(" in wrapper
    plan = json.loads((graph / "plan.json").read_text())
    assert [op["kind"] for op in plan["ops"]] == [
        "ReStickifyOpHBM", "reduction:batchmatmul", "pointwise"]
    assert all(op["decision"] == "no plan" for op in plan["ops"])
    assert plan["ops"][0]["layout"]["device_size"] == [1, 37, 32]
    kernels = sorted(p.name for p in graph.iterdir() if p.is_dir())
    assert kernels == ["sdsc_ReStickifyOpHBM_0", "sdsc_addmm_2", "sdsc_batchmatmul_1"]
    for k in kernels:
        assert (graph / k / "sdsc_0.json").exists()
        assert 'sdsc_filename="sdsc_0.json"' in (graph / k / "bundle.mlir").read_text()
    bmm = json.loads((graph / "sdsc_batchmatmul_1" / "sdsc_0.json").read_text())
    assert bmm["op"] == "batchmatmul" and bmm["is_reduction"] is True
    assert bmm["op_info"]["reduction_symbols"] == ["c2"]
