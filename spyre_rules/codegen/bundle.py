"""Per-kernel device artefacts: ``sdsc_N.json`` (one per OpSpec) and ``bundle.mlir``.

OpSpecs are numbered depth first (``iter_op_specs`` order) -- the numbering the
bundle refers to.  ``bundle.mlir`` here is the non-looped form of
layout_model §5.7 / seed 003: one ``sdscbundle.sdsc_execute`` per OpSpec inside
``func.func @sdsc_bundle``.  Counted loops (``scf.for`` with affine address
maps) arrive with coarse tiling; until then a LoopSpec is refused explicitly.
"""

from __future__ import annotations

from typing import Any

import sympy

from spyre_rules.codegen.op_spec import LoopSpec, OpSpec, TensorArg, iter_op_specs

__all__ = ["generate_bundle", "op_spec_json", "sdsc_files"]


def _jsonable(value: Any) -> Any:
    if isinstance(value, sympy.Basic):
        return str(value)
    if isinstance(value, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return str(value)
    if hasattr(value, "name") and type(value).__module__.startswith("spyre_rules"):
        return value.name  # DataFormat
    return value


def _arg_json(arg: TensorArg) -> dict[str, Any]:
    return {
        "name": arg.name,
        "is_input": arg.is_input,
        "arg_index": arg.arg_index,
        "device_dtype": arg.device_dtype.name,
        "device_size": list(arg.device_size),
        "device_coordinates": [str(c) for c in arg.device_coordinates],
        "allocation": dict(arg.allocation),
        "per_tile_fixed": arg.per_tile_fixed,
    }


def op_spec_json(spec: OpSpec) -> dict[str, Any]:
    return {
        "op": spec.op,
        "is_reduction": spec.is_reduction,
        "iteration_space": {str(s): [str(r), int(w)] for s, (r, w) in spec.iteration_space.items()},
        "tiled_symbols": [[str(s) for s in level] for level in spec.tiled_symbols],
        "args": [_arg_json(a) for a in spec.args],
        "op_info": _jsonable(spec.op_info),
    }


def sdsc_files(items: list[OpSpec | LoopSpec]) -> dict[str, dict[str, Any]]:
    """``{"sdsc_0.json": {...}, ...}`` in depth-first order."""
    return {f"sdsc_{i}.json": op_spec_json(spec) for i, spec in enumerate(iter_op_specs(items))}


def generate_bundle(items: list[OpSpec | LoopSpec]) -> str:
    if any(isinstance(item, LoopSpec) for item in items):
        raise NotImplementedError("bundle.mlir with counted loops (scf.for) is not generated yet")
    lines = ["module {", "  func.func @sdsc_bundle() {"]
    for i, _ in enumerate(iter_op_specs(items)):
        lines.append(f'    sdscbundle.sdsc_execute () {{sdsc_filename="sdsc_{i}.json"}}')
    lines += ["    return", "  }", "}", ""]
    return "\n".join(lines)
