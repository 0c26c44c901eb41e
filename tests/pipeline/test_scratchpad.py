"""scratchpad_planning: loop-internal per-tile buffers go to LX when they fit."""

from __future__ import annotations

import torch

from pipeline_helpers import DEMO_LIMIT, assert_close, capture_auto, h, records, run_auto, span_violations


def chain3(a, b):
    t = a + b          # buf0: read only by buf1 inside the loop -> LX
    u = t * 2          # buf1: read only by buf2 inside the loop -> LX
    return u - a       # buf2: graph output -> HBM (writes the full buffer)


def residual(a):
    t = a + 1          # buf0: read inside (buf1) and after the loop (buf2): copied out
    u = t * 2
    return u, t[:, :2].sum(dim=-1)  # small: no plan of its own


def hbm_segments(ops):
    return [s.name for s in ops.state(0).memory.segments.values()]


def test_loop_internal_buffers_get_lx_offsets():
    ops = capture_auto(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1), lx_planning=True)
    allocation = {op.get_name(): op.layout.allocation for op in ops}
    # per-tile [4, 16, 1, 1, 64] fp16 = 8192 bytes each, packed from offset 0
    assert allocation["buf0"] == {"lx": 0}
    assert allocation["buf1"] == {"lx": 8192}
    assert list(allocation["buf2"]) == ["hbm"]
    assert hbm_segments(ops) == ["arg0_1", "arg1_1", "buf2"]
    plan = records(ops)
    assert plan["buf0"]["scratchpad"] == {"lx": 0, "size_bytes": 8192}
    assert plan["buf0"]["layout"]["allocation"] == {"lx": 0}
    assert "scratchpad" not in plan["buf2"]


def test_capacity_overflow_stays_in_hbm():
    ops = capture_auto(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1), lx_planning=True,
                       lx_capacity_bytes=12288)
    allocation = {op.get_name(): op.layout.allocation for op in ops}
    assert allocation["buf0"] == {"lx": 0}
    assert list(allocation["buf1"]) == ["hbm"]
    assert records(ops)["buf1"]["scratchpad"] == (
        "stays in HBM: 8192 bytes at LX offset 8192 exceed the 12288-byte capacity")
    assert hbm_segments(ops) == ["arg0_1", "arg1_1", "buf1", "buf2"]


def test_off_by_default():
    ops = capture_auto(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1))
    assert all(list(op.layout.allocation) == ["hbm"] for op in ops)


def test_buffer_read_after_its_loop_stays_in_hbm():
    ops = capture_auto(residual, h(1, 20, 16, 64), lx_planning=True)
    allocation = {op.get_name(): op.layout.allocation for op in ops}
    # buf0's tile is read inside the loop only (its full copy serves the reader after it)
    copy = next(op.get_name() for op in ops if getattr(op, "spyre_rules_kind", None) == "copy")
    assert allocation["buf0"] == {"lx": 0}
    assert list(allocation[copy]) == ["hbm"]


def test_lx_programs_match_eager():
    x, y = h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)
    run = run_auto(chain3, x, y, lx_planning=True)
    ((loop,),) = run.programs
    lx_args = sorted({(a.name, a.allocation["lx"]) for s in loop.body for a in s.args
                      if "lx" in a.allocation})
    assert lx_args == [("buf0", 0), ("buf1", 8192)]
    assert_close(run.output, chain3(x, y))
    for spec in run.op_specs():
        assert span_violations(spec, DEMO_LIMIT) == []
    run = run_auto(residual, x, lx_planning=True)
    assert_close(run.output, residual(x))
