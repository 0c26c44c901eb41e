"""Differential fuzzer: random programs compiled by spyre_rules vs eager PyTorch.

``python3 bench/fuzz_programs.py --count N --seed S`` generates programs
``S:0 .. S:N-1`` (``bench/fuzz_gen.py``) and compiles each in every variant --
untiled, manual hints, automatic tiling at the program's random 1-64 KiB limit,
and mixed (hints + automatic) -- with ``torch.compile(backend=...)`` and
``fallback="error"``, runs it and compares it with eager
(``bench/fuzz_run.py`` documents the outcomes and the tolerance).

Output: one line per failure (``FAIL seed:index variant outcome error: message``
followed by the program on one line), one ``DISAGREE`` line per span-check warning
of an op whose decision says no span exceeds the limit (the planner and the span
check must measure the same accesses: also a failure), one ``UNRUN`` line per plan
record with levels of an op no kernel of the compiled program writes (``plan.json``
must show only plans the program runs, ``bench/fuzz_plans.py``: also a failure), then a
table of outcome counts per variant and, last, the share of automatically tiled programs
that compiled with every access within the span limit (``--overflows`` prints each
span-check warning).  Exit code 1 if any program is wrong, stops at run
time, crashes or is ``unexpected`` (a hint slicing a name an op lost --
``fuzz_lost_names`` -- must be refused with a HintError saying where the name was
lost); clean refusals are counted, not failures.

``--replay SEED:INDEX [--variant V]`` prints a standalone script for that
program (one variant, default every variant in turn) and runs it through the
harness, printing the outcome.  ``--variants`` restricts the variants;
``--one-variant`` compiles each program in one variant only (``index % 4``),
which is what the test suite does.  ``--only TEXT[,TEXT...]`` runs only the
programs whose one-line text contains one of the strings (a campaign on one op
family: ``--only .argmax(,.argmin(,.var(,torch.var_mean(``).  ``--refusals`` also prints one line per
clean refusal.  ``--both-paths`` also runs every equal program on the executor's
general and structured paths, which must agree byte for byte (``bench/fuzz_paths.py``);
with ``--replay`` too (without it a replay checks against eager only).
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fuzz_run  # noqa: E402  (imports torch and spyre_rules)
from fuzz_gen import VARIANTS, generate  # noqa: E402

RESET_EVERY = 64  # Dynamo's caches keep every compiled frame; drop them now and then


def variants_for(index: int, variants: tuple[str, ...], one_variant: bool) -> tuple[str, ...]:
    if one_variant:
        return (variants[index % len(variants)],)
    return variants


def fuzz(seed: int, count: int, variants: tuple[str, ...], one_variant: bool = False,
         start: int = 0, on_result=None, check_paths: bool = False,
         only: tuple[str, ...] = ()) -> dict[str, collections.Counter]:
    """Run programs ``seed:start .. seed:start+count-1``; counts per variant.
    ``only``: run just the programs whose one-line text contains one of these."""
    import torch

    counts = {v: collections.Counter() for v in variants}
    for index in range(start, start + count):
        if index % RESET_EVERY == RESET_EVERY - 1:
            torch._dynamo.reset()
        program = generate(seed, index)
        if only and not any(text in program.op_text() for text in only):
            continue
        for variant in variants_for(index, variants, one_variant):
            result = fuzz_run.run_variant(program, variant, check_paths)
            counts[variant][result.outcome] += 1
            if on_result is not None:
                on_result(program, result)
    return counts


def summary_lines(counts: dict[str, collections.Counter]) -> list[str]:
    """Six lines: a header, one row per variant, the total."""
    head = f"{'variant':<8}" + "".join(f"{o:>11}" for o in fuzz_run.OUTCOMES) + f"{'failures':>10}"
    rows = [head]
    total: collections.Counter = collections.Counter()
    for variant in VARIANTS:
        c = counts.get(variant, collections.Counter())
        total.update(c)
        rows.append(_row(variant, c))
    rows.append(_row("total", total))
    return rows


def _row(label: str, c: collections.Counter) -> str:
    failures = sum(c[o] for o in fuzz_run.FAILURES)
    return f"{label:<8}" + "".join(f"{c[o]:>11}" for o in fuzz_run.OUTCOMES) + f"{failures:>10}"


def failure_line(program, result) -> str:
    return (f"FAIL {program.key} {result.variant} {result.outcome} {result.error}: "
            f"{result.message} || {program.op_text()}")


def span_outcomes(result) -> collections.Counter:
    """Span-check tallies of one automatically tiled result: compiled, compiled with
    every access fitting, and span-check warnings the op's decision does not answer."""
    c: collections.Counter = collections.Counter()
    if result.variant == "auto" and result.outcome in ("equal", "wrong"):
        c["compiled"] += 1
        c["fits"] += not result.span_warnings
        c["silent"] += len(result.silent_overflows)
    return c


