"""A counted loop of exact pointwise ops runs as one batched pass over all its tiles
(executor/batched_loops.py) and leaves the bytes its iterations leave: every kernel's
whole device memory equals the iterations' route and the general path's; a loop the
pass cannot prove equal runs its iterations."""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent.parent
for folder in (TESTS / "tiling", TESTS.parent / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import fuzz_paths  # noqa: E402
from special_values import with_specials  # noqa: E402
from tiling_helpers import explicit_groups  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import DeviceMemoryError, batched_loops, native_half  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402

ROWS, COLS, TILES = 64, 256, 8


def _compiled(fn, inputs, ops):
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(fn, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups((list(ops), TILES)), torch.no_grad():
        program(*inputs)
    kernels = fuzz_paths.kernels_since(before)
    assert any(isinstance(item, LoopSpec) for k in kernels for item in k.specs)
    return program, kernels


def _routes(program, inputs, kernels, monkeypatch):
    """(general, iterations, batched) runs and how many loops the batched run batched."""
    monkeypatch.setattr(batched_loops, "ENABLED", False)
    iterations = fuzz_paths.run_on_path(program, inputs, kernels, False, (DeviceMemoryError,))
    monkeypatch.setattr(batched_loops, "ENABLED", True)
    general = fuzz_paths.run_on_path(program, inputs, kernels, True, (DeviceMemoryError,))
    before = batched_loops.counts["batched"]
    batched = fuzz_paths.run_on_path(program, inputs, kernels, False, (DeviceMemoryError,))
    return general, iterations, batched, batched_loops.counts["batched"] - before


PROGRAMS = {
    "(a + b) * c": (lambda a, b, c: (a + b) * c, 3, (0, 1)),
    "(a - b) / c, c a row": (lambda a, b, c: (a - b) / c[:1], 3, (0, 1)),
    "a * a + b, three ops": (lambda a, b: (a * a + b) - a, 2, (0, 1, 2)),
    "(a + b) * 0.1, a constant": (lambda a, b: (a + b) * 0.1, 2, (0, 1)),
}


@pytest.mark.parametrize("passes", [1, 3], ids=["one pass", "passes of 3, 3, 2 tiles"])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_loop_of_exact_ops_is_batched_and_leaves_the_iterations_bytes(name, dtype, passes,
                                                                        monkeypatch):
    fn, arity, ops = PROGRAMS[name]
    inputs = [with_specials((ROWS, COLS), dtype, seed) for seed in range(arity)]
    program, kernels = _compiled(fn, inputs, ops)
    tile_bytes = ROWS // TILES * COLS * dtype.itemsize
    monkeypatch.setattr(batched_loops, "GROUP_BYTES", 0 if passes == 1 else 3 * tile_bytes)
    native = native_half.counts["native"]
    general, iterations, batched, count = _routes(program, inputs, kernels, monkeypatch)
    assert count == 1
    if dtype != torch.float32 and "constant" not in name:  # one native op per body op and pass
        assert native_half.counts["native"] - native == TILES * len(ops) + len(ops) * (
            1 if passes == 1 else 3)
    assert fuzz_paths.difference(general, batched) is None
    assert fuzz_paths.difference(iterations, batched) is None
    expected = fn(*inputs)
    out = program(*inputs)
    assert torch.equal(out.isnan(), expected.isnan())
    if "constant" in name:  # the device rounds the constant to the op's dtype first
        torch.testing.assert_close(out, expected, rtol=2e-2, atol=1e-3, equal_nan=True)
    else:
        assert torch.equal(out[~out.isnan()], expected[~expected.isnan()])
    torch._dynamo.reset()


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
def test_a_one_element_operand_broadcasts_over_every_tile(dtype, monkeypatch):
    # a (1, 1) tensor's load is one point: its view has no axes (fuzz 4412:60)
    a, b = (with_specials((ROWS, COLS), dtype, s) for s in range(2))
    s = torch.full((1, 1), 3.0, dtype=dtype)
    program, kernels = _compiled(lambda a, b, s: (a + b) * s, (a, b, s), (0, 1))
    general, iterations, batched, count = _routes(program, (a, b, s), kernels, monkeypatch)
    assert count == 1
    assert fuzz_paths.difference(general, batched) is None
    assert fuzz_paths.difference(iterations, batched) is None
    torch._dynamo.reset()


def _tiles_too_large(loop, monkeypatch):
    monkeypatch.setattr(batched_loops, "GROUP_BYTES", ROWS // TILES * COLS * 2)  # one tile


def _read_before_write(loop, monkeypatch):
    # the mul reads the add's per-tile buffer as the *previous* iteration left it
    loop.body.reverse()


def _last_tile_past_the_tensors(loop, monkeypatch):
    loop.count = TILES + 1  # the ninth tile reads and writes past the tensors


def _last_store_tile_outside_its_segment(loop, monkeypatch):
    # the output's segment narrowed by one tile's bytes: only the last iteration's store
    # falls outside it (into no other tensor's bytes)
    mul = loop.body[-1]
    store = mul.args[mul.op_info["store"]["arg"]]
    start = int(store.allocation["hbm"])
    store.segment = (start, start + store.size_in_bytes - store.size_in_bytes // TILES)


def _overlapping_tiles(loop, monkeypatch):
    # every tile steps half a tile: iteration i + 1 overwrites half of what i stored
    for spec in loop.body:
        spec.tiled_steps = [[ROWS // TILES // 2]]


#: edit of the compiled (a + b) * c loop -> the error both routes raise (None: none)
REFUSED = {
    "tiles too large for one pass": (_tiles_too_large, None),
    "reading the tile buffer before writing it": (_read_before_write, None),
    "a last tile past the tensors": (_last_tile_past_the_tensors, "DeviceMemoryError"),
    "a last store tile outside its segment": (_last_store_tile_outside_its_segment,
                                              "DeviceMemoryError"),
    "overlapping tiles": (_overlapping_tiles, None),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_loop_the_pass_cannot_prove_runs_the_iterations(case, monkeypatch):
    edit, error = REFUSED[case]
    inputs = [with_specials((ROWS, COLS), torch.float16, s) for s in range(3)]
    program, kernels = _compiled(lambda a, b, c: (a + b) * c, inputs, (0, 1))
    (loop,) = [item for k in kernels for item in k.specs if isinstance(item, LoopSpec)]
    edit(loop, monkeypatch)
    general, iterations, batched, count = _routes(program, inputs, kernels, monkeypatch)
    assert count == 0
    assert (batched[0][0][0] == error) if error else not isinstance(batched[0][0][0], str)
    assert fuzz_paths.difference(general, batched) is None
    assert fuzz_paths.difference(iterations, batched) is None
    torch._dynamo.reset()


def test_a_transcendental_in_the_body_runs_the_iterations(monkeypatch):
    inputs = [with_specials((ROWS, COLS), torch.float32, s) for s in range(2)]
    program, kernels = _compiled(lambda a, b: (a + b).exp(), inputs, (0, 1))
    general, iterations, batched, count = _routes(program, inputs, kernels, monkeypatch)
    assert count == 0
    assert fuzz_paths.difference(general, batched) is None
    torch._dynamo.reset()


def _offsets(sizes, strides):
    return [sum(i * s for i, s in zip(index, strides))
            for index in itertools.product(*(range(n) for n in sizes))]


@pytest.mark.parametrize("seed", range(3))
def test_injective_views_name_each_element_once(seed):
    g = torch.Generator().manual_seed(seed)
    said = 0
    for _ in range(400):
        rank = int(torch.randint(1, 4, (1,), generator=g))
        sizes = tuple(int(x) for x in torch.randint(1, 5, (rank,), generator=g))
        strides = tuple(int(x) for x in torch.randint(0, 24, (rank,), generator=g))
        offsets = _offsets(sizes, strides)
        if batched_loops._injective(sizes, strides):
            said += 1
            assert len(set(offsets)) == len(offsets), (sizes, strides)
    assert said > 50


def test_the_bench_tiles_are_injective():
    # 8 row tiles of a [16 sticks, 1024 rows, 64] fp16 layout, and their per-tile buffer
    assert batched_loops._injective((8, 128, 16, 64), (8192, 64, 65536, 1))
    assert not batched_loops._injective((8, 128, 16, 64), (0, 64, 8192, 1))
    assert batched_loops._injective((128, 16, 64), (64, 8192, 1))


def test_an_empty_loop_body_runs_nothing():
    import sympy

    from spyre_rules.executor import DeviceMemory
    from spyre_rules.executor.loops import run_items

    memory = DeviceMemory(256)
    before = batched_loops.counts["batched"]
    run_items([LoopSpec(sympy.Integer(4), [])], memory, "k")
    assert batched_loops.counts["batched"] == before
    assert not bool(memory.read_bytes(0, 256).any())
