"""Mutation fuzzer of the ``.rules`` checker.

Each input is the bundled policy (``rules/*.rules``) with one or more files
mutated by one of these classes:

* ``token``: delete, duplicate, swap or replace tokens (keywords, names, symbols);
* ``structure``: drop, repeat or move lines and items, duplicate a section, truncate;
* ``cross-file``: move or copy an item to another file, drop a file, duplicate or
  rename one (a second prelude, a policy without one);
* ``numeric``: boundary and huge integers (2**63, 4,000+ digits), units, zero divisors;
* ``template``: placeholders and braces in messages (``\\{``, ``{{``, ``{op.__class__}``,
  ``{a.b.c}``, unclosed braces);
* ``deep``: deep and unclosed nesting of brackets and operators;
* ``long``: very long names, strings, numbers, comments, expressions and items;
* ``special``: special text and bytes (NUL, BOM, CR, tabs, backslash-newline,
  Unicode line separators, non-UTF-8 and random bytes).

Inputs are checked in a worker process, one at a time with a time limit: an
input still running after ``--timeout`` seconds of its CPU time is a *hang* (the worker is
killed and restarted).  Outcomes: ``clean`` (no diagnostic), ``diagnostics``,
``crash`` (an exception escaped the checker), ``hang`` (``--timeout`` CPU
seconds of the worker on one input), and ``bad span`` (a
diagnostic outside its file's lines and columns, or naming a file that was not
checked).  Every fourth input also compares the fast lexer's tokens with
lark's on each mutated file up to 64 KiB (``lexer mismatch``).  The report
gives the counts, the inputs slower than 2 s, and the checker's median and p99
time per input, in CPU time of the worker (what the checker costs, whatever
else runs on the machine) and in wall time.

``--regressions`` checks one input per class found by the campaign of issue 10
(``REGRESSIONS``, also run by tests/lang/test_hardening.py) and prints each
one's checker time.

Run: ``python bench/fuzz_rules.py --count N --seed S [--timeout T] [--dump DIR] [--json OUT]``;
``--start`` and ``--json`` split a long campaign over several processes.
Input ``i`` of seed ``S`` is always the same (``--only i`` re-runs one).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

OUTCOMES = ("clean", "diagnostics", "crash", "hang", "bad span", "lexer mismatch")
SLOW_SECONDS = 2.0
WALL_FACTOR = 20  # a worker without an answer after timeout * WALL_FACTOR wall seconds counts as hung
LEXER_CHECK_BYTES = 64 * 1024  # lark's lexer is slow: compare the lexers on mutated files up to this size

from fuzz_mutations import CLASSES, make_input  # noqa: E402 - bench/ is on sys.path

# ----------------------------------------------------------------- regressions
# One input per class the fuzzing campaign of issue 10 found: (name, the file
# added to the bundled policy -- for rules/planner.rules: the rule put first in
# its eligibility section --, a code the check must report for that file).
_NINES = "9" * 4000
REGRESSIONS: list[tuple[str, str, bytes, str]] = [
    ("escape-mro", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "cls=\{op.__class__.__mro__\}";', "E032"),
    ("escape-globals", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "\{op.__class__.__init__.__globals__\}";',
     "E032"),
    ("escape-open-brace", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "x \{ y";', "E032"),
    ("escape-ctx", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "\{__ctx__\}";', "E032"),
    ("placeholder-dunder", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "{op.__class__}";', "E031"),
    ("placeholder-ctx", "rules/planner.rules",
     rb'  reject esc when is_computed_buffer(op) because "{__ctx__}";', "E031"),
    ("huge-product", "rules/extra.rules",
     f"const H = {_NINES} * {_NINES};\nsearch {{ bound max_combos = 0 - H; }}\n".encode(), "E042"),
    ("squarings", "rules/extra.rules",
     b"const A0 = 4294967296;\n" + b"".join(b"const A%d = A%d * A%d;\n" % (i + 1, i, i) for i in range(26)),
     "E042"),
    ("unclosed-4000", "rules/extra.rules", b"const X = " + b"((((1," * 4000, "E040"),
    ("unclosed-20000", "rules/extra.rules", b"const X = " + b"((((1," * 20000, "E043"),
    ("expression-1mb", "rules/extra.rules", b"const X = " + b"1 + " * 250000 + b"1;\n", "E043"),
    ("backslash-newline", "rules/extra.rules",
     b'const S = "a\\\nb";\nconst T = 1 +;\n', "E003"),
    ("file-too-large", "rules/extra.rules", b"#" * (2 * 1024 * 1024 + 1), "E043"),
    ("too-many-items", "rules/extra.rules", b"".join(b"const C%d = 1;\n" % i for i in range(5001)), "E043"),
]


def regression_input(name: str) -> list[tuple[str, bytes]]:
    """The bundled policy with the regression's file added."""
    _, path, data, _ = next(r for r in REGRESSIONS if r[0] == name)
    seeds = bundled_seeds()
    if path not in dict(seeds):
        return [*seeds, (path, data)]
    head = b"eligibility {\n"
    return [(n, d.replace(head, head + data + b"\n", 1) if n == path else d) for n, d in seeds]


