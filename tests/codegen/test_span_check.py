"""The span check of every compiled program (codegen/span_check.py, config.span_check)."""

from __future__ import annotations

import json
import logging
import sys
import warnings
from pathlib import Path

import pytest
import sympy
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "backend"))

from spyre_helpers import run_spyre  # noqa: E402

from spyre_rules import config  # noqa: E402
from spyre_rules.errors import Unsupported  # noqa: E402
from spyre_rules.ir.errors import find_cause  # noqa: E402
from spyre_rules.program.op_spec import DataFormats, LoopSpec, OpSpec, TensorArg  # noqa: E402
from spyre_rules.codegen.span_check import (  # noqa: E402
    IndirectReadSpanWarning,
    SpanCheckError,
    SpanOverflowWarning,
    check_kernel,
    enforce,
)
from spyre_rules.executor import runtime  # noqa: E402

SHAPE = (1, 20, 16, 64)


def _add(a, b):
    return a + b


def _xy():
    gen = torch.Generator().manual_seed(0)
    return [torch.randn(*SHAPE, generator=gen).half() for _ in range(2)]


def _expected(tensor):
    return (
        "spyre_rules span check: graph 0/0, kernel sdsc_add_0, op buf0 (add): "
        f"{'write' if tensor == 'buf0' else 'read'} of tensor {tensor}, device dim 0 spans "
        "40960 bytes, over the limit of 8192 bytes (max_span_bytes); planner decision: "
        "no plan: automatic span-overflow tiling is off (config.ignore_span_overflow_hints)"
    )


def _plan(dump: Path) -> dict:
    (folder,) = list(dump.iterdir())
    return json.loads((folder / "plan.json").read_text())


def test_warn_is_the_default_and_names_everything(tmp_path, caplog):
    x, y = _xy()
    assert config.span_check == "warn"
    with config.patch(max_span_bytes=8192, dump_dir=str(tmp_path)), \
            warnings.catch_warnings(record=True) as caught, \
            caplog.at_level(logging.CRITICAL, logger="spyre_rules.span_check"):
        warnings.simplefilter("always")
        compiled = run_spyre(_add, x, y)
    assert torch.equal(compiled.output, x + y)  # a warning, the program still runs
    expected = [_expected(t) for t in ("arg0_1", "arg1_1", "buf0")]
    assert [str(w.message) for w in caught if w.category is SpanOverflowWarning] == expected
    records = [r for r in caplog.records if r.name == "spyre_rules.span_check"]
    assert [(r.levelno, r.getMessage()) for r in records] == [(logging.CRITICAL, m) for m in expected]
    assert records[2].span_check == {
        "graph": "0/0", "kernel": "sdsc_add_0", "op": "buf0", "tensor": "buf0", "access": "write",
        "device_dim": 0,
        "span_bytes": 40960, "limit_bytes": 8192,
        "planner_decision": "no plan: automatic span-overflow tiling is off "
                            "(config.ignore_span_overflow_hints)"}
    (record,) = _plan(tmp_path)["ops"]
    assert record["span_check"] == {
        "kernel": "sdsc_add_0", "status": "overflow", "max_span_bytes": 40960,
        "limit_bytes": 8192,
        "overflows": [
            {"tensor": t, "access": a, "device_dim": 0, "span_bytes": 40960, "exact": True,
             "symbols": ["c0"]}
            for t, a in (("arg0_1", "read"), ("arg1_1", "read"), ("buf0", "write"))
        ],
    }