def span_line(spans: collections.Counter) -> str:
    share = spans["fits"] / spans["compiled"] if spans["compiled"] else 0.0
    return (f"auto: {spans['fits']} of {spans['compiled']} compiled programs ({share:.1%}) have every "
            f"access within the span limit; {spans['silent']} span-check warning(s) of an op whose "
            "decision says no span exceeds the limit")


def disagreement_line(program, result, warning: str) -> str:
    return (f"DISAGREE {program.key} {result.variant}: the span check flags an access the decision "
            f"says fits: {warning} || {program.op_text()}")


def unrun_line(program, result, line: str) -> str:
    return (f"UNRUN {program.key} {result.variant}: a recorded plan the program does not run: "
            f"{line} || {program.op_text()}")


def replay(key: str, variants: tuple[str, ...], check_paths: bool = False) -> int:
    seed, index = (int(p) for p in key.split(":"))
    program = generate(seed, index)
    failed = False
    for variant in variants:
        print(f"# ---------------- standalone script: {key} {variant}")
        print(fuzz_run.standalone_source(program, variant))
        result = fuzz_run.run_variant(program, variant, check_paths)
        failed |= result.outcome in fuzz_run.FAILURES
        print(f"# outcome {key} {variant}: {result.outcome} {result.error} {result.message}")
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--start", type=int, default=0, help="first program index")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--variant", help="with --replay: only this variant")
    parser.add_argument("--one-variant", action="store_true",
                        help="one variant per program (index %% 4), as the test suite does")
    parser.add_argument("--replay", metavar="SEED:INDEX")
    parser.add_argument("--refusals", action="store_true", help="print clean refusals too")
    parser.add_argument("--overflows", action="store_true",
                        help="print every span-check warning of a compiled program too")
    parser.add_argument("--both-paths", action="store_true",
                        help="also compare the executor's general and structured paths")
    parser.add_argument("--only", default="", metavar="TEXT[,TEXT...]",
                        help="run only programs whose one-line text contains one of these "
                             "(e.g. .argmax(,.var( for the combining reductions)")
    args = parser.parse_args(argv)
    variants = tuple(v for v in args.variants.split(",") if v)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {unknown}; known: {', '.join(VARIANTS)}")
    if args.replay:
        return replay(args.replay, (args.variant,) if args.variant else variants,
                      args.both_paths)

    failures = skipped = 0
    counts = {v: collections.Counter() for v in variants}
    spans = collections.Counter()
    done = {"programs": 0, "last": None}

    def report(program, result):
        nonlocal failures, skipped
        counts[result.variant][result.outcome] += 1
        if done["last"] != program.key:
            done["programs"] += 1
            done["last"] = program.key
        spans.update(span_outcomes(result))
        if result.outcome in fuzz_run.FAILURES:
            failures += 1
            print(failure_line(program, result), flush=True)
        elif result.outcome == "skipped":
            skipped += 1
            print(f"SKIP {program.key} {result.variant}: {result.message} || {program.op_text()}",
                  flush=True)
        elif args.refusals and result.outcome == "refused":
            print(f"REFUSED {program.key} {result.variant} {result.error}: {result.message}",
                  flush=True)
        if args.overflows:
            for warning in result.span_warnings:
                print(f"OVERFLOW {program.key} {result.variant}: {warning}", flush=True)
        for warning in result.silent_overflows:
            failures += 1
            print(disagreement_line(program, result, warning), flush=True)
        for line in result.unrun_plans:
            failures += 1
            spans["unrun"] += 1
            print(unrun_line(program, result, line), flush=True)

    start = time.perf_counter()
    try:
        fuzz(args.seed, args.count, variants, args.one_variant, args.start, report,
             args.both_paths, tuple(t for t in args.only.split(",") if t))
    except KeyboardInterrupt:  # a long run stopped by hand: still print what it found
        print(f"interrupted after {done['programs']} programs (the last may be partial)")
    elapsed = time.perf_counter() - start
    print(f"{done['programs']} programs (seed {args.seed}, from {args.start}) in {elapsed:.1f} s; "
          f"{failures} failure(s), {skipped} skipped (eager fails: a generator bug); "
          "replay one with --replay SEED:INDEX")
    for line in summary_lines(counts):
        print(line)
    print(span_line(spans))
    print(f"{spans['unrun']} plan record(s) with levels of an op no kernel of the compiled "
          "program writes")
    return 1 if failures or skipped else 0


if __name__ == "__main__":
    sys.exit(main())
