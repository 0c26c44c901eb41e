"""``spyre-rules check [PATH ...] [--format text|json] [--strict]``

Lints ``.rules`` files without importing torch.  PATH is a ``.rules`` file or
a directory of them (default: the bundled ``rules/``); all PATHs are checked
together as one policy, with the bundled prelude added when none of them is a
``prelude.rules``.

Exit codes: 0 clean; 1 diagnostics (errors, or warnings under ``--strict``);
2 usage or I/O error (a missing path, a file that is not ``.rules``, an
unreadable file, a path that is not a regular file -- a FIFO, a device --, a
directory without ``.rules`` files).  A file that is not valid UTF-8 is a
diagnostic (E004), not an I/O error; so is a file over the size limits (E043,
docs/rules_language.md "Limits").
"""

from __future__ import annotations

import sys

from spyre_rules.commands.rules_paths import USAGE_EXIT, add_paths_argument, resolve_or_report

# Freeze the garbage collector before returning (the process exits next);
# tests that call run() in-process turn this off.
FREEZE_GC_AT_EXIT = True


def add_arguments(parser) -> None:
    add_paths_argument(parser, ".rules files or directories of them, checked together "
                               "(default: the bundled rules/)")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="text: file:line:col: severity[CODE]: message, the source line and a caret; "
                             "json: the same fields plus end positions")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")


def parse_plain(argv: list[str]):
    """The arguments of ``check [PATH ...]`` (no option), as argparse would give
    them; None when an argument is an option (argparse reads those)."""
    if any(arg.startswith("-") for arg in argv):
        return None
    from types import SimpleNamespace

    return SimpleNamespace(command="check", paths=list(argv), format="text", strict=False)


def run(args) -> int:
    from spyre_rules.lang.diagnostics import render_text, summary, to_json_obj
    from spyre_rules.lang.driver import check_paths

    result = resolve_or_report("check", check_paths, args.paths)
    if result is None:
        return USAGE_EXIT
    strict = bool(args.strict)
    errors, warnings = result.count(strict)
    out = sys.stdout
    if args.format == "json":
        import json

        doc = {
            "files": result.names,
            "strict": strict,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": [to_json_obj(d, result.texts.get(d.span.file), strict) for d in result.diagnostics],
        }
        out.write(json.dumps(doc, indent=2) + "\n")
    else:
        for d in result.diagnostics:
            out.write(render_text(d, result.texts.get(d.span.file), strict) + "\n")
        out.write(summary(len(result.names), errors, warnings) + "\n")
    out.flush()
    # The process exits next: spare the interpreter's final garbage collection a
    # walk over the grammar tables and syntax trees (about a quarter of the
    # command's wall time).  Objects stay alive until the process ends.
    if FREEZE_GC_AT_EXIT:
        import gc

        gc.freeze()
    return 1 if errors else 0
