"""The README documents the whole fact vocabulary of the bundled prelude."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _prelude_facts() -> list[str]:
    text = (ROOT / "rules" / "prelude.rules").read_text()
    return [m.group(1).strip() for m in re.finditer(r"^fact\s+([^;]+);", text, re.M)]


def test_every_prelude_fact_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    facts = _prelude_facts()
    assert len(facts) > 20
    missing = [sig for sig in facts if f"`{sig}`" not in readme]
    assert not missing, f"README fact table is missing: {missing}"


def test_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line for line in quick.strip().splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[1] == "python3 -m pip install -e '.[test]' && python3 -m pytest -q"
