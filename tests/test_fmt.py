"""``spyre-rules fmt``: canonical layout, idempotent, comments kept, meaning unchanged.

The mutants re-lay out the bundled files at random (spaces, line breaks, blank
lines between tokens; comments always end their line) and change the numbers
of limits.rules: each must format to a fixed point with exactly its tokens and
comments, and every tenth is checked in full (clean, same typed AST).
"""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest

from spyre_rules import cli
from spyre_rules.lang.driver import check_sources
from spyre_rules.lang.formatter import format_text

ROOT = Path(__file__).resolve().parent.parent
RULES = sorted((ROOT / "rules").glob("*.rules"))
TOKEN = re.compile(r'#[^\n]*|"(?:[^"\\\n]|\\.)*"|[A-Za-z_][A-Za-z0-9_]*|[0-9][0-9_]*|//|==|!=|<=|>=|->|\S')
TIGHT = set("()[]{},;:.?")
N_MUTANTS = 600
SEED = 15


def tokens(text: str) -> list[str]:
    return [t.rstrip() for t in TOKEN.findall(text)]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["fmt", *argv])
    out, err = capsys.readouterr()
    return code, out, err


MESSY = """\
# top comment


const A=3;const B = 8 KiB ;   # two consts
eligibility {  skip a when not is_pointwise( op )and rank(op)>=  -1 because "x {op}"; reject b
  when has_user_hints(op)
       or is_reduction(op) because "y";


  # trailing section comment
}
"""

MESSY_FORMATTED = """\
# top comment

const A = 3;
const B = 8 KiB;              # two consts
eligibility {
  skip a when not is_pointwise(op) and rank(op) >= -1 because "x {op}";
  reject b
    when has_user_hints(op)
         or is_reduction(op) because "y";

  # trailing section comment
}
"""


def test_bundled_rules_are_formatted(capsys):
    code, out, err = run(capsys, "--check", str(ROOT / "rules"))
    assert (code, err) == (0, "")
    files = len(list((ROOT / "rules").glob("*.rules")))
    assert files >= 7 and out == f"{files} files: 0 would be reformatted\n"


def test_canonical_layout():
    assert format_text(MESSY) == MESSY_FORMATTED
    assert format_text(MESSY_FORMATTED) == MESSY_FORMATTED


def test_check_prints_a_diff_and_writes_nothing(capsys, tmp_path):
    path = tmp_path / "messy.rules"
    path.write_text("const A=3;\n")
    code, out, _ = run(capsys, "--check", str(path))
    assert code == 1
    assert path.read_text() == "const A=3;\n"
    assert out.splitlines() == [
        f"--- {path} (as written)", f"+++ {path} (formatted)", "@@ -1 +1 @@",
        "-const A=3;", "+const A = 3;", "1 file: 1 would be reformatted"]


def test_fmt_rewrites_in_place(capsys, tmp_path):
    path = tmp_path / "messy.rules"
    path.write_text(MESSY)
    assert run(capsys, str(path)) == (0, f"formatted {path}\n1 file: 1 reformatted\n", "")
    assert path.read_text() == MESSY_FORMATTED
    assert run(capsys, "--check", str(path))[0] == 0


def test_a_file_with_syntax_errors_is_left_alone(capsys, tmp_path):
    path = tmp_path / "bad.rules"
    path.write_text("const A = ;\n")
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert path.read_text() == "const A = ;\n"
    assert f"{path}: not formatted (syntax errors)" in out
    assert "error[E001]" in out


def test_a_formatter_bug_never_reaches_the_file(capsys, tmp_path, monkeypatch):
    from spyre_rules.lang import formatter

    path = tmp_path / "a.rules"
    path.write_text("const A=3;\n")
    monkeypatch.setattr(formatter, "format_text", lambda text: "const A = 4;\n")
    code, _, err = run(capsys, str(path))
    assert code == 2 and "formatting would change the syntax tree" in err
    assert path.read_text() == "const A=3;\n"


def test_missing_path_is_a_usage_error(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path / "nope.rules"))
    assert code == 2 and "no such file or directory" in err


# ------------------------------------------------------------------ mutants


def _relayout(rng: random.Random, text: str) -> str:
    """``text`` with random whitespace between its tokens (same tokens, same comments)."""
    spans = [m.span() for m in TOKEN.finditer(text)]
    out = [text[:spans[0][0]]]
    for i, (a, b) in enumerate(spans):
        out.append(text[a:b])
        end = spans[i + 1][0] if i + 1 < len(spans) else len(text)
        sep = text[b:end]
        if i + 1 < len(spans) and rng.random() < 0.2:
            left, right = text[a:b], text[spans[i + 1][0]:spans[i + 1][1]]
            choices = ["\n", "\n\n", "\n      ", " \n\n\n  "]
            if not left.startswith("#"):
                choices += [" ", "   ", "\t "]
                if left in TIGHT or right in TIGHT:
                    choices.append("")
            sep = rng.choice(choices)
        out.append(sep)
    return "".join(out)


def _renumber(rng: random.Random, text: str) -> str:
    """limits.rules with other (positive) numbers."""
    return re.sub(r"(?m)^(const \w+ = )\d+;", lambda m: f"{m.group(1)}{rng.randint(1, 999)};", text)


def _typed(node, types: dict[int, object]) -> object:
    """A checked tree as nested tuples: node kinds, values and each expression's type; no spans."""
    if dataclasses.is_dataclass(node):
        fields = tuple(_typed(getattr(node, f.name), types) for f in dataclasses.fields(node)
                       if f.name not in ("span", "path", "text"))
        return (type(node).__name__, repr(types.get(id(node))), *fields)
    if isinstance(node, list):
        return tuple(_typed(x, types) for x in node)
    return node


def _checked(sources: dict[str, str]):
    result = check_sources(list(sources.items()))
    assert [d.code for d in result.diagnostics if d.severity(False) == "error"] == []
    checker = result.checker
    return (_typed([f.items for f in result.files], checker.expr_types),
            {k: (repr(v.type), v.value) for k, v in checker.consts.items()},
            [(d.code, d.message) for d in result.diagnostics])


def test_mutants_format_to_a_fixed_point_keeping_tokens_comments_and_meaning():
    rng = random.Random(SEED)
    originals = {f"rules/{p.name}": p.read_text() for p in RULES}
    for i in range(N_MUTANTS):
        name = rng.choice(list(originals))
        text = originals[name]
        if name.endswith("limits.rules") and rng.random() < 0.5:
            text = _renumber(rng, text)
        mutant = _relayout(rng, text)
        formatted = format_text(mutant)
        assert format_text(formatted) == formatted, f"mutant {i} of {name}: not idempotent"
        assert tokens(formatted) == tokens(mutant), f"mutant {i} of {name}: tokens changed"
        if i % 10 == 0:
            before = _checked({**originals, name: mutant})
            after = _checked({**originals, name: formatted})
            assert after == before, f"mutant {i} of {name}: the checked tree changed"


@pytest.mark.parametrize("path", RULES, ids=lambda p: p.name)
def test_bundled_files_keep_every_comment_in_order(path):
    text = path.read_text()
    comments = [t for t in tokens(text) if t.startswith("#")]
    assert [t for t in tokens(format_text(text)) if t.startswith("#")] == comments
