"""The invalid corpus: one file (or directory) per diagnostic kind, named for
its code.  The exact text rendering of every diagnostic -- message, source
line, caret -- is pinned as a snapshot under snapshots/lang/."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spyre_rules.lang.diagnostics import CODES, render_text, summary
from spyre_rules.lang.driver import check_paths

INVALID = Path(__file__).resolve().parent / "invalid"

ENTRIES = sorted(p.name for p in INVALID.iterdir() if p.suffix == ".rules" or p.is_dir())


def render(paths: list[str]) -> tuple[str, list[str]]:
    result = check_paths(paths)
    lines = [render_text(d, result.texts.get(d.span.file)) for d in result.diagnostics]
    errors, warnings = result.count()
    lines.append(summary(len(result.names), errors, warnings))
    return "\n".join(lines) + "\n", [d.code for d in result.diagnostics]


def test_corpus_is_big_enough():
    files = [e for e in ENTRIES if e.endswith(".rules")]
    assert len(files) >= 25
    named = {e[:4] for e in ENTRIES}
    assert named <= set(CODES), named - set(CODES)
    # every diagnostic code has its own corpus entry
    assert set(CODES) <= named, set(CODES) - named


@pytest.mark.parametrize("entry", ENTRIES)
def test_invalid_file(entry, in_root, text_snapshot):
    rel = os.path.relpath(INVALID / entry)
    text, codes = render([rel])
    assert entry[:4] in codes, f"{entry} does not produce {entry[:4]}:\n{text}"
    assert text == text_snapshot
