"""``spyre-rules layout SHAPE``: the Spyre device layout of one host tensor.

Prints the generic stick layout, the device coordinates of a contiguous
access (loop variables numbered the way Inductor numbers them: unit dims are
squeezed out, the rest are ``c0, c1, ...``) and the per-core span of every
device dimension, next to the configured ``max_span_bytes``.  With
``--verify`` the spans are re-measured by the independent verifier.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import sympy


def _int_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip() != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("shape", type=_int_list, help="host size, e.g. 1,8195,256,64")
    parser.add_argument("--dtype", default="float16", help="host dtype (default float16)")
    parser.add_argument("--stride", type=_int_list, default=None,
                        help="host strides (default: contiguous)")
    parser.add_argument("--dim-order", type=_int_list, default=None,
                        help="host dims from outermost to the stick dim (default: 0..r-1)")
    parser.add_argument("--verify", action="store_true",
                        help="re-measure every span with the independent verifier")
    parser.add_argument("--format", choices=("text", "json"), default="text")


def loop_symbols(host_size: list[int]) -> tuple[dict[sympy.Symbol, int], list[sympy.Expr]]:
    """Inductor-style loop variables and the host coordinate each dim reads."""
    ranges: dict[sympy.Symbol, int] = {}
    host_coords: list[sympy.Expr] = []
    for size in host_size:
        if size == 1:
            host_coords.append(sympy.Integer(0))
            continue
        sym = sympy.Symbol(f"c{len(ranges)}", integer=True, nonnegative=True)
        ranges[sym] = size
        host_coords.append(sym)
    return ranges, host_coords


def build_report(shape: list[int], dtype: str, stride: list[int] | None,
                 dim_order: list[int] | None, verify: bool) -> dict[str, Any]:
    from spyre_rules import config
    from spyre_rules.layout import (contiguous_strides, device_coordinates, dtype_info,
                                    generic_stick_layout)
    from spyre_rules.spans import coordinate_span_elems, per_core_span_bytes

    info = dtype_info(dtype)
    host_stride = list(stride) if stride is not None else contiguous_strides(shape)
    layout = generic_stick_layout(shape, host_stride, dtype, dim_order=dim_order)
    ranges, host_coords = loop_symbols(shape)
    index = sympy.Add(*[c * s for c, s in zip(host_coords, host_stride)])
    coords = device_coordinates(layout, index, ranges)
    limit = config.max_span_bytes

    dims = []
    for d, coord in enumerate(coords):
        entry: dict[str, Any] = {
            "device_dim": d,
            "device_size": layout.device_size[d],
            "stride_map": layout.stride_map[d],
            "coordinate": str(coord),
        }
        if d == len(coords) - 1:
            entry["role"] = "stick"
        elif not coord.free_symbols:
            entry["role"] = "constant"
        else:
            entry["role"] = "moving"
            entry["span_elems"] = coordinate_span_elems(coord, ranges)
            entry["span_bytes"] = per_core_span_bytes(layout.device_size, coords, d, ranges,
                                                      info.itemsize)
            if entry["span_bytes"] is not None:
                entry["over_limit"] = entry["span_bytes"] > limit
        dims.append(entry)

    report: dict[str, Any] = {
        "host_size": list(shape),
        "host_stride": list(host_stride),
        "dtype": info.name,
        "device_dtype": layout.device_dtype.name,
        "elems_per_stick": layout.elems_per_stick,
        "device_size": list(layout.device_size),
        "stride_map": list(layout.stride_map),
        "device_bytes": layout.size_in_bytes,
        "loop_ranges": {str(s): r for s, r in ranges.items()},
        "max_span_bytes": limit,
        "dims": dims,
    }
    if verify:
        from spyre_rules.spans import verify_spans

        measured = verify_spans(layout.device_size, coords, ranges, info.itemsize)
        for entry, dim in zip(dims, measured.dims):
            if entry["role"] == "moving":
                entry["verified_span_bytes"] = dim.span_bytes
    return report


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"host size   {report['host_size']}  stride {report['host_stride']}  dtype {report['dtype']}",
        f"device      {report['device_dtype']}, {report['elems_per_stick']} elements per stick, "
        f"{report['device_bytes']:,} bytes",
        f"device_size {report['device_size']}",
        f"stride_map  {report['stride_map']}",
        "loop vars   " + (", ".join(f"{s} in [0, {r})" for s, r in report["loop_ranges"].items())
                          or "(none)"),
        f"limit       max_span_bytes = {report['max_span_bytes']:,}",
        "",
        f"{'dim':>3}  {'size':>8}  {'stride':>10}  {'coordinate':<28} span",
    ]
    for e in report["dims"]:
        if e["role"] == "stick":
            span = "stick (never a span candidate)"
        elif e["role"] == "constant":
            span = "constant (does not move)"
        elif e["span_bytes"] is None:
            span = "unknown (bound not provable)"
        else:
            span = f"{e['span_elems']:,} x inner = {e['span_bytes']:,} bytes"
            if e.get("over_limit"):
                span += "  OVER LIMIT"
            if "verified_span_bytes" in e:
                span += f"  (verified {e['verified_span_bytes']:,})"
        lines.append(f"{e['device_dim']:>3}  {e['device_size']:>8}  {e['stride_map']:>10}  "
                     f"{e['coordinate']:<28} {span}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from spyre_rules.errors import SpyreRulesError

    try:
        report = build_report(args.shape, args.dtype, args.stride, args.dim_order, args.verify)
    except SpyreRulesError as exc:
        print(f"spyre-rules layout: error: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(render_text(report))
    return 0
