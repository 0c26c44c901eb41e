"""Every tile of a counted loop is a rigid translation of the first, or the program is
refused at compile time.

* W1: a split equal to the dim size (per-tile extent 1) keeps its loop symbol, so
  each iteration moves to its own tile (it used to recompute tile 0);
* W4: a dim tiled at two nested levels advances the outer level by the inner
  count times the per-tile extent (both levels used to get the same stride);
* R1 and its class: a tiling whose tiles the layout cannot address by one constant
  stride per level (a partial stick, a read that wraps) is refused while the
  program is compiled, naming the op, tensor, dim and reason.

Each program runs compact and unrolled, equals eager, and passes the span verifier
on every TensorArg.
"""

from __future__ import annotations

import os

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from programs import Program  # noqa: E402
from tiling_helpers import explicit_groups, loop_counts, run_spyre, verify_program  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.bundle import generate_bundle  # noqa: E402
from spyre_rules.codegen.rigid_tiles import TileTranslationError  # noqa: E402
from spyre_rules.hints import clear_tensor_dims, spyre_hint  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


def double(x):
    with spyre_hint(slices={"A": 4}):
        return x * 2.0


def rows_one_nested(x, y):
    with spyre_hint(slices={"C": 4}):
        with spyre_hint(slices={"H": 8}):
            return (x + y) * x


def row_sum_one(x):
    with spyre_hint(slices={"A": 4}):
        return x.sum(dim=1)


def chain_one(a, b, c):
    with spyre_hint(slices={"A": 8}):
        y = a + b  # loop-internal per-tile buffer with a unit dim
        return (y * c).exp()


def unit_tiles_read_outside(a, b, c):
    with spyre_hint(slices={"A": 8}):
        y = a + b  # read inside (z) and outside (the second output): copy op
        z = y * c
    return z, y * 2.0


def same_dim_read_outside(a, b, c):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"A": 4}):
            y = a + b
            z = y * c
    return z, y


def same_dim_2x2(x):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"A": 2}):
            return x * 2.0


def same_dim_chain(a, b, c):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"A": 4}):
            y = a + b
            return y * c


def same_dim_around_other(x, y):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"B": 2}):
            with spyre_hint(slices={"A": 2}):
                return x - y


def row_sum_reduction_split_one(x):
    with spyre_hint(slices={"A": 2}):
        with spyre_hint(slices={"B": 1}):  # one tile over the reduced dim: no accumulation
            return x.sum(dim=-1) + 1.0


def add_one(x):
    return x + 1.0


CASES = [
    Program("w1_flat_rows", double, [(4, 64)], names=[["A", "B"]]),
    Program("w1_nested_both_one", rows_one_nested, [(4, 8, 64)] * 2,
            names=[["C", "H", "W"]] * 2),
    Program("w1_row_sum", row_sum_one, [(4, 64)], torch.float32, names=[["A", "B"]]),
    Program("w1_internal_chain", chain_one, [(8, 128)] * 3, names=[["A", "B"]] * 3),
    Program("w1_explicit", add_one, [(8, 64)], groups=(([0], [(8, [0])]),)),
    Program("reduction_dim_split_one", row_sum_reduction_split_one, [(8, 64)], torch.float32,
            names=[["A", "B"]]),
    Program("w1_copy_for_outside_reader", unit_tiles_read_outside, [(8, 128)] * 3,
            names=[["A", "B"]] * 3),
    Program("w4_copy_for_graph_output", same_dim_read_outside, [(16, 128)] * 3,
            torch.float32, names=[["A", "B"]] * 3),
    Program("w4_same_dim_2x2", same_dim_2x2, [(64, 64)], names=[["A", "B"]]),
    Program("w4_same_dim_chain_fp32", same_dim_chain, [(32, 64)] * 3, torch.float32,
            names=[["A", "B"]] * 3),
    Program("w4_same_dim_around_other", same_dim_around_other, [(16, 256)] * 2,
            names=[["A", "B"]] * 2),
    Program("w4_explicit_three_levels", add_one, [(16, 64)],
            groups=(([0], [(2, [0]), (2, [0]), (2, [0])]),)),
    Program("w4_w1_same_dim_down_to_one", same_dim_2x2, [(4, 64)], names=[["A", "B"]]),
]
BY_NAME = {p.name: p for p in CASES}


def _compile(program, unroll):
    xs = program.inputs()
    with config.patch(unroll_loops=unroll), explicit_groups(*program.groups):
        compiled = run_spyre(program.fn, *xs)
    return compiled, program.fn(*xs)


