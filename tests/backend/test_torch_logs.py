"""``TORCH_LOGS="spyre_rules"`` / ``"+spyre_rules"`` and ``TORCH_TRACE`` (backend/logs.py).

Both are read when torch is imported, so each case runs a small program in a
fresh interpreter: two span-overflowing ops tiled at 8 KiB, a reduction with its
own group, an add that needs no plan.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROGRAM = """
import torch
import spyre_rules

f = torch.compile(lambda x, y: (x * 2 + 1).sum(-1) + y.sum(-1), backend="spyre_rules",
                  options={"max_span_bytes": 8192, "ignore_span_overflow_hints": False,
                           "fallback": "error"})
with torch.no_grad():
    x, y = torch.ones(1, 40, 16, 64, dtype=torch.float16), torch.ones(1, 40, 16, 64, dtype=torch.float16)
    assert torch.equal(f(x, y), (x * 2 + 1).sum(-1) + y.sum(-1))
"""

OP_LINES = [
    # y.sum(-1) reads nothing of the open run (x * 2 + 1 and its row sum): it is hoisted
    # and runs before the run's loop, in a loop of its own
    "graph 0/0: buf3 (reduction:sum): plan, levels (1, 10), rule grouping.reduction_opens_run: "
    "input span overflow for arg1_1",
    "graph 0/0: buf0 (pointwise): plan, levels (1, 10), rule grouping.new_run: "
    "output span overflow",
    "graph 0/0: buf1 (pointwise): plan, levels (1, 10), rule grouping.same_split: "
    "output span overflow",
    "graph 0/0: buf2 (reduction:sum): plan, levels (1, 10), rule grouping.run_tiles_agree: "
    "input span overflow for buf1",
    # the add of the two row sums reads buf2 tile by tile (and buf3's full buffer): it joins
    "graph 0/0: buf4 (pointwise): no plan, levels (1, 10), rule grouping.untiled_reader_to_open_run: "
    "no span exceeds the limit",
]
KERNEL_LINES = [
    "graph 0/0: kernel sdsc_sum_0: span check fits, largest span 8192 of 8192 bytes, ops buf3",
    "graph 0/0: kernel sdsc_mul_add_sum_1: span check fits, largest span 8192 of 8192 bytes, "
    "ops buf0, buf1, buf2, buf4",
]


def _run(tmp_path: Path, **env: str) -> str:
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
                **env}
    for name in ("TORCH_LOGS", "TORCH_TRACE"):
        if name not in env:
            full_env.pop(name, None)
    done = subprocess.run([sys.executable, str(script)], env=full_env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def _our_lines(stderr: str, level: str) -> list[str]:
    """The messages our loggers wrote at ``level`` (I: INFO, V: DEBUG), in order."""
    pattern = re.compile(rf"^{level}\d{{4}} [\d:. ]+\d+ spyre_rules/backend/logs\.py:\d+\] "
                         r"\[0/0\] (.*)$")
    return [m.group(1) for m in map(pattern.match, stderr.splitlines()) if m]


def test_torch_logs_prints_each_op_decision_and_each_kernel_span_check(tmp_path):
    trace = tmp_path / "trace"
    stderr = _run(tmp_path, TORCH_LOGS="spyre_rules", TORCH_TRACE=str(trace))
    assert _our_lines(stderr, "I") == OP_LINES + KERNEL_LINES
    assert _our_lines(stderr, "V") == []  # the rule traces are DEBUG

    (log,) = trace.iterdir()
    artifacts = {}
    lines = log.read_text().splitlines()
    for i, line in enumerate(lines):
        if '{"artifact": {"name": "spyre_rules_' not in line:
            continue
        meta = json.loads(line[line.index("{"):])
        payload = []
        for follow in lines[i + 1:]:
            if not follow.startswith("\t"):
                break
            payload.append(follow[1:])
        artifacts[meta["artifact"]["name"]] = (meta, "\n".join(payload))
    assert sorted(artifacts) == [
        "spyre_rules_bundle_sdsc_mul_add_sum_1", "spyre_rules_bundle_sdsc_sum_0",
        "spyre_rules_plan", "spyre_rules_wrapper"]
    meta, plan = artifacts["spyre_rules_plan"]
    assert (meta["artifact"]["encoding"], meta["frame_id"], meta["frame_compile_id"]) == (
        "json", 0, 0)
    assert [(op["op"], op["decision"]) for op in json.loads(plan)["ops"]] == [
        ("buf3", "plan"), ("buf0", "plan"), ("buf1", "plan"), ("buf2", "plan"),
        ("buf4", "no plan")]
    _, bundle = artifacts["spyre_rules_bundle_sdsc_mul_add_sum_1"]
    assert "scf.for %i_0 = %c0 to %loop_bound_0 step %c1 {" in bundle
    assert bundle.count("sdscbundle.sdsc_execute (") == 4
    _, wrapper = artifacts["spyre_rules_wrapper"]
    assert "rules_make_kernel(" in wrapper


def test_plus_spyre_rules_adds_each_op_rule_trace(tmp_path):
    stderr = _run(tmp_path, TORCH_LOGS="+spyre_rules")
    debug = _our_lines(stderr, "V")
    assert "graph 0/0:   grouping.new_run -> start: buf0 opens a new run with split {1: 10}" in debug
    assert "graph 0/0:   candidates.none -> no plan: no span exceeds the limit" in debug
    assert _our_lines(stderr, "I") == OP_LINES + KERNEL_LINES

