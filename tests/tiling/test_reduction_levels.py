"""Manual reduction-range tiling: a hint on a reduction dim accumulates across tiles.

Each program equals eager, every TensorArg of every OpSpec is span-verified, and
the loop structure (init / counted combine loop / finalise, LoopSpec counts, tiled
symbols, per-tile iteration spaces) is pinned by a snapshot.
"""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from tiling_helpers import loop_counts, run_spyre, verify_program  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle, sdsc_files  # noqa: E402
from spyre_rules.codegen.source import kernel_definition  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402
from spyre_rules.hints import (  # noqa: E402
    clear_tensor_dims,
    declare_tensor_dim,
    hints_to_coarse_tile_groups,
    name_tensor_dims,
    spyre_hint,
)
from spyre_rules.passes.coarse_tile import CoarseTileError  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


def _hinted(slices, fn, inner=None):
    def run(*xs):
        with spyre_hint(slices=slices):
            if inner is None:
                return fn(*xs)
            with spyre_hint(slices=inner):
                return fn(*xs)

    return run


# name -> (fn, [(shape, dim names)], dtype, lx_planning)
PROGRAMS = {
    "sum_d4": (_hinted({"D": 4}, lambda x: x.sum(-1)), [((64, 512), "BD")], torch.float16, False),
    "amax_d4": (_hinted({"D": 4}, lambda x: x.amax(-1)), [((64, 512), "BD")], torch.float16, False),
    "amin_d4": (_hinted({"D": 4}, lambda x: x.amin(-1)), [((64, 512), "BD")], torch.float16, False),
    "sum0_b4": (_hinted({"B": 4}, lambda x: x.sum(0)), [((64, 512), "BD")], torch.float16, False),
    "mean_d4": (_hinted({"D": 4}, lambda x: x.mean(-1)), [((64, 512), "BD")], torch.float16, False),
    "prod_int_d4": (_hinted({"D": 4}, lambda x: x.prod(-1)), [((8, 256), "BD")], torch.int32, False),
    "mm_k4": (_hinted({"K": 4}, torch.matmul), [((64, 512), "MK"), ((512, 32), "KN")],
              torch.float16, False),
    "bmm_k4": (_hinted({"K": 4}, torch.bmm), [((8, 64, 512), "BMK"), ((8, 512, 32), "BKN")],
               torch.float16, False),
    "matmul_3d_2d_k4": (_hinted({"K": 4}, torch.matmul), [((8, 64, 512), "BMK"), ((512, 32), "KN")],
                        torch.float16, False),
    "linear_k4": (_hinted({"K": 4}, F.linear), [((64, 512), "MK"), ((32, 512), "NK")],
                  torch.float16, False),
    "nested_m2_k4": (_hinted({"M": 2}, torch.matmul, {"K": 4}),
                     [((64, 512), "MK"), ((512, 32), "KN")], torch.float16, False),
    "nested_b2_k4": (_hinted({"B": 2}, torch.bmm, {"K": 4}),
                     [((8, 64, 512), "BMK"), ((8, 512, 32), "BKN")], torch.float16, False),
    # regression (fuzz 13:114): a reader of the reduction in the same hint block
    # once shared the reduction loop and read the partial sum
    "reader_after_reduction_level": (_hinted({"B": 4}, lambda x: x * x.sum(0, keepdim=True)),
                                     [((64, 512), "BD")], torch.float32, False),
    "nested_m2_k4_lx": (_hinted({"M": 2}, torch.matmul, {"K": 4}),
                        [((64, 512), "MK"), ((512, 32), "KN")], torch.float16, True),
}


def _inputs(specs, dtype):
    gen = torch.Generator().manual_seed(0)
    xs = []
    for shape, names in specs:
        if dtype.is_floating_point:
            x = torch.randn(*shape, generator=gen).to(dtype)
        else:
            x = torch.randint(-2, 3, shape, generator=gen).to(dtype)
        for n, size in zip(names, shape):
            declare_tensor_dim(n, size)
        name_tensor_dims(x, list(names))
        xs.append(x)
    return xs


_CACHE: dict[str, object] = {}


