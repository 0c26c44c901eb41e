"""Compile a model with the spyre_rules backend and collect what the tests assert.

A model test costs a Dynamo trace (seconds) plus a backend compile (Inductor
lowering, planning, codegen) per variant, so each (model, attention, dtype) is
traced once per session (:func:`traced`): ``torch.compile(model,
backend="spyre_rules")`` runs the plain variant, and the captured graph is handed
to the same backend again for every other setting (:meth:`Traced.compile`, e.g.
automatic tiling at a span limit) on the same inputs against the same eager
reference.  A hinted model has hints inside its forward, so it is traced on its
own (:func:`hinted`).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

import model_zoo  # noqa: E402
from hinting import decoder_layer, hint_sequence_dim  # noqa: E402
import spyre_rules  # noqa: E402,F401  (registers the backend)
from spyre_rules import config  # noqa: E402
from spyre_rules.backend.compile import spyre_rules_backend  # noqa: E402
from spyre_rules.codegen.loops import arg_moves, shifted_symbols  # noqa: E402
from spyre_rules.codegen.op_spec import element_bytes, iter_op_specs  # noqa: E402
from spyre_rules.executor.runtime import recent_kernels  # noqa: E402
from spyre_rules.hints import clear_tensor_dims  # noqa: E402
from spyre_rules.program.op_spec import LoopSpec  # noqa: E402
from spyre_rules.spans import verify_spans  # noqa: E402

#: |spyre - eager| allowed per dtype (the issue's tolerances).
TOLERANCE = {torch.float32: 1e-4, torch.float16: 2e-2}


@dataclass
class Access:
    """One access of one op at one loop iteration, as the independent verifier sees it."""

    op: str
    tensor: str | None
    iteration: tuple[int, ...]
    indirect: bool
    in_bounds: bool
    core_span_bytes: int


class ModelRun:
    def __init__(self, output, expected, kernels, plans, messages, limit):
        self.output = output
        self.expected = expected
        self.kernels = kernels
        self.plans = plans
        self.messages = messages
        self.limit = limit  # max_span_bytes the program was compiled for

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

    def loop_counts(self) -> list[int]:
        """Count of every top-level loop of every kernel, in program order."""
        return [int(item.count) for k in self.kernels for item in k.specs
                if isinstance(item, LoopSpec)]

    @functools.cached_property
    def accesses(self) -> list[Access]:
        """Every access of every op at every iteration of its enclosing loops,
        enumerated by the brute-force verifier (``verify_spans``, which shares no
        reasoning with the planner's span bounds): in bounds over the op's whole
        iteration space, and the span one core's share touches (each range divided
        by its work split, as the span limit is defined).  A moving arg's iteration
        ``i`` reads its coordinates shifted by ``i`` tiles (the executor's offsets);
        an indirect symbol may take any value of the dim it indexes."""
        found = []
        for kernel in self.kernels:
            for spec, levels in _ops_with_loops(kernel.specs):
                full = {s: int(r) for s, (r, _) in spec.iteration_space.items()}
                core = {s: -(-int(r) // max(int(split), 1))
                        for s, (r, split) in spec.iteration_space.items()}
                for iteration in itertools.product(*levels):
                    shift = shifted_symbols(spec, iteration) if iteration else {}
                    for arg in spec.args:
                        coords = list(arg.device_coordinates)
                        if shift and arg_moves(arg):
                            coords = [c.xreplace(shift) for c in coords]
                        indirect = arg.indirect_ranges()
                        item = element_bytes(arg.device_dtype)
                        whole = verify_spans(arg.device_size, coords, {**full, **indirect}, item)
                        share = verify_spans(arg.device_size, coords, {**core, **indirect}, item)
                        found.append(Access(spec.op, arg.name, iteration, bool(indirect),
                                            whole.in_bounds, share.max_dim_span_bytes))
        return found

    def out_of_bounds_accesses(self) -> list[Access]:
        return [a for a in self.accesses if not a.in_bounds]

    def direct_accesses_over_the_limit(self) -> list[Access]:
        return [a for a in self.accesses if not a.indirect and a.core_span_bytes > self.limit]

    def indirect_accesses_over_the_limit(self) -> list[Access]:
        return [a for a in self.accesses if a.indirect and a.core_span_bytes > self.limit]


def _ops_with_loops(items, levels=()):
    """``(OpSpec, iterations of its enclosing loops, outermost first)``, depth first: each
    loop's real iterations ``first .. first + count - 1`` (a peeled tile's are not 0..)."""
    for item in items:
        if isinstance(item, LoopSpec):
            first = int(item.first)
            yield from _ops_with_loops(item.body, levels + (range(first, first + int(item.count)),))
        else:
            yield item, levels


def _first_tensor(output):
    return output[0] if isinstance(output, (tuple, list)) else output


def _compiled_run(call, expected, **cfg) -> ModelRun:
    """``call()`` (which compiles with the spyre_rules backend and runs once) under
    ``fallback='error'``, ``span_check='error'`` and ``cfg``; what it produced."""
    before = max((k.serial for k in recent_kernels()), default=-1)
    settings = {"fallback": "error", "span_check": "error", **cfg}
    with tempfile.TemporaryDirectory() as dump:
        with config.patch(dump_dir=dump, **settings), torch.no_grad(), \
                warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            output = _first_tensor(call())
            limit = config.max_span_bytes
        plans = [json.loads((f / "plan.json").read_text()) for f in sorted(Path(dump).iterdir())]
    messages = [str(w.message) for w in seen if str(w.message).startswith("spyre_rules")]
    kernels = [k for k in recent_kernels() if k.serial > before]
    return ModelRun(output, expected, kernels, plans, messages, limit)


def compile_model(module: torch.nn.Module, inputs: tuple, **cfg) -> ModelRun:
    """``torch.compile(module, backend="spyre_rules")(*inputs)`` once, against eager."""
    torch._dynamo.reset()
    with torch.no_grad():
        expected = module(*inputs)
    return _compiled_run(lambda: torch.compile(module, backend="spyre_rules")(*inputs),
                         expected, **cfg)


def compile_captured(module: torch.nn.Module, inputs: tuple, **cfg):
    """``compile_model`` that also keeps the one graph Dynamo traced:
    ``(run, graph, example inputs)``, to hand the graph to the backend again."""
    graphs = []

    def capturing(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        return spyre_rules_backend(gm, example_inputs)

    torch._dynamo.reset()
    with torch.no_grad():
        expected = module(*inputs)
    run = _compiled_run(lambda: torch.compile(module, backend=capturing)(*inputs), expected, **cfg)
    (graph, example_inputs), = graphs  # one graph: no graph break
    return run, graph, example_inputs


@dataclass
class Traced:
    """One model traced by Dynamo once; its graph recompiled per setting."""

    expected: torch.Tensor
    graph: torch.fx.GraphModule
    example_inputs: list
    plain: ModelRun
    _variants: dict = field(default_factory=dict)

    def compile(self, **cfg) -> ModelRun:
        """The traced graph through the spyre_rules backend under ``cfg`` (cached)."""
        key = tuple(sorted(cfg.items()))
        if key not in self._variants:
            def call():
                return spyre_rules_backend(self.graph, self.example_inputs)(*self.example_inputs)
            self._variants[key] = _compiled_run(call, self.expected, **cfg)
        return self._variants[key]


@functools.cache
def traced(name: str, attn: str, dtype: torch.dtype) -> Traced:
    """``model_zoo`` model ``name`` compiled once (plain settings), graph kept."""
    module = model_zoo.LastHidden(model_zoo.build(name, attn, dtype))
    run, graph, example_inputs = compile_captured(module, (model_zoo.input_ids(),))
    return Traced(run.expected, graph, example_inputs, run)


@functools.cache
def hinted(name: str, attn: str, dtype: torch.dtype, count: int, naming: str) -> ModelRun:
    """The model with its first decoder layer's sequence dim tiled ``count`` ways
    by a manual hint inside its forward (``hinting.hint_sequence_dim``)."""
    clear_tensor_dims()
    try:
        base = model_zoo.build(name, attn, dtype)
        hint_sequence_dim(decoder_layer(base, name), model_zoo.SEQ, count, naming)
        return compile_model(model_zoo.LastHidden(base), (model_zoo.input_ids(),))
    finally:
        clear_tensor_dims()
