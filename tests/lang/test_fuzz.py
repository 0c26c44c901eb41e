"""Mutation fuzzing of the checker, in-process.

Thousands of deterministic mutants of the bundled rules -- deleted,
duplicated, swapped and replaced tokens, truncations, inserted random bytes,
non-UTF-8 bytes, dropped and repeated lines -- are checked together with the
other bundled files.  Every mutant must end in diagnostics (or be clean):
never a Python exception, never a hang.
"""

from __future__ import annotations

import random
import re
import time

from spyre_rules.lang.diagnostics import Diagnostic, render_text
from spyre_rules.lang.driver import check_sources, read_sources, resolve_paths
from spyre_rules.lang.parser import keywords

N_MUTANTS = 3000
SEED = 20240611
TOKEN = re.compile(rb'#[^\n]*|"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_]*|//|==|!=|<=|>=|->|\S')


def _tokens(data: bytes) -> list[tuple[int, int]]:
    """Spans of the code tokens (comments are skipped: mutating them proves little)."""
    return [m.span() for m in TOKEN.finditer(data) if not m.group().startswith(b"#")]


def _code_lines(lines: list[bytes]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.strip() and not line.strip().startswith(b"#")] or [0]


def _code_pos(rng: random.Random, data: bytes, spans) -> int:
    """A position at the start or end of a code token."""
    if not spans:
        return rng.randrange(len(data) + 1)
    return rng.choice(rng.choice(spans))


def _mutate(rng: random.Random, data: bytes, words: list[bytes]) -> tuple[str, bytes]:
    spans = _tokens(data)
    kind = rng.randrange(11)
    if kind == 0 and spans:  # delete a token
        a, b = rng.choice(spans)
        return "delete", data[:a] + data[b:]
    if kind == 1 and spans:  # duplicate a token
        a, b = rng.choice(spans)
        return "duplicate", data[:b] + b" " + data[a:b] + data[b:]
    if kind == 2 and len(spans) > 1:  # swap two neighbouring tokens
        i = rng.randrange(len(spans) - 1)
        (a, b), (c, d) = spans[i], spans[i + 1]
        return "swap", data[:a] + data[c:d] + data[b:c] + data[a:b] + data[d:]
    if kind == 3:  # truncate
        return "truncate", data[:rng.randrange(len(data) + 1)]
    if kind == 4:  # insert random bytes (any value)
        pos = _code_pos(rng, data, spans)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 6)))
        return "random-bytes", data[:pos] + junk + data[pos:]
    if kind == 5:  # a byte that is never valid UTF-8 (anywhere: comments too)
        pos = rng.randrange(len(data) + 1)
        return "non-utf8", data[:pos] + rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\x80"]) + data[pos:]
    if kind == 6 and spans:  # replace a token by a keyword, name or symbol
        a, b = rng.choice(spans)
        return "replace", data[:a] + rng.choice(words) + data[b:]
    if kind == 7:  # drop a line
        lines = data.split(b"\n")
        del lines[rng.choice(_code_lines(lines))]
        return "drop-line", b"\n".join(lines)
    if kind == 8:  # repeat a line somewhere else
        lines = data.split(b"\n")
        line = lines[rng.choice(_code_lines(lines))]
        lines.insert(rng.randrange(len(lines) + 1), line)
        return "repeat-line", b"\n".join(lines)
    if kind == 9 and spans:  # several edits at once
        out = data
        for _ in range(rng.randrange(2, 5)):
            out = _mutate(rng, out, words)[1]
        return "multi", out
    # insert a printable character that is not part of the language, or a brace/quote
    pos = _code_pos(rng, data, spans)
    return "insert-char", data[:pos] + rng.choice([b"$", b"@", b"{", b"}", b'"', b"(", b";", b"\t", b"`"]) + data[pos:]


def test_mutants_end_in_diagnostics_never_exceptions():
    sources = read_sources(resolve_paths(None))
    words = sorted(w.encode() for w in keywords()) + [b"op", b"x", b"c.span_bytes", b"0", b"-1", b"{}", b"[]",
                                                     b"\"{missing}\"", b"true", b"AUTO_SPLIT_CAP", b"is known"]
    rng = random.Random(SEED)
    kinds: dict[str, int] = {}
    with_diagnostics = 0
    start = time.perf_counter()
    for n in range(N_MUTANTS):
        index = n % len(sources)
        name, data = sources[index]
        kind, mutant = _mutate(rng, data, words)
        kinds[kind] = kinds.get(kind, 0) + 1
        trial = list(sources)
        trial[index] = (name, mutant)
        try:
            result = check_sources(trial)
            for d in result.diagnostics:
                assert isinstance(d, Diagnostic)
                assert d.span.line >= 1 and d.span.col >= 1, d
                render_text(d, result.texts.get(d.span.file), strict=True)
        except Exception as exc:  # pragma: no cover - the failure report
            raise AssertionError(f"mutant {n} ({kind} of {name}) raised {exc!r}; mutant bytes:\n{mutant!r}") from exc
        with_diagnostics += bool(result.diagnostics)
    elapsed = time.perf_counter() - start
    assert len(kinds) >= 10, kinds
    # Most mutants break something; a few (a swapped pair of equal tokens, a
    # repeated blank line) are still clean policies.
    assert with_diagnostics > N_MUTANTS * 0.8, (with_diagnostics, kinds)
    assert elapsed < 150, f"{N_MUTANTS} mutants took {elapsed:.1f}s"  # ~30 s on 2 cores; a hang fails here
