"""Mutation fuzzing of the checker (``bench/fuzz_rules.py``), short seeded run.

400 mutants of the bundled rules (50 of each class) -- token, structure, cross-file,
numeric, template, deep-nesting, long-token and special-byte mutations -- are
checked one by one in a worker process with a time limit.  Every mutant must
end in diagnostics (or be clean): never an exception, never a hang, never a
diagnostic outside its file's lines and columns, and the fast lexer always
agrees with lark's.  (``bench/fuzz_rules.py --count 100000`` is the long run.)
"""

from __future__ import annotations

from fuzz_support import load  # noqa: E402

N_INPUTS = 400
SEED = 20240611


def test_mutants_end_in_diagnostics_never_exceptions_hangs_or_bad_spans():
    fuzz = load()
    summary = fuzz.fuzz(N_INPUTS, SEED, timeout=30.0)
    counts = summary["counts"]
    assert summary["findings"] == []
    assert counts["crash"] == counts["hang"] == counts["bad span"] == counts["lexer mismatch"] == 0
    assert set(summary["classes"]) == set(fuzz.CLASSES) and min(summary["classes"].values()) == N_INPUTS // 8
    # Most mutants break something; some (a swapped pair of equal tokens, a
    # repeated blank line, a comment made longer) are still clean policies.
    assert counts["diagnostics"] > N_INPUTS * 0.7, counts
    assert counts["clean"] > 0, counts


def test_inputs_are_reproducible_by_index():
    fuzz = load()
    seeds = fuzz.bundled_seeds()
    assert fuzz.make_input(seeds, 7, 123) == fuzz.make_input(seeds, 7, 123)
    assert fuzz.make_input(seeds, 7, 123) != fuzz.make_input(seeds, 7, 124)
