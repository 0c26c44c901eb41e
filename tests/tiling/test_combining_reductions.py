"""argmax / argmin, welford and scalar/full reductions tiled on their reduced dim.

Their partial results combine as Inductor's split reductions combine them
(docs/accumulation.md): argmax / argmin keep the extreme value, its first index and
a count of combined points (exact, also for ties across tiles, an all-equal row, NaN
and infinities); welford keeps mean, m2 and weight (Chan's combination: float32
rounding of another order).  Each case compiles once, manual (``spyre_hint`` on the
reduced dim) or automatic (a small span limit), and must equal eager with every
TensorArg of every OpSpec span-verified.
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
from spyre_rules.hints import (  # noqa: E402
    clear_tensor_dims,
    declare_tensor_dim,
    name_tensor_dims,
    spyre_hint,
)

NAN, INF = float("nan"), float("inf")


def _hinted(fn, outer, inner=None):
    def run(x):
        with spyre_hint(slices=outer):
            if inner is None:
                return fn(x)
            with spyre_hint(slices=inner):
                return fn(x)

    return run


def _index_input(shape, dtype, seed=0):
    """Small integers (ties everywhere, also across tiles) and the edge rows."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randint(-6, 7, shape, generator=gen).to(torch.float32)
    if len(shape) == 2 and shape[0] >= 8 and dtype.is_floating_point:
        n = shape[1]
        x[0] = 1.0                                 # all equal: index 0
        x[1, n // 8] = x[1, n - 3] = 50.0          # a tie in the first and the last tile
        x[1, n // 8 + 1] = x[1, n - 2] = -50.0
        x[2, n // 2] = NAN                         # NaN in a middle tile wins, the first one
        x[2, n - 1] = NAN
        x[3] = -INF                                # all -inf
        x[4] = INF                                 # all +inf
        x[5, n - 1] = 99.0                         # the extreme at the very end
        x[5, n - 2] = -99.0
        x[6, 1] = -INF
        x[6, n - 5] = INF
    return x.to(dtype)


def _ties_input(shape, dtype, seed=2):
    """The extreme in an early row of the last column tile and again in a later row of
    the first: tiles of an inner reduction dim meet the higher index first."""
    x = torch.randint(-6, 5, shape, generator=torch.Generator().manual_seed(seed)).float()
    x[0, shape[1] - 12] = x[3, 10] = x[5, shape[1] // 2] = 9.0
    x[1, shape[1] - 1] = x[2, 1] = x[6, 3] = -9.0
    return x.to(dtype)


def _stats_input(shape, dtype, seed=1):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=gen) * 3 + 5).to(dtype)


# name -> (fn, input, dim names or None, hints (outer, inner) or an automatic limit)
CASES = {
    # ---------------------------------------------------------------- manual
    "argmax_d4_fp32": (lambda t: t.argmax(-1), ((16, 512), torch.float32, "index"), "BD",
                       ({"D": 4},)),
    "argmax_d4_fp16": (lambda t: t.argmax(-1), ((16, 512), torch.float16, "index"), "BD",
                       ({"D": 4},)),
    "argmin_d4_fp32": (lambda t: t.argmin(-1), ((16, 512), torch.float32, "index"), "BD",
                       ({"D": 4},)),
    "argmin_d4_fp16": (lambda t: t.argmin(-1), ((16, 512), torch.float16, "index"), "BD",
                       ({"D": 4},)),
    "argmax_int32_d4": (lambda t: t.argmax(-1), ((16, 512), torch.int32, "index"), "BD",
                        ({"D": 4},)),
    "argmax_dim0_b4": (lambda t: t.argmax(0), ((512, 64), torch.float32, "index"), "BD",
                       ({"B": 4},)),
    # a full argmax tiled on its outer reduction dim (index = local + count) ...
    "argmax_full_b4": (lambda t: t.argmax(), ((16, 512), torch.float16, "index"), "BD",
                       ({"B": 4},)),
    # ... and on its inner one (index = (i // block) * whole + count // outer + i % block)
    "argmin_full_d4": (lambda t: t.argmin(), ((16, 512), torch.float32, "index"), "BD",
                       ({"D": 4},)),
    "argmax_full_inner_ties": (lambda t: t.argmax(), ((16, 512), torch.float32, "ties"), "BD",
                               ({"D": 4},)),
    "argmin_full_inner_ties_fp16": (lambda t: t.argmin(), ((16, 512), torch.float16, "ties"),
                                    "BD", ({"D": 4},)),
    "argmax_nested_b2_d4": (lambda t: t.argmax(-1), ((16, 512), torch.float32, "index"), "BD",
                            ({"B": 2}, {"D": 4})),
    "argmax_d2_in_d2": (lambda t: t.argmax(-1), ((16, 512), torch.float16, "index"), "BD",
                        ({"D": 2}, {"D": 2})),
    "var_d4_fp32": (lambda t: t.var(-1), ((8, 2048), torch.float32, "stats"), "BD",
                    ({"D": 4},)),
    "var_mean_d4_fp16": (lambda t: torch.var_mean(t.float(), -1), ((8, 2048), torch.float16, "stats"),
                         "BD", ({"D": 4},)),
    "std_full_b4": (lambda t: t.std(), ((16, 512), torch.float32, "stats"), "BD", ({"B": 4},)),
    "var_nested_b2_d4": (lambda t: t.var(-1), ((8, 2048), torch.float32, "stats"), "BD",
                         ({"B": 2}, {"D": 4})),
    "layer_norm_d4_fp16": (lambda t: F.layer_norm(t, (2048,)), ((8, 2048), torch.float16, "stats"),
                           "BD", ({"D": 4},)),
    "sum_full_d4_fp16": (lambda t: t.sum(), ((16, 512), torch.float16, "stats"), "BD",
                         ({"D": 4},)),
    "mean_full_b4_fp32": (lambda t: t.mean(), ((16, 512), torch.float32, "stats"), "BD",
                          ({"B": 4},)),
    "amax_full_d4_fp16": (lambda t: t.amax(), ((16, 512), torch.float16, "index"), "BD",
                          ({"D": 4},)),
    # ------------------------------------------------------------- automatic
    "auto_argmax_fp16": (lambda t: t.argmax(-1), ((8, 4096), torch.float16, "index"), None, 2048),
    "auto_argmin_fp32": (lambda t: t.argmin(-1), ((8, 4096), torch.float32, "index"), None, 2048),
    "auto_var_mean_fp32": (lambda t: torch.var_mean(t, -1), ((8, 4096), torch.float32, "stats"),
                           None, 2048),
    "auto_var_fp16": (lambda t: t.float().var(-1).half(), ((8, 4096), torch.float16, "stats"),
                      None, 2048),
    "auto_sum_full_fp16": (lambda t: t.sum(), ((8, 4096), torch.float16, "stats"), None, 2048),
    "auto_mean_full_fp32": (lambda t: t.mean(), ((8, 4096), torch.float32, "stats"), None, 2048),
    "auto_amax_full_fp32": (lambda t: t.amax(), ((8, 4096), torch.float32, "index"), None, 2048),
    "auto_argmax_full_fp16": (lambda t: t.argmax(), ((8, 4096), torch.float16, "index"), None, 2048),
    "auto_var_full_fp32": (lambda t: t.var(), ((8, 4096), torch.float32, "stats"), None, 2048),
    # an output level (dim 1 by 2) outside the reduction level (dim 0 by 64)
    "auto_argmax_dim0_nested": (lambda t: t.argmax(0), ((4096, 64), torch.float32, "index"), None,
                                8192),
    "auto_var_dim0_nested": (lambda t: t.var(0), ((4096, 64), torch.float32, "stats"), None, 8192),
}

_CACHE: dict[str, tuple] = {}


def compile_case(name):
    if name not in _CACHE:
        fn, (shape, dtype, kind), names, how = CASES[name]
        x = {"index": _index_input, "ties": _ties_input, "stats": _stats_input}[kind](shape, dtype)
        clear_tensor_dims()
        if isinstance(how, int):
            with config.patch(ignore_span_overflow_hints=False, max_span_bytes=how,
                              span_check="error"):
                compiled = run_spyre(fn, x)
        else:
            for n, size in zip(names, shape):
                declare_tensor_dim(n, size)
            name_tensor_dims(x, list(names))
            compiled = run_spyre(_hinted(fn, *how), x)
            clear_tensor_dims()
        _CACHE[name] = (compiled, fn(x), x)
    return _CACHE[name]


def _equal(out, ref):
    assert out.shape == ref.shape and out.dtype == ref.dtype
    if not ref.dtype.is_floating_point:
        assert torch.equal(out, ref), (out, ref)
    elif ref.dtype == torch.float16:
        torch.testing.assert_close(out, ref, rtol=2e-3, atol=2e-3, equal_nan=True)
    else:
        # float32 Welford / sums: another order of float32 rounding than eager's
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5, equal_nan=True)


def _steps(compiled):
    return [s.op_info.get("accumulate", {}).get("step") for s in compiled.op_specs()]


@pytest.mark.parametrize("name", list(CASES))
def test_equals_eager_with_every_access_verified(name):
    compiled, expected, _ = compile_case(name)
    outs = compiled.output if isinstance(compiled.output, tuple) else (compiled.output,)
    refs = expected if isinstance(expected, tuple) else (expected,)
    for out, ref in zip(outs, refs, strict=True):
        _equal(out, ref)
    assert "combine" in _steps(compiled)  # the reduced dim really was tiled
    reports = verify_program(compiled)
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs())


