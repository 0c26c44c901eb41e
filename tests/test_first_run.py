"""A first run without noise: the README's test command prints pytest's summary line.

Runs the README's pytest invocation (with the repository's pytest config) on one
small test file in a subprocess, as a new user's terminal would show it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SMALL = "tests/test_config.py"


def _readme_pytest_command() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    found = re.search(r"&& (python3 -m pytest[^\n`]*)", readme)
    assert found, "the README's test command runs pytest"
    return found.group(1).split()


def test_readme_pytest_invocation_prints_the_summary_line():
    argv = _readme_pytest_command()
    assert argv == ["python3", "-m", "pytest", "-q", "-n", "auto"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, *argv[1:], SMALL], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ passed in \d+\.\d+s", last), proc.stdout
    assert "Failed to initialize NumPy" not in proc.stdout + proc.stderr
