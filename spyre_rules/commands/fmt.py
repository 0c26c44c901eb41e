"""``spyre-rules fmt [--check] [PATH ...]``: the canonical layout of ``.rules`` files.

PATH is a ``.rules`` file or a directory of them (default: the bundled
``rules/``), as for ``check``.  Without ``--check`` every file not in the
canonical layout (spyre_rules/lang/formatter.py) is rewritten in place; with
``--check`` nothing is written and a unified diff is printed for each such
file.  A file with syntax errors is not formatted (its diagnostics are
printed).  Before writing, the formatted text is parsed again and must give the
same syntax tree (spans aside): formatting never changes meaning.

Exit codes: 0 every file is (now) formatted; 1 ``--check`` found a file to
format, or a file has syntax errors; 2 usage or I/O error.  No torch import.
"""

from __future__ import annotations

import difflib
import sys

from spyre_rules.commands.rules_paths import USAGE_EXIT, add_paths_argument, resolve_or_report


def add_arguments(parser) -> None:
    add_paths_argument(parser, ".rules files or directories of them (default: the bundled rules/)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; print a diff and exit 1 if a file is not formatted")


def run(args) -> int:
    from spyre_rules.lang.diagnostics import render_text
    from spyre_rules.lang.driver import decode, display_path, resolve_paths
    from spyre_rules.lang.formatter import FormatError, format_text, same_meaning
    from spyre_rules.lang.parser import parse_source

    paths = resolve_or_report("fmt", resolve_paths, args.paths)
    if paths is None:
        return USAGE_EXIT
    out = sys.stdout
    bad = changed = 0
    for path in paths:
        shown = display_path(path)
        try:
            data = path.read_bytes()
        except OSError as err:
            print(f"spyre-rules fmt: error: {shown}: cannot read: {err.strerror or err}", file=sys.stderr)
            return 2
        text, problem = decode(shown, data)
        diags = [problem] if problem is not None else parse_source(text, shown)[1]
        if diags:
            for d in diags:
                out.write(render_text(d, text) + "\n")
            out.write(f"{shown}: not formatted (syntax errors)\n")
            bad += 1
            continue
        try:
            formatted = format_text(text)
        except FormatError as err:
            out.write(f"{shown}: not formatted: {err}\n")
            bad += 1
            continue
        if formatted == text:
            continue
        if not same_meaning(text, formatted, shown):  # a formatter bug: never write it
            print(f"spyre-rules fmt: error: {shown}: formatting would change the syntax tree; "
                  "file left as it is (please report)", file=sys.stderr)
            return 2
        changed += 1
        if args.check:
            out.writelines(difflib.unified_diff(text.splitlines(True), formatted.splitlines(True),
                                                f"{shown} (as written)", f"{shown} (formatted)"))
            continue
        try:
            path.write_text(formatted, encoding="utf-8")
        except OSError as err:
            print(f"spyre-rules fmt: error: {shown}: cannot write: {err.strerror or err}", file=sys.stderr)
            return 2
        out.write(f"formatted {shown}\n")
    n = len(paths)
    verb = "would be reformatted" if args.check else "reformatted"
    out.write(f"{n} file{'s' if n != 1 else ''}: {changed} {verb}"
              + (f", {bad} with errors" if bad else "") + "\n")
    return 1 if bad or (args.check and changed) else 0
