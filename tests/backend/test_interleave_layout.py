"""A concatenation read through a flattening view is laid out as that view (issue 41).

``associative_scan``'s interleave, ``torch.stack([a, b], 1).flatten(0, 1)``, lowers to
a ConcatKernel ``[4, 256, 16]`` read flat as ``[8, 128, 16]``.  Its generic layout put
the 256 rows outermost and the 4 pairs just outside the stick, so element ``k`` of
the flat dim sat at ``Mod(k, 2) * 128 + floor(k / 2)`` rows: no tile of ``k`` was a
rigid translation of the first and Mamba, Falcon-Mamba and Jamba were refused at
64 KiB.  Laid out as ``[8, 128, 16]`` (``facts/merged_view.py``,
``backend/merged_layouts.py``) the reader moves along one device dim, and the
regions' coordinates drop the ``Mod`` the merged dim put on rows they never reach
(``coordinates.access_coordinates``), so their tiles translate too.
"""

from __future__ import annotations

import sympy
import torch
from spyre_helpers import run_spyre

from spyre_rules import config
from spyre_rules.facts.coordinates import access_coordinates
from spyre_rules.facts.merged_view import merged_view
from spyre_rules.facts.stick_layout import generic_stick_layout
from spyre_rules.program.op_spec import LoopSpec

KiB = 1024
d0, d1, d2 = sympy.symbols("d0 d1 d2", integer=True, nonnegative=True)


def interleave_times(a, b, y):
    s = torch.stack([a, b], dim=1).flatten(0, 1)  # [8, 128, 16]
    return s[:-1] * y[2::2]


def test_merged_view_of_a_flattened_stack():
    """The reader walks the 4 pairs and the top bit of the 256 rows as one dim of 8."""
    reader = (2048 * d0 + 16 * d1 + d2, {d0: 7, d1: 128, d2: 16})
    region = (16 * d1 + d2 + 4096 * d0, {d0: 4, d1: 128, d2: 16})
    assert merged_view([4, 256, 16], [4096, 16, 1], [reader, region]) == (
        [8, 128, 16], [2048, 16, 1])
    # no access walks across a host dim boundary: the host view serves
    assert merged_view([4, 256, 16], [4096, 16, 1], [region]) is None
    # a view flattening the stick dim is left alone
    flat = (d0, {d0: 4 * 256 * 16})
    assert merged_view([4, 256, 16], [4096, 16, 1], [flat]) is None


def test_region_coordinates_drop_the_merge_they_never_reach():
    """The second region writes rows 128..255 of [4, 256, 16] laid out as [8, 128, 16]."""
    stl = generic_stick_layout([8, 128, 16], [2048, 16, 1], torch.float32)
    assert stl.device_size == (128, 1, 8, 32)
    coords = access_coordinates(stl, [4, 256, 16], [4096, 16, 1], 0,
                                2048 + 4096 * d0 + 16 * d1 + d2, {d0: 4, d1: 128, d2: 16})
    assert coords == [d1, 0, 2 * d0 + 1, d2]


def test_interleave_tiles_at_64_kib_and_equals_eager():
    gen = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 128, 16, generator=gen), torch.randn(4, 128, 16, generator=gen)
    y = torch.randn(16, 128, 16, generator=gen)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=64 * KiB,
                      span_check="error"):
        compiled = run_spyre(interleave_times, a, b, y)
    assert torch.equal(compiled.output, interleave_times(a, b, y))
    loops = [item for k in compiled.kernels for item in k.specs if isinstance(item, LoopSpec)]
    # the two regions share a loop of 2 tiles of 64 rows; the product 4 tiles of 32 rows
    assert [(int(loop.count), [s.op for s in loop.body]) for loop in loops] == [
        (2, ["cat", "cat"]), (4, ["mul"])]
    (read, *_) = loops[1].body[0].args
    assert read.name == "buf2" and read.device_size == [128, 1, 8, 32]


def two_interleaves_times(a, b, c, y):
    s = torch.stack([a, b], dim=1).flatten(0, 1)  # [8, 128, 16]
    t = torch.stack([b, c], dim=1).flatten(0, 1)
    return (s[:-1] + t[1:]) * y[2::2]


def test_two_interleaves_each_merged_and_every_op_described_once(monkeypatch):
    """Each concatenation gets its merged view, and the pass asks each op for its reads and
    writes once, not once per concatenation (that was quadratic in the graph)."""
    from torch._inductor import ir

    from spyre_rules.backend import layouts

    calls: list[str] = []
    described = ir.ComputedBuffer.get_read_writes
    original = layouts.lay_out_merged_views

    def counting(graph, state):
        def counted(self):
            calls.append(self.get_name())
            return described(self)

        with monkeypatch.context() as patch:
            patch.setattr(ir.ComputedBuffer, "get_read_writes", counted)
            original(graph, state)

    monkeypatch.setattr(layouts, "lay_out_merged_views", counting)
    gen = torch.Generator().manual_seed(0)
    a, b, c = (torch.randn(4, 128, 16, generator=gen) for _ in range(3))
    y = torch.randn(16, 128, 16, generator=gen)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=64 * KiB,
                      span_check="error"):
        compiled = run_spyre(two_interleaves_times, a, b, c, y)
    assert torch.equal(compiled.output, two_interleaves_times(a, b, c, y))
    assert calls and len(calls) == len(set(calls))

    def args(items):
        for item in items:
            yield from args(item.body) if isinstance(item, LoopSpec) else item.args

    merged = {arg.name for k in compiled.kernels for arg in args(k.specs)
              if list(arg.device_size) == [128, 1, 8, 32]}
    assert len(merged) == 2, merged
