"""``spyre-rules layout``: the README's first command."""

from __future__ import annotations

import json
import subprocess
import sys

from spyre_rules.cli import main


def test_seed_example_reports_the_overflowing_dim(capsys):
    assert main(["layout", "1,8195,256,64", "--dtype", "float16"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2] == "device_size [8195, 256, 1, 1, 64]"
    assert out[3] == "stride_map  [16384, 64, 64, -1, 1]"
    assert out[4] == "loop vars   c0 in [0, 8195), c1 in [0, 256), c2 in [0, 64)"
    rows = [line.split() for line in out[-5:]]
    assert rows[0][:4] == ["0", "8195", "16384", "c0"]
    assert out[-5].endswith("8,195 x inner = 268,533,760 bytes  OVER LIMIT")
    assert out[-4].endswith("256 x inner = 32,768 bytes")
    assert out[-1].endswith("stick (never a span candidate)")


def test_json_report_with_verifier_and_patched_limit(capsys, monkeypatch):
    monkeypatch.setenv("SPYRE_MAX_SPAN_BYTES", "8192")
    assert main(["layout", "2,20,16,64", "--verify", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device_size"] == [20, 16, 1, 2, 64]
    assert report["stride_map"] == [1024, 64, 64, 20480, 1]
    assert report["max_span_bytes"] == 8192
    moving = {d["device_dim"]: d for d in report["dims"] if d["role"] == "moving"}
    assert {d: (e["coordinate"], e["span_bytes"], e["verified_span_bytes"], e["over_limit"])
            for d, e in moving.items()} == {
        0: ("c1", 81920, 81920, True),
        1: ("c2", 4096, 4096, False),
        3: ("c0", 256, 256, False),
    }


def test_bad_shape_and_dtype_exit_2_with_the_value(capsys):
    assert main(["layout", "4,0"]) == 2
    assert "host_size[1] = 0 must be positive" in capsys.readouterr().err
    assert main(["layout", "4,5", "--dtype", "complex64"]) == 2
    assert "unsupported dtype 'complex64'" in capsys.readouterr().err


def test_usage_error_exits_2():
    proc = subprocess.run([sys.executable, "-m", "spyre_rules", "layout", "4,x"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "expected comma-separated integers, got '4,x'" in proc.stderr