# --------------------------------------------------------------------- checking

def span_problem(diag, names: set[str], texts: dict[str, str]) -> str | None:
    """Why a diagnostic lies outside its file, or None.  A span may end one
    column past the end of its line (a caret at the end of a line or file)."""
    s = diag.span
    if s.file not in names:
        return f"{diag.code} names file {s.file!r}, which was not checked"
    lines = texts.get(s.file, "").split("\n")
    if not (1 <= s.line <= len(lines)) or not (s.line <= s.end_line <= len(lines)):
        return f"{diag.code} at lines {s.line}-{s.end_line} of a {len(lines)}-line file"
    if not 1 <= s.col <= len(lines[s.line - 1]) + 1:
        return f"{diag.code} at {s.line}:{s.col}, the line has {len(lines[s.line - 1])} characters"
    if not 1 <= s.end_col <= len(lines[s.end_line - 1]) + 2 or (s.end_line == s.line and s.end_col < s.col):
        return f"{diag.code} ends at {s.end_line}:{s.end_col}, the line has {len(lines[s.end_line - 1])} characters"
    return None


def lexer_mismatch(text: str) -> str | None:
    """Where the fast lexer and lark's lexer disagree on ``text``, or None."""
    from spyre_rules.lang.lark_support import lark
    from spyre_rules.lang.parser import get_parser

    parser = get_parser()
    if parser.fast_lexer is None:
        return None
    fast = parser.fast_lexer.lex(text)
    slow = parser.lark_lexer.lex(lark.lexer.LexerState(lark.lexer.TextSlice.cast_from(text)), None)
    for a, b in zip(fast, slow):
        ka = (a.type, str(a), a.line, a.column, a.end_line, a.end_column)
        kb = (b.type, str(b), b.line, b.column, b.end_line, b.end_column)
        if ka != kb:
            return f"fast {ka[:1] + ka[2:]} vs lark {kb[:1] + kb[2:]}"
    return None


def check_one(files: list[tuple[str, bytes]], seeds: dict[str, bytes], compare_lexers: bool) -> dict:
    """Check one input in this process; the outcome record (never raises)."""
    from spyre_rules.lang.diagnostics import render_text
    from spyre_rules.lang.driver import check_sources

    start, cpu = time.perf_counter(), time.process_time()
    try:
        result = check_sources(files, complete=True)
        seconds = time.process_time() - cpu
        wall = time.perf_counter() - start
        names = {name for name, _ in files}
        for d in result.diagnostics:
            render_text(d, result.texts.get(d.span.file), strict=True)
            problem = span_problem(d, names, result.texts)
            if problem:
                return {"outcome": "bad span", "seconds": seconds, "wall": wall, "detail": problem}
        if compare_lexers:
            for name, data in files:
                if seeds.get(name) != data and name in result.texts and len(data) <= LEXER_CHECK_BYTES:
                    problem = lexer_mismatch(result.texts[name])
                    if problem:
                        return {"outcome": "lexer mismatch", "seconds": seconds, "wall": wall,
                                "detail": f"{name}: {problem}"}
        outcome = "diagnostics" if result.diagnostics else "clean"
        return {"outcome": outcome, "seconds": seconds, "wall": wall, "detail": ""}
    except BaseException as exc:  # noqa: BLE001 - a crash is the finding
        return {"outcome": "crash", "seconds": time.process_time() - cpu, "wall": time.perf_counter() - start,
                "detail": repr(exc)[:500]}


def _worker(conn) -> None:
    from spyre_rules.lang.parser import get_parser

    get_parser()
    seeds = None
    while True:
        msg = conn.recv()
        if msg is None:
            return
        if msg[0] == "seeds":
            seeds = dict(msg[1])
            conn.send("ready")
            continue
        if msg[0] == "codes":
            _, files, path = msg
            rec = check_one(files, seeds, False)
            if rec["outcome"] in ("clean", "diagnostics"):
                from spyre_rules.lang.driver import check_sources

                rec["codes"] = [d.code for d in check_sources(files).diagnostics if d.span.file == path]
            conn.send(rec)
            continue
        _, files, compare = msg
        conn.send(check_one(files, seeds, compare))


