"""Automatic tiling end to end: torch.compile(backend="spyre_rules") vs eager.

Every program runs at the small limit of docs/layout_model.md §6.1-§6.2 (8 KiB, sencores 4), compiles without
falling back, and every OpSpec passes the independent span verifier.
"""

from __future__ import annotations

import pytest
import sympy
import torch

from spyre_rules import config
from spyre_rules.codegen.span_check import SpanOverflowWarning
from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint
from spyre_rules.program.op_spec import LoopSpec, OpSpec

from pipeline_helpers import DEMO_LIMIT, assert_close, h, run_auto, span_violations


def add(a, b):
    return a + b


def add_mul(a, b):
    return (a + b) * 2


def relu_mul(a, b):
    return torch.relu(a) * b


def sum0(a):
    return a.sum(dim=0)


def amax0(a):
    return a.amax(dim=0)


def conform(a):
    c = a + 1
    d = c[:, :, :8, :] * 2  # its own plan is {1: 4}; the run's {1: 5} also fits it
    return c, d


def fp32_add(a):
    return a * 3 + 1


def stick_dim_mul(a):
    return a * 3 - 1


def shape(spec):
    """A program's loop structure: LoopSpec counts around op names."""
    out = []
    for item in spec:
        if isinstance(item, LoopSpec):
            out.append((int(item.count), shape(item.body)))
        else:
            out.append(item.op)
    return out


# name -> (fn, inputs, program structure)
AUTO_CASES = {
    "add": (add, lambda: (h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)), [(5, ["add"])]),
    "add_mul_run": (add_mul, lambda: (h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)),
                    [(5, ["add", "mul"])]),
    "relu_mul_run": (relu_mul, lambda: (h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)),
                     [(5, ["relu", "mul"])]),
    "conform": (conform, lambda: (h(1, 20, 16, 64),), [(5, ["add", "copy", "mul"])]),
    "fp32_add": (fp32_add, lambda: (torch.randn(1, 20, 16, 32),), [(5, ["mul", "add"])]),
    "stick_dim": (stick_dim_mul, lambda: (h(40, 128),), [(2, ["mul", "sub"])]),
}


#: ((0, 10), (1, 6)): host dim 1 (16) in 6 remainder tiles of 3, run as 5 whole tiles and a
#: peeled last tile of 1 inside the loop over dim 0 (docs/layout_model.md §6.2)
REDUCTION_CASES = {
    "sum_dim0": (sum0, lambda: (h(2, 20, 16, 64),), [(10, [(5, ["sum"]), (1, ["sum"])])]),
    "amax_dim0": (amax0, lambda: (h(2, 20, 16, 64),), [(10, [(5, ["max"]), (1, ["max"])])]),
}


@pytest.mark.parametrize("name", sorted(REDUCTION_CASES))
def test_auto_tiled_reduction_matches_eager(name):
    fn, make_inputs, structure = REDUCTION_CASES[name]
    inputs = make_inputs()
    run = run_auto(fn, *inputs)
    assert [shape(p) for p in run.programs] == [structure]
    assert_close(run.output, fn(*inputs))
    ((outer,),) = run.programs
    for inner in outer.body:  # the whole tiles, then the last one
        (spec,) = inner.body
        assert spec.tiled_symbols == [[sympy.Symbol("c1")], [sympy.Symbol("c0")]]
        # every access, the input read of x included, fits: x's d0 steps over its
        # whole inner extent, so a tile may cover 2 of its 20 rows (2 x 2048 x 2 B)
        assert span_violations(spec, DEMO_LIMIT) == []


@pytest.mark.parametrize("name", sorted(AUTO_CASES))
def test_auto_tiled_program_matches_eager_and_is_span_safe(name):
    fn, make_inputs, structure = AUTO_CASES[name]
    inputs = make_inputs()
    run = run_auto(fn, *inputs)
    with torch.no_grad():
        expected = fn(*inputs)
    assert [k.calls for k in run.kernels] == [1] * len(run.kernels)
    assert [shape(p) for p in run.programs] == [structure]
    assert_close(run.output, expected)
    for spec in run.op_specs():
        assert span_violations(spec, DEMO_LIMIT) == [], spec.op


