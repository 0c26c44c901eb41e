"""Fixtures for hint tests: capture with input dim names bound, fresh declared dims.

The backend does not enter ``bind_input_dim_names`` yet (the lead wires it into
``spyre_rules.backend.compile``); until then ``capture`` wraps
``compile_for_capture`` with it, exactly as the backend entry will.
"""

from __future__ import annotations

import os

import pytest

# Inductor caches would skip the pre-scheduling seam on a hit (integration pitfall 7).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import torch  # noqa: E402

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules.hints import bind_input_dim_names, clear_tensor_dims  # noqa: E402


@pytest.fixture(autouse=True)
def fresh_dims():
    clear_tensor_dims()
    yield
    clear_tensor_dims()


@pytest.fixture
def capture(monkeypatch):
    """``capture_operations`` with ``bind_input_dim_names`` around the lowering."""
    import spyre_rules.backend.capture as capture_mod
    import spyre_rules.backend.compile as compile_mod

    original = compile_mod.compile_for_capture

    def bound(gm, example_inputs):
        with bind_input_dim_names(example_inputs):
            return original(gm, example_inputs)

    monkeypatch.setattr(compile_mod, "compile_for_capture", bound)
    monkeypatch.setattr(capture_mod, "compile_for_capture", bound)

    def run(fn, *inputs):
        torch._dynamo.reset()
        return capture_mod.capture_operations(fn, *inputs)

    return run


@pytest.fixture
def root_error():
    """The first exception of type ``cls`` in the chain Dynamo/Inductor wrapped around it."""

    def find(exc, cls):
        seen, todo = set(), [exc]
        while todo:
            cur = todo.pop()
            if cur is None or id(cur) in seen:
                continue
            seen.add(id(cur))
            if isinstance(cur, cls):
                return cur
            todo.extend([getattr(cur, "inner_exception", None), cur.__cause__, cur.__context__])
        raise AssertionError(f"no {cls.__name__} in the chain of {exc!r}")

    return find
