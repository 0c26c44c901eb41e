"""Helpers for the language tests: run the checker from the repository root
so that diagnostics show stable relative paths."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def in_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    return ROOT


@pytest.fixture
def no_gc_freeze(monkeypatch):
    """`spyre-rules check` freezes the GC before exiting; not in a test process."""
    from spyre_rules.commands import check

    monkeypatch.setattr(check, "FREEZE_GC_AT_EXIT", False)
