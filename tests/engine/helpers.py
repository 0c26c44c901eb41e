"""Shared helpers of the engine tests: capturing real programs and checking plans.

* :func:`capture` -- ``spyre_rules.capture_operations`` with a per-session cache
  keyed by a program name (capture costs ~0.3 s; ops are shared, so a test that
  stamps ``dim_hints`` must remove them again: :func:`without_hints`).
* :func:`capture_without_running` -- lowers a program to the planner's seam but
  never runs it eagerly, for shapes far too large to allocate (docs/layout_model.md §6.4).
* :func:`assert_span_safe` -- the independent verifier (``verify_spans``,
  brute-force enumeration) over what a plan makes the hardware touch: the
  per-tile output buffer and every tile's write into the full output buffer.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import sympy
import torch
from torch._inductor import ir

import spyre_rules
from spyre_rules.backend.capture import CapturedOperations
from spyre_rules.backend.compile import compile_for_capture
from spyre_rules.backend.pre_scheduling import capture_sink
from spyre_rules.facts.coordinates import access_coordinates, device_coordinates
from spyre_rules.facts.op_facts import op_facts
from spyre_rules.facts.per_tile import split_by_symbol
from spyre_rules.facts.stick_layout import dtype_info
from spyre_rules.facts.tile_accesses import full_buffer_write, input_read_accesses, tiled_accesses
from spyre_rules.facts.tile_extent import tile_extent
from spyre_rules.spans import verify_spans

FP16 = torch.float16
_CACHE: dict[str, CapturedOperations] = {}


def capture(key: str, fn: Callable, *inputs: Any) -> CapturedOperations:
    """Capture ``fn(*inputs)`` once per session under ``key``."""
    found = _CACHE.get(key)
    if found is None:
        found = _CACHE[key] = spyre_rules.capture_operations(fn, *inputs)
    return found


class _Captured(Exception):
    pass


def capture_without_running(fn: Callable, *inputs: Any) -> CapturedOperations:
    sink: list = []

    def backend(gm, example_inputs):
        with capture_sink(sink):
            compile_for_capture(gm, example_inputs)
        raise _Captured()  # stop before Dynamo runs the graph on real tensors

    try:
        with torch.no_grad():
            torch.compile(fn, backend=backend)(*inputs)
    except Exception as exc:  # noqa: BLE001 - Dynamo wraps our stop signal
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, _Captured):
            cause = cause.__cause__ or cause.__context__
        if cause is None:
            raise
    finally:
        torch._dynamo.reset_code(fn.__code__)
    ops = CapturedOperations(op for _, group in sink for op in group)
    ops.graphs = [graph for graph, _ in sink]
    return ops


@contextlib.contextmanager
def without_hints(ops) -> Iterator[None]:
    """Remove every ``dim_hints`` the block stamps (ops are shared between tests)."""
    before = {id(op): getattr(op, "dim_hints", None) for op in ops}
    try:
        yield
    finally:
        for op in ops:
            if getattr(op, "dim_hints", None) is not before[id(op)]:
                op.dim_hints = before[id(op)]


def by_name(ops, name: str):
    return next(op for op in ops if op.get_name() == name)


# ------------------------------------------------------------------ verifier


def _check_coords(what: str, device_size, coords, ranges: dict, itemsize: int, limit: int,
                  steps: dict) -> list[str]:
    """Every non-stick coordinate's true span, per tile, must fit ``limit``.

    Each coordinate is enumerated on its own (the others held at 0) so only its
    own symbols are enumerated; its span is then exact for the verifier's
    measure (coordinate values touched x inner device elements x itemsize).
    ``steps``: tiled symbol -> (per-tile range, number of tiles); tile ``t``
    reads the symbol at ``s + t * range``.
    """
    problems = []
    last = len(coords) - 1
    for d, coord in enumerate(coords[:last]):
        coord = sympy.sympify(coord)
        syms = sorted((s for s in coord.free_symbols if s in ranges), key=str)
        if not syms:
            continue
        tiled = [s for s in syms if s in steps]
        for tiles in itertools.product(*(range(steps[s][1]) for s in tiled)):
            shifted = coord.subs({s: s + t * steps[s][0] for s, t in zip(tiled, tiles)})
            only = [shifted if j == d else 0 for j in range(len(coords))]
            report = verify_spans(device_size, only, {s: ranges[s] for s in syms}, itemsize)
            span = report.dims[d].span_bytes
            if report.dims[d].varies and span > limit:
                problems.append(f"{what}: device dim {d} ({coord}) tile {tiles} spans {span} > {limit}")
    return problems


def span_problems(op, splits, limit: int, all_reads: bool = False) -> list[str]:
    """What the verifier finds over a plan's real accesses: the per-tile output
    buffer, every tile's full-buffer write and every tile's input reads (empty: safe).

    Reads: Reductions only unless ``all_reads`` (a Pointwise op's reads are its run's
    per-tile buffers or inputs laid out like its output), and not coordinates driven
    by a reduction symbol -- output-range tiling cannot shrink those (docs/layout_model.md
    §3.5: reduction-range tiling is a separate mechanism, not built yet)."""
    facts = op_facts(op)
    key = tuple(sorted((int(d), int(k)) for d, k in splits if k > 1))
    view = facts.output_view(key)
    if not view:  # a plan must have one; the oracle's brute force just skips the split
        assert all_reads, f"{op.get_name()}: per-tile view of {key} cannot be built: {view}"
        return [f"no per-tile view: {view}"]
    problems = _check_coords("per-tile buffer", view.device_layout.device_size, view.coords,
                             view.range_map, view.itemsize, limit, {})
    layout, write = op.layout, facts.write
    coords = device_coordinates(layout.device_layout, write.index, write.ranges)
    per_symbol = split_by_symbol(facts.split_dims, key)
    ranges = {s: tile_of(r, per_symbol.get(s, 1)) for s, r in write.ranges.items()}
    steps = {s: (ranges[s], k) for s, k in per_symbol.items() if s in ranges}
    problems += _check_coords("full-buffer write", layout.device_layout.device_size, coords,
                              ranges, dtype_info(layout.dtype).itemsize, limit, steps)
    # Reads: Reductions only (a Pointwise op's reads are its run's per-tile
    # buffers or inputs laid out like its output), and not coordinates driven by
    # a reduction symbol -- output-range tiling cannot shrink those (docs/layout_model.md §3.5:
    # reduction-range tiling is a separate mechanism, not built yet).
    reads = facts.input_reads() if isinstance(op.data, ir.Reduction) else []
    for read in reads:
        dep, rl = facts.dep_of(read), read.layout
        coords = access_coordinates(rl.device_layout, rl.size, rl.stride, rl.offset,
                                    dep.index, dep.ranges)
        # A coordinate driven only by reduction symbols the plan tiles (a reduction
        # level) is measured per tile; other reduction-driven ones are left out.
        reduction_syms = set(dep.ranges) - set(write.ranges)
        coords = [sympy.Integer(0) if c.free_symbols & reduction_syms
                  and (c.free_symbols & set(write.ranges)
                       or not c.free_symbols & reduction_syms <= set(per_symbol)) else c
                  for c in coords]
        ranges = {s: tile_of(r, per_symbol.get(s, 1)) for s, r in dep.ranges.items()}
        steps = {s: (ranges[s], k) for s, k in per_symbol.items() if s in ranges}
        problems += _check_coords(f"read of {read.buffer}", rl.device_layout.device_size, coords,
                                  ranges, dtype_info(rl.dtype).itemsize, limit, steps)
    return problems


def tile_of(r, k: int) -> int:
    """A range's tile under ``k`` tiles: ``r / k``, or a remainder split's whole tile (its
    shorter last tile is a sub-box of a translated whole one): facts/tile_extent.py."""
    return int(r) if k <= 1 else tile_extent(int(r), k)


def assert_span_safe(op, plan, limit: int) -> None:
    """The independent verifier accepts every tile of ``plan`` (a plan or splits)."""
    splits = plan.splits if hasattr(plan, "splits") else plan
    problems = span_problems(op, splits, limit)
    assert not problems, "\n".join(problems)


def _offsets(coords, device_size, ranges: dict) -> tuple[list, Any]:
    """Every point's device element offset on the grid of ``ranges`` (symbols by name)."""
    import numpy as np

    syms = sorted(ranges, key=str)
    grids = np.meshgrid(*[np.arange(int(ranges[s])) for s in syms], indexing="ij")
    strides = [int(np.prod([int(x) for x in device_size[d + 1:]])) for d in range(len(device_size))]
    total = np.zeros([int(ranges[s]) for s in syms], dtype=np.int64)
    for coord, stride in zip(coords, strides):
        fn = sympy.lambdify(syms, sympy.sympify(coord), modules="numpy")
        total = total + np.rint(np.asarray(fn(*grids), dtype=np.float64)).astype(np.int64) * stride
    return syms, total


