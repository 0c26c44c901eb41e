"""scratchpad_planning: loop-internal per-tile buffers go to LX when they fit."""

from __future__ import annotations

import json

from pipeline_helpers import DEMO_LIMIT, assert_close, h, run_auto, span_violations


def chain3(a, b):
    t = a + b          # buf0: read only by buf1 inside the loop -> LX
    u = t * 2          # buf1: read only by buf2 inside the loop -> LX
    return u - a       # buf2: graph output -> HBM (writes the full buffer)


def residual(a):
    t = a + 1          # buf0: read inside (buf1) and after the loop (buf2): copied out
    u = t * 2
    return u, t[:, :2].sum(dim=-1)  # small: no plan of its own


def compiled_plan(fn, *inputs, tmp_path, **cfg):
    """Compile and run ``fn`` with the dump dir on: plan.json's op records and HBM segments."""
    run_auto(fn, *inputs, dump_dir=str(tmp_path), **cfg)
    plan = json.loads((tmp_path / "graph_0" / "plan.json").read_text())
    ops = {r["op"]: r for r in plan["ops"]}
    return ops, [s["name"] for s in plan["memory_map"]["segments"]]


def allocations(ops):
    return {name: r["layout"]["allocation"] for name, r in ops.items()}


def test_loop_internal_buffers_get_lx_offsets(tmp_path):
    ops, hbm = compiled_plan(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1),
                             tmp_path=tmp_path, lx_planning=True)
    # per-tile [4, 16, 1, 1, 64] fp16 = 8192 bytes each, packed from offset 0
    assert allocations(ops) == {"buf0": {"lx": 0}, "buf1": {"lx": 8192}, "buf2": {"hbm": 81920}}
    assert hbm == ["arg0_1", "arg1_1", "buf2"]
    assert ops["buf0"]["scratchpad"] == {"lx": 0, "size_bytes": 8192}
    assert "scratchpad" not in ops["buf2"]


def test_capacity_overflow_stays_in_hbm(tmp_path):
    ops, hbm = compiled_plan(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1),
                             tmp_path=tmp_path, lx_planning=True, lx_capacity_bytes=12288)
    assert allocations(ops) == {"buf0": {"lx": 0}, "buf1": {"hbm": 81920},
                                "buf2": {"hbm": 90112}}
    assert ops["buf1"]["scratchpad"] == (
        "stays in HBM: 8192 bytes at LX offset 8192 exceed the 12288-byte capacity")
    assert hbm == ["arg0_1", "arg1_1", "buf1", "buf2"]


def test_off_by_default(tmp_path):
    ops, hbm = compiled_plan(chain3, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1),
                             tmp_path=tmp_path)
    assert all(list(a) == ["hbm"] for a in allocations(ops).values())
    assert hbm == ["arg0_1", "arg1_1", "buf0", "buf1", "buf2"]


def test_buffer_read_after_its_loop_stays_in_hbm(tmp_path):
    ops, _ = compiled_plan(residual, h(1, 20, 16, 64), tmp_path=tmp_path, lx_planning=True)
    # buf0's tile is read inside the loop only (its full copy serves the reader after it)
    (copy,) = [name for name, r in ops.items() if r["kind"] == "copy"]
    assert allocations(ops)["buf0"] == {"lx": 0}
    assert list(allocations(ops)[copy]) == ["hbm"]


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
