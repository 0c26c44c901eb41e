"""``spyre-rules explain``: each op's decision and the rules that made it.

    spyre-rules explain lm_head
    spyre-rules explain my_model:fn --shapes 1,8195,256,64 1,8195,256,64 --dtype float16
    spyre-rules explain reduction_input --max-span-bytes 4096 --format json
    spyre-rules explain --list

The program (a bundled example, or ``module:function`` called with zero
tensors of ``--shapes``) is captured exactly as the planner sees it; for every
op the rule engine prints the decision (plan / no plan / unsupported), the
reason and the trace of every rule that fired with the values it saw.  Automatic
span-overflow tiling is switched on for the run, so the grouping decisions
(which ops share a tile loop, or why grouping refuses) are printed too.

Exit codes: 0 explained (Unsupported decisions included: they are answers),
2 usage errors (unknown example, bad shapes, an import that fails).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("program", nargs="?",
                        help="a bundled example (see --list) or module:function")
    parser.add_argument("--shapes", nargs="+", type=_shape, default=None,
                        help="input shapes for module:function, e.g. 1,8195,256,64 (one per input)")
    parser.add_argument("--dtype", default="float16", help="input dtype (default float16)")
    parser.add_argument("--max-span-bytes", type=int, default=None,
                        help="span limit for this run (default: the example's, else the config)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--list", action="store_true", help="list the bundled examples")
    parser.add_argument("--plot", metavar="FILE", default=None,
                        help="also draw each op's worst span before/after tiling against the limit "
                             "(.png or .svg; needs the [plot] extra)")


def _usage(message: str) -> int:
    print(f"spyre-rules explain: error: {message}", file=sys.stderr)
    return 2


def _resolve(args: argparse.Namespace) -> tuple[Any, list[Any], int | None] | str:
    """(function, inputs, span limit) or an error message."""
    from spyre_rules.engine.examples import EXAMPLES, example_inputs

    if args.program in EXAMPLES:
        ex = EXAMPLES[args.program]
        shapes = args.shapes or ex.shapes
        limit = args.max_span_bytes if args.max_span_bytes is not None else ex.max_span_bytes
        return ex.fn, example_inputs(shapes, args.dtype or ex.dtype, ex.index_inputs), limit
    if ":" not in args.program:
        return (f"unknown example {args.program!r}; known: {', '.join(EXAMPLES)} "
                "(or give module:function)")
    module_name, _, attr = args.program.partition(":")
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        return f"cannot load {args.program}: {exc}"
    if not args.shapes:
        return f"{args.program} needs --shapes (one comma-separated shape per input)"
    try:
        inputs = example_inputs(args.shapes, args.dtype)
    except (AttributeError, TypeError) as exc:
        return f"bad --dtype {args.dtype!r}: {exc}"
    return fn, inputs, args.max_span_bytes


def explain(fn: Any, inputs: list[Any], max_span_bytes: int | None) -> dict[str, Any]:
    """Capture ``fn(*inputs)`` and explain every op (also used by tests)."""
    import spyre_rules
    from spyre_rules import Unsupported, config
    from spyre_rules.engine import decide_groups, plan_graph
    from spyre_rules.engine.policy import get_policy

    settings = {"ignore_span_overflow_hints": False, "ignore_wsr_hints": False}
    if max_span_bytes is not None:
        settings["max_span_bytes"] = max_span_bytes
    # captured under the settings too: the seam's edits may depend on the limit
    # (backend/gathered_windows.py)
    with config.patch(**settings):
        ops = spyre_rules.capture_operations(fn, *inputs)
        decisions = plan_graph(ops)
        report: dict[str, Any] = {
            "rules": get_policy().source,
            "config": {"max_span_bytes": config.max_span_bytes, "sencores": config.sencores},
            "ops": [d.as_dict() for d in decisions],
        }
        try:
            outcome = decide_groups(ops)  # the decision only: nothing is written into the ops
            report["groups"] = [{"ops": [op.get_name() for op in group.ops],
                                 "levels": [[lv.hint_id, int(lv.split), lv.is_reduction]
                                            for lv in group.levels]}
                                for group in outcome.groups]
            report["grouping"] = {name: step.as_dict() for name, step in outcome.actions.items()}
        except Unsupported as exc:
            report["grouping_error"] = str(exc)
    return report


def _text(report: dict[str, Any]) -> str:
    cfg = report["config"]
    lines = [f"rules: {report['rules']}  (max_span_bytes={cfg['max_span_bytes']}, "
             f"sencores={cfg['sencores']}, automatic tiling on)"]
    for d in report["ops"]:
        plan = ""
        if d["plan"] is not None:
            levels = [(lv["selected_host_dim"], lv["split_count"]) for lv in d["plan"]["levels"]]
            plan = " " + " ".join(f"(host dim {h}: {k} tiles)" for h, k in levels)
        lines.append("")
        lines.append(f"{d['op']} ({d['kind']}): {d['decision']}{plan}")
        if d["reason"]:
            lines.append(f"  reason: {d['reason']}")
        for step in d["trace"]:
            values = ", ".join(f"{k}={v}" for k, v in step["values"].items())
            msg = f" -- {step['message']}" if step["message"] else ""
            lines.append(f"  {step['section']}.{step['rule']}: {step['outcome']}{msg}"
                         + (f"  [{values}]" if values else ""))
    lines.append("")
    if "grouping_error" in report:
        lines.append(f"grouping: Unsupported: {report['grouping_error']}")
    else:
        lines.append("grouping:")
        for name, step in report["grouping"].items():
            msg = f" -- {step['message']}" if step["message"] else ""
            lines.append(f"  {name}: {step['outcome']} ({step['rule']}){msg}")
        for g in report["groups"]:
            lines.append(f"  group {g['ops']}: levels {[tuple(lv) for lv in g['levels']]}")
        if not report["groups"]:
            lines.append("  no automatic groups")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    if args.list:
        from spyre_rules.engine.examples import EXAMPLES

        for name, ex in EXAMPLES.items():
            print(f"{name:22} {ex.about}")
        return 0
    if not args.program:
        return _usage("give an example name (see --list) or module:function")
    resolved = _resolve(args)
    if isinstance(resolved, str):
        return _usage(resolved)
    from spyre_rules.commands.quiet import hide_cache_off_warning

    hide_cache_off_warning()
    fn, inputs, limit = resolved
    plot_path = None
    if args.plot:
        from spyre_rules.commands.plot import PlotError, check_plot_path

        try:
            plot_path = check_plot_path(args.plot)
        except PlotError as err:
            return _usage(str(err))
    report = explain(fn, inputs, limit)
    if plot_path is not None:
        from spyre_rules.commands.plot import plot_program

        settings = {"ignore_span_overflow_hints": False, "ignore_wsr_hints": False}
        if limit is not None:
            settings["max_span_bytes"] = limit
        written = plot_program(fn, inputs, settings, plot_path, f"spyre-rules explain {args.program}")
        report["plots"] = [str(p) for p in written]
    if args.format == "json":
        print(json.dumps(report, indent=2))
    else:
        print(_text(report))
        for path in report.get("plots", []):
            print(f"plot: {path}")
    return 0
