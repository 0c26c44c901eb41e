"""``spyre-rules explain``: decisions and rule traces for examples and module:function."""

from __future__ import annotations

import json

from spyre_rules import config
from spyre_rules.cli import main


def run(capsys, *argv):
    code = main(["explain", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_list(capsys):
    code, out, _ = run(capsys, "--list")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert {"pointwise_overflow", "reduction_input", "lm_head", "stick_alignment"} <= set(names)


def test_reduction_input_text(capsys):
    code, out, _ = run(capsys, "reduction_input")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "rules: bundled rules/  (max_span_bytes=8192, sencores=32, automatic tiling on)"
    assert "buf0 (Reduction): plan (host dim 0: 10 tiles) (host dim 1: 6 tiles)" in lines
    assert "  reason: input span overflow for arg0_1; output span overflow" in lines
    assert any(line.startswith("  candidates.input_span: emit -- input span overflow for arg0_1")
               for line in lines)
    assert any(line.startswith("  validation.full_buffer_write_fits: fail -- writing tile {0: 10} of buf0")
               for line in lines)
    assert "  group ['buf0']: levels [(10000, 10, False), (10001, 6, False)]" in lines
    # automatic tiling was on only for the run
    assert config.ignore_span_overflow_hints is True


def test_lm_head_json_shows_the_shared_loop(capsys):
    code, out, _ = run(capsys, "lm_head", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert [(d["op"], d["decision"]) for d in report["ops"]] == [("buf1", "plan"), ("buf0", "plan")]
    assert report["ops"][0]["plan"]["levels"] == [
        {"selected_host_dim": 0, "split_count": 16, "is_reduction": False}]
    assert "grouping_error" not in report
    # one loop of 16: the restickify tiles its dim 0, the BMM its output dim 1
    assert report["groups"] == [{"ops": ["buf1", "buf0"], "levels": [[10000, 16, False]]}]
    first = report["ops"][0]["trace"][0]
    assert (first["section"], first["rule"], first["outcome"]) == ("candidates", "output_span", "emit")
    assert first["values"]["span_bytes"] == "131072"


def test_max_span_bytes_and_module_function(capsys):
    code, out, _ = run(capsys, "spyre_rules.engine.examples:_add", "--shapes", "1,20,16,64",
                       "1,20,16,64", "--max-span-bytes", "8192", "--format", "json")
    assert code == 0
    report = json.loads(out)
    assert report["config"]["max_span_bytes"] == 8192
    (op,) = report["ops"]
    assert op["plan"]["levels"] == [{"selected_host_dim": 1, "split_count": 5, "is_reduction": False}]
    assert report["groups"] == [{"ops": ["buf0"], "levels": [[10000, 5, False]]}]


def test_gathered_read_is_explained(capsys):
    code, out, _ = run(capsys, "indirect_read")
    assert code == 0
    lines = out.splitlines()
    # the gathered table's rows are a span candidate of every host dim, and the refusal
    # names the table, the device dim and its span (one 128-byte row is over 64 bytes)
    assert sum(line.startswith("  candidates.gathered_rows: emit -- gathered rows of arg0_1")
               for line in lines) == 2, out
    assert ("  reason: Cannot auto-tile buf0 (aten ops: index.Tensor): no split brings its "
            "gathered read under the limit of 64 bytes (gathered rows of arg0_1 (any index may "
            "pick any row): device dim 1 (tmp0) spans 1024 bytes)") in lines, out


def test_usage_errors(capsys):
    assert run(capsys, "nope")[0] == 2
    code, _, err = run(capsys, "spyre_rules.engine.examples:_add")
    assert code == 2 and "needs --shapes" in err
    assert run(capsys)[0] == 2
