"""Graphs with symbolic sizes run as one static Spyre program per concrete shape.

When Dynamo traces with dynamic shapes (its automatic dynamic on a second
shape, ``dynamic=True``, ``torch._dynamo.mark_dynamic``), the backend receives
a graph with symbolic sizes.  It returns a :class:`SpecializingProgram` instead
of compiling: at a call with sizes it has not seen, the graph is specialised to
the call's concrete sizes (``specialize_graph.specialize``) and compiled by the
static-shape pipeline (planned, generated, span-checked), and the program is
cached under those sizes; a call with sizes seen before runs the cached program
without planning again.

A frame compiled first with static shapes and then dynamically (Dynamo's
automatic dynamic) already has a program for its first shape: the static
program is reused when the specialised graph is the same computation
(``same_graph``) under the same settings, so each distinct shape compiles once.

At most ``config.max_specializations`` programs per graph; a call with new sizes
past it follows ``config.fallback``: ``"eager"`` warns naming the graph and the
sizes and runs that call eagerly, ``"error"`` raises naming them.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from spyre_rules import config
from spyre_rules.backend.specialize_graph import (
    is_symbolic_value,
    same_graph,
    specialize,
    value_inputs,
)
from spyre_rules.errors import SpyreRulesError
from spyre_rules.hints.api import bind_dim_sizes
from spyre_rules.hints.errors import HintError
from spyre_rules.ir.errors import BackendCompileError, find_cause

__all__ = ["SpecializingProgram", "StaticCompile", "is_symbolic", "specializing_program"]

#: Settings that do not change the generated program (static-program reuse ignores them).
_NEUTRAL_SETTINGS = ("dump_dir", "max_specializations")


def is_symbolic(example_inputs: Sequence[Any]) -> bool:
    """Whether Dynamo traced this graph with symbolic sizes."""
    return any(is_symbolic_value(v) for v in example_inputs)


def _settings(snapshot: dict[str, Any]) -> tuple:
    from spyre_rules.hints import declared_tensor_dims

    snapshot = dict(snapshot)
    for name in _NEUTRAL_SETTINGS:
        snapshot.pop(name, None)
    return tuple(sorted(snapshot.items())), tuple(sorted(declared_tensor_dims().items()))


def _tensor_key(args: Sequence[Any]) -> tuple:
    from spyre_rules.hints import tensor_dim_names

    return tuple(
        (tuple(a.shape), a.stride(), a.dtype, tensor_dim_names(a)) if isinstance(a, torch.Tensor)
        else ("scalar", a) for a in args
    )


@dataclass
class _Static:
    gm: torch.fx.GraphModule
    key: tuple  # _tensor_key of its example inputs
    settings: tuple
    program: Callable


#: Dynamo's per-frame state dict (the same dict for every recompile of a frame,
#: a new one after ``torch._dynamo.reset()``) keeps the frame's static programs here.
_STATIC_KEY = "spyre_rules.static_programs"
#: at most this many static programs remembered per frame
_STATIC_PER_FRAME = 16


def _frame_state() -> dict | None:
    try:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
    except Exception:  # noqa: BLE001 - outside a Dynamo trace there is no frame
        return None
    state = getattr(getattr(tx, "output", None), "frame_state", None)
    return state if isinstance(state, dict) else None


class StaticCompile:
    """A static graph of a Dynamo frame being compiled; :meth:`remember` keeps its
    program for a later dynamic recompile of the frame (Dynamo's automatic dynamic)."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> None:
        self.frame = _frame_state()
        # copied before the pipeline edits gm in place (keep_matmul_batch, pre-grad passes)
        self.gm = _copy(gm) if self.frame is not None else None
        self.key = _tensor_key(example_inputs)
        self.settings = _settings(config.snapshot())

    def remember(self, program: Callable) -> None:
        if self.frame is None:
            return
        entries = self.frame.setdefault(_STATIC_KEY, [])
        entries.append(_Static(self.gm, self.key, self.settings, program))
        del entries[:-_STATIC_PER_FRAME]


def _copy(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(gm.graph, {}))
    return torch.fx.GraphModule(gm, graph)


def _compile_id() -> Any:
    from torch._guards import CompileContext

    return CompileContext.current_compile_id()


def _graph_label() -> str:
    compile_id = _compile_id()
    return f"graph {compile_id}" if compile_id is not None else "graph <unnamed>"


def _symbols(gm: torch.fx.GraphModule, example_inputs: Sequence[Any]) -> list[tuple]:
    """``(symbol name, input position, dim or None, where)`` per symbol, first use."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    found: dict[str, tuple] = {}
    for i, (node, value) in enumerate(zip(placeholders, example_inputs)):
        source = getattr(node.meta.get("grapharg"), "source", None)
        where = source.name if source is not None else node.name
        if isinstance(value, torch.SymInt):
            found.setdefault(str(value.node.expr), (i, None, where))
        elif isinstance(value, torch.Tensor):
            for d, size in enumerate(value.shape):
                if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                    found.setdefault(str(size.node.expr), (i, d, f"{where}.size({d})"))
    return [(name, *entry) for name, entry in found.items()]


def _named_sizes(gm: torch.fx.GraphModule) -> dict[str, Any]:
    """Declared dim name -> the symbolic size it names (``spyre_hint(named_dims=...)``
    on a tensor with a symbolic dim)."""
    from spyre_rules.hints.api import NAMED_DIMS_KEY

    found: dict[str, Any] = {}
    for node in gm.graph.nodes:
        names = (node.meta.get("custom") or {}).get(NAMED_DIMS_KEY)
        value = node.meta.get("example_value")
        if not names or not isinstance(value, torch.Tensor) or value.dim() != len(names):
            continue
        for name, size in zip(names, value.shape):
            if name is not None and isinstance(size, torch.SymInt):
                found.setdefault(name, size.node.expr)
    return found


class SpecializingProgram:
    """The callable Dynamo gets for a symbolic graph: one program per concrete shape."""

    def __init__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                 compile_static: Callable[[torch.fx.GraphModule, list[Any]], Callable]) -> None:
        self.gm = gm
        self.label = _graph_label()
        self.compile_id = _compile_id()
        self.compile_static = compile_static
        self.symbols = _symbols(gm, example_inputs)
        self.named = _named_sizes(gm)
        self.value_inputs = value_inputs(gm)
        frame = _frame_state()
        self.statics = frame.get(_STATIC_KEY, []) if frame is not None else []
        #: the settings of the backend call (torch.compile time): every specialisation
        #: compiles under them, as a static graph compiles under the settings of its trace
        self.config = config.snapshot()
        #: sizes key -> (program, positions of the arguments it takes, sizes)
        self.programs: dict[tuple, tuple[Callable, list[int], dict[str, int]]] = {}
        #: how many programs this graph compiled (a reused static program is not one)
        self.compiled = 0

    def sizes(self, args: Sequence[Any]) -> dict[str, int]:
        """The call's value of each symbol (``{"s0": 24}``)."""
        out = {}
        for name, i, d, _ in self.symbols:
            value = args[i]
            out[name] = int(value if d is None else value.shape[d])
        return out

    def describe(self, sizes: dict[str, int]) -> str:
        where = {name: w for name, _, _, w in self.symbols}
        return ", ".join(f"{name}={value} ({where[name]})" for name, value in sizes.items())

    def __call__(self, *args: Any) -> Any:
        # an input read by value (a float Dynamo passes as a 0-d tensor) is folded
        # into the program: its value is part of the key
        key = (_tensor_key(args), tuple(args[i].tolist() for i in self.value_inputs))
        entry = self.programs.get(key)
        if entry is None:
            entry = self._specialize(key, args)
            if entry is None:
                return self.gm.forward(*args)
        program, kept, _ = entry
        return program(*[args[i] for i in kept])

    def _specialize(self, key: tuple, args: Sequence[Any]) -> tuple | None:
        from torch._guards import CompileContext, compile_context

        # the graph's Dynamo compile id again, so messages (span check) name the graph
        context = compile_context(CompileContext(self.compile_id)) \
            if self.compile_id is not None else contextlib.nullcontext()
        with config.patch(**self.config), context:
            return self._specialize_now(key, args)

    def _specialize_now(self, key: tuple, args: Sequence[Any]) -> tuple | None:
        sizes = self.sizes(args)
        limit = config.max_specializations
        if len(self.programs) >= limit:
            return self._over_limit(sizes, limit)
        specialized = specialize(self.gm, args)
        static_args = [args[i] for i in specialized.kept]
        program = self._reusable(specialized.gm, static_args)
        if program is None:
            from spyre_rules.codegen.dump import dump_sizes

            try:
                with dump_sizes({"graph": self.label, "sizes": sizes,
                                 "symbols": {name: w for name, _, _, w in self.symbols}}), \
                        bind_dim_sizes(self._dim_sizes(sizes)):
                    program = self.compile_static(specialized.gm, static_args)
            except Exception as exc:  # noqa: BLE001 - only our own errors are surfaced
                own = _own_error(exc, f"{self.label} specialised to sizes {self.describe(sizes)}")
                if own is None:
                    raise
                raise own from None
            self.compiled += 1
        entry = (program, specialized.kept, sizes)
        self.programs[key] = entry
        return entry

    def _dim_sizes(self, sizes: dict[str, int]) -> dict[str, int]:
        """Declared dims naming a symbolic dim, bound to the call's size of that dim."""
        bound = {}
        for name, expr in self.named.items():
            values = {sym: sizes[str(sym)] for sym in expr.free_symbols if str(sym) in sizes}
            if len(values) == len(expr.free_symbols):
                bound[name] = int(expr.xreplace(values))
        return bound

    def _reusable(self, gm: torch.fx.GraphModule, static_args: list[Any]) -> Callable | None:
        key, settings = _tensor_key(static_args), _settings(self.config)
        for static in self.statics:
            if static.key == key and static.settings == settings and same_graph(gm, static.gm):
                return static.program
        return None

    def _over_limit(self, sizes: dict[str, int], limit: int) -> None:
        seen = "; ".join(self.describe(s) for _, _, s in self.programs.values())
        text = (f"{self.label} already has {len(self.programs)} specialised Spyre programs "
                f"(config.max_specializations = {limit}, SPYRE_RULES_MAX_SPECIALIZATIONS; "
                f"compiled for: {seen})")
        if config.fallback == "error":
            raise BackendCompileError(
                f"spyre_rules cannot compile {self.label} for sizes {self.describe(sizes)}: {text}"
            )
        warnings.warn(
            f"spyre_rules: running this call of {self.label} eagerly instead of on the Spyre "
            f"program: sizes {self.describe(sizes)} are new and {text}",
            stacklevel=3,
        )
        return None


def _own_error(exc: Exception, where: str) -> BaseException | None:
    """Our error inside Inductor's wrappers, saying which specialisation raised it
    (Dynamo does not wrap it: the compile runs at the call); None for any other."""
    own = find_cause(exc, SpyreRulesError)
    if own is None:
        return None
    if isinstance(own, HintError):
        # a hint checked against sizes it was not written for: say which sizes
        return HintError(f"{where}: {own}")
    own.add_note(f"raised while compiling {where}")
    return own


def specializing_program(gm: torch.fx.GraphModule, example_inputs: Sequence[Any],
                         compile_static: Callable) -> SpecializingProgram:
    return SpecializingProgram(gm, example_inputs, compile_static)
