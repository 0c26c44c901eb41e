"""Print a kernel's program as Python source for the generated wrapper.

Layout follows docs/layout_model.md §5.6: one field per line, every sympy value as
``sympify('<str>')``, device formats as ``DataFormats.X``; ``tiled_symbols`` is
printed only when non-empty.  The wrapper module evaluates this source, so the
executor runs exactly what is printed (nothing is passed around in memory).
"""

from __future__ import annotations

import math
from typing import Any

import sympy

from spyre_rules.facts.stick_layout import DataFormat
from spyre_rules.program.op_spec import LoopSpec, OpSpec, TensorArg, TensorPlacement

__all__ = ["format_value", "format_program", "kernel_definition", "placement_source"]

IMPORTS = (
    "from spyre_rules.codegen.op_spec import "
    "DataFormats, LoopSpec, OpSpec, TensorArg, TensorPlacement, sympify",
    "from spyre_rules.executor.runtime import rules_device, rules_make_kernel",
)


#: Imported only by the wrapper of a graph with host steps (backend/host_codegen.py).
HOST_STEP_IMPORTS = ("from spyre_rules.executor.runtime import rules_to_device, rules_to_host",)


def format_value(value: Any) -> str:
    """A Python expression evaluating to ``value`` in the wrapper's namespace."""
    if isinstance(value, sympy.Basic):
        return f"sympify({str(value)!r})"
    if isinstance(value, DataFormat):
        return f"DataFormats.{value.name}"
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return f"float({str(value)!r})"
        return repr(value)
    if isinstance(value, int):
        return repr(int(value))
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{format_value(k)}: {format_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        inner = ", ".join(format_value(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    raise TypeError(f"cannot print {type(value).__name__} {value!r} into the wrapper source")


def _tensor_arg(arg: TensorArg, pad: str) -> list[str]:
    lines = [
        f"{pad}TensorArg(",
        f"{pad}    is_input={arg.is_input!r},",
        f"{pad}    arg_index={arg.arg_index},",
        f"{pad}    device_dtype={format_value(arg.device_dtype)},",
        f"{pad}    device_size={format_value(list(arg.device_size))},",
        f"{pad}    device_coordinates={format_value(list(arg.device_coordinates))},",
        f"{pad}    allocation={format_value(dict(arg.allocation))},",
    ]
    if arg.per_tile_fixed:
        lines.append(f"{pad}    per_tile_fixed=True,")
    if arg.name is not None:
        lines.append(f"{pad}    name={arg.name!r},")
    if arg.segment is not None:
        lines.append(f"{pad}    segment=({int(arg.segment[0])}, {int(arg.segment[1])}),")
    if arg.indirect:  # (symbol, size, source_arg) triples; TensorArg builds IndirectIndex
        inds = ", ".join(
            format_value((i.symbol, int(i.size), i.source_arg)) for i in arg.indirect)
        lines.append(f"{pad}    indirect=[{inds}],")
    lines.append(f"{pad}),")
    return lines


def _op_spec(spec: OpSpec, pad: str) -> list[str]:
    space = ", ".join(
        f"{format_value(s)}: ({format_value(r)}, {int(split)})"
        for s, (r, split) in spec.iteration_space.items()
    )
    lines = [
        f"{pad}OpSpec(",
        f"{pad}    op={spec.op!r},",
        f"{pad}    is_reduction={spec.is_reduction!r},",
        f"{pad}    iteration_space={{{space}}},",
        f"{pad}    op_info={format_value(spec.op_info)},",
    ]
    if spec.tiled_symbols:
        lines.append(f"{pad}    tiled_symbols={format_value(spec.tiled_symbols)},")
    if spec.tiled_steps is not None:
        lines.append(f"{pad}    tiled_steps={format_value(spec.tiled_steps)},")
    lines.append(f"{pad}    args=[")
    for arg in spec.args:
        lines.extend(_tensor_arg(arg, pad + "        "))
    lines += [f"{pad}    ],", f"{pad}),"]
    return lines


def format_program(items: list[OpSpec | LoopSpec], pad: str = "    ") -> list[str]:
    lines: list[str] = []
    for item in items:
        if isinstance(item, LoopSpec):
            lines += [f"{pad}LoopSpec(", f"{pad}    count={format_value(item.count)},"]
            if int(item.first):  # a peeled tile's loop; printed only then (snapshots)
                lines.append(f"{pad}    first={int(item.first)},")
            lines.append(f"{pad}    body=[")
            lines += format_program(item.body, pad + "        ")
            lines += [f"{pad}    ],", f"{pad}),"]
        else:
            lines += _op_spec(item, pad)
    return lines


def placement_source(p: TensorPlacement) -> str:
    return (
        f"TensorPlacement(name={p.name!r}, host_size={format_value(tuple(p.host_size))}, "
        f"host_stride={format_value(tuple(p.host_stride))}, host_dtype={p.host_dtype!r}, "
        f"device_size={format_value(tuple(p.device_size))}, "
        f"stride_map={format_value(tuple(p.stride_map))}, "
        f"device_dtype={format_value(p.device_dtype)}, address={p.address})"
    )


def kernel_definition(
    name: str,
    device_var: str,
    items: list[OpSpec | LoopSpec],
    stickify: dict[int, TensorPlacement],
    unstickify: dict[int, TensorPlacement],
    write_through: dict[int, TensorPlacement] | None = None,
) -> str:
    """The right-hand side of ``<name> = ...`` in the wrapper module."""
    lines = [f"rules_make_kernel({name!r}, {device_var}, ["]
    lines += format_program(items)
    lines.append("],")
    tables = [("stickify", stickify), ("unstickify", unstickify)]
    if write_through:
        tables.append(("write_through", write_through))
    for label, table in tables:
        lines.append(f"    {label}={{")
        for index, p in table.items():
            lines.append(f"        {index}: {placement_source(p)},")
        lines.append("    },")
    lines.append(")")
    return "\n".join(lines)