def compile_program(name):
    if name not in _CACHE:
        fn, specs, dtype, lx = PROGRAMS[name]
        clear_tensor_dims()
        xs = _inputs(specs, dtype)
        with config.patch(lx_planning=lx):
            compiled = run_spyre(fn, *xs)
        _CACHE[name] = (compiled, fn(*xs))
    return _CACHE[name]


def _close(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if not ref.dtype.is_floating_point:
        assert torch.equal(out, ref)
        return
    tol = 2e-3 if ref.dtype == torch.float16 else 1e-5
    torch.testing.assert_close(out, ref, rtol=tol, atol=tol)


def _structure(items):
    """Loop nesting with each OpSpec's step, tiled symbols and per-tile iteration space."""
    out = []
    for item in items:
        if isinstance(item, LoopSpec):
            out.append({"loop": int(item.count), "body": _structure(item.body)})
            continue
        step = item.op_info.get("accumulate", {})
        out.append({
            "op": item.op,
            "step": step.get("step"),
            "combine": step.get("combine"),
            "identity": step.get("identity"),
            "space": {str(s): int(r) for s, (r, _) in item.iteration_space.items()},
            "tiled_symbols": [[str(s) for s in level] for level in item.tiled_symbols],
            "args": [(a.name, a.is_input, a.per_tile_fixed, sorted(a.allocation))
                     for a in item.args],
        })
    return out


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_equals_eager_and_every_access_verified(name):
    compiled, expected = compile_program(name)
    _close(compiled.output, expected)
    assert all(k.calls == 1 and k.affine_checked for k in compiled.kernels)
    reports = verify_program(compiled)
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs())
    steps = [s.op_info.get("accumulate", {}).get("step") for s in compiled.op_specs()]
    assert steps.count("init") == steps.count("combine") == steps.count("finalize") == 1


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_loop_structure_snapshot(name, snapshot):
    compiled, _ = compile_program(name)
    assert [_structure(k.specs) for k in compiled.kernels] == snapshot


@pytest.mark.parametrize("name", ["sum_d4", "nested_m2_k4_lx"])
def test_wrapper_source_sdsc_and_bundle_snapshot(name, text_snapshot):
    compiled, _ = compile_program(name)
    parts = []
    for k in compiled.kernels:
        parts.append(kernel_definition(k.name, "spyre_device", k.specs, k.stickify, k.unstickify))
        files = sdsc_files(k.specs)
        parts += [f"# {f}: {c['op']} {c['op_info'].get('accumulate')}" for f, c in files.items()]
        parts.append(generate_bundle(k.specs))
    assert "\n".join(parts) == text_snapshot


def test_counts_of_the_seed_list():
    counts = {name: [loop_counts(k.specs) for k in compile_program(name)[0].kernels]
              for name in ("sum_d4", "sum0_b4", "mm_k4", "bmm_k4", "nested_m2_k4",
                           "nested_b2_k4", "mean_d4")}
    assert counts == {
        "sum_d4": [["acc_init", (4, ["sum"]), "acc_finalize"]],
        "sum0_b4": [["acc_init", (4, ["sum"]), "acc_finalize"]],
        "mm_k4": [["acc_init", (4, ["batchmatmul"]), "acc_finalize"]],
        "bmm_k4": [["acc_init", (4, ["batchmatmul"]), "acc_finalize"]],
        "nested_m2_k4": [[(2, ["acc_init", (4, ["batchmatmul"]), "acc_finalize"])]],
        "nested_b2_k4": [[(2, ["acc_init", (4, ["batchmatmul"]), "acc_finalize"])]],
        # mean = sum (accumulated) then the divide, after the loop, in its own kernel
        "mean_d4": [["acc_init", (4, ["sum"]), "acc_finalize"], ["mean"]],
    }


