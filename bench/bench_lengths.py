"""Every prompt length at real size: does it plan, and how many loop trips does it cost?

    python bench/bench_lengths.py                              # 4 models x (16 lengths + 131071)
    python bench/bench_lengths.py --models Llama-3-8B --count 4 --seed 7
    python bench/bench_lengths.py --models Qwen2-7B --seqs 16381 8191 --no-long

Per shipped model (``--models``; default Llama-3-8B, Granite-3-8B, Mistral-7B,
Qwen2-7B) and prompt length (``--count`` lengths drawn uniformly from
[``--low``, ``--high``] with ``random.Random(--seed)``, one draw per model so a
subset of models sees the same lengths, plus ``--long`` = 131071 unless
``--no-long``; or exactly ``--seqs``), one decoder layer (``--layers``) is
planned as ``spyre-rules plan`` does (``commands/model_plan.plan_model``: the
meta device, automatic tiling at 256 MiB, nothing runs), and one line reports:

* fits: every access fits the span limit (the plan's verdict: no op refused, no
  access over the limit, every op span-checked) -- else the first refusal;
* trips: the loop trips of the program, the sum over loop groups of the product
  of their tile counts (the loop groups of ``spyre-rules plan --format json``);
* pow2 trips: the same at the next power of two at or above the length (planned
  once per model and power, cached), and trips / pow2 trips.

The target (issue 40): every length fits and no ratio is above 1.  The exit
status is 0 only then.  Every plan takes ~10 s of CPU; plans run one after the
other in this process (``torch._dynamo.reset()`` between them).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("Llama-3-8B", "Granite-3-8B", "Mistral-7B", "Qwen2-7B")


def lengths(count: int, seed: int, low: int, high: int) -> list[int]:
    """``count`` seeded lengths in [low, high], in draw order (the same for every model)."""
    draw = random.Random(seed)
    return [draw.randint(low, high) for _ in range(count)]


def next_power_of_two(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def loop_trips(report: dict) -> int:
    """Sum over loop groups of the product of their tile counts."""
    return sum(math.prod(g["tiles"]) for graph in report["graphs"] for g in graph["loop_groups"])


def plan(model: str, seq: int, layers: int, limit: int) -> dict:
    from spyre_rules.commands.model_plan import plan_model

    start = time.perf_counter()
    report = plan_model(model, seq=seq, layers=layers, max_span_bytes=limit)
    problem = report["error"] or next(iter(report["unsupported"] + report["overflows"]
                                           + report["unchecked"]), None)
    return {"ok": report["ok"], "trips": loop_trips(report), "problem": problem,
            "seconds": time.perf_counter() - start,
            "groups": [g["tiles"] for graph in report["graphs"] for g in graph["loop_groups"]]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--count", type=int, default=16, help="random lengths per model")
    parser.add_argument("--seed", type=int, default=40)
    parser.add_argument("--low", type=int, default=1025)
    parser.add_argument("--high", type=int, default=32768)
    parser.add_argument("--long", type=int, default=131071, help="one more length per model")
    parser.add_argument("--no-long", action="store_true")
    parser.add_argument("--seqs", nargs="*", type=int, help="these lengths instead of a draw")
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--max-span-bytes", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--groups", action="store_true", help="also print each plan's tile counts")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(ROOT))
    seqs = args.seqs or lengths(args.count, args.seed, args.low, args.high)
    if not args.seqs and not args.no_long:
        seqs = [*seqs, args.long]
    print(f"{args.layers} layer(s), fp16, batch 1, limit {args.max_span_bytes} bytes, meta device; "
          f"lengths {seqs}" + ("" if args.seqs else f" (seed {args.seed})"), flush=True)
    print(f"{'model':14} {'seq':>7} {'fits':>5} {'trips':>7} {'pow2':>7} {'pow2 trips':>10} "
          f"{'ratio':>6} {'s':>5}  refusal", flush=True)
    good = True
    for model in args.models:
        at_pow2: dict[int, dict] = {}
        for seq in seqs:
            row = plan(model, seq, args.layers, args.max_span_bytes)
            p2 = next_power_of_two(seq)
            if p2 not in at_pow2:
                at_pow2[p2] = row if p2 == seq else plan(model, p2, args.layers,
                                                         args.max_span_bytes)
            ref = at_pow2[p2]
            ratio = row["trips"] / ref["trips"] if row["ok"] and ref["ok"] and ref["trips"] else None
            good &= bool(row["ok"] and ratio is not None and ratio <= 1)
            print(f"{model:14} {seq:7} {'yes' if row['ok'] else 'NO':>5} {row['trips']:7} {p2:7} "
                  f"{ref['trips']:10} {'-' if ratio is None else f'{ratio:.2f}':>6} "
                  f"{row['seconds']:5.1f}  {(row['problem'] or '')[:100]}", flush=True)
            if args.groups:
                print(f"{'':14} {seq:7} groups {row['groups']}; at {p2}: {ref['groups']}", flush=True)
    print("every length fits, none costs more trips than its next power of two" if good
          else "NOT every length fits within its next power of two's trips")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