def test_argmax_program_structure():
    """Three fields (value, index, count): three inits, a loop of the index step, the
    value step and the count step, then the finalise of the index."""
    compiled, _, _ = compile_case("argmax_d4_fp32")
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init"] * 3 + [(4, ["argmax", "argmax", "acc_count"]), "acc_finalize"]]
    specs = compiled.op_specs()
    inits = [s.args[0] for s in specs[:3]]
    assert [(a.name, a.device_dtype.name, a.per_tile_fixed, a.arg_index) for a in inits] == [
        ("buf0_acc", "IEEE_FP32", True, -1), ("buf0_acc_index", "IEEE_INT32", True, -1),
        ("buf0_acc_count", "IEEE_INT32", True, -1)]
    index_step, value_step, count_step, finalize = specs[3:]
    assert [s.op_info["accumulate"].get("field") for s in (index_step, value_step, count_step)] == [
        "buf0_acc_index", "buf0_acc", "buf0_acc_count"]
    reduction = next(e for e in index_step.op_info["program"] if e["op"] == "reduction")
    assert reduction["partial"] is True
    assert count_step.op_info["program"][1] == {"op": "constant", "value": 128, "dtype": "int64"}
    assert finalize.args[0].name == "buf0_acc_index"


def test_welford_program_structure():
    """mean, m2, weight: each welford output op updates m2, then mean, then weight."""
    compiled, _, _ = compile_case("var_d4_fp32")
    first = compiled.kernels[0]
    assert loop_counts(first.specs) == [
        "acc_init", "acc_init", "acc_init",
        (4, ["welford_reduce", "welford_reduce", "welford_reduce"]), "acc_finalize"]
    steps = [s.op_info["accumulate"] for s in compiled.op_specs()[:7]]
    acc = steps[3]["accumulator"]  # var needs m2 only: the op storing it
    assert [s.get("field") for s in steps[3:6]] == [f"{acc}_m2", acc, f"{acc}_weight"]
    assert steps[6] == {"step": "finalize", "accumulator": acc, "reduction": "welford_reduce",
                        "dtype": "float32", "field": f"{acc}_m2"}
    assert {s["combine"] for s in steps[3:6]} == {"welford_combine"}


