"""Check a set of ``.rules`` files together: read, parse, resolve, type-check.

Which files: each PATH is a ``.rules`` file or a directory (all of its
``*.rules`` files, sorted by name, not recursive); no PATH means the bundled
``rules/`` directory.  The files are one policy: a constant of one file may be
used in another.  If none of them is a prelude (``prelude.rules``), the bundled
prelude is checked with them.

Problems with the paths themselves (missing, unreadable, not ``.rules``, an
empty directory) raise :class:`UsageError` (exit 2).  Everything about the
contents -- including a file that is not UTF-8 -- is a diagnostic.
"""

from __future__ import annotations

import gc

from spyre_rules.errors import SpyreRulesError
from spyre_rules.lang import ast as A
from spyre_rules.lang.diagnostics import Diagnostic, sort_key
# The path handling lives in lang/files.py (read before anything is parsed); its
# names stay importable from here.
from spyre_rules.lang.files import (SUFFIX, UsageError, display_path, is_prelude,  # noqa: F401
                                    policy_sources, read_regular_file, read_sources, resolve_paths)
from spyre_rules.lang.limits import MAX_FILE_BYTES, MAX_ITEMS
from spyre_rules.lang.prelude import Vocabulary, build_vocabulary
from spyre_rules.lang.slotted import Plain


class PolicyError(SpyreRulesError):
    """A policy that does not check cleanly cannot be loaded; the message holds
    the rendered diagnostics."""

    def __init__(self, message: str, diagnostics: list[Diagnostic]) -> None:
        super().__init__(message)
        self.diagnostics = diagnostics


class CheckResult(Plain):
    __slots__ = _fields = ("names", "files", "diagnostics", "texts", "vocab", "checker")
    names: list[str]                # every checked file, as displayed
    files: list[A.SourceFile]       # the ones that could be decoded and parsed
    diagnostics: list[Diagnostic]
    texts: dict[str, str]
    vocab: Vocabulary | None
    checker: object | None

    def __init__(self, names: list[str], files: list[A.SourceFile], diagnostics: list[Diagnostic],
                 texts: dict[str, str] | None = None, vocab: Vocabulary | None = None,
                 checker: object | None = None) -> None:
        self.names, self.files, self.diagnostics = names, files, diagnostics
        self.texts = {} if texts is None else texts
        self.vocab, self.checker = vocab, checker

    def count(self, strict: bool = False) -> tuple[int, int]:
        """(errors, warnings) as reported with or without ``--strict``."""
        errors = sum(1 for d in self.diagnostics if d.severity(strict) == "error")
        return errors, len(self.diagnostics) - errors

    def ok(self, strict: bool = False) -> bool:
        return self.count(strict)[0] == 0


def check_paths(paths: list[str] | None = None, complete: bool | None = None) -> CheckResult:
    """Check the files named by ``paths`` (see the module doc).  Raises
    :class:`UsageError` for unusable paths.

    A directory is a whole policy, so when a PATH is a directory (or no PATH is
    given) the policy must also be complete: one section of each kind (E018).
    Single files are checked as parts of a policy, without that check
    (``complete`` overrides this)."""
    sources, complete = policy_sources(paths, complete)
    return check_sources(sources, complete=complete)


def decode(name: str, data: bytes) -> tuple[str | None, Diagnostic | None]:
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError as err:
        good = data[:err.start].decode("utf-8", errors="replace")
        line = good.count("\n") + 1
        col = len(good) - (good.rfind("\n") + 1) + 1
        span = A.Span(name, line, col, line, col + 1)
        return None, Diagnostic("E004", f"the file is not valid UTF-8 (byte 0x{data[err.start]:02x} at offset "
                                        f"{err.start}); it was not checked", span)


def check_sources(sources: list[tuple[str, bytes | str]], complete: bool = True) -> CheckResult:
    """Check in-memory sources ``(display name, bytes or text)`` as one policy
    (``complete``: it must have one section of each kind).  Never raises on bad
    contents: every problem is a diagnostic."""
    # The parser and checker allocate many small acyclic objects; the cyclic
    # collector only slows them down (~15%), so it pauses while they run.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _check_sources(sources, complete)
    finally:
        if paused:
            gc.enable()


def _check_sources(sources: list[tuple[str, bytes | str]], complete: bool) -> CheckResult:
    from spyre_rules.lang.checker import Checker
    from spyre_rules.lang.parser import parse_source

    diags: list[Diagnostic] = []
    files: list[A.SourceFile] = []
    texts: dict[str, str] = {}
    syntax_ok = True
    for name, data in sources:
        if len(data) > MAX_FILE_BYTES:
            diags.append(Diagnostic("E043", f"the file is larger than {MAX_FILE_BYTES} bytes; it was not checked",
                                    A.Span(name, 1, 1, 1, 2)))
            syntax_ok = False
            texts[name] = ""
            continue
        if isinstance(data, bytes):
            text, problem = decode(name, data)
            if problem is not None:
                diags.append(problem)
                syntax_ok = False
                texts[name] = data.decode("utf-8", errors="replace")  # only to show the line
                continue
        else:
            text = data
        texts[name] = text
        before = len(diags)
        sf, syntax = parse_source(text, name)
        sf.is_prelude = is_prelude(name)
        diags.extend(syntax)
        n_items = sum(1 + len(item.items) if isinstance(item, A.Section) else 1 for item in sf.items)
        if n_items > MAX_ITEMS:
            diags.append(Diagnostic("E043", f"the file has {n_items} items, more than {MAX_ITEMS}; it was not "
                                    "checked (split it into several files)", A.Span(name, 1, 1, 1, 2)))
            sf.items = []
        if len(diags) > before:
            syntax_ok = False
        files.append(sf)
    prelude = next((f for f in files if f.is_prelude), None)
    anchor_file = prelude or (files[0] if files else None)
    anchor = A.Span(anchor_file.path if anchor_file else "<none>", 1, 1, 1, 2)
    vocab = checker = None
    try:
        vocab = build_vocabulary(files, diags, anchor)
        checker = Checker(files, vocab, diags)
        checker.run(syntax_ok, complete)
    except RecursionError:
        first = next((f for f in files if not f.is_prelude), anchor_file)
        span = A.Span(first.path if first else "<none>", 1, 1, 1, 2)
        diags.append(Diagnostic("E040", "an expression is nested too deeply to check", span))
    order = {name: i for i, (name, _) in enumerate(sources)}
    unique: dict[tuple, Diagnostic] = {}
    for d in diags:
        unique.setdefault((d.code, d.span, d.message), d)
    result = sorted(unique.values(), key=lambda d: sort_key(d, order))
    return CheckResult([name for name, _ in sources], files, result, texts, vocab, checker)


def load_policy(paths: list[str] | None = None) -> CheckResult:
    """Check a whole policy (``paths`` as for ``spyre-rules check``; default the
    bundled rules) and return it for the engine, or raise :class:`PolicyError`
    if it has errors (warnings are allowed)."""
    from spyre_rules.lang.diagnostics import render_text

    result = check_paths(paths if paths else None, complete=True)
    if not result.ok():
        shown = "\n".join(render_text(d, result.texts.get(d.span.file)) for d in result.diagnostics)
        raise PolicyError(f"the rules do not check cleanly:\n{shown}", result.diagnostics)
    return result