def test_error_raises_before_anything_runs(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(runtime, "run_items", lambda *a, **k: calls.append(a))
    before = max((k.serial for k in runtime.recent_kernels()), default=-1)
    x, y = _xy()
    with config.patch(max_span_bytes=8192, span_check="error", dump_dir=str(tmp_path)), \
            pytest.raises(Exception) as info:
        run_spyre(_add, x, y)
    error = find_cause(info.value, SpanCheckError)
    assert error is not None, info.value
    assert str(error) == "\n".join(_expected(t) for t in ("arg0_1", "arg1_1", "buf0"))
    assert calls == []  # the executor never ran
    assert [k for k in runtime.recent_kernels() if k.serial > before] == []
    (record,) = _plan(tmp_path)["ops"]  # the dump is written first, showing why
    assert record["span_check"]["status"] == "overflow"


def test_off_checks_nothing(tmp_path):
    x, y = _xy()
    with config.patch(max_span_bytes=8192, span_check="off", dump_dir=str(tmp_path)), \
            warnings.catch_warnings():
        warnings.simplefilter("error", SpanOverflowWarning)
        compiled = run_spyre(_add, x, y)
    assert torch.equal(compiled.output, x + y)
    (record,) = _plan(tmp_path)["ops"]
    assert record["span_check"] == {"status": "off"}


def test_setting_from_environment(monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_SPAN_CHECK", "ERROR")
    assert config.span_check == "error"
    monkeypatch.setenv("SPYRE_RULES_SPAN_CHECK", "loud")
    with pytest.raises(config.ConfigError, match="SPYRE_RULES_SPAN_CHECK='loud'"):
        config.span_check  # noqa: B018


def test_automatic_tiling_makes_it_fit(tmp_path):
    x, y = _xy()
    with config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False,
                      dump_dir=str(tmp_path)), warnings.catch_warnings():
        warnings.simplefilter("error", SpanOverflowWarning)
        compiled = run_spyre(_add, x, y)
    assert torch.equal(compiled.output, x + y)
    (record,) = _plan(tmp_path)["ops"]
    assert record["span_check"]["status"] == "fits"
    assert record["span_check"]["max_span_bytes"] <= 8192


def test_reduction_controlled_span_is_tiled_automatically():
    """x.sum(0): only the reduced axis drives the read's span; a reduction level fixes it."""
    x = torch.randn(256, 64).half()
    with config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False), \
            warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = run_spyre(lambda a: a.sum(0), x)
    torch.testing.assert_close(compiled.output, x.sum(0), atol=0.5, rtol=1e-2)
    assert [w for w in caught if w.category is SpanOverflowWarning] == []
    assert [s.op for s in compiled.op_specs()] == ["acc_init", "sum", "acc_finalize"]


def test_reduction_controlled_span_says_so():
    """A float product's partials do not combine: no reduction level.  Untiled, the span
    check says why; under automatic tiling the planner refuses the op naming that read
    (it used to say that no span exceeds the limit)."""
    x = 1 + 0.01 * torch.randn(256, 32)
    with config.patch(max_span_bytes=8192), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = run_spyre(lambda a: a.prod(0), x)
    torch.testing.assert_close(compiled.output, x.prod(0), rtol=1e-4, atol=1e-5)
    assert [str(w.message) for w in caught if w.category is SpanOverflowWarning] == [
        "spyre_rules span check: graph 0/0, kernel sdsc_prod_0, op buf0 (prod): read of tensor "
        "arg0_1, device dim 1 spans 32768 bytes, over the limit of 8192 bytes (max_span_bytes); "
        "planner decision: no plan: automatic span-overflow tiling is off "
        "(config.ignore_span_overflow_hints); reduction-controlled span: "
        "needs reduction-range tiling"
    ]
    with config.patch(max_span_bytes=8192, ignore_span_overflow_hints=False, fallback="error"), \
            pytest.raises(Exception) as info:
        run_spyre(lambda a: a.prod(0), x)
    assert str(find_cause(info.value, Unsupported)) == (
        "Cannot auto-tile buf0 (aten ops: prod.dim_int): no legal split of host dims [1] brings its "
        "access under the limit of 8192 bytes (reduction-controlled input span for arg0_1: device "
        "dim 1 (d1) spans 32768 bytes); host dim 1: splits 2, 4, 8, 16, 32, 64, 128, 256 fail "
        "reduction_combines (the partial results of buf0 over host dim 1 do not combine across "
        "tiles (prod))")