def _assert_equal(out, ref):
    outs = out if isinstance(out, (tuple, list)) else [out]
    refs = ref if isinstance(ref, (tuple, list)) else [ref]
    for o, r in zip(outs, refs):
        tol = 2e-3 if r.dtype == torch.float16 else 1e-5
        torch.testing.assert_close(o, r, rtol=tol, atol=tol)


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
@pytest.mark.parametrize("program", CASES, ids=lambda p: p.name)
def test_equals_eager_and_spans_verified(program, unroll):
    compiled, expected = _compile(program, unroll)
    _assert_equal(compiled.output, expected)
    looped = [k for k in compiled.kernels if any(isinstance(i, LoopSpec) for i in k.specs)]
    assert bool(looped) != unroll
    assert all(k.affine_checked for k in compiled.kernels)
    reports = verify_program(compiled)
    assert len(reports) == sum(len(s.args) for s in compiled.op_specs())


def _spec_shape(compiled):
    (spec,) = compiled.op_specs()
    return (
        {str(s): int(r) for s, (r, _) in spec.iteration_space.items()},
        [[str(s) for s in level] for level in spec.tiled_symbols],
        spec.tiled_steps,
    )


def test_w1_unit_tile_keeps_its_symbol():
    compiled, _ = _compile(BY_NAME["w1_flat_rows"], unroll=False)
    assert _spec_shape(compiled) == ({"c0": 1, "c1": 64}, [["c0"]], None)
    (kernel,) = compiled.kernels
    # each of the 4 iterations moves every tensor by one row of 64 fp16 = 128 bytes
    assert "#map_0 = affine_map<(d0)[s0] -> (s0 + 128*d0)>" in generate_bundle(kernel.specs)


def test_w1_unrolled_copies_move():
    compiled, _ = _compile(BY_NAME["w1_flat_rows"], unroll=True)
    bases = [s.args[0].allocation["hbm"] for s in compiled.op_specs()]
    assert [b - bases[0] for b in bases] == [0, 128, 256, 384]


def test_w4_outer_level_steps_over_the_inner_levels():
    compiled, _ = _compile(BY_NAME["w4_same_dim_2x2"], unroll=False)
    (kernel,) = compiled.kernels
    assert loop_counts(kernel.specs) == [(2, [(2, ["mul"])])]
    assert _spec_shape(compiled) == ({"c0": 16, "c1": 64}, [["c0"], ["c0"]], [[16], [32]])
    # outer level 32 rows x 128 B, inner level 16 rows x 128 B
    assert "affine_map<(d0, d1)[s0] -> (s0 + 4096*d0 + 2048*d1)>" in generate_bundle(kernel.specs)


def test_w4_three_levels_on_one_dim():
    compiled, _ = _compile(BY_NAME["w4_explicit_three_levels"], unroll=False)
    assert _spec_shape(compiled) == (
        {"c0": 2, "c1": 64}, [["c0"], ["c0"], ["c0"]], [[2], [4], [8]]
    )


def test_w1_automatic_plan_with_unit_tiles():
    """The automatic planner itself picks a split equal to a dim size here."""
    x = torch.randn(8, 8, 64, generator=torch.Generator().manual_seed(0)).half()
    for unroll in (False, True):
        with config.patch(max_span_bytes=1024, sencores=4, ignore_span_overflow_hints=False,
                          unroll_loops=unroll):
            compiled = run_spyre(lambda t: t * 2.0, x)
        _assert_equal(compiled.output, x * 2.0)
        verify_program(compiled)
    with config.patch(max_span_bytes=1024, sencores=4, ignore_span_overflow_hints=False):
        compiled = run_spyre(lambda t: t * 2.0, x)
    (spec,) = compiled.op_specs()
    ranges = {s: int(r) for s, (r, _) in spec.iteration_space.items()}
    assert any(ranges[s] == 1 for level in spec.tiled_symbols for s in level)


# --------------------------------------------------------------------------- refusals


def _refusal(fn, *xs, unroll=False, groups=(), error=TileTranslationError):
    """The message of the ``error`` compiling ``fn`` raises (a HintError: and no
    TileTranslationError, the hint pass refused it before codegen)."""
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        with config.patch(unroll_loops=unroll), explicit_groups(*groups):
            run_spyre(fn, *xs)
    err = find_cause(info.value, error)
    assert err is not None, info.value
    if error is not TileTranslationError:
        assert find_cause(info.value, TileTranslationError) is None
    return str(err)


