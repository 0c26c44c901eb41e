"""``spyre-rules test``: the bundled policy tests pass, cover the policy, and catch a policy edit.

docs/policy_tests.md documents the format; these tests run the command in-process.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from spyre_rules import cli

ROOT = Path(__file__).resolve().parent.parent

os.environ.setdefault("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1")



def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = cli.main(["test", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def bundled_run():
    """One run of the bundled tests with --coverage (the costly part: ~30 captures)."""
    import contextlib
    import io

    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["test", "--coverage"])
    finally:
        os.chdir(cwd)
    return code, out.getvalue(), err.getvalue()


def test_bundled_policy_tests_pass(bundled_run):
    _, out, err = bundled_run
    assert err == ""
    assert "FAIL" not in out
    summary = out.splitlines()[-1]
    assert summary.endswith("0 failed (114 tests in 6 files; policy: bundled rules/)"), summary


def test_coverage_leaves_no_rule_unexercised(bundled_run):
    code, out, _ = bundled_run
    assert "coverage: every rule fired in at least one test" in out.splitlines()
    assert code == 0


@pytest.fixture()
def policy_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "rules"
    shutil.copytree(ROOT / "rules", dest)
    return dest


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, old
    path.write_text(text.replace(old, new))


def test_lowering_the_split_cap_fails_the_named_test(capsys, policy_copy):
    _edit(policy_copy / "limits.rules", "const AUTO_SPLIT_CAP = 16384;", "const AUTO_SPLIT_CAP = 16;")
    code, out, err = run(capsys, str(policy_copy), "-k", "many_tiles_within_the_split_cap")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("FAIL many_tiles_within_the_split_cap  (")
    assert lines[0].endswith("/tests/planner.toml:106)")
    assert lines[2:5] == [
        "  buf0:",
        "    - expected: plan [(0, 130)]",
        "    + actual:   unsupported: Cannot auto-tile buf0 (aten ops: add.Tensor): no combined split "
        "among host dims [0] keeps every span within 128 bytes after trying 13 combinations (the last: "
        "an output span of buf0 still exceeds 128 bytes with split {0: 15})",
    ]
    assert "    trace of buf0:" in lines
    # exact and remainder counts up to the cap (130 rows in 15 tiles: 14 of 9, the last 4)
    assert ("      legality.splits: legal  [op=buf0, dim=0, legal=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, "
            "12, 13, 15], rejected=['17: auto_split_cap', '19: auto_split_cap', '22: auto_split_cap', "
            "'26: auto_split_cap', '33: auto_split_cap', '44: auto_split_cap', '65: auto_split_cap', "
            "'130: auto_split_cap']]") in lines
    assert lines[-1] == f"0 passed, 1 failed (1 tests in 6 files; policy: {policy_copy})"


def test_without_the_outer_reorder_rule_the_key_keeps_its_layout(capsys, policy_copy):
    """The layout_choice section decides: a policy without ``take outer_reorder`` is asked,
    takes nothing, and the product reads the key as laid out, which no split fits."""
    rules = policy_copy / "layout_choice.rules"
    text = rules.read_text()
    start = text.index("  take outer_reorder")
    end = text.index("\n\n", start)
    rules.write_text(text[:start] + text[end + 2:])
    code, out, err = run(capsys, str(policy_copy), "-k", "outer_reorder_reads_the_repeated_key")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0].startswith("FAIL outer_reorder_reads_the_repeated_key_through_a_copy  (")
    at = lines.index("  buf1 layout choices:")
    assert lines[at + 1:at + 3] == ["    - expected: ['layout_choice.outer_reorder']",
                                    "    + actual:   []"]
    # the key read as laid out: beta is moved off its stick instead (buf3, a restickify
    # copy now), which no split fits; the product splits its tokens too
    at = lines.index("  buf3:")
    assert lines[at + 2].startswith(
        "    + actual:   unsupported: Cannot auto-tile buf3 (aten ops: mul.Tensor, permute.default, "
        "reshape.default, unsqueeze.default): no combined split among host dims [2, 1] keeps every "
        "span within 65536 bytes after trying 32 combinations"), lines[at + 2]
    at = lines.index("  buf2:")
    assert lines[at + 1:at + 3] == ["    - expected: plan [(1, 32)]",
                                    "    + actual:   plan [(1, 32), (2, 32)]"]
    assert lines[-1] == f"0 passed, 1 failed (1 tests in 6 files; policy: {policy_copy})"


def test_reversing_the_cost_order_fails_with_a_readable_diff(capsys, policy_copy):
    _edit(policy_copy / "planner.rules",
          "cost c: (product(c.counts), count(k > 1 for k in c.counts), max(c.counts), c.counts);",
          "cost c: (-product(c.counts), count(k > 1 for k in c.counts), max(c.counts), c.counts);")
    code, out, _ = run(capsys, str(policy_copy), "-k", "pointwise_output_overflow")
    assert code == 1
    lines = out.splitlines()
    assert lines[2:5] == ["  buf0:", "    - expected: plan [(1, 5)]", "    + actual:   plan [(1, 20)]"]


def test_a_policy_that_does_not_load_exits_1(capsys, policy_copy):
    _edit(policy_copy / "limits.rules", "const AUTO_SPLIT_CAP = 16384;", "const AUTO_SPLIT_CAP = ;")
    code, out, _ = run(capsys, str(policy_copy), "-k", "pointwise_output_overflow")
    assert code == 1
    assert out.startswith("spyre-rules test: the policy does not load: the rules do not check cleanly:")


@pytest.mark.parametrize(("text", "message"), [
    ("[[test]]\nname = \"a\"\n", "test 'a': give either example = \"NAME\" or program = \"...\" with inputs"),
    ("[[test]]\nname = \"a\"\nexample = \"lm_head\"\nops.buf0 = { plan = [[1, 2]], no_plan = \"\" }\n",
     "test 'a': ops.buf0: give exactly one of plan, no_plan, unsupported"),
    ("[[test]]\nname = \"a\"\nexample = \"lm_head\"\nconfig = { max_span = 1 }\nops.buf0 = { no_plan = \"\" }\n",
     "test 'a': config.max_span: unknown (known: ['ignore_span_overflow_hints', 'ignore_wsr_hints', "
     "'max_span_bytes', 'sencores'])"),
    ("[[test]]\nname = \"a\"\nprogram = \"return x + 1\"\ninputs = { x = \"float16[8, 64]\" }\n",
     "test 'a': expects nothing: add ops.NAME, groups, grouping_error, staged or layout_choices"),
    ("[[test]]\nname = \"a\"\nprogram = \"return x + 1\"\ninputs = { x = \"float16[8, 64]\" }\n"
     "layout_choices = { buf0 = \"layout_choice.outer_reorder\" }\n",
     "test 'a': layout_choices.buf0 is a list of \"layout_choice.RULE\" names, got 'layout_choice.outer_reorder'"),
    ("test = 1\n", "a policy test file holds [[test]] tables only"),
    ("[[test]]\nname = \"c\"\ncollective = \"all_reduce_\"\nreads = [\"float16[8, 64]\"]\n",
     "test 'c': a collectives test expects chunks = [host_dim, length, count] or [] (none)"),
    ("[[test]]\nname = \"c\"\ncollective = \"all_reduce_\"\nreads = [\"float16[8, 64]\"]\nchunks = [1, 2]\n",
     "test 'c': chunks must be [host_dim, length, count] or [], got [1, 2]"),
    ("[[test]]\nname = \"c\"\ncollective = \"all_reduce_\"\nprogram = \"return x\"\nchunks = []\n",
     "test 'c': unknown key(s) ['program'] in a collectives test"),
    ("[[test]\n", "Expected ']]' at the end of an array declaration (at line 1, column 7)"),
])
def test_invalid_test_files_exit_2(capsys, tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    code, out, err = run(capsys, str(path))
    assert (code, out) == (2, "")
    assert message in err, err


def test_program_errors_exit_2_naming_the_test(capsys, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[test]]\nname = "p"\nprogram = "return x.foo()"\ninputs = { x = "float16[8, 64]" }\n'
                    'ops.buf0 = { no_plan = "" }\n')
    code, _, err = run(capsys, str(path))
    assert code == 2
    assert err.strip().startswith("spyre-rules test: error: ")
    assert err.strip().endswith("bad.toml:2: test 'p': program: line 1: method `.foo` is not supported (supported: abs, amax, "
                           "amin, argmax, argmin, contiguous, cumsum, exp, expand, float, half, index_add_, index_copy_, mean, neg, permute, prod, "
                           "relu, repeat_interleave, reshape, sigmoid, softmax, sqrt, squeeze, std, sum, t, "
                           "transpose, unsqueeze, "
                           "var, view)")


def test_missing_path_exits_2(capsys, tmp_path):
    code, _, err = run(capsys, str(tmp_path / "nope.toml"))
    assert code == 2 and "no such file or directory" in err


def test_policy_tests_ship_with_the_bundled_rules():
    import tomllib

    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "tests/*.toml" in data["spyre_rules.bundled_rules"]
    assert sorted(p.name for p in (ROOT / "rules" / "tests").iterdir()) == [
        "collectives.toml", "eligibility.toml", "grouping.toml", "layout_choice.toml", "planner.toml",
        "restickify.toml"]


def test_rules_option_names_the_policy_for_any_test_file(capsys, policy_copy):
    _edit(policy_copy / "limits.rules", "const AUTO_SPLIT_CAP = 16384;", "const AUTO_SPLIT_CAP = 16;")
    tests = str(ROOT / "rules" / "tests" / "planner.toml")
    code, out, _ = run(capsys, tests, "--rules", str(policy_copy), "-k", "split_cap")
    assert code == 1
    assert out.splitlines()[-1] == f"0 passed, 2 failed (2 tests in 1 file; policy: {policy_copy})"
    assert run(capsys, tests, "-k", "split_cap")[0] == 0  # the bundled policy passes them


def test_a_selection_that_matches_nothing_is_a_usage_error(capsys):
    code, out, err = run(capsys, "-k", "no_such_test")
    assert (code, out) == (2, "")
    assert err == "spyre-rules test: error: no test matches -k 'no_such_test'\n"


@pytest.mark.parametrize(("source", "inputs", "message"), [
    ("import os\nreturn x", {"x": "float16[2]"}, "line 1: expected `NAME = EXPR` (got `import os`)"),
    ("y = x + 1", {"x": "float16[2]"}, "a program ends with `return NAME[, NAME ...]`"),
    ("return open(x)", {"x": "float16[2]"},
     "line 1: function `open` is not supported (supported: bmm, cat, exp, layer_norm, linear, "
     "matmul, relu, safe_softmax, softmax, var_mean, where)"),
    ("return x.sum(dim=5)", {"x": "float16[2]"},
     "the program fails on its inputs: IndexError: Dimension out of range (expected to be in range "
     "of [-1, 0], but got 5)"),
    ("return x", {"x": "floatz[2]"}, "input 'floatz[2]': unknown dtype 'floatz'"),
    ("return x", {"x": "float16(2)"}, "input 'float16(2)': expected DTYPE[D0, D1, ...], e.g. \"float16[8, 64]\""),
    ("return y", {"x": "float16[2]"}, "line 1: unknown name `y`"),
])
def test_program_language_errors(source, inputs, message, capfd):
    from spyre_rules.commands.policy_programs import ProgramError, build_program

    with pytest.raises(ProgramError) as info:
        build_program(source, inputs)
    assert str(info.value) == message
    assert capfd.readouterr().err == ""


def test_program_builds_the_graph_it_says():
    from spyre_rules.commands.policy_programs import build_program

    module, tensors = build_program("c = x + 1\nd = c[:, :8] * 2\nreturn c, linear(d, w)",
                                    {"x": "float16[4, 16]", "w": "float16[3, 8]"})
    assert [(str(t.dtype), tuple(t.shape)) for t in tensors] == [
        ("torch.float16", (4, 16)), ("torch.float16", (3, 8))]
    c, y = module.forward(*tensors)
    assert tuple(c.shape) == (4, 16) and tuple(y.shape) == (4, 3)


def test_a_collectives_test_names_the_chunking_it_expected(capsys, tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[test]]\nname = "c"\ncollective = "all_reduce_"\nreads = ["float16[8, 8, 128]"]\n'
                    'writes = ["float16[8, 8, 128]"]\nconfig = { max_span_bytes = 4096 }\nchunks = [1, 4, 2]\n')
    code, out, _ = run(capsys, str(path))
    assert code == 1
    assert out.splitlines()[1:4] == ["  chunks:", "    - expected: 2 chunks of 4 along host dim 1",
                                     "    + actual:   4 chunks of 2 along host dim 1"]
