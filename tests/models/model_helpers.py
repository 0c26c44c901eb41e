"""Compile a model with the spyre_rules backend and collect what the tests assert."""

from __future__ import annotations

import json
import os
import tempfile
import warnings
from pathlib import Path

import torch

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.codegen.op_spec import element_bytes, iter_op_specs  # noqa: E402
from spyre_rules.executor.runtime import recent_kernels  # noqa: E402
from spyre_rules.spans import verify_spans  # noqa: E402

#: |spyre - eager| allowed per dtype (the issue's tolerances).
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2}


class ModelRun:
    def __init__(self, output, expected, kernels, plans, messages):
        self.output = output
        self.expected = expected
        self.kernels = kernels
        self.plans = plans
        self.messages = messages

    @property
    def host_steps(self) -> list[str]:
        """Description of each host step (aten node) of every graph, in order."""
        return [step["description"] for plan in self.plans
                for step in plan["host_steps"].values()
                if not step["reason"].startswith("part of host step")]

    @property
    def max_error(self) -> float:
        return (self.output.float() - self.expected.float()).abs().max().item()

    def op_specs(self):
        return [spec for k in self.kernels for spec in iter_op_specs(k.specs)]

    def out_of_bounds_accesses(self) -> list[tuple[str, str]]:
        """Every access the independent verifier finds outside its device tensor."""
        bad = []
        for spec in self.op_specs():
            ranges = {sym: int(r) for sym, (r, _) in spec.iteration_space.items()}
            for arg in spec.args:
                # an indirect symbol may take any value of the dim it indexes
                report = verify_spans(arg.device_size, arg.device_coordinates,
                                      {**ranges, **arg.indirect_ranges()},
                                      element_bytes(arg.device_dtype))
                if not report.in_bounds:
                    bad.append((spec.op, arg.name))
        return bad


def compile_model(module: torch.nn.Module, inputs: tuple, fallback: str, **cfg) -> ModelRun:
    """``torch.compile(module, backend="spyre_rules")(*inputs)`` once, against eager."""
    torch._dynamo.reset()
    with torch.no_grad():
        expected = module(*inputs)
    before = max((k.serial for k in recent_kernels()), default=-1)
    with tempfile.TemporaryDirectory() as dump:
        settings = dict(fallback=fallback, dump_dir=dump, span_check="error", **cfg)
        with config.patch(**settings), torch.no_grad(), \
                warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            output = torch.compile(module, backend="spyre_rules")(*inputs)
        plans = [json.loads((f / "plan.json").read_text()) for f in sorted(Path(dump).iterdir())]
    messages = [str(w.message) for w in seen if str(w.message).startswith("spyre_rules")]
    kernels = [k for k in recent_kernels() if k.serial > before]
    return ModelRun(output, expected, kernels, plans, messages)
