"""Partition (fallback='eager'): an op without a Spyre lowering runs on the host as
its own step inside the compiled program; everything else stays on the program."""

from __future__ import annotations

import json
import warnings

import pytest
import torch

from spyre_helpers import run_spyre
from spyre_rules import config
from spyre_rules.backend import support
from spyre_rules.codegen.op_spec import iter_op_specs
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint

HOST = "on the host instead of the Spyre program"


@pytest.fixture
def tanh_unlowered(monkeypatch):
    """Test-only: aten.tanh is left without a Spyre lowering (the support table)."""
    monkeypatch.setitem(support.NO_SPYRE_LOWERING, torch.ops.aten.tanh, "left unlowered by the test")


def tanh_block(x):
    return torch.tanh(x + 1) * 2


def run_partitioned(fn, *inputs, dump=None, **cfg):
    """Compile with fallback='eager' and a dump dir; (compiled, host warnings, plan, wrapper)."""
    with config.patch(dump_dir=str(dump), **cfg), warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        compiled = run_spyre(fn, *inputs, fallback="eager")
    messages = [str(w.message) for w in seen if HOST in str(w.message)]
    folders = sorted(dump.iterdir())
    plans = [json.loads((f / "plan.json").read_text()) for f in folders]
    wrappers = [(f / "wrapper.py").read_text() for f in folders]
    return compiled, messages, plans, wrappers


def test_forced_host_op_runs_on_the_host_and_the_rest_on_the_program(tanh_unlowered, tmp_path):
    x = torch.randn(4, 5)
    compiled, messages, plans, wrappers = run_partitioned(tanh_block, x, dump=tmp_path)
    assert torch.equal(compiled.output, tanh_block(x))
    assert messages == [
        "spyre_rules: 1 op of this graph runs on the host instead of the Spyre program "
        "(fallback='eager'): buf1 (aten ops: tanh.default): aten.tanh has no Spyre lowering "
        "(left unlowered by the test)"
    ]
    # add and mul ran on the Spyre program, each once
    assert [spec.op for spec in compiled.op_specs()] == ["add", "mul"]
    assert [k.calls for k in compiled.kernels] == [1, 1]
    # its input was unstickified from device memory, its output stickified back
    assert compiled.kernels[0].device.host_transfers == 2
    (plan,) = plans
    assert plan["host_steps"] == {
        "buf1": {"description": "buf1 (aten ops: tanh.default)",
                 "reason": "aten.tanh has no Spyre lowering (left unlowered by the test)"},
        "buf2": {"description": "buf2 (aten ops: tanh.default)",
                 "reason": "part of host step buf1"},
    }
    assert [(r["op"], r["kind"], r["decision"]) for r in plan["ops"]] == [
        ("buf0", "pointwise", "no plan"),
        ("buf1", "host step", "host"),
        ("buf2", "host step", "host"),
        ("buf3", "pointwise", "no plan"),
    ]
    (wrapper,) = wrappers
    call = wrapper[wrapper.index("def call"):]
    lines = [line.strip() for line in call.splitlines()]
    start = lines.index("# host step buf1 (aten ops: tanh.default): aten.tanh has no Spyre "
                        "lowering (left unlowered by the test)")
    assert lines[start - 2] == "sdsc_add_0.run(arg0_1, buf0)"
    assert lines[start + 1].startswith("buf0 = rules_to_host(spyre_device, TensorPlacement(name='buf0'")
    assert "buf1 = torch.ops.aten.tanh.default(buf0)" in lines
    stick = next(i for i, line in enumerate(lines) if line.startswith("rules_to_device("))
    assert lines[stick].startswith("rules_to_device(spyre_device, TensorPlacement(name='buf2'")
    assert lines[stick].endswith(", buf2)")
    assert "sdsc_mul_1.run(buf2, buf3)" in lines[stick:]


def test_forced_host_op_is_an_error_under_fallback_error(tanh_unlowered):
    with pytest.raises(Exception, match=r"tanh \(aten.tanh\): aten.tanh has no Spyre lowering "
                                        r"\(left unlowered by the test\)"):
        run_spyre(tanh_block, torch.randn(4, 5), fallback="error")


def flip_add(x):
    return torch.flip(x, [0]) + 1


def test_refused_lowering_is_retried_on_the_host(tmp_path):
    # prims.rev lowers to loops whose coordinates we cannot derive: the seam names
    # its aten node, the backend compiles again with that node on the host.
    x = torch.randn(4, 5)
    compiled, messages, plans, _ = run_partitioned(flip_add, x, dump=tmp_path)
    assert torch.equal(compiled.output, flip_add(x))
    assert messages == [
        "spyre_rules: 1 op of this graph runs on the host instead of the Spyre program "
        "(fallback='eager'): buf0 (aten ops: prims.rev.default): cannot derive coordinates of "
        "index -5*c0 + c1 + 15: term -5*c0 has coefficient -5, not a positive integer"
    ]
    assert [spec.op for spec in compiled.op_specs()] == ["add"]
    assert sorted(plans[-1]["host_steps"]) == ["buf0", "buf1"]


def _hinted_with_host_op(x):
    with spyre_hint(slices={"H": 4}):
        a = x + 1
        b = torch.tanh(a)
        c = b * a  # named through `a` (names do not cross a host step)
    return c


def test_a_tiling_group_is_split_at_a_host_step(tanh_unlowered, tmp_path):
    declare_tensor_dim("H", 8)
    x = torch.randn(1, 8, 64)
    name_tensor_dims(x, [None, "H", None])
    compiled, messages, plans, _ = run_partitioned(_hinted_with_host_op, x, dump=tmp_path)
    assert torch.equal(compiled.output, _hinted_with_host_op(x))
    assert len(messages) == 1 and "buf1 (aten ops: tanh.default)" in messages[0]
    # two loops, one on each side of the host step: add, then mul
    loops = [(int(item.count), [s.op for s in iter_op_specs(item.body)])
             for k in compiled.kernels for item in k.specs]
    assert loops == [(4, ["add"]), (4, ["mul"])]
    records = {r["op"]: r for r in plans[-1]["ops"]}
    assert [(n, records[n]["decision"], records[n].get("split_at_host_steps"),
             records[n].get("loop", {}).get("loop_group_id")) for n in records] == [
        ("buf0", "user hint", ["buf1", "buf2"], [0]),
        ("buf1", "host", None, None),
        ("buf2", "host", None, None),
        ("buf3", "user hint", ["buf1", "buf2"], [1]),
    ]