def partial_sticks(x):
    with spyre_hint(slices={"B": 4}):  # 16 fp32 per tile of a 32-element stick
        return x * 2.0


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
def test_r1_partial_stick_split_is_refused_when_hints_are_assigned(unroll):
    """The hint pass asks the rigid-tile condition codegen proves (facts.translation)
    of every read that moves with the loop, so R1 is refused before lowering."""
    from spyre_rules.hints import HintError, declare_tensor_dim, name_tensor_dims

    declare_tensor_dim("A", 16)
    declare_tensor_dim("B", 64)
    x = name_tensor_dims(torch.randn(16, 64), ["A", "B"])
    assert _refusal(partial_sticks, x, unroll=unroll, error=HintError) == (
        "buf0 (aten ops: mul.Tensor): spyre_hint(slices={'B': 4}) cannot be tiled: its tiles "
        "of arg0_1 are not rigid translations of the first tile (a split through part of a "
        "stick, or a read that wraps), so no constant per-iteration stride addresses them; "
        "choose a split whose tiles the layout can express"
    )


def iota_added(x):
    # Made outside the block, the arange (it reads nothing) is inlined into the hinted add,
    # which then computes a value from its index along the tiled dim.
    iota = torch.arange(2048, dtype=x.dtype)
    with spyre_hint(slices={"A": 2}):
        return x + iota


def iota_made_in_the_hint(x):
    with spyre_hint(slices={"A": 2}):
        return x + torch.arange(2048, dtype=x.dtype)


def test_manual_hint_on_a_dim_the_op_computes_values_from_is_a_hint_error():
    from spyre_rules.hints import HintError, declare_tensor_dim, name_tensor_dims

    declare_tensor_dim("A", 2048)
    x = name_tensor_dims(torch.randn(2048), ["A"])
    assert _refusal(iota_added, x, error=HintError) == (
        "buf4 (aten ops: add.Tensor): spyre_hint(slices={'A': 2}) cannot be tiled: it "
        "computes a value from its index along a tiled dim (an iota or a mask), which every "
        "tile would restart at 0; leave that dim untiled")


def test_an_arange_made_inside_the_hint_is_its_own_op_and_the_add_tiles():
    """Made inside the block, the arange stays its own op (backend/hinted_fills.py): it
    carries no dim named A (it reads nothing), so it runs whole before the loop, and the
    add reads its tiles like any buffer's: two tiles, equal to eager."""
    from spyre_rules.hints import declare_tensor_dim, name_tensor_dims

    declare_tensor_dim("A", 2048)
    x = name_tensor_dims(torch.randn(2048), ["A"])
    compiled = run_spyre(iota_made_in_the_hint, x)
    _assert_equal(compiled.output, iota_made_in_the_hint(x))
    loops = [(k.name, item.count) for k in compiled.kernels for item in k.specs
             if isinstance(item, LoopSpec)]
    assert [(name.split("_")[1], int(count)) for name, count in loops] == [("add", 2)]


def test_r1_partial_stick_split_is_refused_by_codegen_without_hints():
    """The same tiling through explicit groups (no hint pass) meets codegen's proof."""
    x = torch.randn(16, 64)
    assert _refusal(lambda t: t * 2.0, x, groups=(([0], [(4, [1])]),)) == (
        "buf0 (aten ops: mul.Tensor): coarse tiling cannot address the tiles of tensor arg0_1 "
        "along dim 1 (per-tile extent 16, 16 elements per iteration of level 0): they are "
        "not rigid translations of the first tile: the tiled dim runs along the stick dim "
        "and 16 elements per iteration is not a whole number of 32-element sticks; choose "
        "a split whose tiles the layout can express"
    )


