"""Graphs with symbolic sizes: one static Spyre program per concrete shape
(backend/specialize.py), for plain functions under ``mark_dynamic``,
``dynamic=True`` and Dynamo's automatic dynamic; symbolic scalar inputs; the
specialisation limit under both ``fallback`` settings; automatic tiling with a
different plan per shape; a ``spyre_hint`` whose split does not divide a new size.

Each call is checked against eager and shown to run the generated kernels; the
dump folders (one per compiled program, ``sizes.json`` naming its sizes) count
the programs."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pytest
import torch

from spyre_helpers import config, recent_kernels
from spyre_rules.hints import HintError, clear_tensor_dims, declare_tensor_dim, spyre_hint
from spyre_rules.ir.errors import BackendCompileError


class Calls:
    """A compiled ``fn`` called repeatedly; per call what compiled and what ran."""

    def __init__(self, fn, dump: Path, **compile_kwargs) -> None:
        torch._dynamo.reset()
        self.fn = fn
        self.compiled = torch.compile(fn, backend="spyre_rules", **compile_kwargs)
        self.dump = dump
        self.kernels: list = []  # strong references: recent_kernels keeps only the latest

    def __call__(self, *args):
        before = max((k.serial for k in recent_kernels()), default=-1)
        runs = sum(k.calls for k in self.kernels)
        with torch.no_grad():
            out = self.compiled(*args)
            expected = self.fn(*args)
        new = [k for k in recent_kernels() if k.serial > before]
        self.kernels.extend(new)
        ran = sum(k.calls for k in self.kernels) - runs
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        return len(new), ran

    def sizes(self) -> list:
        """Per dump folder in order: the sizes its program was specialised to (values)."""
        folders = sorted(self.dump.iterdir(), key=lambda p: int(p.name.split("_")[1]))
        found = []
        for folder in folders:
            path = folder / "sizes.json"
            found.append(list(json.loads(path.read_text())["sizes"].values())
                         if path.exists() else None)
        return found

    def plans(self) -> list:
        folders = sorted(self.dump.iterdir(), key=lambda p: int(p.name.split("_")[1]))
        return [json.loads((f / "plan.json").read_text()) for f in folders]


@pytest.fixture
def strict(tmp_path):
    with config.patch(fallback="error", span_check="error", dump_dir=str(tmp_path)), \
            warnings.catch_warnings():
        warnings.filterwarnings("error", message="spyre_rules")
        yield tmp_path


def _attention_like(x, w):
    return torch.softmax(x @ w, dim=-1) * 2


def test_mark_dynamic_compiles_one_program_per_shape_and_reuses_it(strict):
    w = torch.randn(32, 16)
    calls = Calls(_attention_like, strict)
    results = []
    for s in (8, 16, 24, 8, 16):
        x = torch.randn(2, s, 32)
        torch._dynamo.mark_dynamic(x, 1)
        results.append(calls(x, w))
    compiled = [n for n, _ in results]
    assert all(n > 0 for n in compiled[:3]) and compiled[3:] == [0, 0]
    # every call ran the program: a repeat runs exactly the kernels of its shape's program
    assert [ran for _, ran in results] == compiled[:3] + compiled[:2]
    assert calls.sizes() == [[8], [16], [24]]


def test_automatic_dynamic_reuses_the_first_static_program(strict):
    calls = Calls(lambda x: (x * 3).sum(-1), strict)
    compiled = [calls(torch.randn(4, s))[0] for s in (8, 16, 24, 8, 24)]
    # 8 compiles static; 16 recompiles dynamically; the dynamic graph at 8 is the
    # static graph again, so its program is reused: three shapes, three programs
    assert [n > 0 for n in compiled] == [True, True, True, False, False]
    assert calls.sizes() == [None, [16], [24]]


SCALE = 2.0


def _global_scale(x):
    return x * SCALE


def test_a_static_program_is_reused_only_for_the_same_computation(strict):
    global SCALE
    calls = Calls(_global_scale, strict)
    try:
        assert calls(torch.randn(8))[0] > 0  # static program: x * 2
        SCALE = 3.0
        # Dynamo recompiles dynamically (x * 3); at length 8 the frame's static
        # program computes x * 2: a different graph, so 8 compiles again
        assert calls(torch.randn(16))[0] > 0
        assert calls(torch.randn(8))[0] > 0
    finally:
        SCALE = 2.0
    assert calls.sizes() == [None, [16], [8]]


def test_reset_forgets_the_static_programs(strict):
    calls = Calls(_global_scale, strict)
    calls(torch.randn(8))
    torch._dynamo.reset()  # as if a new process: nothing compiled before is reused
    calls(torch.randn(16))  # static again
    assert calls(torch.randn(8))[0] > 0  # dynamic recompile: 8 compiles anew
    assert calls.sizes() == [None, None, [8]]


def _scaled(x, n):
    return x * n + torch.arange(x.shape[0], dtype=x.dtype)[:, None]


def test_symbolic_scalar_inputs_are_bound_to_the_call(strict):
    calls = Calls(_scaled, strict, dynamic=True)
    for s, n in ((8, 3), (12, 5), (8, 3)):
        calls(torch.randn(s, 64), n)
    # dynamic=True: both dims and the int n are symbols (n a SymInt graph input)
    assert [sorted(v) for v in calls.sizes()] == [[3, 8, 64], [5, 12, 64]]


@pytest.mark.parametrize("fallback", ["eager", "error"])
def test_the_specialisation_limit_follows_fallback(tmp_path, fallback):
    calls = Calls(lambda x: x.exp() + 1, tmp_path, dynamic=True)
    with config.patch(fallback=fallback, dump_dir=str(tmp_path), max_specializations=2):
        calls(torch.randn(8 * 64))
        calls(torch.randn(16 * 64))
        expected = (r"graph 0/0 for sizes s\d+=1536 \(L\['x'\]\.size\(\)\[0\]\): graph 0/0 already "
                    r"has 2 specialised Spyre programs \(config\.max_specializations = 2, "
                    r"SPYRE_RULES_MAX_SPECIALIZATIONS; compiled for: s\d+=512 \(L\['x'\]\.size\(\)"
                    r"\[0\]\); s\d+=1024 \(L\['x'\]\.size\(\)\[0\]\)\)")
        if fallback == "error":
            with pytest.raises(BackendCompileError, match="spyre_rules cannot compile " + expected):
                calls(torch.randn(24 * 64))
        else:
            warned = (r"running this call of graph 0/0 eagerly instead of on the Spyre program: "
                      r"sizes s\d+=1536 \(L\['x'\]\.size\(\)\[0\]\) are new and graph 0/0 "
                      r"already has 2")
            with pytest.warns(UserWarning, match=warned) as seen:
                assert calls(torch.randn(24 * 64)) == (0, 0)  # eager: nothing compiled, nothing ran
            assert len([w for w in seen if "eagerly" in str(w.message)]) == 1
        # the shapes within the limit keep their programs
        assert calls(torch.randn(8 * 64))[1] > 0
    assert calls.sizes() == [[512], [1024]]


def test_automatic_tiling_plans_each_shape_on_its_own(strict):
    calls = Calls(lambda x, y: (x + y) * 2, strict, dynamic=True)
    with config.patch(ignore_span_overflow_hints=False, max_span_bytes=8192):
        for s in (4, 8, 20, 40, 8):
            x = torch.randn(1, s, 16, 64, dtype=torch.float16)
            calls(x, torch.randn_like(x))
    plans = calls.plans()
    assert [p["sizes"]["sizes"][next(iter(p["sizes"]["sizes"]))] for p in plans] == [4, 8, 20, 40]
    # (1, s, 16, 64) fp16 spans s * 2 KiB: untiled at 4, then 2, 5 and 10 tiles of the
    # sequence dim to fit 8 KiB; span_check='error' checked every program
    levels = [[op["levels"] for op in p["ops"]] for p in plans]
    assert levels == [[[], []], [[[1, 2]], [[1, 2]]], [[[1, 5]], [[1, 5]]], [[[1, 10]], [[1, 10]]]]
    assert {op["span_check"]["status"] for p in plans for op in p["ops"]} == {"fits"}


def _hinted(x):
    with spyre_hint(slices={"S": 2}, named_dims=["S", None]):
        return (x * 2).exp()


def test_a_hint_that_does_not_divide_a_new_size_is_an_error(strict):
    clear_tensor_dims()
    declare_tensor_dim("S", 8)
    try:
        calls = Calls(_hinted, strict)
        for s in (8, 12):
            x = torch.randn(s, 64)
            torch._dynamo.mark_dynamic(x, 0)
            calls(x)
        # x * 2 and exp: 2 tiles of S at 8 and at 12
        levels = [[op["levels"] for op in p["ops"]] for p in calls.plans()]
        assert levels == [[[[0, 2]], [[0, 2]]]] * 2
        x = torch.randn(9, 64)
        torch._dynamo.mark_dynamic(x, 0)
        with pytest.raises(HintError) as raised:
            calls(x)
    finally:
        clear_tensor_dims()
    assert re.fullmatch(
        r"graph 0/0 specialised to sizes s\d+=9 \(L\['x'\]\.size\(\)\[0\]\): spyre_hint\(slices="
        r"\{'S': 2\}\): count 2 does not divide dim 'S' \(dim 0 of size 9\) of buf0 .*",
        str(raised.value))


def test_compile_options_apply_to_every_shape(tmp_path):
    calls = Calls(lambda x: x.exp() + 1, tmp_path, dynamic=True,
                  options={"max_specializations": 1, "fallback": "error",
                           "dump_dir": str(tmp_path)})
    calls(torch.randn(8 * 64))
    with pytest.raises(BackendCompileError, match=r"config\.max_specializations = 1"):
        calls(torch.randn(16 * 64))
    assert calls.sizes() == [[512]]


def test_a_span_overflow_of_one_shape_names_the_graph(tmp_path):
    from spyre_rules.codegen.span_check import SpanCheckError

    calls = Calls(lambda x, y: x + y, tmp_path, dynamic=True)
    with config.patch(span_check="error", max_span_bytes=8192, dump_dir=str(tmp_path)):
        x = torch.randn(1, 4, 16, 64, dtype=torch.float16)
        calls(x, x)  # 8 KiB: fits
        x = torch.randn(1, 20, 16, 64, dtype=torch.float16)
        overflow = (r"graph 0/0, kernel sdsc_add_0, op buf0 \(add\): read of tensor arg0_1, "
                    r"device dim 0 spans 40960")
        with pytest.raises(SpanCheckError, match=overflow) as raised:
            calls(x, x)
    assert re.fullmatch(r"raised while compiling graph 0/0 specialised to sizes s\d+=20 "
                        r"\(L\['x'\]\.size\(\)\[1\]\)(, s\d+=\d+ \(.*\))*",
                        raised.value.__notes__[0])
