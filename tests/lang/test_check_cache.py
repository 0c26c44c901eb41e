"""`spyre-rules check` prints a remembered report for inputs it already checked
(commands/check_cache.py): the same bytes and exit code as checking, without
importing the syntax tree, the checker or torch; and any change of a file, an
option or the checker's own source is checked afresh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from spyre_rules.commands import check_cache

ROOT = Path(__file__).resolve().parents[2]

_PROBE = """
import atexit, json, runpy, sys
def report():
    sys.__stderr__.write("MODULES " + json.dumps(sorted(sys.modules)) + "\\n")
atexit.register(report)
sys.argv = ["spyre_rules", *{args!r}]
runpy.run_module("spyre_rules", run_name="__main__", alter_sys=True)
"""
# Modules a remembered report does without (it only reads and hashes its inputs).
CHECKING_MODULES = {"spyre_rules.lang.ast", "spyre_rules.lang.parser", "spyre_rules.lang.checker",
                    "spyre_rules.lang.driver", "spyre_rules.lang.diagnostics", "spyre_rules.lang.prelude"}


def _run(args: list[str], cache: Path, cwd: Path = ROOT, **env) -> tuple[int, str, set[str]]:
    full = {k: v for k, v in os.environ.items() if k != check_cache.ENV_SWITCH}
    full.update(PYTHONPATH=str(ROOT), SPYRE_RULES_CACHE_DIR=str(cache), **env)
    proc = subprocess.run([sys.executable, "-c", _PROBE.format(args=args)], capture_output=True, text=True,
                          cwd=cwd, env=full)
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES "))
    return proc.returncode, proc.stdout, set(json.loads(line[len("MODULES "):]))


@pytest.mark.parametrize("args", [["check"], ["check", "rules/planner.rules"], ["check", "--strict"],
                                  ["check", "--format", "json", "rules/planner.rules"]])
def test_a_remembered_report_is_the_checked_one_without_the_checker(tmp_path, args):
    first = _run(args, tmp_path)
    second = _run(args, tmp_path)
    assert CHECKING_MODULES <= first[2]  # the first run checked
    assert second[:2] == first[:2]       # same exit code, same bytes
    assert not (CHECKING_MODULES | {"torch", "lark"}) & second[2], sorted(CHECKING_MODULES & second[2])
    assert len(list((tmp_path / "check-results").iterdir())) == 1


def test_expected_outputs_of_both_paths(tmp_path):
    clean = _run(["check"], tmp_path)[:2], _run(["check"], tmp_path)[:2]
    assert clean[0] == clean[1] == (0, "checked 7 files: no problems\n")
    broken = [_run(["check", "rules/planner.rules"], tmp_path)[:2] for _ in range(2)]
    for code, out in broken:
        assert code == 1 and "error[E010]: unknown name `MAX_TILE_DIMS`" in out
        assert out.endswith("checked 2 files: 9 errors, 0 warnings\n")


def test_an_edited_file_is_checked_again(tmp_path):
    policy = tmp_path / "policy"
    shutil.copytree(ROOT / "rules", policy, ignore=shutil.ignore_patterns("tests"))
    cache = tmp_path / "cache"
    assert _run(["check", str(policy)], cache)[:2] == (0, "checked 7 files: no problems\n")
    limits = policy / "limits.rules"
    limits.write_text(limits.read_text() + "const ANSWER = 42;\n")  # unused: a warning
    code, out, modules = _run(["check", str(policy)], cache)
    assert code == 0 and "warning[W001]" in out and "ANSWER" in out
    assert out.endswith("checked 7 files: 0 errors, 1 warning\n")
    assert "spyre_rules.lang.checker" in modules
    # the new report is remembered beside the old one
    assert _run(["check", str(policy)], cache)[:2] == (code, out)
    assert len(list((cache / "check-results").iterdir())) == 2


def test_the_display_names_are_part_of_the_key(tmp_path):
    cache = tmp_path / "cache"
    from_root = _run(["check", "rules/planner.rules"], cache)
    from_rules = _run(["check", "planner.rules"], cache, cwd=ROOT / "rules")
    assert "rules/planner.rules:" in from_root[1] and "\nplanner.rules:" in "\n" + from_rules[1]
    assert "spyre_rules.lang.checker" in from_rules[2]


def test_switched_off_it_checks_every_time_and_stores_nothing(tmp_path):
    for _ in range(2):
        code, out, modules = _run(["check"], tmp_path, SPYRE_RULES_CHECK_CACHE="0")
        assert (code, out) == (0, "checked 7 files: no problems\n") and "spyre_rules.lang.checker" in modules
    assert not (tmp_path / "check-results").exists()


def test_an_unwritable_cache_only_means_checking(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for _ in range(2):
        code, out, modules = _run(["check"], blocker / "cache")
        assert (code, out) == (0, "checked 7 files: no problems\n") and "spyre_rules.lang.checker" in modules


def test_a_corrupt_entry_is_checked_again(tmp_path):
    _run(["check"], tmp_path)
    (entry,) = (tmp_path / "check-results").iterdir()
    entry.write_bytes(b"not a code\n")
    code, out, modules = _run(["check"], tmp_path)
    assert (code, out) == (0, "checked 7 files: no problems\n") and "spyre_rules.lang.checker" in modules
    assert entry.read_bytes() == b"0\nchecked 7 files: no problems\n"


def test_the_key_covers_inputs_options_and_the_checker(tmp_path, monkeypatch):
    sources = [("rules/prelude.rules", b"x"), ("rules/limits.rules", b"const A = 1;")]
    base = check_cache.result_key(sources, True, "text", False)
    assert base == check_cache.result_key(list(sources), True, "text", False)
    variants = [
        check_cache.result_key(sources[:1], True, "text", False),
        check_cache.result_key([sources[0], ("rules/limits.rules", b"const A = 2;")], True, "text", False),
        check_cache.result_key([sources[0], ("limits.rules", b"const A = 1;")], True, "text", False),
        check_cache.result_key(sources[::-1], True, "text", False),
        check_cache.result_key(sources, False, "text", False),
        check_cache.result_key(sources, True, "json", False),
        check_cache.result_key(sources, True, "text", True),
        # a file boundary moved: same concatenated bytes, another key
        check_cache.result_key([("a", b"bc"), ("d", b"")], True, "text", False),
    ]
    assert check_cache.result_key([("a", b"b"), ("cd", b"")], True, "text", False) not in variants
    assert len({base, *variants}) == len(variants) + 1
    # the checker's own source: an edited module is another key
    module = tmp_path / "lang_module.py"
    module.write_text("X = 1\n")
    monkeypatch.setattr(check_cache, "_CHECKER_FILES", (*check_cache._CHECKER_FILES, module))
    before = check_cache.result_key(sources, True, "text", False)
    module.write_text("X = 2\n")
    assert check_cache.result_key(sources, True, "text", False) != before


def test_every_language_module_is_part_of_the_checker():
    hashed = {str(p.relative_to(ROOT)) for p in check_cache._checker_files()}
    lang = {str(p.relative_to(ROOT)) for p in (ROOT / "spyre_rules" / "lang").rglob("*.py")}
    assert lang <= hashed
    assert {"grammar/spyre_rules.lark", "spyre_rules/commands/check.py",
            "spyre_rules/commands/check_cache.py"} <= hashed


def test_the_oldest_entries_go_first(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_RULES_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(check_cache, "MAX_ENTRIES", 3)
    for i in range(5):
        check_cache.store(f"k{i}", 0, f"report {i}\n")
        os.utime(tmp_path / "check-results" / f"k{i}.txt", ns=(i * 10**9, i * 10**9))
    assert sorted(p.name for p in (tmp_path / "check-results").iterdir()) == ["k2.txt", "k3.txt", "k4.txt"]
    assert check_cache.load("k4") == (0, "report 4\n") and check_cache.load("k0") is None
