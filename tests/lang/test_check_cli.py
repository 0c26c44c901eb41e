"""`spyre-rules check`: the bundled rules are clean under --strict, output
formats, exit codes, and no torch import."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from argparse import Namespace
from pathlib import Path

import pytest

from spyre_rules.commands import check as check_cmd
from spyre_rules.lang.driver import check_paths

ROOT = Path(__file__).resolve().parents[2]
INVALID = Path(__file__).resolve().parent / "invalid"
# A command line that checks every time (no remembered report: test_check_cache.py).
CHECKING = dict(os.environ, SPYRE_RULES_CHECK_CACHE="0")


def run_check(capsys, *paths: str, fmt: str = "text", strict: bool = False) -> tuple[int, str, str]:
    code = check_cmd.run(Namespace(paths=list(paths), format=fmt, strict=strict))
    out, err = capsys.readouterr()
    return code, out, err


def test_bundled_rules_are_clean_under_strict(in_root):
    result = check_paths(None)
    assert [d.code for d in result.diagnostics] == []
    assert result.count(strict=True) == (0, 0)
    assert sorted(Path(n).name for n in result.names) == [
        "collectives.rules", "grouping.rules", "layout_choice.rules", "limits.rules", "planner.rules",
        "prelude.rules", "restickify.rules"]


def test_bundled_rules_cli_strict_subprocess():
    proc = subprocess.run([sys.executable, "-m", "spyre_rules", "check", "--strict"],
                          capture_output=True, text=True, cwd=ROOT, env=CHECKING)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.strip() == "checked 7 files: no problems"


def test_json_format(in_root, capsys, no_gc_freeze):
    path = "tests/lang/invalid/E031_placeholder_names_nothing.rules"
    code, out, _ = run_check(capsys, path, fmt="json")
    assert code == 1
    doc = json.loads(out)
    assert doc["files"] == ["rules/prelude.rules", path]
    assert doc["errors"] == 3 and doc["warnings"] == 0 and doc["strict"] is False
    first = doc["diagnostics"][0]
    assert first == {
        "file": path, "line": 6, "col": 77, "end_line": 6, "end_col": 87,
        "severity": "error", "code": "E031",
        "message": "placeholder `{producer}` names nothing in scope",
        "notes": ["help: did you mean `producers`?"],
        "source_line": '    because "Cannot auto-tile {op}: it reads already auto-tiled producer(s) {producer} '
                       '({run.member}, {config.max_span})";',
    }
    assert {d["code"] for d in doc["diagnostics"]} == {"E031"}


def test_json_strict_turns_warnings_into_errors(in_root, capsys, no_gc_freeze):
    path = "tests/lang/invalid/W001_unused_constant.rules"
    code, out, _ = run_check(capsys, path, fmt="json")
    assert code == 0
    assert json.loads(out)["diagnostics"][0]["severity"] == "warning"
    code, out, _ = run_check(capsys, path, fmt="json", strict=True)
    assert code == 1
    doc = json.loads(out)
    assert doc["errors"] == 1 and doc["warnings"] == 0
    assert doc["diagnostics"][0]["severity"] == "error" and doc["diagnostics"][0]["code"] == "W001"


def test_text_format_and_strict(in_root, capsys, no_gc_freeze):
    path = "tests/lang/invalid/W002_unused_binding.rules"
    code, out, _ = run_check(capsys, path)
    assert code == 0
    assert out.splitlines()[0] == f"{path}:5:9: warning[W002]: loop variable `s` is never used"
    assert out.splitlines()[-1] == "checked 2 files: 0 errors, 2 warnings"
    code, out, _ = run_check(capsys, path, strict=True)
    assert code == 1
    assert out.splitlines()[0] == f"{path}:5:9: error[W002]: loop variable `s` is never used"
    assert out.splitlines()[-1] == "checked 2 files: 2 errors, 0 warnings"


@pytest.mark.parametrize("make, message", [
    (lambda tmp: str(tmp / "missing.rules"), "no such file or directory"),
    (lambda tmp: (tmp / "policy.txt").write_text("const A = 1;") and str(tmp / "policy.txt"), "not a .rules file"),
    (lambda tmp: str(tmp), "no .rules files in this directory"),
])
def test_usage_errors_exit_2(tmp_path, capsys, no_gc_freeze, make, message):
    code, out, err = run_check(capsys, make(tmp_path))
    assert code == 2
    assert out == ""
    assert message in err and err.startswith("spyre-rules check: error: ")


def test_unreadable_file_exits_2(tmp_path, capsys, no_gc_freeze, monkeypatch):
    blocked = tmp_path / "blocked.rules"
    blocked.write_text("const A = 1;\n")
    real = os.open

    def fake_open(path, *args, **kwargs):  # the tests run as root: chmod cannot refuse the read
        if str(path).endswith("blocked.rules"):
            raise PermissionError(13, "Permission denied")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake_open)
    code, out, err = run_check(capsys, str(blocked))
    assert code == 2 and out == ""
    assert err == f"spyre-rules check: error: {blocked}: cannot read: Permission denied\n"


def test_non_utf8_is_a_diagnostic_not_an_io_error(in_root, capsys, no_gc_freeze):
    code, out, _ = run_check(capsys, "tests/lang/invalid/E004_not_utf8.rules")
    assert code == 1
    assert "error[E004]" in out


def test_several_files_share_constants(tmp_path, capsys, no_gc_freeze):
    (tmp_path / "a.rules").write_text("const CAP = 64;\n")
    (tmp_path / "b.rules").write_text(textwrap.dedent("""\
        legality {
          splits k in divisors(128);
          require cap: k <= CAP;
        }
    """))
    code, out, _ = run_check(capsys, str(tmp_path / "a.rules"), str(tmp_path / "b.rules"))
    assert code == 0, out
    code, out, _ = run_check(capsys, str(tmp_path / "b.rules"))
    assert code == 1 and "unknown name `CAP`" in out


def test_directory_is_checked_as_a_whole_policy(tmp_path, capsys, no_gc_freeze):
    for f in (ROOT / "rules").glob("*.rules"):
        (tmp_path / f.name).write_text(f.read_text())
    code, out, _ = run_check(capsys, str(tmp_path), strict=True)
    assert code == 0, out
    (tmp_path / "grouping.rules").unlink()
    code, out, _ = run_check(capsys, str(tmp_path))
    assert code == 1
    assert "error[E018]: the policy has no `grouping` section" in out


def test_check_never_imports_torch():
    probe = textwrap.dedent("""
        import sys
        from spyre_rules.cli import main
        sys.argv = ["spyre-rules", "check", "--strict"]
        code = main()
        loaded = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
        assert not loaded, loaded
        assert "spyre_rules.lang.checker" in sys.modules
        sys.exit(code)
    """)
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=CHECKING)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_python_m_check_importtime_has_no_torch():
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "spyre_rules", "check"],
                          capture_output=True, text=True, cwd=ROOT, env=CHECKING)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    imported = {line.split("|")[-1].strip() for line in proc.stderr.splitlines() if line.startswith("import time:")}
    assert "spyre_rules.lang.checker" in imported
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}
