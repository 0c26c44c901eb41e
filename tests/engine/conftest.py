"""Engine tests capture real programs: keep Inductor's caches from skipping our seam.

Every plan the engine produces during these tests is re-checked by the
independent verifier (``helpers.span_problems``: brute-force enumeration of the
per-tile buffer and of every tile's full-buffer write) -- a test that means to
produce an unsafe plan (a policy edit that drops a safety requirement) says so
with ``@pytest.mark.unsafe_plans``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Inductor caches would skip the pre-scheduling seam on a hit (docs/inductor_integration.md pitfall 7).
os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")
os.environ.setdefault("TORCHINDUCTOR_AUTOGRAD_CACHE", "0")

sys.path.insert(0, str(Path(__file__).resolve().parent))  # `import helpers`

VERIFIED: list[str] = []  # "op: splits" of every plan verified in this session


def pytest_configure(config):
    config.addinivalue_line("markers", "unsafe_plans: the test produces plans the verifier rejects")


@pytest.fixture(autouse=True)
def verify_every_plan(request, monkeypatch):
    if request.node.get_closest_marker("unsafe_plans"):
        yield
        return
    from helpers import span_problems
    from spyre_rules.engine.planner import Evaluator

    decide = Evaluator.decide

    def checked(self, op):
        decision = decide(self, op)
        if decision.plan is not None:
            limit = self.config["max_span_bytes"]
            problems = span_problems(op, decision.plan.splits, limit)
            assert not problems, f"{decision.op} {decision.plan.splits}: " + "; ".join(problems)
            VERIFIED.append(f"{decision.op}: {decision.plan.splits}")
        return decision

    monkeypatch.setattr(Evaluator, "decide", checked)
    yield
