"""Tiled programs compiled with fallback='error': equal eager, spans verified,
wrapper source + bundle.mlir snapshotted (read by eye; HBM addresses are the
deterministic memory map)."""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
from programs import PROGRAMS  # noqa: E402
from tiling_helpers import explicit_groups, loop_counts, run_spyre, verify_program  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle, sdsc_files  # noqa: E402
from spyre_rules.codegen.source import kernel_definition  # noqa: E402
from spyre_rules.hints import clear_tensor_dims  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402

BY_NAME = {p.name: p for p in PROGRAMS}


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


_CACHE: dict[str, object] = {}


def compile_program(program):
    if program.name in _CACHE:
        return _CACHE[program.name]
    xs = program.inputs()
    with config.patch(unroll_loops=program.unroll), explicit_groups(*program.groups):
        compiled = run_spyre(program.fn, *xs)
    expected = program.fn(*xs)
    _CACHE[program.name] = (compiled, expected)
    return compiled, expected


def _close(out, ref):
    outs = out if isinstance(out, (tuple, list)) else [out]
    refs = ref if isinstance(ref, (tuple, list)) else [ref]
    assert len(outs) == len(refs)
    for o, r in zip(outs, refs):
        assert o.shape == r.shape and o.dtype == r.dtype
        tol = 2e-3 if r.dtype == torch.float16 else 1e-5
        torch.testing.assert_close(o, r, rtol=tol, atol=tol)


def _looped(kernels):
    return [k for k in kernels if any(isinstance(i, LoopSpec) for i in k.specs)]


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_equals_eager_and_spans_verified(program):
    compiled, expected = compile_program(program)
    _close(compiled.output, expected)
    assert all(k.calls == 1 for k in compiled.kernels)
    if program.unroll:
        assert not _looped(compiled.kernels)
    else:
        assert _looped(compiled.kernels), "no counted loop was generated"
        assert all(k.affine_checked for k in compiled.kernels)
    reports = verify_program(compiled)
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs())


SNAPSHOTTED = [p.name for p in PROGRAMS]


@pytest.mark.parametrize("name", SNAPSHOTTED)
def test_wrapper_source_and_bundle_snapshot(name, text_snapshot):
    compiled, _ = compile_program(BY_NAME[name])
    parts = []
    for k in compiled.kernels:
        parts.append(f"# ---- {k.name}: wrapper source")
        parts.append(f"{k.name} = " + kernel_definition(k.name, "spyre_device", k.specs,
                                                        k.stickify, k.unstickify))
        parts.append(f"# ---- {k.name}: bundle.mlir ({len(sdsc_files(k.specs))} sdsc files)")
        parts.append(generate_bundle(k.specs))
    assert "\n".join(parts) == text_snapshot


def test_seed_structure():
    compiled, _ = compile_program(BY_NAME["seed_nested_add_mul"])
    (kernel,) = compiled.kernels
    assert loop_counts(kernel.specs) == [(2, [(4, ["add", "mul"])])]
    add, mul = compiled.op_specs()
    assert [[str(s) for s in lvl] for lvl in add.tiled_symbols] == [["c1"], ["c0"]]
    assert [a.per_tile_fixed for a in add.args] == [False, False, True]
    assert [a.per_tile_fixed for a in mul.args] == [True, False, False]
    assert [a.device_size for a in mul.args] == [[16, 512, 64], [64, 1024, 64], [64, 1024, 64]]
    bundle = generate_bundle(kernel.specs)
    assert "#map_0 = affine_map<(d0, d1)[s0] -> (s0 + 65536*d0 + 2097152*d1)>" in bundle


def test_sum_dim0_is_count_10_tiled_c0():
    compiled, _ = compile_program(BY_NAME["sum_dim0_count10"])
    (kernel,) = compiled.kernels
    (loop,) = kernel.specs
    assert int(loop.count) == 10
    (spec,) = loop.body
    assert spec.op == "sum"
    assert [[str(s) for s in lvl] for lvl in spec.tiled_symbols] == [["c0"]]
    assert {str(s): int(r) for s, (r, _) in spec.iteration_space.items()} == {
        "c0": 2, "c1": 16, "c2": 64, "c3": 2}


def test_copy_op_inserted_for_outside_reader():
    compiled, _ = compile_program(BY_NAME["copy_for_outside_reader"])
    looped = _looped(compiled.kernels)
    assert [loop_counts(k.specs) for k in looped] == [[(2, [["add", "copy", "mul"]][0])]]


def test_unrolled_spec_count_grows_compact_does_not():
    compact, _ = compile_program(BY_NAME["flat_rows_fp32"])
    unrolled, _ = compile_program(BY_NAME["unrolled_flat"])
    assert len(compact.op_specs()) == 1
    assert len(unrolled.op_specs()) == 4
    shifted = [s.args[0].allocation["hbm"] for s in unrolled.op_specs()]
    base = shifted[0]
    assert [a - base for a in shifted] == [0, 2048, 4096, 6144]  # 16 rows x 1 stick x 128 B