def tiles_translate_by_enumeration(coords, device_size, ranges: dict, per_symbol: dict) -> bool:
    """Independent of ``facts.translation``: evaluate every element's device offset and
    check that tile ``t`` (``per_symbol``: tiled symbol -> split) is tile 0 moved by
    ``sum_l t_l * stride_l``, one constant stride per tiled symbol -- what a counted
    loop's affine offsets do."""
    import numpy as np

    syms, offsets = _offsets(coords, device_size, ranges)
    tiled = [s for s in syms if per_symbol.get(s, 1) > 1]
    if not tiled:
        return True
    axes = [syms.index(s) for s in tiled]
    # tile t of a symbol covers [t * T, min((t + 1) * T, r)): T = n / k, or a remainder
    # split's whole tile and a shorter last one (compared with tile 0's first elements)
    extents = [tile_of(ranges[s], per_symbol[s]) for s in tiled]

    def block(tile):
        index = [slice(None)] * len(syms)
        for axis, t, size, s in zip(axes, tile, extents, tiled):
            index[axis] = slice(t * size, min((t + 1) * size, int(ranges[s])))
        return offsets[tuple(index)]

    first = block((0,) * len(tiled))
    unit = []
    for n in range(len(tiled)):
        index = [0] * len(tiled)
        index[n] = 1
        unit.append(int((block(tuple(index)).flat[0] - first.flat[0])))
    for tile in itertools.product(*(range(per_symbol[s]) for s in tiled)):
        here = block(tile)
        moved = here - first[tuple(slice(0, n) for n in here.shape)]
        expected = sum(t * u for t, u in zip(tile, unit))
        if moved.min() != expected or moved.max() != expected:
            return False
    return True


def plan_translates(op, splits) -> bool:
    """Every tile of ``splits`` moves the op's full-buffer write and each input read
    rigidly (:func:`tiles_translate_by_enumeration` on each access)."""
    facts = op_facts(op)
    key = tuple(sorted((int(d), int(k)) for d, k in splits if k > 1))
    per_symbol = split_by_symbol(facts.symbol_dims, key)
    accesses = [full_buffer_write(op), *input_read_accesses(op, zero_reduction=False)]
    return all(tiles_translate_by_enumeration(
                   a.coords, a.device_size, {s: int(r) for s, r in a.ranges.items()},
                   {s: k for s, k in per_symbol.items() if s in a.ranges})
               for a in accesses)