def test_whole_stick_split_of_the_stick_dim_still_compiles():
    from spyre_rules.hints import declare_tensor_dim, name_tensor_dims

    declare_tensor_dim("A", 16)
    declare_tensor_dim("B", 64)
    x = name_tensor_dims(torch.randn(16, 64), ["A", "B"])

    def f(x):
        with spyre_hint(slices={"B": 2}):  # 32 fp32 per tile: one whole stick
            return x * 2.0

    for unroll in (False, True):
        with config.patch(unroll_loops=unroll):
            compiled = run_spyre(f, x)
        _assert_equal(compiled.output, x * 2.0)
        verify_program(compiled)


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
def test_wrapping_read_is_refused_at_compile_time(unroll):
    """Not the stick dim: tile rows of ``x.repeat(2, 1)`` by 2 and the read of
    ``x`` (row ``c0 mod 3``) wraps inside the second tile."""
    x = torch.randn(3, 64, dtype=torch.float16)
    message = _refusal(lambda t: t.repeat(2, 1) * 2.0, x, unroll=unroll, groups=(([0], 3),))
    assert message == (
        "buf0 (aten ops: repeat.default): coarse tiling cannot address the tiles of tensor "
        "arg0_1 along dim 0 (per-tile extent 2, 2 elements per iteration of level 0): they "
        "are not rigid translations of the first tile: at iteration [1] device dim 1 "
        "(coordinate Mod(c0, 3)) does not move by the same amount at every element of the "
        "tile; choose a split whose tiles the layout can express"
    )


def test_non_wrapping_split_of_the_same_read_compiles():
    x = torch.randn(3, 64, dtype=torch.float16)
    for unroll in (False, True):
        with config.patch(unroll_loops=unroll), explicit_groups(([0], 2)):
            compiled = run_spyre(lambda t: t.repeat(2, 1) * 2.0, x)
        _assert_equal(compiled.output, x.repeat(2, 1) * 2.0)
        verify_program(compiled)


def test_tiled_read_through_a_merged_view_compact_and_unrolled():
    """C1's codegen side: the op reads x (4, 32, 64) through a merged (4*32) dim, tiled by
    whole x rows (32 of the 128 merged rows per tile, a manual hint on M).  Its moving
    read is derived over the loop-wide extent (floor(c0/32) kept), so tile t reads x[t],
    compact and unrolled (it used to be simplified with the per-tile range and left the
    allocation).  Automatic tiling refuses this read at small limits:
    tests/pipeline/test_view_regressions.py."""
    from spyre_rules.hints import clear_tensor_dims, declare_tensor_dim, name_tensor_dims, spyre_hint

    x = torch.randn(4, 32, 64, generator=torch.Generator().manual_seed(0)).half()
    y = torch.randn(128, 64, generator=torch.Generator().manual_seed(1)).half()
    clear_tensor_dims()
    declare_tensor_dim("M", 128)
    declare_tensor_dim("C", 64)
    name_tensor_dims(y, ["M", "C"])

    def fn(a, b):
        with spyre_hint(slices={"M": 4}):
            return a.reshape(128, 64) + b

    for unroll in (False, True):
        with config.patch(unroll_loops=unroll):
            compiled = run_spyre(fn, x, y)
        _assert_equal(compiled.output, x.reshape(128, 64) + y)
        verify_program(compiled)
        if unroll:
            assert len(compiled.op_specs()) == 4
            continue
        (kernel,) = compiled.kernels
        assert loop_counts(kernel.specs) == [(4, ["add"])]
        (spec,) = compiled.op_specs()
        assert spec.tiled_symbols
        read = next(a for a in spec.args if a.name == "arg0_1")
        assert [str(c) for c in read.device_coordinates] == [
            "Mod(c0, 32)", "0", "floor(c0/32)", "c1"]


# --------------------------------------------------------------------------- the check itself


def _one_arg_spec(program, coords, device_size, tile):
    import sympy

    from spyre_rules.program.op_spec import OpSpec, TensorArg
    from spyre_rules.facts.stick_layout import DataFormat

    c0 = sympy.Symbol("c0", integer=True, nonnegative=True)
    arg = TensorArg(is_input=False, arg_index=0, device_dtype=DataFormat.SEN169_FP16,
                    device_size=device_size, device_coordinates=coords(c0),
                    allocation={"hbm": 0}, name="buf0")
    spec = OpSpec(op="iota", is_reduction=False, iteration_space={c0: (sympy.Integer(tile), 1)},
                  args=[arg], op_info={"program": program(c0), "store": {"arg": 0, "value": 0},
                                       "reduction_symbols": []},
                  tiled_symbols=[[c0]])
    return spec, c0


def test_a_value_computed_from_a_tiled_index_is_refused():
    """Every tile runs the same program from index 0: an iota over a tiled dim
    would write tile 0's values into every tile."""
    import sympy

    from spyre_rules.codegen.rigid_tiles import check_rigid_tiles

    spec, c0 = _one_arg_spec(
        lambda c: [{"op": "index_expr", "expr": c, "dtype": "float16"}],
        lambda c: [sympy.Integer(0), c], [1, 64], 16,
    )
    with pytest.raises(TileTranslationError) as info:
        check_rigid_tiles(spec, [4], "buf0 (aten ops: prims.iota.default)", {c0: 0})
    assert str(info.value) == (
        "buf0 (aten ops: prims.iota.default): coarse tiling cannot tile dim 0: the op "
        "computes a value from its index along it (c0, e.g. an iota or a mask), which would "
        "restart at 0 on every tile; leave that dim untiled"
    )


