"""bundle.mlir in MLIR's generic form (``config.bundle_mlir_form = "generic"``)
parses and verifies with MLIR's own parser (the Python bindings of
iree-base-compiler, pinned in the test extra), unregistered dialects allowed.

A set of programs -- hint tiling (nested, two loops), explicit groups, unrolled
loops, LX planning, automatic tiling, a small GPT-2 -- is compiled once with the
dump folder on; every ``bundle.mlir`` written is parsed and verified, its
``sdsc_execute`` ops name exactly the kernel's ``sdsc_N.json`` files in order, and
a sample goes through ``canonicalize,cse``.  The custom form (the default) is
unchanged: the bundle snapshots of tests/tiling check it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest  # noqa: E402
import sympy  # noqa: E402
import torch  # noqa: E402
from iree.compiler import ir, passmanager  # noqa: E402

TESTS = Path(__file__).resolve().parent.parent
for folder in ("tiling", "models"):
    if str(TESTS / folder) not in sys.path:
        sys.path.insert(0, str(TESTS / folder))

import model_zoo  # noqa: E402
from programs import PROGRAMS  # noqa: E402
from tiling_helpers import explicit_groups  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle  # noqa: E402
from spyre_rules.hints import clear_tensor_dims  # noqa: E402
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg  # noqa: E402

BY_NAME = {p.name: p for p in PROGRAMS}
AUTO = dict(max_span_bytes=8192, sencores=4, ignore_span_overflow_hints=False)


def _lx_chain(a, b):
    t = a + b  # per-tile buffers read only inside the loop: LX
    u = t * 2
    return u - a


def _program(name, **cfg):
    program = BY_NAME[name]
    return lambda: (program.fn, program.inputs(), program.groups,
                    {"unroll_loops": program.unroll, **cfg})


def _lx():
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(1, 20, 16, 64, generator=gen).half() for _ in range(2)]
    return _lx_chain, xs, (), {**AUTO, "lx_planning": True}


def _auto():
    gen = torch.Generator().manual_seed(0)
    xs = [torch.randn(64, 256, generator=gen) for _ in range(2)]
    return (lambda a, b: (a * b).exp() + a), xs, (), AUTO


def _gpt2():
    module = model_zoo.LastHidden(model_zoo.build("gpt2", "eager", torch.float16))
    return module, [model_zoo.input_ids()], (), {"max_span_bytes": 16 * 1024,
                                                 "ignore_span_overflow_hints": False}


#: case -> () -> (function, inputs, explicit groups, settings); each compiled once.
CASES = {
    "hints_nested": _program("seed_nested_add_mul"),
    "hints_two_loops": _program("two_top_level_loops"),
    "hints_softmax": _program("softmax_rows_fp32"),
    "explicit_nested": _program("explicit_chain_nested"),
    "explicit_count10": _program("sum_dim0_count10"),
    "unrolled_nested": _program("unrolled_three_d_nested"),
    "lx_planning": _lx,
    "automatic": _auto,
    "gpt2_fp16_auto": _gpt2,
}


@pytest.fixture(scope="module")
def dumped(tmp_path_factory):
    """case -> the kernel folders (bundle.mlir + sdsc_N.json) its compile dumped."""
    out = {}
    for case, make in CASES.items():
        clear_tensor_dims()
        fn, inputs, groups, cfg = make()
        root = tmp_path_factory.mktemp(case)
        torch._dynamo.reset()
        settings = {"fallback": "error", "dump_dir": str(root), "bundle_mlir_form": "generic",
                    **cfg}
        with config.patch(settings), explicit_groups(*groups), torch.no_grad():
            torch.compile(fn, backend="spyre_rules")(*inputs)
        out[case] = sorted(p.parent for p in root.glob("graph_*/*/bundle.mlir"))
        clear_tensor_dims()
    return out


def _context() -> ir.Context:
    ctx = ir.Context()
    ctx.allow_unregistered_dialects = True
    return ctx


def _parse(text: str, ctx: ir.Context) -> ir.Module:
    module = ir.Module.parse(text, ctx)
    assert module.operation.verify()
    return module


def _executes(module: ir.Module) -> list[ir.Operation]:
    found = []

    def visit(op):
        if op.name == "sdscbundle.sdsc_execute":
            found.append(op)
        return ir.WalkResult.ADVANCE

    module.operation.walk(visit)
    return found


@pytest.mark.parametrize("case", list(CASES))
def test_every_generated_bundle_parses_and_verifies(dumped, case):
    kernels = dumped[case]
    assert kernels, f"{case}: no kernel was dumped"
    ctx = _context()
    for kdir in kernels:
        module = _parse((kdir / "bundle.mlir").read_text(), ctx)
        executes = _executes(module)
        files = [ir.StringAttr(op.attributes["sdsc_filename"]).value for op in executes]
        assert files == [f"sdsc_{i}.json" for i in range(len(executes))]
        assert sorted(files) == sorted(p.name for p in kdir.glob("sdsc_*.json"))
        for op in executes:  # every operand is an HBM address
            assert all(str(v.type) == "index" for v in op.operands)


def test_the_cases_cover_loops_unrolling_and_lx(dumped):
    texts = {case: [(k / "bundle.mlir").read_text() for k in kernels]
             for case, kernels in dumped.items()}
    assert any("scf.for" in t for t in texts["hints_nested"])
    assert any("affine.apply" in t for t in texts["explicit_nested"])
    assert not any("scf.for" in t for t in texts["unrolled_nested"])
    assert any("lx_offsets = [" in t for t in texts["lx_planning"])
    assert any("scf.for" in t for t in texts["automatic"])
    assert any("scf.for" in t for t in texts["gpt2_fp16_auto"])
    for t in (t for ts in texts.values() for t in ts):
        assert "sdscbundle.sdsc_execute (" not in t  # no custom-form op left


def test_a_sample_canonicalizes(dumped):
    ctx = _context()
    for case in ("hints_nested", "explicit_nested", "lx_planning", "gpt2_fp16_auto"):
        kdir = dumped[case][0]
        module = _parse((kdir / "bundle.mlir").read_text(), ctx)
        before = len(_executes(module))
        passmanager.PassManager.parse("builtin.module(canonicalize,cse)", ctx).run(module.operation)
        assert module.operation.verify()
        # the unregistered op has unknown effects: canonicalize keeps every execute
        assert len(_executes(module)) == before
        _parse(str(module), ctx)  # and the result round-trips


def _spec(op: str) -> OpSpec:
    c0 = sympy.Symbol("c0")
    arg = TensorArg(True, 0, DataFormats.SEN169_FP16, [64], [c0], {"hbm": 0}, name="x")
    return OpSpec(op=op, is_reduction=False, iteration_space={c0: (sympy.Integer(64), 1)},
                  args=[arg], op_info={})


def test_the_custom_form_needs_the_dialect_and_a_malformed_module_fails(dumped):
    ctx = _context()
    custom = generate_bundle([_spec("add")], form="custom")
    assert custom == (
        'module {\n  func.func @sdsc_bundle() {\n'
        '    sdscbundle.sdsc_execute () {sdsc_filename="sdsc_0.json"}\n'
        '    return\n  }\n}\n')
    with pytest.raises(ir.MLIRError, match="Dialect `sdscbundle' not found for custom op"):
        ir.Module.parse(custom, ctx)
    generic = generate_bundle([_spec("add")], form="generic")
    assert '"sdscbundle.sdsc_execute"() {sdsc_filename = "sdsc_0.json"} : () -> ()' in generic
    _parse(generic, ctx)
    text = (dumped["explicit_nested"][0] / "bundle.mlir").read_text()
    # an operand list whose types disagree with it
    broken = text.replace(" : (index, ", " : (", 1)
    assert broken != text
    with pytest.raises(ir.MLIRError):
        ir.Module.parse(broken, ctx)
    # a loop variable used outside its loop
    looped = LoopSpec(sympy.Integer(2), [_spec("mul")])
    escaped = generate_bundle([looped], form="generic").replace(
        "    return", "    %x = arith.addi %i_0, %c1 : index\n    return")
    with pytest.raises(ir.MLIRError):
        ir.Module.parse(escaped, ctx)


def test_the_form_setting_is_validated(monkeypatch):
    assert config.bundle_mlir_form == "custom"
    monkeypatch.setenv("SPYRE_RULES_BUNDLE_MLIR_FORM", "Generic")
    assert config.bundle_mlir_form == "generic"
    with pytest.raises(config.ConfigError, match="invalid value 'pretty' for setting "
                                                 "'bundle_mlir_form': expected 'custom' or 'generic'"):
        config.patch(bundle_mlir_form="pretty")