def test_full_reduction_accumulator_is_one_element():
    compiled, _, _ = compile_case("sum_full_d4_fp16")
    init, combine, finalize = compiled.op_specs()
    assert init.iteration_space == {} and finalize.iteration_space == {}
    assert combine.op_info["accumulate"]["combine"] == "add"
    assert [loop_counts(k.specs) for k in compiled.kernels] == [
        ["acc_init", (4, ["sum"]), "acc_finalize"]]


@pytest.mark.parametrize("name, counts", [
    # fp16 [8, 4096]: 64 stick columns x 8 rows x 128 bytes = 64 KiB, 32 tiles of 2 KiB
    ("auto_argmax_fp16", ["acc_init"] * 3 + [(32, ["argmax", "argmax", "acc_count"]),
                                             "acc_finalize"]),
    ("auto_argmax_full_fp16", ["acc_init"] * 3 + [(32, ["argmax", "argmax", "acc_count"]),
                                                  "acc_finalize"]),
    ("auto_sum_full_fp16", ["acc_init", (32, ["sum"]), "acc_finalize"]),
    ("auto_argmin_fp32", ["acc_init"] * 3 + [(64, ["argmin", "argmin", "acc_count"]),
                                             "acc_finalize"]),
    ("auto_argmax_dim0_nested", [(2, ["acc_init"] * 3 + [(64, ["argmax", "argmax", "acc_count"]),
                                                         "acc_finalize"])]),
])
def test_automatic_loop_structure(name, counts):
    compiled, _, _ = compile_case(name)
    assert loop_counts(compiled.kernels[0].specs) == counts


