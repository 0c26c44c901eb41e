"""A kernel run puts off the NaN check of a native half store until a later native op
that reads it whole has checked its own result (executor/native_half.py, ``Deferred``).

What must hold: the device bytes of every kernel are those of the general path
(``views.FORCE_GENERAL``, which checks and canonicalises every store at once), every
NaN stored in half storage is the canonical one, and an op that is not such a
native reader sees only canonical NaNs.  The tiled ``(a + b) * c`` program chains
the add's per-tile buffer into the mul: a NaN made by the add (``inf + -inf``) must
be made canonical in that buffer although only the mul's result is checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

TESTS = Path(__file__).resolve().parent.parent
for folder in (TESTS / "tiling", TESTS.parent / "bench"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

import fuzz_paths  # noqa: E402
from tiling_helpers import explicit_groups  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import batched_loops, native_half  # noqa: E402

ROWS, COLS, TILES = 64, 128, 8
CANONICAL = 0x7E00
INF, NAN = float("inf"), float("nan")


def _compiled(fn, inputs, ops=(0, 1)):
    """``fn`` compiled with its ops ``ops`` in one counted loop of ``TILES`` row tiles."""
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(fn, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups((list(ops), TILES)), torch.no_grad():
        program(*inputs)
    return program, fuzz_paths.kernels_since(before)


def _ones(seed):
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(ROWS, COLS, generator=g) + 0.5).half()


def _negative_nan(payload):
    """A float16 NaN with the sign bit and a payload (never the canonical bits)."""
    return torch.tensor([-0x8000 | 0x7C00 | payload], dtype=torch.int32).to(torch.int16).view(
        torch.float16)[0]


def _plant(kind, row, col):
    a, b, c = _ones(1), _ones(2), _ones(3)
    if kind == "inf - inf in the add":
        a[row, col], b[row, col] = INF, -INF
    elif kind == "0 * inf in the mul":
        a[row, col], b[row, col], c[row, col] = 0.0, 0.0, INF
    elif kind == "NaN payload in a":
        a[row, col] = _negative_nan(0x155)
    elif kind == "NaN payload in c":
        c[row, col] = _negative_nan(0x2A)
    return a, b, c


def _stored_nans_are_canonical(kernel, memory: torch.Tensor) -> bool:
    """Every NaN the kernel's ops stored (outside the graph inputs' segments, whose
    bytes are the host's) is the canonical one."""
    memory = memory.clone()
    for p in kernel.stickify.values():
        memory[p.address:p.address + p.size_in_bytes] = 0
    halves = memory[: memory.numel() // 2 * 2].view(torch.float16)
    return bool((halves.view(torch.int16)[halves.isnan()] == CANONICAL).all())


def _stored_nan_count(kernel, memory: torch.Tensor) -> int:
    memory = memory.clone()
    for p in kernel.stickify.values():
        memory[p.address:p.address + p.size_in_bytes] = 0
    return int(memory[: memory.numel() // 2 * 2].view(torch.float16).isnan().sum())


@pytest.fixture(scope="module")
def tiled():
    inputs = _plant(None, 0, 0)
    program, kernels = _compiled(lambda a, b, c: (a + b) * c, inputs)
    yield program, kernels
    torch._dynamo.reset()


# every tile, and in each its first, last and an inner point
POSITIONS = [(t * ROWS // TILES + r, col) for t in range(TILES)
             for r, col in ((0, 0), (ROWS // TILES - 1, COLS - 1), (3, 70))]


@pytest.fixture(params=["iterations", "batched"])
def route(request, monkeypatch):
    """The loop's iterations one by one (NaN checks put off across them: ``Deferred``)
    or as one batched pass (``batched_loops``, its own chain of checks)."""
    monkeypatch.setattr(batched_loops, "ENABLED", request.param == "batched")
    return request.param


@pytest.mark.parametrize("kind", ["inf - inf in the add", "0 * inf in the mul",
                                  "NaN payload in a", "NaN payload in c"])
@pytest.mark.parametrize("row, col", POSITIONS)
def test_a_nan_at_any_point_gives_the_general_paths_bytes(tiled, route, kind, row, col):
    program, kernels = tiled
    inputs = _plant(kind, row, col)
    general = fuzz_paths.run_on_path(program, inputs, kernels, True, ())
    start = dict(native_half.counts)
    batched = batched_loops.counts["batched"]
    structured = fuzz_paths.run_on_path(program, inputs, kernels, False, ())
    # the native route ran, per tile or once per op over all tiles
    assert native_half.counts["native"] - start["native"] == (2 * TILES if route == "iterations" else 2)
    assert batched_loops.counts["batched"] - batched == (route == "batched")
    assert native_half.counts["canonical"] - start["canonical"] == 1  # one chain held the NaN
    assert fuzz_paths.difference(general, structured) is None
    out = structured[0][0][2].view(torch.float16).view(ROWS, COLS)
    nan = out.isnan()
    assert nan.sum() == 1 and bool(nan[row, col])
    assert all(_stored_nans_are_canonical(k, m) for k, m in zip(kernels, structured[1]))


def test_a_nan_made_in_the_last_tile_is_canonical_in_the_add_buffer(tiled, route):
    # the per-tile add buffer keeps the last tile: its NaN was checked only through the mul
    program, kernels = tiled
    structured = fuzz_paths.run_on_path(program, _plant("inf - inf in the add", ROWS - 1, 5),
                                        kernels, False, ())
    assert _stored_nan_count(kernels[0], structured[1][0]) == 2  # the add's buffer, the output
    assert _stored_nans_are_canonical(kernels[0], structured[1][0])


def test_many_nans_in_every_tile_give_the_general_paths_bytes(tiled, route):
    program, kernels = tiled
    a, b, c = _ones(4), _ones(5), _ones(6)
    g = torch.Generator().manual_seed(9)
    for x, value in ((a, INF), (b, -INF), (a, _negative_nan(0x3F)), (c, INF), (c, _negative_nan(1))):
        x.view(-1)[torch.randint(0, ROWS * COLS, (300,), generator=g)] = value
    b.view(-1)[torch.randint(0, ROWS * COLS, (300,), generator=g)] = 0.0
    assert fuzz_paths.compare_paths(program, (a, b, c), kernels, ()) is None


def test_an_op_that_is_not_native_reads_only_canonical_nans():
    # the mul's result is read in the same loop iteration by a conversion to float32,
    # which keeps a NaN's sign: it must see the mul's NaN made canonical (the chain's
    # check is not put off past it)
    inputs = _plant("0 * inf in the mul", 13, 77)
    program, kernels = _compiled(lambda a, b, c: ((a + b) * c).float(), inputs, ops=(0, 1, 2))
    assert len(kernels) == 1 and len(kernels[0].specs[0].body) == 3
    general = fuzz_paths.run_on_path(program, inputs, kernels, True, ())
    structured = fuzz_paths.run_on_path(program, inputs, kernels, False, ())
    assert fuzz_paths.difference(general, structured) is None
    out = structured[0][0][2].view(torch.float32).view(ROWS, COLS)
    assert out.view(torch.int32)[13, 77] == 0x7FC00000  # float32 of the canonical half NaN
    torch._dynamo.reset()


@pytest.mark.parametrize("op", ["truediv", "sub"])
def test_an_edit_of_the_chained_op_between_runs_is_honoured(op):
    # the programs are bound once per kernel run: an edit made between two runs (here
    # the mul becomes another native op) is seen by the next run, on both paths
    inputs = _plant("inf - inf in the add", 21, 100)
    program, kernels = _compiled(lambda a, b, c: (a + b) * c, inputs)
    mul = kernels[0].specs[0].body[1]
    mul.op_info["program"][2]["op"] = op
    general = fuzz_paths.run_on_path(program, inputs, kernels, True, ())
    structured = fuzz_paths.run_on_path(program, inputs, kernels, False, ())
    assert fuzz_paths.difference(general, structured) is None
    a, b, c = (x.float() for x in inputs)
    value = (a + b).half().float()
    expected = (value / c if op == "truediv" else value - c).half()
    out = structured[0][0][2].view(torch.float16).view(ROWS, COLS)
    nan = expected.isnan()
    assert torch.equal(out.isnan(), nan)
    assert torch.equal(out[~nan], expected[~nan])
    torch._dynamo.reset()


# ---- the pieces: when two views may share an element, and what a flush checks

def _elements(view: torch.Tensor) -> set[int]:
    index = torch.zeros(view.shape, dtype=torch.int64)
    for d, (n, s) in enumerate(zip(view.shape, view.stride())):
        shape = [1] * view.dim()
        shape[d] = n
        index = index + (torch.arange(n) * s).view(shape)
    return set((index + view.storage_offset()).reshape(-1).tolist())


@pytest.mark.parametrize("seed", range(4))
def test_views_said_disjoint_share_no_element(seed):
    from spyre_rules.executor.nan_checks import _may_overlap

    g = torch.Generator().manual_seed(seed)
    memory = torch.zeros(4096, dtype=torch.float16)
    said_disjoint = 0
    for _ in range(300):
        n, length = (int(x) for x in torch.randint(1, 6, (2,), generator=g))
        step = length + int(torch.randint(0, 12, (1,), generator=g))
        offsets = torch.randint(0, 4096 - n * step, (2,), generator=g).tolist()
        a, b = (memory.as_strided((n, length), (step, 1), o) for o in offsets)
        if not _may_overlap(a, b):
            said_disjoint += 1
            assert not _elements(a) & _elements(b)
        elif n > 1:
            other = memory.as_strided((n, length), (step + 1, 1), offsets[1])
            assert _may_overlap(a, other)  # another pattern: never said disjoint
    assert said_disjoint > 50


def test_a_store_over_an_unchecked_head_checks_it_first():
    from spyre_rules.executor.hbm import DeviceMemory
    from spyre_rules.executor.nan_checks import Deferred

    memory = DeviceMemory(4096)
    head = memory.strided(torch.float16, (4, 8), (16, 1), 0)
    head.view(torch.int16)[1, 3] = -512  # 0xFE00: a NaN that is not canonical
    deferred = Deferred()
    deferred.add(head, head, memory, False)
    apart = memory.strided(torch.float16, (4, 8), (16, 1), 8)  # the other half of each row
    deferred.before_store(memory, apart)
    assert deferred.head() is head  # disjoint: still unchecked
    over = memory.strided(torch.float16, (4, 8), (16, 1), 4)
    deferred.before_store(memory, over)
    assert deferred.head() is None
    assert int(head.view(torch.int16)[1, 3]) == CANONICAL