def test_fp16_sum_accumulates_in_fp32_and_rounds_once():
    compiled, _ = compile_program("sum_d4")
    init, combine, finalize = compiled.op_specs()
    assert init.op_info["program"] == [{"op": "constant", "value": 0, "dtype": "float32"}]
    assert combine.op_info["store"]["dtype"] == "float32"
    assert combine.op_info["program"][-2:] == [
        {"op": "load", "arg": 2, "dtype": "float32"}, {"op": "add", "in": [2, 1]}]
    assert finalize.op_info["store"]["dtype"] == "float16"
    acc = combine.args[combine.op_info["store"]["arg"]]
    assert (acc.name, acc.device_dtype.name, acc.device_size, acc.arg_index) == (
        "buf0_acc", "IEEE_FP32", [2, 32], -1)


def test_accumulator_in_lx_under_lx_planning():
    compiled, _ = compile_program("nested_m2_k4_lx")
    acc_args = [a for s in compiled.op_specs() for a in s.args if a.name == "buf0_acc"]
    assert len(acc_args) == 4 and all(a.allocation == {"lx": 0} for a in acc_args)
    assert all(a.per_tile_fixed for a in acc_args)
    # one M tile of fp32 accumulators: 32 rows x 32 columns x 4 bytes
    assert acc_args[0].device_size == [1, 32, 32]
    hbm, _ = compile_program("nested_m2_k4")
    assert all("hbm" in a.allocation for s in hbm.op_specs() for a in s.args
               if a.name == "buf0_acc")


def test_prod_with_exact_values_in_fp16():
    x = torch.tensor([1.0, -1.0, 2.0, 0.5, -1.0] * 256, dtype=torch.float16)[:1024].reshape(2, 512)
    declare_tensor_dim("B", 2)
    declare_tensor_dim("D", 512)
    name_tensor_dims(x, ["B", "D"])
    fn = _hinted({"D": 4}, lambda t: t.prod(-1))
    compiled = run_spyre(fn, x)
    assert torch.equal(compiled.output, fn(x))
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (4, ["prod"]), "acc_finalize"]]


def test_reduction_levels_in_groups(capture):
    a, b = _inputs([((64, 512), "MK"), ((512, 32), "KN")], torch.float16)
    fn = _hinted({"M": 2}, torch.matmul, {"K": 4})
    (mm,) = capture(fn, a, b)
    assert [(levels) for _, levels in hints_to_coarse_tile_groups([mm])] == [
        [(0, 2, False), (1, 4, True)]]


def test_argmax_on_two_tiled_reduction_dims_is_refused():
    """x.argmax() tiled on B, then on D inside: the count of combined points gives a
    tile's offset only when tiles walk one reduction dim in order."""
    (x,) = _inputs([((8, 256), "BD")], torch.float16)
    with pytest.raises(Exception) as info:
        run_spyre(_hinted({"B": 2}, lambda t: t.argmax(), {"D": 4}), x)
    err = find_cause(info.value, CoarseTileError)
    assert err is not None
    assert str(err).endswith(
        "(argmax) tiles its reduction dim 1 inside a loop over its reduction dim 0; an index "
        "reduction accumulates over one tiled reduction dim")


def test_output_level_inside_a_reduction_level_is_refused():
    a, b = _inputs([((64, 512), "MK"), ((512, 32), "KN")], torch.float16)
    with pytest.raises(Exception) as info:
        run_spyre(_hinted({"K": 4}, torch.matmul, {"M": 2}), a, b)
    err = find_cause(info.value, CoarseTileError)
    assert err is not None and "tiles its output dim 0 inside a loop over its reduction dim 0; " \
        "put the reduction level innermost" in str(err)


def _auto(fn, *xs):
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=8192, span_check="error"):
        return run_spyre(fn, *xs)


def test_automatic_sum_plans_a_reduction_level():
    """x.sum(-1) on (4, 65536) fp16 at 8 KiB: only the reduced axis drives the read's span."""
    x = torch.randn(4, 65536, generator=torch.Generator().manual_seed(0)).half()
    compiled = _auto(lambda t: t.sum(-1), x)
    _close(compiled.output, x.sum(-1))
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (64, ["sum"]), "acc_finalize"]]
    reports = verify_program(compiled)  # every TensorArg within 8 KiB
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs()) == 6
    _, combine, _ = compiled.op_specs()
    assert [[str(s) for s in level] for level in combine.tiled_symbols] == [["c1"]]