def test_argmax_edge_rows_are_exercised():
    """The input really holds what the exactness claims cover (ties across tiles, NaN,
    an all-equal row, +-inf rows) and eager's answers for them are the first index."""
    _, expected, x = compile_case("argmax_d4_fp32")
    assert expected[:7].tolist() == [0, 64, 256, 0, 0, 511, 507]
    assert bool(x[2].isnan().any())


def test_multi_field_accumulators_in_lx_under_lx_planning():
    """Each field is its own LX buffer (distinct offsets); the result is unchanged."""
    x = _index_input((16, 512), torch.float32)
    clear_tensor_dims()
    declare_tensor_dim("B", 16)
    declare_tensor_dim("D", 512)
    name_tensor_dims(x, ["B", "D"])
    with config.patch(lx_planning=True):
        compiled = run_spyre(_hinted(lambda t: t.argmax(-1), {"B": 2}, {"D": 4}), x)
    assert torch.equal(compiled.output, x.argmax(-1))
    places = {a.name: a.allocation for s in compiled.op_specs() for a in s.args
              if a.name.startswith("buf0_acc")}
    assert places == {"buf0_acc": {"lx": 0}, "buf0_acc_index": {"lx": 128},
                      "buf0_acc_count": {"lx": 256}}


def test_ties_across_inner_tiles_take_the_lower_index():
    """The case the lower-index rule exists for: eager's first index sits in a later
    tile than a higher index of the same value (fuzz 31:313)."""
    _, expected, x = compile_case("argmax_full_inner_ties")
    assert int(expected) == 512 - 12  # row 0, last tile; tile 0 meets 3 * 512 + 10 first
    _, expected, _ = compile_case("argmin_full_inner_ties_fp16")
    assert int(expected) == 512 + 511  # row 1, last tile; tile 0 meets 2 * 512 + 1 first


def test_a_computed_logical_index_is_not_accumulated():
    """argmax of a non-contiguous input reduces (value, logical index) pairs: that index
    is a value of the tile's own symbols, so a reduction level is refused by name; the
    untiled program takes the lowest index among equal values, as Inductor does."""
    x = torch.round(torch.randn(64, 1, 1, generator=torch.Generator().manual_seed(3)) * 2).half()
    compiled = run_spyre(lambda t: t.argmax(), x)
    assert torch.equal(compiled.output, x.argmax())
    program = compiled.op_specs()[0].op_info["program"]
    assert [e["op"] for e in program] == ["load", "index_expr", "reduction"]
    clear_tensor_dims()
    declare_tensor_dim("A", 64)
    name_tensor_dims(x, ["A", None, None])
    with pytest.raises(Exception) as info:
        run_spyre(_hinted(lambda t: t.argmax(), {"A": 4}), x)
    assert "the op computes a value from its index along it" in str(info.value)
