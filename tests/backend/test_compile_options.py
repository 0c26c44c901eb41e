"""``torch.compile(fn, backend="spyre_rules", options={...})``: spyre_rules settings
by their config names, for that compiled function only (backend/options.py)."""

from __future__ import annotations

import json

import pytest
import torch
from spyre_helpers import recent_kernels

from spyre_rules import config
from spyre_rules.backend.options import compile_with_options
from spyre_rules.config import ConfigError
from spyre_rules.ir.errors import find_cause
from spyre_rules.program.op_spec import LoopSpec

SMALL = {"max_span_bytes": 8192, "ignore_span_overflow_hints": False}


def affine(x):
    return x * 2 + 1


def _looped(kernels):
    return [k.name for k in kernels if any(isinstance(i, LoopSpec) for i in k.specs)]


def _new_kernels(call, *inputs):
    before = max((k.serial for k in recent_kernels()), default=-1)
    with torch.no_grad():
        out = call(*inputs)
    return out, [k for k in recent_kernels() if k.serial > before]


def test_options_apply_to_one_compiled_function_only(tmp_path):
    torch._dynamo.reset()
    x = torch.randn(1, 40, 16, 64, dtype=torch.float16)
    tiled = torch.compile(affine, backend="spyre_rules", dynamic=False,
                          options={**SMALL, "fallback": "error", "dump_dir": str(tmp_path)})
    plain = torch.compile(lambda x: x * 2 + 1, backend="spyre_rules", dynamic=False)

    # both called outside any patch, interleaved: each keeps its own settings
    out_tiled, k_tiled = _new_kernels(tiled, x)
    out_plain, k_plain = _new_kernels(plain, x)
    assert config.max_span_bytes == 268435456 and config.ignore_span_overflow_hints is True
    assert _looped(k_tiled) and not _looped(k_plain)
    torch.testing.assert_close(out_tiled, affine(x), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(out_plain, affine(x), rtol=2e-2, atol=2e-2)
    (plan,) = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("graph_*/plan.json"))]
    assert [op["decision"] for op in plan["ops"]] == ["plan", "plan"]

    # a recompile (new shape) of the tiled function compiles under its options again
    y = torch.randn(1, 80, 16, 64, dtype=torch.float16)
    _, k_again = _new_kernels(tiled, y)
    assert _looped(k_again)
    assert len(list(tmp_path.glob("graph_*/plan.json"))) == 2
    _, k_plain_again = _new_kernels(plain, y)
    assert not _looped(k_plain_again)


def test_a_misspelt_option_names_the_known_ones():
    torch._dynamo.reset()
    f = torch.compile(affine, backend="spyre_rules", options={"max_span_byte": 8192})
    with pytest.raises(Exception) as info:
        f(torch.randn(4, 64))
    error = find_cause(info.value, ConfigError)
    assert error is not None, info.value
    assert str(error).startswith("unknown setting 'max_span_byte'; known: bundle_mlir_form, ")
    assert "max_span_bytes" in str(error) and "ignore_span_overflow_hints" in str(error)


def test_a_bad_option_value_is_refused_like_config_patch():
    with pytest.raises(ConfigError, match="invalid value -1 for setting 'max_span_bytes'"):
        compile_with_options(lambda gm, inputs: gm, None, [], {"max_span_bytes": -1})


def test_the_options_hold_when_the_compiled_function_runs():
    seen = []

    def compile_graph(gm, inputs):
        seen.append(("compile", config.max_span_bytes))
        return lambda *args: seen.append(("run", config.max_span_bytes, args))

    run = compile_with_options(compile_graph, None, [], {"max_span_bytes": "4096"})
    assert config.max_span_bytes == 268435456  # nothing leaks out of the compile
    with config.patch(max_span_bytes=1 << 20):
        run(1, 2)
    run(3)
    assert seen == [("compile", 4096), ("run", 4096, (1, 2)), ("run", 4096, (3,))]
