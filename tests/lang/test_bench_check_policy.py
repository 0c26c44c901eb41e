"""The generated policies ``bench/bench_check.py`` times check clean.

The bench measures the checker's work on the bundled rules plus 1,000 and
4,000 generated constants; a generated policy that ends in a diagnostic
(it once summed 400 constants in one expression: E040, and left nine in ten
unused: W001) would time an error path, not a check.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from spyre_rules.lang.driver import check_sources

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import bench_check  # noqa: E402


@pytest.mark.parametrize("n", [1, 10, 1000, 4000])
def test_generated_policy_checks_without_a_diagnostic(n):
    sources = bench_check._policy_with_constants(n)
    assert [str(d) for d in check_sources(sources).diagnostics] == []
    bench_check.check_clean(sources)  # what the bench asserts before timing


def test_generated_constants_form_a_tree_of_short_sums():
    assert bench_check.extra_constants(12, fanout=10).splitlines()[-3:] == [
        "const S1_0 = C0 + C1 + C2 + C3 + C4 + C5 + C6 + C7 + C8 + C9;",
        "const S1_1 = C10 + C11;",
        "const _TOTAL = S1_0 + S1_1;",
    ]
    assert bench_check.extra_constants(1).splitlines() == ["const C0 = 0 + 1;", "const _TOTAL = C0;"]


def test_the_bench_stops_on_a_policy_that_does_not_check_clean():
    sources = bench_check._policy_with_constants(10) + [("bad.rules", "const UNUSED = 1;\n")]
    with pytest.raises(SystemExit, match=r"does not check clean: .*W001.*constant `UNUSED` is never used"):
        bench_check.check_clean(sources)


def test_a_constant_named_with_a_leading_underscore_may_stay_unused():
    base = bench_check._policy_with_constants(10)
    codes = {text: [d.code for d in check_sources(base + [("x.rules", text)]).diagnostics]
             for text in ("const _SPARE = 1;\n", "const SPARE = 1;\n")}
    assert codes == {"const _SPARE = 1;\n": [], "const SPARE = 1;\n": ["W001"]}
