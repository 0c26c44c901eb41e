"""``spyre-rules`` command line: a thin dispatcher.

Each subcommand lives in ``spyre_rules/commands/<module>.py`` and exposes
``add_arguments(parser)`` and ``run(args) -> int``; its one-line help is in
``_HELP`` here.  Subcommand modules are imported only when chosen, so
``spyre-rules check`` never pays for (or imports) torch.  A module may also
expose ``parse_plain(argv)``: the arguments of its commonest form read without
argparse (whose import and set-up cost a tenth of ``spyre-rules check``), or
None for anything else, which argparse then reads -- with its usual messages
and exit codes.

Exit codes: 0 success / clean, 1 diagnostics or a failed check, 2 usage or I/O error.
"""

from __future__ import annotations

import importlib
import sys

# subcommand -> module under spyre_rules.commands
COMMANDS: dict[str, str] = {
    "check": "check",
    "layout": "layout_report",
    "explain": "explain",
    "demo": "demo",
    "test": "policy_test",
    "fmt": "fmt",
    "plan": "plan",
}

_HELP: dict[str, str] = {
    "check": "lint .rules files (defaults to the bundled rules/)",
    "layout": "print the Spyre device layout, coordinates and spans of a host shape",
    "explain": "explain the planner's decision and rule trace for each op of a program",
    "demo": "compile a bundled model with automatic tiling, write the artifacts, compare with eager",
    "fmt": "lay .rules files out canonically (--check: print a diff, change nothing)",
    "plan": "build a transformers model config on the meta device, compile it with automatic "
            "tiling at the real limit, print each op's plan, loop groups and span check",
    "test": "run policy tests (expected plans, rejections, groups) against a policy; --coverage",
}


def build_parser(command: str | None = None):
    """The argparse parser of every command (``command``'s own arguments added)."""
    import argparse

    class _Parser(argparse.ArgumentParser):
        def error(self, message: str) -> None:  # argparse exits 2 on usage errors; keep that.
            self.print_usage(sys.stderr)
            self.exit(2, f"{self.prog}: error: {message}\n")

    parser = _Parser(prog="spyre-rules", description="Declarative coarse-tiling rules for the IBM Spyre accelerator.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in COMMANDS:
        sp = sub.add_parser(name, help=_HELP[name], description=_HELP[name])
        if command == name:
            _load(name).add_arguments(sp)
    return parser


def _load(name: str):
    return importlib.import_module(f"spyre_rules.commands.{COMMANDS[name]}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else None
    parse_plain = getattr(_load(command), "parse_plain", None) if command is not None else None
    args = parse_plain(argv[1:]) if parse_plain is not None else None
    if args is None:
        parser = build_parser(command)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
    try:
        return int(_load(args.command).run(args))
    except BrokenPipeError:
        return 0
