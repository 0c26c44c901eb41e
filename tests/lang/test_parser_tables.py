"""The cached parser tables (``lang/lark_support.py``): exact, keyed by the
grammar text, rebuilt when missing or corrupt, and ``check`` runs without lark."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from spyre_rules.lang import lark_support as L
from spyre_rules.lang.parser import _Parser
from spyre_rules.resources import grammar_file

ROOT = Path(__file__).resolve().parents[2]
GRAMMAR = grammar_file().read_text(encoding="utf-8")


def test_tables_are_built_once_then_read_back(tmp_path, monkeypatch):
    # (lark numbers the LALR states differently from one build to the next, so
    # two builds are compared through the parsers they make, below.)
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path))
    built = L.load_tables(GRAMMAR)
    assert [p.name for p in tmp_path.iterdir()] == [L.cache_file(GRAMMAR).name]
    assert L.load_tables(GRAMMAR) == built
    # marshal's bytes depend on object sharing (back-references), so compare values
    assert __import__("marshal").loads(L.cache_file(GRAMMAR).read_bytes()) == built


def test_a_changed_grammar_never_reads_the_old_tables(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path))
    L.load_tables(GRAMMAR)
    changed = GRAMMAR.replace('"extern"', '"external"')
    assert L.cache_file(changed) != L.cache_file(GRAMMAR)
    assert ("EXTERN", "str", "external", "external") in L.load_tables(changed)["terminals"]
    assert ("EXTERN", "str", "extern", "extern") in L.load_tables(GRAMMAR)["terminals"]
    assert len(list(tmp_path.iterdir())) == 2


def test_a_corrupt_cache_file_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path))
    path = L.cache_file(GRAMMAR)
    for junk in (b"", b"\x00garbage", __import__("marshal").dumps({"format": -1})):
        path.write_bytes(junk)
        tables = L.load_tables(GRAMMAR)
        assert L._valid(tables) and len(tables["states"]) > 100
        assert L._valid(__import__("marshal").loads(path.read_bytes()))


def test_an_unwritable_cache_dir_builds_in_memory(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(blocker / "cache"))
    assert L._valid(L.load_tables(GRAMMAR))
    assert blocker.read_text() == "not a directory"


def test_cache_dir_defaults_to_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv("SPYRE_RULES_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert L.cache_dir() == tmp_path / "spyre-rules"


def test_parsers_from_two_builds_give_the_same_trees_and_diagnostics(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path / "a"))
    one = _Parser()
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path / "b"))
    other = _Parser()
    assert one.states.keys() == other.states.keys()
    paths = [*sorted((ROOT / "rules").glob("*.rules")), *sorted((ROOT / "tests/lang/invalid").rglob("*.rules"))]
    assert len(paths) > 20
    for path in paths:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert repr(one.parse(text, path.name)) == repr(other.parse(text, path.name)), path


def test_token_behaves_like_the_text_with_positions():
    tok = L.Token("NAME", "abc", 4, 2, 3, 2, 6, 7)
    assert tok == "abc" and str(tok) == "abc" and tok.value == "abc"
    assert (tok.type, tok.start_pos, tok.line, tok.column, tok.end_line, tok.end_column, tok.end_pos) == \
        ("NAME", 4, 2, 3, 2, 6, 7)
    import pickle

    back = pickle.loads(pickle.dumps(tok))
    assert (back, back.type, back.end_pos) == ("abc", "NAME", 7)


def test_check_imports_neither_lark_nor_torch(tmp_path):
    env = dict(os.environ, SPYRE_RULES_CACHE_DIR=str(tmp_path), PYTHONPATH=str(ROOT))
    probe = ("import sys\nfrom spyre_rules.cli import main\ncode = main(['check'])\n"
             "import json\nprint(json.dumps([code, sorted({m.split('.')[0] for m in sys.modules} "
             "& {'lark', 'torch', 'numpy', 'sympy', 'hashlib', 'regex'})]))\n")
    runs = [subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, cwd=ROOT,
                           check=True) for _ in range(2)]
    first, second = (json.loads(r.stdout.strip().splitlines()[-1]) for r in runs)
    assert first[0] == 0 and "lark" in first[1]  # the first run builds the tables with lark
    assert second == [0, []]
