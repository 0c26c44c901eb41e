"""Code, rules, tests and benches cite only this repository's docs, and only sections that exist.

A citation of a file outside the repository (the design notes and seeds it was
started from) means nothing to a reader of a clone; a doc named without its
``docs/`` folder is ambiguous; ``docs/X.md §N`` must name a section of X.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("spyre_rules", "rules", "tests", "bench")
SUFFIXES = {".py", ".rules", ".toml", ".md", ".txt", ".lark"}
DOCS = tuple(sorted(p.stem for p in (ROOT / "docs").glob("*.md")))  # every doc, so a new one is checked too

#: What a citation of something outside the repository looks like.
OUTSIDE = [
    re.compile(r"\.\./shared|/work/shared"),
    re.compile(r"(?<![\w.])design/"),
    re.compile(r"\bseeds/"),
    re.compile(r"(?i)\bseeds? ?\d{3}\b"),
    re.compile(r"(?i)\bthe seed\b|\bseed's\b|\bseed §"),
    # a doc named without its folder: design/layout_model.md and docs/layout_model.md look alike
    re.compile(rf"(?<![\w/\"'])(?:{'|'.join(DOCS)})(?:\.md)?(?= ?§|\.md)"),
]
CITED_SECTION = re.compile(rf"docs/({'|'.join(DOCS)})\.md`{{0,2}} ?§(\d+(?:\.\d+)?)")
CITED_PITFALL = re.compile(r"docs/inductor_integration\.md`{0,2} pitfalls? (\d+)")
THIS_FILE = Path(__file__).resolve()


def _files():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and path.resolve() != THIS_FILE \
                    and "__pycache__" not in path.parts:
                yield path


def _lines():
    for path in _files():
        # errors="replace": the invalid-input corpus holds deliberately non-UTF-8 files
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            yield f"{path.relative_to(ROOT)}:{number}", line


def _sections(doc: str) -> set[str]:
    """Numbered headings (``## 3.``, ``### 3.2``) and numbered paragraphs (``7.8.``)."""
    text = (ROOT / "docs" / f"{doc}.md").read_text(encoding="utf-8")
    found = set(re.findall(r"^#+ (\d+(?:\.\d+)?)\.? ", text, re.M))
    found |= set(re.findall(r"^(\d+\.\d+)\. ", text, re.M))
    return found


def _pitfalls() -> set[str]:
    text = (ROOT / "docs" / "inductor_integration.md").read_text(encoding="utf-8")
    part = text.split("## 4. Pitfalls", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"^(\d+)\. ", part, re.M))


def test_nothing_cites_a_file_outside_the_repository():
    found = [f"{where}: {line.strip()}" for where, line in _lines()
             if any(p.search(line) for p in OUTSIDE)]
    assert found == []


def test_every_cited_docs_section_exists():
    sections = {doc: _sections(doc) for doc in DOCS}
    pitfalls = _pitfalls()
    missing = []
    for where, line in _lines():
        for doc, section in CITED_SECTION.findall(line):
            if section not in sections[doc]:
                missing.append(f"{where}: docs/{doc}.md §{section}")
        for pitfall in CITED_PITFALL.findall(line):
            if pitfall not in pitfalls:
                missing.append(f"{where}: docs/inductor_integration.md pitfall {pitfall}")
    assert missing == []


def test_the_checks_recognise_what_they_refuse():
    refused = ["see design/layout_model.md §2", "layout_model §5.4", "(seed 003 layer 2)",
               "the seed's ((0, 10))", "../shared/seeds/000.txt", "architecture.md, difference 3"]
    assert [text for text in refused if not any(p.search(text) for p in OUTSIDE)] == []
    allowed = ["docs/layout_model.md §5.4", "(docs/architecture.md)", "random seed 7", "seed=3",
               '"rules_language.md"']
    assert [text for text in allowed if any(p.search(text) for p in OUTSIDE)] == []
    assert CITED_SECTION.findall("``docs/layout_model.md`` §2.1") == [("layout_model", "2.1")]