def test_rigid_tiles_inside_one_stick_pass_the_check():
    import sympy

    from spyre_rules.codegen.rigid_tiles import check_rigid_tiles

    spec, c0 = _one_arg_spec(
        lambda c: [{"op": "constant", "value": 1.0, "dtype": "float16"}],
        lambda c: [sympy.Integer(0), c], [1, 64], 16,
    )
    check_rigid_tiles(spec, [4], "buf0", {c0: 0})  # 16 elements move by 32 bytes each


def _merged_view_chain(x0):
    t0 = x0.view(6, 2, 6, 8)
    t1 = torch.relu(t0)
    t2 = t1 * t0
    return torch.relu(t2), t2


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
def test_unrolled_tile_of_a_merged_view_read_keeps_the_whole_device_dim(unroll):
    # Fuzz 2026:2108: the read of x0 through view(6, 2, 6, 8) has device coordinate
    # 2*c0 + c1 with c1 tiled; an unrolled tile's TensorArg shrank that device dim to
    # one tile's step of c1 (1) although c0 still moves it, so the executor refused
    # an in-bounds load.  Auto-tiled at 1471 bytes: {1: 2, 2: 6}.
    import spyre_rules
    from spyre_rules import config

    x0 = torch.randn(12, 6, 8, generator=torch.Generator().manual_seed(202608186))
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(fallback="error", unroll_loops=unroll, max_span_bytes=1471,
                                       sencores=4, ignore_span_overflow_hints=False):
        actual = torch.compile(_merged_view_chain, backend="spyre_rules", dynamic=False)(x0)
    for a, e in zip(actual, _merged_view_chain(x0)):
        assert torch.equal(a, e)


def _cropping_pad(x0):
    t0 = x0 * 0.5 - 0.25
    return F.pad(t0, (3, 2, -1, -1), value=0.5) * 2.0


@pytest.mark.parametrize("unroll", [False, True], ids=["compact", "unrolled"])
def test_unrolled_tile_read_one_row_on_keeps_the_whole_device_dim(unroll):
    # Fuzz 1202:3501 (auto): the pad crops one row each side of dim 1, so the tiled
    # ``* 2.0`` reads the padded buffer at device coordinate c1 + 1; an unrolled tile
    # of one row shrank that device dim to 1 although the read is one row on, and
    # the executor refused the in-bounds load.  Auto-tiled at 1135 bytes; the ops writing
    # regions of the pad's concatenation tile too (issue 33), so the span check passes.
    from spyre_rules import config

    x0 = torch.randn(12, 12, 2, generator=torch.Generator().manual_seed(0))
    torch._dynamo.reset()
    with torch.no_grad(), config.patch(fallback="error", unroll_loops=unroll, max_span_bytes=1135,
                                       sencores=32, ignore_span_overflow_hints=False,
                                       span_check="error"):
        actual = torch.compile(_cropping_pad, backend="spyre_rules", dynamic=False)(x0)
    assert torch.equal(actual, _cropping_pad(x0))


def test_select_scatter_compares_its_index_with_a_constant_and_tiles_other_dims():
    """``out[:, :, i] = v`` (the gated delta rule's per-chunk output) compares the
    chunk index with the constant ``i``: an ``index_expr`` of a plain int, which
    crashed the translation fact ("'int' object has no attribute 'free_symbols'");
    the heads tile, the compared dim stays whole."""
    def per_chunk(a, b):
        out = torch.zeros(1, 4, 2, 64, 128)
        for i, v in enumerate((a, b)):
            out[:, :, i] = v * (i + 1)
        return out + 1

    a, b = torch.randn(1, 4, 64, 128), torch.randn(1, 4, 64, 128)
    with config.patch(max_span_bytes=65536, ignore_span_overflow_hints=False, span_check="error"):
        compiled = run_spyre(per_chunk, a, b)
    torch.testing.assert_close(compiled.output, per_chunk(a, b), atol=0, rtol=0)
    assert any(isinstance(item, LoopSpec) for k in compiled.kernels for item in k.specs)
    verify_program(compiled)
