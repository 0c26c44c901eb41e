"""Helpers for backend tests: compile with spyre_rules and prove the program ran.

A plain module (not conftest.py) so tests can import it by a unique name:
several test folders have a conftest.py, and ``from conftest import ...``
resolves to whichever was imported first.
"""

from __future__ import annotations

import os

import torch

# Inductor caches would skip our hooks on a hit (docs/inductor_integration.md pitfall 7).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import spyre_rules  # noqa: E402  (registers the backend: torch is imported)
from spyre_rules import config  # noqa: E402
from spyre_rules.executor.runtime import recent_kernels  # noqa: E402


class Compiled:
    """Result of ``run_spyre``: the output plus the kernels that produced it."""

    def __init__(self, output, kernels):
        self.output = output
        self.kernels = kernels

    def op_specs(self):
        from spyre_rules.program.op_spec import iter_op_specs

        return [spec for k in self.kernels for spec in iter_op_specs(k.specs)]


def run_spyre(fn, *inputs, fallback="error", **compile_kwargs):
    """Compile ``fn`` with the spyre_rules backend (fresh Dynamo state) and run it once."""
    torch._dynamo.reset()
    before = max((k.serial for k in recent_kernels()), default=-1)
    with config.patch(fallback=fallback), torch.no_grad():
        out = torch.compile(fn, backend="spyre_rules", **compile_kwargs)(*inputs)
    kernels = [k for k in recent_kernels() if k.serial > before]
    return Compiled(out, kernels)
