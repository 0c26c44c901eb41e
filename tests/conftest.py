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


@pytest.fixture
def capture():
    """``capture_operations`` after a Dynamo reset (the backend binds input dim names)."""
    import torch

    from spyre_rules.backend.capture import capture_operations

    def run(fn, *inputs):
        torch._dynamo.reset()
        return capture_operations(fn, *inputs)

    return run


@pytest.fixture
def root_error():
    """The first exception of type ``cls`` in the chain Dynamo/Inductor wrapped around it."""
    from spyre_rules.ir.errors import find_cause

    def find(exc, cls):
        cause = find_cause(exc, cls)
        if cause is None:
            raise AssertionError(f"no {cls.__name__} in the chain of {exc!r}")
        return cause

    return find


@pytest.fixture
def fresh_dims():
    """A clean registry of declared tensor dims around the test."""
    from spyre_rules.hints import clear_tensor_dims

    clear_tensor_dims()
    yield
    clear_tensor_dims()
