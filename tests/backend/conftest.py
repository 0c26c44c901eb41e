"""Fixtures for backend tests (helpers live in spyre_helpers.py)."""

from __future__ import annotations

import pytest

from spyre_helpers import run_spyre


@pytest.fixture
def spyre():
    return run_spyre