def _embedding_at(limit, tmp_path, **cfg):
    """F.embedding(ids (2, 16), w (50, 64) fp32) at ``limit`` under span_check='error'.

    Gathered read of w: device [2, 50, 32]; dim 0 (the two sticks of a row)
    spans 2 x 50 x 128 = 12800 bytes, dim 1 (ind0 over all 50 rows) 6400; the
    write (device [16, 2, 2, 32]) spans 8192 bytes on dim 0."""
    gen = torch.Generator().manual_seed(0)
    ids, w = torch.randint(0, 50, (2, 16), generator=gen), torch.randn(50, 64, generator=gen)
    with config.patch(max_span_bytes=limit, span_check="error", dump_dir=str(tmp_path), **cfg):
        return ids, w, run_spyre(torch.nn.functional.embedding, ids, w)


def _gathered_read_message(dim, span, limit, decision, deferred=False):
    return (
        "spyre_rules span check: graph 0/0, kernel sdsc_embedding_0, op buf0 (embedding): "
        f"indirect read of tensor arg1_1 (gathered through ind0), device dim {dim} spans {span} "
        f"bytes, over the limit of {limit} bytes (max_span_bytes); planner decision: {decision}"
        + ("; deferred to the indirect-access path (span_check does not enforce indirect reads)"
           if deferred else "")
    )


def test_an_overflowing_gathered_read_is_tiled_along_the_hidden_dim(tmp_path):
    """The table's stick-count dim (12800 B) overflows 8192: the planner splits the
    output's hidden dim 2 ways (one stick per tile); the gathered row coordinate
    (ind0 over all 50 rows, 6400 B) fits, and the span check enforces both (the
    write, 8192 B on its dim 0, is the largest span)."""
    ids, w, compiled = _embedding_at(8192, tmp_path, ignore_span_overflow_hints=False)
    assert torch.equal(compiled.output, torch.nn.functional.embedding(ids, w))
    (loop,) = compiled.kernels[0].specs
    assert isinstance(loop, LoopSpec) and loop.count == 2
    (record,) = _plan(tmp_path)["ops"]
    assert (record["decision"], record["levels"]) == ("plan", [[2, 2]])
    assert record["span_check"] == {
        "kernel": "sdsc_embedding_0", "status": "fits", "max_span_bytes": 8192,
        "limit_bytes": 8192, "overflows": []}


def test_a_gathered_read_is_enforced_like_any_access(tmp_path):
    """Tiling off: the gathered read's overflows raise with the write's (not deferred)."""
    with warnings.catch_warnings(record=True) as caught, pytest.raises(Exception) as info:
        warnings.simplefilter("always")
        _embedding_at(4096, tmp_path)
    error = find_cause(info.value, SpanCheckError)
    assert error is not None, info.value
    off = "no plan: automatic span-overflow tiling is off (config.ignore_span_overflow_hints)"
    assert str(error).split("\n") == [
        _gathered_read_message(0, 12800, 4096, off),
        _gathered_read_message(1, 6400, 4096, off),
        "spyre_rules span check: graph 0/0, kernel sdsc_embedding_0, op buf0 (embedding): write "
        "of tensor buf0, device dim 0 spans 8192 bytes, over the limit of 4096 bytes "
        f"(max_span_bytes); planner decision: {off}",
    ]
    assert [w for w in caught if w.category is IndirectReadSpanWarning] == []
    (record,) = _plan(tmp_path)["ops"]
    assert record["span_check"]["status"] == "overflow"
    assert "deferred" not in record["span_check"]


