"""``spyre-rules plan MODEL --decode --context N [--batch B] [--paged --block-size S]``:
the decode options of the plan command and their run (``commands/decode_plan.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["add_decode_arguments", "run_decode"]


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("decode (one generated token against a KV cache)")
    group.add_argument("--decode", action="store_true",
                       help="plan one decode step against a KV cache of --context tokens")
    group.add_argument("--context", type=int, default=None,
                       help="tokens in the KV cache (with --decode)")
    group.add_argument("--paged", action="store_true",
                       help="a paged cache (blocks of --block-size tokens, a block table per "
                            "sequence) instead of the model's own static cache")
    group.add_argument("--block-size", type=int, default=16,
                       help="tokens per page of the paged cache (default 16)")


def run_decode(args: argparse.Namespace, usage_error: Callable[[str], int],
               print_report: Callable[[dict[str, Any], str], int]) -> int:
    from spyre_rules.commands import decode_plan, model_plan

    if not args.decode:
        return usage_error("--context and --paged plan a decode step: add --decode")
    if args.context is None:
        return usage_error("--decode needs --context")
    if args.seq is not None:
        return usage_error("--seq is the prefill's; a decode step takes --context")
    for name in ("context", "batch", "layers", "max_span_bytes", "block_size", "tp"):
        value = getattr(args, name)
        if value is not None and value <= 0:
            return usage_error(f"--{name.replace('_', '-')} must be positive, not {value}")
    try:
        model_plan.load_config(args.model)  # a bad config fails before torch is imported
        settings = dict(context=args.context, batch=args.batch, layers=args.layers,
                        dtype=args.dtype, max_span_bytes=args.max_span_bytes,
                        out=Path(args.out) if args.out is not None else None,
                        progress=sys.stderr, paged=args.paged, block_size=args.block_size)
        if getattr(args, "tp", None) is not None:
            from spyre_rules.commands import tp_plan

            report = tp_plan.plan_tensor_parallel(args.model, args.tp, decode=True, **settings)
        else:
            report = decode_plan.plan_decode(args.model, **settings)
    except model_plan.ConfigError as exc:
        return usage_error(str(exc))
    return print_report(report, args.format)