def test_seed_add_codegen_loop():
    run = run_auto(add, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1))
    ((loop,),) = run.programs
    (spec,) = loop.body
    assert loop.count == sympy.Integer(5)
    assert spec.tiled_symbols == [[sympy.Symbol("c0")]]
    assert spec.iteration_space[sympy.Symbol("c0")][0] == 4


def test_run_of_equal_signature_ops_shares_one_loop():
    run = run_auto(add_mul, h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1))
    ((loop,),) = run.programs
    assert [s.op for s in loop.body] == ["add", "mul"]
    assert all(s.tiled_symbols == [[sympy.Symbol("c0")]] for s in loop.body)
    # the intermediate stays one tile at a fixed address; the output moves with the loop
    add_out = next(a for a in loop.body[0].args if not a.is_input)
    assert add_out.per_tile_fixed and add_out.device_size == [4, 16, 1, 1, 64]


def test_seed_sum_plan_with_the_full_buffer_requirement_dropped(tmp_path, monkeypatch):
    """The reference's ((0, 10)) (docs/layout_model.md §6.2), reproduced by a policy edit that drops the
    bundled full-buffer requirement: every tile's write into the full output buffer spans
    40,960 bytes, so the engine's span-verifier veto refuses the plan whatever the policy
    says (it used to compile and run: issue 10)."""
    import shutil
    from pathlib import Path

    import spyre_rules

    rules = Path(spyre_rules.__file__).resolve().parent.parent / "rules"
    target = tmp_path / "rules"
    shutil.copytree(rules, target)
    planner = target / "planner.rules"
    text = planner.read_text()
    start = text.index("  require full_buffer_write_fits:")
    end = text.index(";\n", text.index("because", start)) + 2
    planner.write_text(text[:start] + text[end:])
    monkeypatch.setenv("SPYRE_RULES_PATH", str(target))
    x = h(2, 20, 16, 64)
    with pytest.raises(Exception, match=r"the span verifier refuses split \{0: 10\}, which the `validation` "
                                        r"section .* accepted: tile write into the full output buffer: "
                                        r"device dim 0 \(d1\) spans 40960 bytes > 8192"):
        run_auto(sum0, x)


def _hinted_and_free(x, y):
    with spyre_hint(slices={"H": 4}):
        a = x + 1
    b = y * 2
    return a, b


def test_user_hint_wins_and_both_loops_run():
    declare_tensor_dim("H", 20)
    x, y = h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)
    name_tensor_dims(x, [None, "H", None, None])
    # the user's 4 tiles leave 10240-byte spans over 8 KiB: the hint wins, the check warns
    with pytest.warns(SpanOverflowWarning) as warned:
        run = run_auto(_hinted_and_free, x, y)
    assert [str(w.message).split(": ", 2)[2].split(";")[0] for w in warned
            if w.category is SpanOverflowWarning] == [
        "read of tensor arg0_1, device dim 0 spans 10240 bytes, over the limit of 8192 bytes "
        "(max_span_bytes)",
        "write of tensor buf0, device dim 0 spans 10240 bytes, over the limit of 8192 bytes "
        "(max_span_bytes)"]
    assert [shape(p) for p in run.programs] == [[(4, ["add"])], [(5, ["mul"])]]
    assert_close(run.output, (x + 1, y * 2))


def lm_head(x, w):
    return torch.nn.functional.linear(x, w)


def test_lm_head_restickify_and_bmm_share_one_loop():
    """Seed example 5 at 8 KiB: one loop of 16; the BMM reads the per-tile buffer the
    restickify writes in the same iteration (per_tile_fixed)."""
    x, w = h(2, 64), h(1024, 64, seed=1)
    run = run_auto(lm_head, x, w)
    assert [shape(p) for p in run.programs] == [[(16, ["ReStickifyOpHBM", "batchmatmul"])]]
    restick, bmm = run.op_specs()
    weight = next(a for a in bmm.args if a.name == "buf1")
    assert weight.per_tile_fixed and weight.device_size == [1, 64, 64]
    assert [a.device_size for a in restick.args if a.name == "buf1"] == [[1, 64, 64]]
    assert [span_violations(s, DEMO_LIMIT) for s in run.op_specs()] == [[], []]
    assert_close(run.output, lm_head(x, w))


