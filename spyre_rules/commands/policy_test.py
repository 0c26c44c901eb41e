"""``spyre-rules test [PATH ...] [--rules DIR] [--coverage] [-k TEXT]``: policy tests.

Each PATH is a policy test file (``*.toml``, docs/policy_tests.md), a
directory of them, or a policy directory (one holding ``*.rules``): then its
``tests/*.toml`` are run against that policy.  No PATH: the bundled ``rules/``
and its ``rules/tests/``.  ``--rules`` names the policy explicitly (a
directory or ``.rules`` files, as ``SPYRE_RULES_PATH``).

Exit codes (as ``check``): 0 every test passed (and, with ``--coverage``,
every rule fired); 1 a test failed, the policy does not load, or a rule is
left unexercised under ``--coverage``; 2 usage or I/O error (a missing path,
a test file that is not valid, a program the harness cannot build).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from spyre_rules.commands.policy_files import SUFFIX, PolicyTest, TestFileError, load_file


def add_arguments(parser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="test files, directories of them, or a policy directory (runs its tests/); "
                             "default: the bundled rules/ and rules/tests/")
    parser.add_argument("--rules", default=None, metavar="DIR",
                        help="the policy under test (default: the policy directory given, else the bundled rules/)")
    parser.add_argument("--coverage", action="store_true",
                        help="also list the rules (file:line) that no test made fire")
    parser.add_argument("-k", dest="select", default=None, metavar="TEXT",
                        help="run only the tests whose name contains TEXT")


class _Usage(Exception):
    pass


def _is_policy_dir(p: Path) -> bool:
    return p.is_dir() and any(q.suffix == ".rules" for q in p.iterdir())


def _show(p: Path) -> str:
    from spyre_rules.lang.driver import display_path

    return display_path(p)


def collect(paths: list[str], rules: str | None) -> tuple[list[Path], str | None]:
    """(test files, policy path or None for the bundled rules)."""
    from spyre_rules.resources import rules_dir

    if not paths:
        paths = [str(rules_dir())]
    files: list[Path] = []
    policy = rules
    for raw in paths:
        p = Path(raw)
        if _is_policy_dir(p):
            if policy is None and p.resolve() != rules_dir().resolve():
                policy = str(p)
            p = p / "tests"
            if not p.is_dir():
                raise _Usage(f"{raw}: a policy directory without tests/")
        if p.is_dir():
            found = sorted(q for q in p.iterdir() if q.suffix == SUFFIX and q.is_file())
            if not found:
                raise _Usage(f"{p}: no {SUFFIX} test files in this directory")
            files.extend(found)
        elif p.is_file():
            if p.suffix != SUFFIX:
                raise _Usage(f"{raw}: not a {SUFFIX} policy test file")
            files.append(p)
        else:
            raise _Usage(f"{raw}: no such file or directory")
    if policy is not None and not Path(policy.split(os.pathsep)[0]).exists():
        raise _Usage(f"--rules {policy}: no such file or directory")
    return files, policy


def _load(files: list[Path], select: str | None) -> list[PolicyTest]:
    tests = []
    for f in files:
        tests.extend(t for t in load_file(f, _show(f)) if select is None or select in t.name)
    return tests


def _coverage(policy: str | None, steps: list) -> list[str]:
    from spyre_rules.commands.policy_coverage import exercised, policy_rules, uncovered
    from spyre_rules.engine.policy import rules_paths
    from spyre_rules.lang.driver import load_policy

    result = load_policy(rules_paths(policy) if policy else None)
    return [r.text() for r in uncovered(policy_rules(result.checker.sections), exercised(steps))]


def run(args) -> int:
    from spyre_rules.commands.policy_runner import HarnessError, run_test
    from spyre_rules.engine.binding import BindingError
    from spyre_rules.engine.policy import PolicyError, get_policy

    try:
        files, policy = collect(list(args.paths), args.rules)
        tests = _load(files, args.select)
    except (_Usage, TestFileError) as err:
        print(f"spyre-rules test: error: {err}", file=sys.stderr)
        return 2
    if not tests:
        print(f"spyre-rules test: error: no test matches -k {args.select!r}", file=sys.stderr)
        return 2
    try:
        get_policy(policy or "")
    except (PolicyError, BindingError) as err:
        print(f"spyre-rules test: the policy does not load: {err}")
        return 1
    from spyre_rules.commands.quiet import hide_cache_off_warning

    hide_cache_off_warning()
    out = sys.stdout
    failed, steps = [], []
    for test in tests:
        try:
            outcome = run_test(test, policy)
        except HarnessError as err:
            print(f"spyre-rules test: error: {test.where}: test {test.name!r}: {err}", file=sys.stderr)
            return 2
        steps.extend(outcome.steps)
        if outcome.passed:
            continue
        failed.append(test)
        out.write(f"FAIL {test.name}  ({test.where})\n")
        if test.about:
            out.write(f"  {test.about}\n")
        out.write("\n".join(outcome.failures) + "\n\n")
    missing = _coverage(policy, steps) if args.coverage else []
    if args.coverage:
        if missing:
            out.write(f"rules no test made fire ({len(missing)}):\n")
            out.writelines(f"  {line}\n" for line in missing)
        else:
            out.write("coverage: every rule fired in at least one test\n")
    where = f"{len(files)} file{'s' if len(files) != 1 else ''}"
    out.write(f"{len(tests) - len(failed)} passed, {len(failed)} failed ({len(tests)} tests in {where}; "
              f"policy: {policy or 'bundled rules/'})\n")
    out.flush()
    return 1 if failed or missing else 0
