"""Shared test setup.

syrupy writes every snapshot under the top-level ``snapshots/`` folder,
mirroring the test file's place under ``tests/``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from syrupy.extensions.amber import AmberSnapshotExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
SNAPSHOTS = ROOT / "snapshots"


def _snapshot_dir(test_location) -> str:
    rel = Path(test_location.filepath).resolve().parent.relative_to(TESTS)
    return str(SNAPSHOTS / rel)


class TopLevelAmberExtension(AmberSnapshotExtension):
    @classmethod
    def dirname(cls, *, test_location) -> str:
        return _snapshot_dir(test_location)


class TopLevelTextExtension(SingleFileSnapshotExtension):
    """One text file per snapshot (wrapper sources, bundle.mlir, diagnostics)."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"

    @classmethod
    def dirname(cls, *, test_location) -> str:
        return str(Path(_snapshot_dir(test_location)) / Path(test_location.filepath).stem)


@pytest.fixture
def snapshot(snapshot):
    return snapshot.use_extension(TopLevelAmberExtension)


@pytest.fixture
def text_snapshot(snapshot):
    return snapshot.use_extension(TopLevelTextExtension)
