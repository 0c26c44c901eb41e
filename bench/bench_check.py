"""Wall time of ``spyre-rules check`` on the bundled rules, relative to an
empty Python start.

Each repetition starts fresh subprocesses: ``python -c pass`` and
``python -m spyre_rules check`` (interleaved, so both see the same machine
load), and the script prints the median wall times and their ratio (target,
docs of issue 14: at most 2x with a bytecode cache).  The median CPU time
(user + system of the child, from ``getrusage(RUSAGE_CHILDREN)``) is printed
beside it: on a shared machine it moves less than wall time.

Two settings are measured:

* ``as-is``: the environment unchanged.  With ``PYTHONDONTWRITEBYTECODE`` set
  and no ``__pycache__`` in the checkout (a fresh clone in some sandboxes),
  every spyre_rules module is compiled from source on every start: the
  no-bytecode-cache figure.  The script says which case it measured.
* ``bytecode-cached``: ``PYTHONDONTWRITEBYTECODE`` unset and
  ``PYTHONPYCACHEPREFIX`` pointing at a temp dir, after one warm-up run: what
  an installed or regularly used checkout sees.

Both settings use one cache directory (``SPYRE_RULES_CACHE_DIR``, a temp
dir): the parser tables and the remembered reports of ``check``
(``spyre_rules/commands/check_cache.py``), filled by the warm-up run, so the
two settings measure a repeated check of unchanged files (what an editor or a
pre-commit hook runs).  The one-off cost of a run that has to build the tables
(a fresh user cache, or right after the grammar changed) is printed first.  A
third setting, ``checking`` (bytecode cached, ``SPYRE_RULES_CHECK_CACHE=0``),
parses and type-checks the policy on every run: the figure for a policy or a
checker that just changed.

Last, the checker's own work is timed in process on the bundled rules plus
1,000 and 4,000 extra constants (linear: a ratio near 4x).

Run: ``python bench/bench_check.py [--reps N]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent  # this checkout: measured, not an installed copy


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _time(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    cpu0 = _cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.decode()[-2000:]}")
    return elapsed, _cpu() - cpu0


def _spyre_bytecode() -> int:
    """How many compiled spyre_rules modules sit in the checkout's __pycache__ dirs."""
    package = ROOT / "spyre_rules"
    return sum(1 for _ in package.rglob("__pycache__/*.pyc"))


def measure(env: dict[str, str], reps: int) -> dict[str, float]:
    base_cmd = [sys.executable, "-c", "pass"]
    check_cmd = [sys.executable, "-m", "spyre_rules", "check"]
    _time(base_cmd, env)  # warm-ups (file cache, bytecode cache, parser-table cache)
    _time(check_cmd, env)
    runs: dict[str, list[tuple[float, float]]] = {"base": [], "check": []}
    for _ in range(reps):
        runs["base"].append(_time(base_cmd, env))
        runs["check"].append(_time(check_cmd, env))
    out = {}
    for name, samples in runs.items():
        out[f"{name}_wall"] = statistics.median(s[0] for s in samples)
        out[f"{name}_cpu"] = statistics.median(s[1] for s in samples)
    return out


def _policy_with_constants(n: int) -> list[tuple[str, str]]:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from spyre_rules.lang.driver import read_sources
    from spyre_rules.resources import rules_dir

    return read_sources(sorted(rules_dir().glob("*.rules"))) + [("extra.rules", extra_constants(n))]


def extra_constants(n: int, fanout: int = 10) -> str:
    """``n`` constants summed in a tree of ``fanout``-term sums up to one root.

    Every constant is used once (no W001) and no sum nests deeper than
    ``fanout`` terms (the checker's nesting limit is 100 levels, E040); the
    root is ``_TOTAL`` (a leading underscore: deliberately unused), so the
    policy checks clean and the bench measures a clean check."""
    lines = [f"const C{i} = {i} + 1;" for i in range(n)]
    level, names = 0, [f"C{i}" for i in range(n)]
    while len(names) > 1 or level == 0:  # one constant still gets its root
        level += 1
        groups = [names[i:i + fanout] for i in range(0, len(names), fanout)]
        names = ["_TOTAL" if len(groups) == 1 else f"S{level}_{j}" for j in range(len(groups))]
        lines += [f"const {name} = {' + '.join(group)};" for name, group in zip(names, groups)]
    return "\n".join(lines) + "\n"


def check_clean(sources: list[tuple[str, str]]) -> None:
    """Stop the bench unless ``sources`` check without a single diagnostic."""
    from spyre_rules.lang.driver import check_sources

    diagnostics = check_sources(sources).diagnostics
    if diagnostics:
        raise SystemExit(f"the generated policy does not check clean: {diagnostics[0]}"
                         f" (and {len(diagnostics) - 1} more)")


def scaling(small: int = 1000, factor: int = 4) -> tuple[float, float]:
    """CPU seconds of checking the bundled rules plus ``small`` and ``factor * small``
    extra constants in this process (parser already built): linear work gives
    a ratio near ``factor``."""
    from spyre_rules.lang.driver import check_sources

    check_sources(_policy_with_constants(10))  # build the parser, warm caches
    times = []
    for n in (small, small * factor):
        sources = _policy_with_constants(n)
        check_clean(sources)  # the timed work is a clean check, not an error path
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            check_sources(sources)
            best = min(best, time.process_time() - start)
        times.append(best)
    return times[0], times[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=15, help="repetitions per setting (default 15)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="spyre-rules-bench-pyc-") as pyc, \
            tempfile.TemporaryDirectory(prefix="spyre-rules-bench-tables-") as tables:
        as_is = dict(os.environ, SPYRE_RULES_CACHE_DIR=tables)
        cached = dict(as_is, PYTHONPYCACHEPREFIX=pyc)
        cached.pop("PYTHONDONTWRITEBYTECODE", None)
        no_pyc = "PYTHONDONTWRITEBYTECODE" in os.environ and "PYTHONPYCACHEPREFIX" not in os.environ \
            and _spyre_bytecode() == 0
        print(f"python: {sys.executable}  reps: {args.reps}")
        print("as-is: " + ("PYTHONDONTWRITEBYTECODE set, no spyre_rules bytecode: the no-cache figure" if no_pyc
                           else "spyre_rules bytecode may be cached (not the no-cache figure)"))
        wall, cpu = _time([sys.executable, "-m", "spyre_rules", "check"], as_is)
        print(f"first run, building the parser tables: wall {wall * 1000:.1f} ms, cpu {cpu * 1000:.1f} ms")
        checking = dict(cached, SPYRE_RULES_CHECK_CACHE="0")
        settings = [("as-is", as_is), ("bytecode-cached", cached), ("checking", checking)]
        for name, env in settings:
            m = measure(env, args.reps)
            print(f"{name:16s} wall: python -c pass {m['base_wall'] * 1000:6.1f} ms, "
                  f"spyre-rules check {m['check_wall'] * 1000:6.1f} ms, ratio {m['check_wall'] / m['base_wall']:.2f}x"
                  f"   |   cpu: {m['base_cpu'] * 1000:6.1f} ms vs {m['check_cpu'] * 1000:6.1f} ms, "
                  f"ratio {m['check_cpu'] / m['base_cpu']:.2f}x")
    small, large = scaling()
    print(f"checker work (cpu, in process): 1,000 extra constants {small * 1000:.1f} ms, "
          f"4,000 {large * 1000:.1f} ms, ratio {large / small:.2f}x (linear: 4x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
