"""``spyre-rules check [PATH ...] [--format text|json] [--strict]``

Lints ``.rules`` files without importing torch.  A report of the same files
checked by the same checker is printed from a cache (``check_cache.py``;
``SPYRE_RULES_CHECK_CACHE=0`` checks every time).  PATH is a ``.rules`` file or
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
    # The command line remembers reports (commands/check_cache.py); run() called in
    # process with arguments of its own (tests) checks every time.
    parser.set_defaults(result_cache=True)


def parse_plain(argv: list[str]):
    """The arguments of ``check [PATH ...]`` (no option), as argparse would give
    them; None when an argument is an option (argparse reads those)."""
    if any(arg.startswith("-") for arg in argv):
        return None
    from types import SimpleNamespace

    return SimpleNamespace(command="check", paths=list(argv), format="text", strict=False, result_cache=True)


def run(args) -> int:
    from spyre_rules.lang.files import policy_sources

    found = resolve_or_report("check", policy_sources, args.paths)
    if found is None:
        return USAGE_EXIT
    sources, complete = found
    strict = bool(args.strict)
    key = None
    if getattr(args, "result_cache", False):
        from spyre_rules.commands import check_cache

        if check_cache.enabled():
            key = check_cache.result_key(sources, complete, args.format, strict)
            hit = check_cache.load(key)
            if hit is not None:
                code, text = hit
                sys.stdout.write(text)
                sys.stdout.flush()
                return code
    code, text = _check(sources, complete, args.format, strict)
    sys.stdout.write(text)
    sys.stdout.flush()
    if key is not None:
        check_cache.store(key, code, text)
    # The process exits next: spare the interpreter's final garbage collection a
    # walk over the grammar tables and syntax trees (about a quarter of the
    # command's wall time).  Objects stay alive until the process ends.
    if FREEZE_GC_AT_EXIT:
        import gc

        gc.freeze()
    return code


def _check(sources: list[tuple[str, bytes]], complete: bool, fmt: str, strict: bool) -> tuple[int, str]:
    """Exit code and report of checking ``sources`` as one policy."""
    from spyre_rules.lang.diagnostics import render_text, summary, to_json_obj
    from spyre_rules.lang.driver import check_sources

    result = check_sources(sources, complete=complete)
    errors, warnings = result.count(strict)
    if fmt == "json":
        import json

        doc = {
            "files": result.names,
            "strict": strict,
            "errors": errors,
            "warnings": warnings,
            "diagnostics": [to_json_obj(d, result.texts.get(d.span.file), strict) for d in result.diagnostics],
        }
        text = json.dumps(doc, indent=2) + "\n"
    else:
        text = "".join(render_text(d, result.texts.get(d.span.file), strict) + "\n" for d in result.diagnostics)
        text += summary(len(result.names), errors, warnings) + "\n"
    return (1 if errors else 0), text