def test_a_gathered_read_left_to_the_indirect_path_is_deferred(caplog):
    """Only an op the planner left to the indirect-access path (a gathered read it
    cannot measure: eligibility.indirect_reads) has its gathered read deferred."""
    import types

    ids, w = torch.randint(0, 50, (2, 16)), torch.randn(50, 64)
    specs = run_spyre(torch.nn.functional.embedding, ids, w).kernels[0].specs
    reason = "buf0 reads through an indirect index whose indexed extent cannot be shown; ..."
    record = types.SimpleNamespace(decision=types.SimpleNamespace(
        decision="no plan", reason=reason, rule="eligibility.indirect_reads"))
    plan = {"buf0": record}
    checks = check_kernel("sdsc_embedding_0", specs, 8192, plan)
    expected = _gathered_read_message(0, 12800, 8192, f"no plan: {reason}", deferred=True)
    with warnings.catch_warnings(record=True) as caught, \
            caplog.at_level(logging.WARNING, logger="spyre_rules.span_check"):
        warnings.simplefilter("always")
        assert enforce("0/0", checks, plan, "error") == [expected]
    assert [(w.category, str(w.message)) for w in caught] == [(IndirectReadSpanWarning, expected)]
    (check,) = checks
    assert check.overflows == [] and [d.device_dim for d in check.deferred] == [0]
    assert check.as_dict()["status"] == "indirect read deferred"


# --------------------------------------------------------------------------- unit level

c0, c1 = sympy.symbols("c0 c1", integer=True, nonnegative=True)
FP16 = DataFormats.SEN169_FP16


def _op(coords, device_size, ranges, *, tiled=(), per_tile_fixed=False):
    out = TensorArg(False, 0, FP16, device_size, coords, {"hbm": 0},
                    per_tile_fixed=per_tile_fixed, name="buf0")
    return OpSpec(op="add", is_reduction=False,
                  iteration_space={s: (sympy.Integer(r), 1) for s, r in ranges.items()},
                  args=[out], op_info={"store": {"arg": 0}, "reduction_symbols": []},
                  tiled_symbols=[list(t) for t in tiled])


def _dims(items):
    return [(c.op, d.tensor, d.device_dim, d.span_bytes, d.exact)
            for c in check_kernel("k", items, 8192) for d in c.dims]


def test_a_coordinate_with_one_value_is_not_a_span():
    # c1 < 32 inside a 64-wide stick group: floor(c1/64) is always 0.
    spec = _op([sympy.floor(c1 / 64), c0, sympy.Mod(c1, 64)], [4, 128, 64], {c0: 128, c1: 32})
    assert _dims([spec]) == [("buf0", "buf0", 1, 128 * 64 * 2, True)]


def test_shifted_iterations_are_bounded_one_by_one():
    # Tiles of 32 along c0 of floor(c0/48): tile 1 (c0 in [32, 64)) straddles 48.
    spec = _op([sympy.floor(c0 / 48), c1], [4, 64], {c0: 32, c1: 64}, tiled=[[c0]])
    assert _dims([LoopSpec(sympy.Integer(4), [spec])]) == [("buf0", "buf0", 0, 2 * 64 * 2, True)]
    # the same op outside a loop: one value (0) over c0 in [0, 32)
    assert _dims([spec]) == []


def test_a_per_tile_buffer_does_not_move():
    spec = _op([sympy.floor(c0 / 48), c1], [4, 64], {c0: 32, c1: 64}, tiled=[[c0]],
               per_tile_fixed=True)
    assert _dims([LoopSpec(sympy.Integer(4), [spec])]) == []


def test_an_unbounded_coordinate_is_bounded_by_its_dim_size():
    spec = _op([sympy.Mod(3 * c0, 5), c1], [5, 64], {c0: 8, c1: 64})
    assert _dims([spec]) == [("buf0", "buf0", 0, 5 * 64 * 2, False)]


def test_too_many_iterations_bound_the_union_of_their_domains():
    # 300 iterations > MAX_ENUMERATED_ITERATIONS: floor(c0/48) over c0 in [0, 300*32)
    spec = _op([sympy.floor(c0 / 48), c1], [200, 64], {c0: 32, c1: 64}, tiled=[[c0]])
    assert _dims([LoopSpec(sympy.Integer(300), [spec])]) == [
        ("buf0", "buf0", 0, 200 * 64 * 2, False)]
