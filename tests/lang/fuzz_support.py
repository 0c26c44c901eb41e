"""Import of ``bench/fuzz_rules.py`` for the tests (bench/ is not a package).

bench/ goes on ``sys.path`` so that the fuzzer's worker processes (spawned:
they inherit ``sys.path``) can import the module too.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

_BENCH = str(Path(__file__).resolve().parents[2] / "bench")


def load():
    if _BENCH not in sys.path:
        sys.path.append(_BENCH)
    return importlib.import_module("fuzz_rules")
