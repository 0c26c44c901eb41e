"""A perfect nest of counted loops (each level's body the next level alone) of exact
pointwise ops runs as batched passes over all its tiles, each view gaining one leading
axis per batched level (executor/batched_loops.py): every kernel's whole device memory
equals the iterations' route and the general path's, and the output equals eager.
Mamba2's chunk scan at 64 KiB copies a [256, 128, 256] buffer onto the heads outermost
in 256 x 128 x 4 tiles: 24 s iterating, one pass batched."""

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
from special_values import with_specials  # noqa: E402
from tiling_helpers import explicit_groups, loop_counts  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.executor import DeviceMemoryError, batched_loops  # noqa: E402

ROWS, COLS = 64, 256
LEVELS = [(4, [0]), (4, [1])]  # tiles of 16 rows x 64 columns


def _fn(a, b, c):
    return (a + b) * c


@pytest.mark.parametrize("group_tiles", [0, 2, 1], ids=["one pass", "passes of 2 inner tiles",
                                                         "one tile a pass: iterations"])
@pytest.mark.parametrize("dtype", [torch.float32])  # a half tile of one stick of columns: no one view
def test_a_loop_nest_of_exact_ops_is_batched_and_leaves_the_iterations_bytes(dtype, group_tiles,
                                                                             monkeypatch):
    inputs = [with_specials((ROWS, COLS), dtype, seed) for seed in range(3)]
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(_fn, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups(([0, 1], LEVELS)), torch.no_grad():
        program(*inputs)
    kernels = fuzz_paths.kernels_since(before)
    assert [loop_counts(k.specs) for k in kernels] == [[(4, [(4, ["add", "mul"])])]]
    tile_bytes = ROWS // 4 * COLS // 4 * dtype.itemsize
    monkeypatch.setattr(batched_loops, "GROUP_BYTES", group_tiles * tile_bytes)
    monkeypatch.setattr(batched_loops, "ENABLED", False)
    iterations = fuzz_paths.run_on_path(program, inputs, kernels, False, (DeviceMemoryError,))
    monkeypatch.setattr(batched_loops, "ENABLED", True)
    general = fuzz_paths.run_on_path(program, inputs, kernels, True, (DeviceMemoryError,))
    count = batched_loops.counts["batched"]
    batched = fuzz_paths.run_on_path(program, inputs, kernels, False, (DeviceMemoryError,))
    assert batched_loops.counts["batched"] - count == (0 if group_tiles == 1 else 1)
    assert fuzz_paths.difference(general, batched) is None
    assert fuzz_paths.difference(iterations, batched) is None
    expected, out = _fn(*inputs), program(*inputs)
    assert torch.equal(out.isnan(), expected.isnan())
    assert torch.equal(out[~out.isnan()], expected[~expected.isnan()])
    torch._dynamo.reset()


def test_passes_fix_the_outer_levels_and_batch_the_inner_ones():
    largest = batched_loops.GROUP_BYTES // 10  # 5 tiles fit twice, 20 do not
    assert batched_loops._passes((3, 4, 5), largest) == (1, 2)
    passes = list(batched_loops._each_pass((3, 4, 5), 1, 2))
    assert [(p.prefix, p.first, p.lead) for p in passes][:3] == \
        [((0,), 0, (2, 5)), ((0,), 2, (2, 5)), ((1,), 0, (2, 5))]
    assert len(passes) == 6 and passes[0].at(3) == (0, 0, 0) and passes[1].at(3) == (0, 2, 0)
    assert batched_loops._passes((3, 4), batched_loops.GROUP_BYTES + 1) is None
    assert batched_loops._passes((3, 4), 0) == (0, 3)


def test_a_nest_whose_iterations_depend_on_each_other_runs_its_iterations(monkeypatch):
    # the mul reads the add's per-tile buffer before the add writes it: as the previous
    # iteration of the inner level left it (or the outer level's previous one)
    inputs = [with_specials((ROWS, COLS), torch.float32, seed) for seed in range(3)]
    torch._dynamo.reset()
    before = fuzz_paths.newest_kernel_serial()
    program = torch.compile(_fn, backend="spyre_rules", dynamic=False)
    with config.patch(fallback="error"), explicit_groups(([0, 1], LEVELS)), torch.no_grad():
        program(*inputs)
    (kernel,) = fuzz_paths.kernels_since(before)
    levels, body = batched_loops.nest(kernel.specs[0])
    assert [int(level.count) for level in levels] == [4, 4]
    body.reverse()
    monkeypatch.setattr(batched_loops, "ENABLED", False)
    iterations = fuzz_paths.run_on_path(program, inputs, [kernel], False, (DeviceMemoryError,))
    monkeypatch.setattr(batched_loops, "ENABLED", True)
    count = batched_loops.counts["batched"]
    batched = fuzz_paths.run_on_path(program, inputs, [kernel], False, (DeviceMemoryError,))
    assert batched_loops.counts["batched"] == count
    assert fuzz_paths.difference(iterations, batched) is None
    torch._dynamo.reset()
