"""Every test here starts and ends with no declared tensor dims."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _fresh_dims(fresh_dims):
    yield