class Runner:
    """A worker process checking one input at a time, killed and restarted on a hang."""

    def __init__(self, seeds: list[tuple[str, bytes]], timeout: float) -> None:
        self.seeds = seeds
        self.timeout = timeout
        self.ctx = mp.get_context("spawn")
        self.proc = None
        self._start()

    def _start(self) -> None:
        self.conn, child = self.ctx.Pipe()
        self.proc = self.ctx.Process(target=_worker, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        self.conn.send(("seeds", self.seeds))
        if not self.conn.poll(120):
            raise RuntimeError("the fuzz worker did not start")
        self.conn.recv()

    def run_codes(self, files, path: str) -> dict:
        """Like :meth:`run`, and the codes of the diagnostics in file ``path`` (key ``codes``)."""
        return self._ask(("codes", files, path))

    def run(self, files, compare: bool) -> dict:
        return self._ask(("check", files, compare))

    def _cpu(self) -> float | None:
        """CPU seconds the worker has used (Linux /proc), or None."""
        try:
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def _ask(self, msg) -> dict:
        """The worker's answer.  A hang is ``timeout`` seconds of the worker's CPU
        time on one input (wall time where /proc is missing, and at most
        ``WALL_FACTOR`` times it in any case): on a loaded machine a starved
        worker is slow, not hung."""
        start_cpu, start_wall = self._cpu(), time.perf_counter()
        self.conn.send(msg)
        detail = ""
        while not detail:
            if self.conn.poll(min(self.timeout, 1.0)):
                try:
                    return self.conn.recv()
                except EOFError:
                    detail = "the worker died"
                    break
            now = self._cpu()
            used = now - start_cpu if now is not None and start_cpu is not None \
                else time.perf_counter() - start_wall
            if used > self.timeout or time.perf_counter() - start_wall > self.timeout * WALL_FACTOR:
                detail = f"no answer within {self.timeout} s"
        self.proc.kill()
        self.proc.join()
        self._start()
        return {"outcome": "hang" if "answer" in detail else "crash", "seconds": self.timeout,
                "wall": self.timeout, "detail": detail, "codes": []}

    def close(self) -> None:
        try:
            self.conn.send(None)
        except OSError:
            pass
        self.proc.join(5)
        if self.proc.is_alive():
            self.proc.kill()


def bundled_seeds() -> list[tuple[str, bytes]]:
    rules = ROOT / "rules"
    return [(f"rules/{p.name}", p.read_bytes()) for p in sorted(rules.glob("*.rules"))]


def fuzz(count: int, seed: int, timeout: float = 10.0, start: int = 0, dump: Path | None = None,
         progress: bool = False, checkpoint: Path | None = None) -> dict:
    """Run inputs ``start .. start+count-1``; a summary dict (see :func:`report`)."""
    seeds = bundled_seeds()
    runner = Runner(seeds, timeout)
    counts = {o: 0 for o in OUTCOMES}
    per_class = {c: 0 for c in CLASSES}
    times: list[float] = []
    walls: list[float] = []
    slow_wall: list[tuple[int, str, float]] = []
    findings: list[tuple[int, str, str, str]] = []
    slow: list[tuple[int, str, float]] = []
    began = time.perf_counter()
    try:
        for index in range(start, start + count):
            cls, files = make_input(seeds, seed, index)
            per_class[cls] += 1
            rec = runner.run(files, compare=index % 4 == 0)
            counts[rec["outcome"]] += 1
            times.append(rec["seconds"])
            walls.append(rec["wall"])
            if rec["seconds"] > SLOW_SECONDS:
                slow.append((index, cls, rec["seconds"]))
            if rec["wall"] > SLOW_SECONDS:
                slow_wall.append((index, cls, rec["wall"]))
            if rec["outcome"] not in ("clean", "diagnostics"):
                findings.append((index, cls, rec["outcome"], rec["detail"]))
                if dump is not None:
                    folder = dump / f"{seed}_{index}"
                    folder.mkdir(parents=True, exist_ok=True)
                    for name, data in files:
                        (folder / Path(name).name).write_bytes(data)
            done = index - start + 1
            if checkpoint is not None and done % 1000 == 0:
                # the summary so far: a campaign stopped early still reports what it ran
                import json

                checkpoint.write_text(json.dumps(summarise(done, seed, counts, per_class, findings, slow,
                                                           slow_wall, times, walls,
                                                           time.perf_counter() - began)))
            if progress and (index - start + 1) % 1000 == 0:
                print(f"  {index - start + 1} inputs, {time.perf_counter() - began:.0f} s, "
                      + ", ".join(f"{k}={v}" for k, v in counts.items() if v), flush=True)
    finally:
        runner.close()
    return summarise(count, seed, counts, per_class, findings, slow, slow_wall, times, walls,
                     time.perf_counter() - began)


def _quantiles(values: list[float]) -> tuple[float, float, float]:
    values = sorted(values)
    if not values:
        return 0.0, 0.0, 0.0
    return statistics.median(values), values[min(len(values) - 1, int(len(values) * 0.99))], values[-1]


def summarise(count, seed, counts, per_class, findings, slow, slow_wall, times, walls, wall) -> dict:
    median, p99, top = _quantiles(times)
    wmedian, wp99, wtop = _quantiles(walls)
    return {"count": count, "seed": seed, "counts": counts, "classes": per_class, "findings": findings,
            "slow": slow, "slow_wall": slow_wall, "median": median, "p99": p99, "max": top,
            "wall_median": wmedian, "wall_p99": wp99, "wall_max": wtop, "wall": wall,
            "times": times, "walls": walls}


def merge(parts: list[dict]) -> dict:
    """One summary of several runs (``--json`` files of a campaign split with ``--start``)."""
    counts = {o: sum(p["counts"][o] for p in parts) for o in OUTCOMES}
    classes = {c: sum(p["classes"][c] for p in parts) for c in CLASSES}
    return summarise(sum(p["count"] for p in parts), parts[0]["seed"], counts, classes,
                     [f for p in parts for f in p["findings"]], [f for p in parts for f in p["slow"]],
                     [f for p in parts for f in p["slow_wall"]], [t for p in parts for t in p["times"]],
                     [t for p in parts for t in p["walls"]], max(p["wall"] for p in parts))


def report(summary: dict) -> str:
    out = [f"fuzz_rules: {summary['count']} inputs, seed {summary['seed']}, {summary['wall']:.0f} s wall"]
    out.append("  classes: " + ", ".join(f"{k}={v}" for k, v in summary["classes"].items()))
    out.append("  outcomes: " + ", ".join(f"{k}={v}" for k, v in summary["counts"].items()))
    out.append(f"  inputs over {SLOW_SECONDS:.0f} s: {len(summary['slow'])} (CPU time), "
               f"{len(summary['slow_wall'])} (wall time)")
    out.append(f"  checker CPU time per input: median {summary['median'] * 1000:.1f} ms, "
               f"p99 {summary['p99'] * 1000:.1f} ms, max {summary['max'] * 1000:.1f} ms")
    out.append(f"  checker wall time per input: median {summary['wall_median'] * 1000:.1f} ms, "
               f"p99 {summary['wall_p99'] * 1000:.1f} ms, max {summary['wall_max'] * 1000:.1f} ms")
    for index, cls, outcome, detail in summary["findings"][:20]:
        out.append(f"  input {index} ({cls}): {outcome}: {detail}")
    for index, cls, seconds in summary["slow"][:20]:
        out.append(f"  input {index} ({cls}): {seconds:.2f} s CPU")
    for index, cls, seconds in summary["slow_wall"][:20]:
        out.append(f"  input {index} ({cls}): {seconds:.2f} s wall")
    return "\n".join(out)


def run_regressions(timeout: float) -> int:
    """Each regression input in the worker: its outcome, codes and checker time."""
    runner = Runner(bundled_seeds(), timeout)
    bad = 0
    try:
        for name, path, _, code in REGRESSIONS:
            rec = runner.run_codes(regression_input(name), path)
            ok = rec["outcome"] == "diagnostics" and code in rec["codes"]
            bad += not ok
            print(f"{name:20} {'ok ' if ok else 'BAD'} {rec['outcome']:12} CPU {rec['seconds'] * 1000:7.1f} ms  "
                  f"wall {rec['wall'] * 1000:7.1f} ms  {code} in {sorted(set(rec['codes']))}")
    finally:
        runner.close()
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--start", type=int, default=0, help="index of the first input")
    ap.add_argument("--only", type=int, help="run just this input index")
    ap.add_argument("--timeout", type=float, default=10.0, help="seconds before an input counts as a hang")
    ap.add_argument("--dump", type=Path, help="write every failing input to DIR/SEED_INDEX/")
    ap.add_argument("--progress", action="store_true")
    ap.add_argument("--json", type=Path, help="also write the summary (with every input's time) as JSON, "
                                              "updated every 1000 inputs")
    ap.add_argument("--merge", type=Path, nargs="+", help="print one report of several --json files")
    ap.add_argument("--regressions", action="store_true",
                    help="check each regression input (REGRESSIONS) in the worker and print its time")
    args = ap.parse_args(argv)
    if args.regressions:
        return run_regressions(args.timeout)
    if args.merge:
        import json

        print(report(merge([json.loads(p.read_text()) for p in args.merge])))
        return 0
    start, count = (args.only, 1) if args.only is not None else (args.start, args.count)
    summary = fuzz(count, args.seed, args.timeout, start, args.dump, args.progress, args.json)
    print(report(summary))
    if args.json is not None:
        import json

        args.json.write_text(json.dumps(summary))
    bad = sum(summary["counts"][o] for o in ("crash", "hang", "bad span", "lexer mismatch"))
    return 1 if bad or summary["slow"] else 0


if __name__ == "__main__":
    sys.exit(main())