def test_automatic_matmul_plans_a_k_level():
    """x @ w whose weight read overflows only through k."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 4096, generator=gen).half(), torch.randn(4096, 16, generator=gen).half()
    compiled = _auto(torch.matmul, x, w)
    _close(compiled.output, x @ w)
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (64, ["batchmatmul"]), "acc_finalize"]]
    verify_program(compiled)


def test_automatic_linear_restickifies_then_plans_a_k_level():
    """F.linear(x, w) with w[16, 4096] at 8 KiB: the weight's restickify splits k, and
    the BMM, which reads that k by its reduction symbol, shares the loop as a reduction
    level: init, one loop of restickify + accumulating BMM, finalise."""
    gen = torch.Generator().manual_seed(0)
    x, w = torch.randn(4, 4096, generator=gen).half(), torch.randn(16, 4096, generator=gen).half()
    compiled = _auto(F.linear, x, w)
    _close(compiled.output, F.linear(x, w))
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (64, ["ReStickifyOpHBM", "batchmatmul"]), "acc_finalize"]]
    verify_program(compiled)


def test_automatic_plan_records_the_reduction_level(capture):
    from spyre_rules.engine import plan_span_overflow_tile

    x = torch.randn(4, 65536).half()
    (op,) = capture(lambda t: t.sum(-1), x)
    with config.patch(max_span_bytes=8192):
        plan = plan_span_overflow_tile(op)
    # split dim 1 = rank 1 + reduction dim 0
    assert [(lv.selected_host_dim, lv.split_count, lv.is_reduction) for lv in plan.levels] == [
        (1, 64, True)]
    assert plan.reason == "reduction-controlled input span for arg0_1"


def test_argmax_is_split_automatically(capture):
    from spyre_rules.engine import plan_span_overflow_tile

    (op,) = capture(lambda t: t.argmax(-1), torch.randn(4, 65536).half())
    with config.patch(max_span_bytes=8192):
        plan = plan_span_overflow_tile(op)
    assert [(lv.selected_host_dim, lv.split_count, lv.is_reduction) for lv in plan.levels] == [
        (1, 64, True)]


def test_unrolled_reduction_levels_equal_the_compact_program():
    compact, _ = compile_program("nested_m2_k4")
    fn, specs, dtype, _ = PROGRAMS["nested_m2_k4"]
    clear_tensor_dims()
    xs = _inputs(specs, dtype)
    with config.patch(unroll_loops=True):
        unrolled = run_spyre(fn, *xs)
    assert [loop_counts(k.specs) for k in unrolled.kernels] == [
        ["acc_init", *["batchmatmul"] * 4, "acc_finalize"] * 2]
    assert torch.equal(unrolled.output, compact.output)


def test_a_sum_of_an_auto_tiled_add_shares_its_loop_as_a_reduction_level():
    """(x + 1).sum(-1) on (4, 65536) fp16 at 8 KiB: the add splits dim 1 by 64; the sum
    reads that dim by its reduction symbol, so the run's split is its reduction level:
    one loop of add + accumulating sum."""
    x = torch.randn(4, 65536, generator=torch.Generator().manual_seed(0)).half()
    compiled = _auto(lambda t: (t + 1).sum(-1), x)
    _close(compiled.output, (x + 1).sum(-1))
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (64, ["add", "sum"]), "acc_finalize"]]
    verify_program(compiled)


def test_an_argmax_of_an_auto_tiled_add_shares_its_loop_as_a_reduction_level():
    """(x + 1).argmax(-1) on (4, 65536) fp16 at 8 KiB: argmax partials combine
    (value and first index), so the add's split is the argmax's reduction level."""
    x = torch.randn(4, 65536, generator=torch.Generator().manual_seed(0)).half()
    x[1, 70] = x[1, 65000] = 9.0  # a tie across tiles: the first index wins
    compiled = _auto(lambda t: (t + 1).argmax(-1), x)
    assert torch.equal(compiled.output, (x + 1).argmax(-1))
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init"] * 3 + [(64, ["add", "argmax", "argmax", "acc_count"]), "acc_finalize"]]
    verify_program(compiled)
