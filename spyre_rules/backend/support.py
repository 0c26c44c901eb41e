"""Which lowered graphs the pipeline can compile; everything else is named and refused.

Refusing is explicit: an ``UnsupportedGraph`` naming the op and the reason,
which the backend turns into a warned eager fallback or an error
(``config.fallback``).  Running such a graph through Inductor's own kernels
instead would quietly bypass the Spyre program, which is what we must not do.
"""

from __future__ import annotations

from typing import Any

import sympy
from torch._inductor import ir
from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

from spyre_rules.backend.collectives import is_collective
from spyre_rules.backend.concat import region_base
from spyre_rules.backend.in_place import in_place_refusal
from spyre_rules.ir.errors import UnsupportedGraph
from spyre_rules.ir.ir_edit import op_description
from spyre_rules.ir.op_identity import is_allocation

__all__ = [
    "NO_SPYRE_LOWERING", "check_inputs", "check_supported", "concat_names", "op_refusal", "static_ints",
    "unmeasured_sizes",
]

# Loop kinds our recorder and executor understand.  WelfordReduction is a
# Reduction subclass (layer_norm/var on CPU lower to it for long rows).
_SUPPORTED_DATA = (ir.Pointwise, ir.Reduction)
_UNSUPPORTED_DATA = (ir.Scan, ir.Sort)


def static_ints(values: Any, what: str, op: Any) -> list[int]:
    out = []
    for v in values:
        if isinstance(v, sympy.Expr) and not v.is_Integer:
            unbacked = sorted(map(str, free_unbacked_symbols(v)))
            if unbacked:
                # An unbacked symbol is a size only the data decides (nonzero, a
                # boolean mask, .item()): no static program can be laid out for it.
                raise UnsupportedGraph(
                    f"{op_description(op)}: {what} {list(values)} depends on "
                    f"{', '.join(unbacked)}, a data-dependent size known only when the graph "
                    "runs; spyre_rules compiles static shapes only"
                )
            raise UnsupportedGraph(
                f"{op_description(op)}: {what} {list(values)} is symbolic; "
                "spyre_rules compiles static shapes only (dynamic shapes are unsupported)"
            )
        out.append(int(v))
    return out


def unmeasured_sizes(op: Any) -> str | None:
    """Why some size of ``op`` cannot be measured (None: every one is a static int).

    The one place the sizes every later stage evaluates are checked -- the layout's
    size, stride and offset (layouts, facts, the memory map) and the loop and reduction
    ranges (the planner, the recorder, codegen) -- so an op with a symbolic or
    data-dependent one is refused here, by name, before any of them evaluates it."""
    layout = op.get_layout()
    sizes = [("size", layout.size), ("stride", layout.stride), ("offset", [layout.offset])]
    data = getattr(op, "data", None)
    if isinstance(data, ir.Loops) and not is_allocation(op):
        sizes.append(("loop ranges", data.get_size()))
        if isinstance(data, ir.Reduction):
            sizes.append(("reduction size", data.get_reduction_size()))
    try:
        for what, values in sizes:
            static_ints(values, what, op)
    except UnsupportedGraph as exc:
        return str(exc)
    return None


def is_opaque_input(value: Any) -> bool:
    """A graph input that is an opaque object, not a tensor: the process group a
    tensor-parallel module hands ``dist.all_reduce``.  No kernel can read one (it has no
    layout); only an extern kernel -- a collective step -- takes it as an argument."""
    return isinstance(value, ir.TorchBindObject)


def _check_input(name: str, value: Any) -> None:
    if isinstance(value, sympy.Expr):
        raise UnsupportedGraph(
            f"graph input {name} is a symbolic size ({value}); "
            "spyre_rules compiles static shapes only (dynamic shapes are unsupported)"
        )
    if is_opaque_input(value):
        return  # a process group handed to the collectives (backend/collectives.py)
    if not isinstance(value, ir.TensorBox):
        raise UnsupportedGraph(f"graph input {name} is a {type(value).__name__}, not a tensor")
    layout = value.get_layout()
    static_ints(layout.size, "size", value)
    strides = static_ints(layout.stride, "stride", value)
    if any(s == 0 for s, n in zip(strides, layout.size) if int(n) > 1):
        raise UnsupportedGraph(
            f"graph input {name} has a zero (broadcast) stride {strides}; "
            "a device stick layout needs distinct host elements"
        )


#: aten ops (OpOverloadPackets) that have no Spyre lowering, with the reason: their
#: nodes are lowered straight to host steps under ``fallback='eager'`` and refused
#: under ``fallback='error'`` (backend/host_steps.py).  Empty: every op Inductor
#: lowers to loops is tried on the Spyre program first.
NO_SPYRE_LOWERING: dict[Any, str] = {}


def check_supported(graph: Any) -> None:
    """Raise UnsupportedGraph for the first input or operation we cannot compile."""
    check_inputs(graph)
    concats = concat_names(graph)
    for op in graph.operations:
        reason = op_refusal(op, concats)
        if reason is not None:
            raise UnsupportedGraph(reason)


def check_inputs(graph: Any) -> None:
    for name, value in graph.graph_inputs.items():
        _check_input(name, value)


def concat_names(graph: Any) -> frozenset[str]:
    """The graph's ConcatKernel buffers (the regions written into them are lowered)."""
    return frozenset(op.get_name() for op in graph.operations if isinstance(op, ir.ConcatKernel))


def op_refusal(op: Any, concats: frozenset[str] = frozenset()) -> str | None:
    """Why ``op`` cannot be lowered to the Spyre program (None: it can be tried)."""
    what = op_description(op)
    if is_collective(op):
        return None  # a collective step of the program (backend/collectives.py)
    if isinstance(op, ir.ConcatKernel):
        return unmeasured_sizes(op)
    if not isinstance(op, ir.ComputedBuffer):
        kernel = getattr(op, "python_kernel_name", None) or type(op).__name__
        return f"{what} lowers to {kernel} ({type(op).__name__}), which has no Spyre lowering"
    if isinstance(op.layout, ir.NonOwningLayout) and region_base(op) in concats:
        pass  # writes its region of a concatenation (concat.py)
    elif isinstance(op.layout, ir.MutationLayoutSHOULDREMOVE):
        reason = in_place_refusal(op)
        if reason is not None:
            return f"{what} {reason}"
    elif isinstance(op.layout, ir.NonOwningLayout):
        return (
            f"{what} writes into another buffer ({type(op.layout).__name__}); "
            "in-place mutation (other than a concatenation's regions) is unsupported"
        )
    data = op.data
    if isinstance(data, _UNSUPPORTED_DATA) or not isinstance(data, _SUPPORTED_DATA):
        return f"{what} is a {type(data).__name__}, which is unsupported"
    unmeasured = unmeasured_sizes(op)
    if unmeasured is not None:
        return unmeasured
    if any(int(s) == 0 for s in op.get_size()):
        return f"{what} has a zero-size dim {list(op.get_size())}"
    return None