def test_lm_head_whose_restickify_splits_k_shares_its_loop_with_a_k_level():
    """W[1024, 128] at 16 KiB: the restickify also splits k (its read of W is stick-on-k);
    the BMM reads that k by its reduction symbol, so it shares the loop as a reduction
    level inside the n level, accumulating its k tiles."""
    x, w = h(2, 128), h(1024, 128, seed=1)
    run = run_auto(lm_head, x, w, max_span_bytes=16384)
    assert [shape(p) for p in run.programs] == [
        [(16, ["acc_init", (2, ["ReStickifyOpHBM", "batchmatmul"]), "acc_finalize"])]]
    violations = [span_violations(s, 16384) for s in run.op_specs()]
    assert len(violations) == 4 and not any(violations)
    assert_close(run.output, lm_head(x, w))


def residual_layer_norm(x, r, w, b):
    y = x + r
    return torch.nn.functional.layer_norm(y, (32,), w, b), y


def residual_rms_norm(x, r, w):
    y = x + r
    return torch.nn.functional.rms_norm(y, (32,), w), y


NORM_LOOPS = {
    # the weight and bias casts read nothing of the loop: hoisted, they run once before it
    residual_layer_norm: [["mul"], ["add"],
                          [(4, ["add", "copy", "convert_element_type", "sum", "getitem", "sum",
                                "getitem", "sub", "add", "rsqrt", "mul", "mul", "add",
                                "convert_element_type"])]],
    residual_rms_norm: [["mul"],
                        [(4, ["add", "copy", "convert_element_type", "pow", "sum", "mean", "add",
                              "rsqrt", "mul", "mul", "convert_element_type"])]],
}


@pytest.mark.parametrize("norm", list(NORM_LOOPS), ids=lambda f: f.__name__)
def test_norm_reading_an_auto_tiled_residual_add_shares_its_loop(norm):
    """x + r on (128, 32) fp16 at 4 KiB needs 4 tiles; the norm's reductions read the
    add's tile in the same iteration (its weight casts run before the loop), and its
    output equals eager (and the untiled program, bit for bit)."""
    args = [h(128, 32), h(128, 32, seed=1), h(32, seed=2), h(32, seed=3)][:4 if norm is
                                                                        residual_layer_norm else 3]
    run = run_auto(norm, *args, max_span_bytes=4096)
    assert [shape(p) for p in run.programs] == NORM_LOOPS[norm]
    assert [v for s in run.op_specs() for v in span_violations(s, 4096)] == []
    assert_close(run.output, norm(*args))
    untiled = run_auto(norm, *args, max_span_bytes=4096, ignore_span_overflow_hints=True,
                       span_check="off")
    assert all(torch.equal(a, b) for a, b in zip(run.output, untiled.output))


def prime_row_sum(x):
    # (16411, 128) fp32 at 8 KiB: the read over the 16411 reduced rows overflows and
    # 16411 (prime) has no even split under the automatic cap; an index reduction takes
    # no remainder tiles (a sum would: planner.rules `otherwise splits`), so the planner
    # refuses the graph
    return x.argmax(dim=0)


REFUSAL = ("Cannot auto-tile buf0 (aten ops: argmax.default): no legal split brings its read under the "
           "limit of 8192 bytes (reduction-controlled input span for arg0_1: device dim 1 (d1) spans "
           "2100608 bytes); host dim 1: split 16411 fails auto_split_cap (automatic split counts are "
           "capped at 16384)")


