"""``spyre-rules plan``: does a real-size language model compile for Spyre, and how is it tiled?

    spyre-rules plan Llama-3-8B --seq 32768
    spyre-rules plan my_config.json --seq 8192 --batch 4 --layers 2 --format json
    spyre-rules plan Llama-3-70B --seq 32768 --tp 8 --layers 2

``--tp N`` plans one rank's shard of N tensor-parallel ranks (commands/tp_plan.py).

MODEL is a ``transformers`` config JSON file or the name of a config the package
ships (``--list``).  The model is built on the meta device (no weights, nothing
runs), compiled with ``torch.compile(model, backend="spyre_rules")`` and
automatic tiling at ``--max-span-bytes`` (default the hardware's 256 MiB), and
the command prints each op's plan, the loop groups and the span check (text: a
compact table; json: the plan records of every graph).  Progress goes to stderr.

Exit codes: 0 every generated access fits the limit; 1 an access does not, an
op is unsupported or the compiler refused the graph (each named); 2 usage
errors (unreadable or unknown config, bad arguments).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

DEFAULT_LIMIT = 256 * 1024 * 1024
MIB = 1024 * 1024


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", nargs="?",
                        help="a transformers config JSON file or a shipped config name (--list)")
    parser.add_argument("--seq", type=int, help="sequence length (tokens per sequence)")
    parser.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    parser.add_argument("--layers", type=int, default=None,
                        help="decoder layers (default: the config's num_hidden_layers)")
    parser.add_argument("--dtype", choices=("fp16", "bf16", "fp32"), default="fp16",
                        help="parameter and activation dtype (default fp16)")
    parser.add_argument("--max-span-bytes", type=int, default=DEFAULT_LIMIT,
                        help=f"per-core span limit in bytes (default {DEFAULT_LIMIT})")
    parser.add_argument("--tp", type=int, default=None,
                        help="plan one rank's shard of N tensor-parallel ranks (the model's "
                             "tp_plan on a fake process group; commands/tp_plan.py)")
    parser.add_argument("--out", default=None,
                        help="keep the artifacts (wrapper.py, plan.json, kernels) in DIR")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--whole-graph", action="store_true",
                        help="compile every decoder layer in one graph (default: the layers are one "
                             "nested compile region, compiled once and shared)")
    parser.add_argument("--list", action="store_true", help="list the shipped configs and exit")
    from spyre_rules.commands.decode_arguments import add_decode_arguments

    add_decode_arguments(parser)


def _usage_error(message: str) -> int:
    print(f"spyre-rules plan: error: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from spyre_rules.commands import model_plan

    if args.list:
        print("\n".join(model_plan.shipped_configs()))
        return 0
    if args.model is None:
        return _usage_error("MODEL is required (a config JSON file or one of: "
                            f"{', '.join(model_plan.shipped_configs())})")
    if args.decode or args.paged or args.context is not None:
        from spyre_rules.commands.decode_arguments import run_decode

        return run_decode(args, _usage_error, _print_report)
    if args.seq is None:
        return _usage_error("--seq is required")
    for name in ("seq", "batch", "layers", "max_span_bytes", "tp"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            return _usage_error(f"--{name.replace('_', '-')} must be positive, not {value}")
    try:
        model_plan.load_config(args.model)  # a bad config fails before torch is imported
        settings = dict(seq=args.seq, batch=args.batch, layers=args.layers, dtype=args.dtype,
                        max_span_bytes=args.max_span_bytes,
                        out=Path(args.out) if args.out is not None else None,
                        progress=sys.stderr,
                        reuse_layers=not getattr(args, "whole_graph", False))
        if args.tp is not None:
            from spyre_rules.commands import tp_plan

            report = tp_plan.plan_tensor_parallel(args.model, args.tp, **settings)
        else:
            report = model_plan.plan_model(args.model, **settings)
    except model_plan.ConfigError as exc:
        return _usage_error(str(exc))
    return _print_report(report, args.format)


def _print_report(report: dict[str, Any], fmt: str) -> int:
    """Print ``report`` as text or JSON; the exit code its verdict gives."""
    if fmt == "json":
        print(json.dumps(report, indent=2, default=str))
    else:
        print(text_report(report))
    return 0 if report["ok"] else 1


def _mib(n: Any) -> str:
    return "-" if n is None else f"{n / MIB:.1f}"


def _levels(levels: Any) -> str:
    return " ".join(f"({h},{k})" for h, k in levels or []) or "-"


def _status(record: dict[str, Any]) -> tuple[str, Any]:
    check = record.get("span_check") or {}
    return check.get("status", "-"), check.get("max_span_bytes")


def _kind(kind: str) -> str:
    return kind.removeprefix("reduction:")[:12]


def _aten(description: str) -> str:
    """``buf3 (aten ops: mean.dim)`` -> ``mean.dim``."""
    _, _, rest = description.partition("(aten ops: ")
    return (rest.removesuffix(")") or description)[:28]


def _region(region: dict[str, Any] | None) -> str:
    """Which part of a model split at its layers a graph is (backend/regions.py)."""
    if not region:
        return ""
    if region.get("kind") == "region":
        shared = region["shared_by"]
        calls = shared[0] if len(shared) == 1 else f"{shared[0]} .. {shared[-1]}"
        return f"; one program for {len(shared)} layers: {calls}"
    return f"; the ops {region['position']}"


def text_report(report: dict[str, Any]) -> str:
    limit = report["max_span_bytes"]
    lines = [f"model {report['model']} ({report['model_type']}, {report['layers']} layers, "
             f"{report['dtype']}): batch {report['batch']}, seq {report['seq']}; "
             f"limit {limit} bytes ({_mib(limit)} MiB), automatic tiling on, nothing executed"]
    if report.get("decode"):
        from spyre_rules.commands.decode_plan import decode_header

        lines = [decode_header(report)]
    if report.get("tp"):
        from spyre_rules.commands.tp_plan import tp_lines

        lines += tp_lines(report)
    for graph in report["graphs"]:
        groups = {tuple(g["id"]): g for g in graph["loop_groups"]}
        lines += ["", f"{graph['graph']} ({len(graph['ops'])} ops{_region(graph.get('region'))}): op, kind, "
                      "decision, aten ops, levels (host dim,tiles), loop group, worst span MiB, span check"]
        for r in graph["ops"]:
            status, worst = _status(r)
            loop = r.get("loop") or {}
            group = f"g{'.'.join(map(str, loop['loop_group_id']))}" if loop.get(
                "loop_group_id") else "-"
            lines.append(f"  {r['op']:7} {_kind(r['kind']):12} {r.get('decision', '-'):11} "
                         f"{_aten(r['description']):28} {_levels(r.get('levels')):14} {group:5} "
                         f"{_mib(worst):>8} {status}")
        lines.append(f"loop groups: {len(groups)}")
        for key, g in groups.items():
            names = g["ops"] if len(g["ops"]) <= 6 else g["ops"][:5] + [f"... {len(g['ops'])} ops"]
            lines.append(f"  g{'.'.join(map(str, key))}: tiles {g['tiles']}, {', '.join(names)}")
            for op, text in (g.get("last_tiles") or {}).items():
                lines.append(f"    {op} {text}")
        for error in graph["graph_errors"]:
            lines.append(f"graph refused: {error}")
    lines.append("")
    for graph in report["graphs"]:
        region = graph.get("region") or {}
        if region.get("kind") == "region" and len(region["shared_by"]) > 1:
            lines.append(f"{len(region['shared_by'])} layers share the program of {graph['graph']}: "
                         f"planned and span-checked once, run once per layer")
    checked = sum(1 for g in report["graphs"] for r in g["ops"] if r.get("span_check"))
    lines.append(f"span check: {checked} ops checked, {len(report['overflows'])} over the limit, "
                 f"{len(report['deferred_indirect_reads'])} indirect reads deferred (not enforced)")
    if report["overflows"]:
        lines.append(f"over the limit: {', '.join(report['overflows'])}")
    if report["deferred_indirect_reads"]:
        lines.append(f"deferred indirect reads: {', '.join(report['deferred_indirect_reads'])}")
    for u in report["unsupported"]:
        lines.append(f"unsupported: {u}")
    if report["unchecked"] and report["error"] is None:
        lines.append(f"no span check result: {', '.join(report['unchecked'])}")
    if report["error"] is not None:
        lines.append(f"compile error: {report['error']}")
    if report.get("out"):
        lines.append(f"artifacts in {report['out']}")
    lines.append("OK: every access fits" if report["ok"] else "FAILED")
    return "\n".join(lines)