def test_refused_graph_is_a_compile_error_under_fallback_error():
    with pytest.raises(Exception) as info:
        run_auto(prime_row_sum, torch.randn(16411, 128))
    assert f"spyre_rules cannot compile this graph: {REFUSAL}" in str(info.value)


def test_refused_graph_warns_and_runs_eagerly_under_fallback_eager():
    x = torch.randn(16411, 128)
    with pytest.warns(UserWarning) as warned:
        run = run_auto(prime_row_sum, x, fallback="eager")
    messages = [str(w.message) for w in warned if "spyre_rules" in str(w.message)]
    assert messages == [
        f"spyre_rules: running this graph eagerly instead of on the Spyre program: {REFUSAL}"]
    assert run.kernels == []
    assert torch.equal(run.output, prime_row_sum(x))


def test_default_config_compiles_without_loops():
    torch._dynamo.reset()
    x, y = h(1, 20, 16, 64), h(1, 20, 16, 64, seed=1)
    # untiled at the 8 KiB limit: the span check warns for both reads and the write
    with config.patch(max_span_bytes=DEMO_LIMIT), \
            pytest.warns(SpanOverflowWarning, match="spans 40960 bytes") as warned:
        run = run_auto(add, x, y, ignore_span_overflow_hints=True)
    assert sum(w.category is SpanOverflowWarning for w in warned) == 3
    assert [shape(p) for p in run.programs] == [["add"]]
    assert isinstance(run.programs[0][0], OpSpec)


def test_refused_graph_still_writes_plan_json(tmp_path):
    import json

    with pytest.warns(UserWarning, match="Cannot auto-tile buf0"):
        run_auto(prime_row_sum, torch.randn(16411, 128), fallback="eager", dump_dir=str(tmp_path))
    plan = json.loads((tmp_path / "graph_0" / "plan.json").read_text())
    ops = {r["op"]: r for r in plan["ops"]}
    assert list(ops) == ["buf0"]
    assert (ops["buf0"]["decision"], ops["buf0"]["levels"], ops["buf0"]["graph_error"],
            ops["buf0"]["reason"]) == ("unsupported", [], REFUSAL, REFUSAL)
    assert sorted(p.name for p in (tmp_path / "graph_0").iterdir()) == ["plan.json", "wrapper.py"]


def _independent_between(x, w):
    y = x + 1           # opens the run
    z = torch.exp(w) * 2  # reads nothing of it, with its split: joins its loop
    return y, y * z, z + 3


def test_ops_independent_of_the_open_run_with_its_split_share_its_loop():
    """exp(w) * 2 sits between x + 1 and y * z in graph order, reads nothing of the run and
    has its split (8 row tiles): it joins the run's loop (grouping rule
    independent_same_split), and so do y * z and z + 3: one loop of 8 (hoisted, it ran three
    loops of 8).  Each result equals eager."""
    x, w = h(256, 64), h(256, 64, seed=1)
    run = run_auto(_independent_between, x, w, max_span_bytes=4096, span_check="error")
    assert [shape(p) for p in run.programs] == [[(8, ["add", "copy", "exp", "mul", "mul", "add"])]]
    for got, want in zip(run.output, _independent_between(x, w)):
        assert torch.equal(got, want)


def _independent_other_split(x, w):
    y = x + 1           # opens the run: 8 row tiles
    z = torch.exp(w) * 2  # reads nothing of it, twice the rows: 16 tiles, hoisted
    return y, z + 3


def test_ops_independent_of_the_open_run_are_hoisted_before_its_loop():
    """exp(w) * 2 on twice the rows reads nothing of x + 1's run but needs another split: it
    runs before the loop in a loop of its own (with z + 3, which reads only it).  Each result
    equals eager."""
    x, w = h(256, 64), h(512, 64, seed=1)
    run = run_auto(_independent_other_split, x, w, max_span_bytes=4096, span_check="error")
    assert [shape(p) for p in run.programs] == [[(16, ["exp", "mul", "add"])], [(8, ["add"])]]
    for got, want in zip(run.output, _independent_other_split(x, w)):
        assert torch.equal(got, want)
