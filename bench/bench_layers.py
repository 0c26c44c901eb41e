"""Compile cost against the number of identical decoder layers.

    python bench/bench_layers.py                       # Llama-3-8B at 8192 tokens, 4 vs 32 layers
    python bench/bench_layers.py --model Qwen2-7B --seq 4096 --layers 2 28

Each case runs ``spyre-rules plan``'s compile (``commands/model_plan.plan_model``:
the model on the meta device, automatic tiling at the real 256 MiB limit) in a
fresh process, and prints side by side: wall and CPU seconds of the compile
(Dynamo, Inductor, planner, codegen, span check; the model build apart), the
peak RSS of the process, how many programs were compiled and how many decoder
layers share one, and whether every op is planned and span-checked.  The last
line gives the largest case over the smallest (target for the full
Llama-3-8B over its 4-layer version: at most 2x, issue 40).

``--no-reuse`` compiles every layer as its own part of one graph (the default
of ``torch.compile(model, backend="spyre_rules")``): the figure before layer
reuse.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import json, resource, sys
from spyre_rules.commands.model_plan import plan_model
report = plan_model({model!r}, seq={seq}, layers={layers}, reuse_layers={reuse})
ops = [r for g in report["graphs"] for r in g["ops"]]
shared = [g["region"] for g in report["graphs"] if (g.get("region") or {{}}).get("shared_by")]
print(json.dumps({{
    "seconds": report["seconds"]["compile"], "ok": report["ok"], "error": report["error"],
    "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "programs": len(report["graphs"]), "ops": len(ops),
    "layers_sharing": max((len(g["shared_by"]) for g in shared), default=0),
    "unchecked": len(report["unchecked"]), "overflows": len(report["overflows"]),
}}))
"""


def one_case(model: str, seq: int, layers: int, reuse: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(model=model, seq=seq, layers=layers, reuse=reuse)],
                          capture_output=True, text=True, cwd=ROOT, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"{model} with {layers} layers failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="Llama-3-8B")
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--layers", type=int, nargs="+", default=[4, 32])
    parser.add_argument("--no-reuse", action="store_true", help="compile every layer (the figure before reuse)")
    args = parser.parse_args(argv)
    reuse = not args.no_reuse
    print(f"{args.model} at {args.seq} tokens, meta device, 256 MiB limit, layer reuse {'on' if reuse else 'off'}")
    print(f"{'layers':>6} {'wall s':>8} {'cpu s':>8} {'peak MB':>8} {'programs':>8} {'sharing':>8} {'ops':>6}  verdict")
    rows = []
    for layers in args.layers:
        r = one_case(args.model, args.seq, layers, reuse)
        rows.append((layers, r))
        verdict = "ok" if r["ok"] else (f"NOT OK: {r['error'] or ''} overflows {r['overflows']} "
                                        f"unchecked {r['unchecked']}")
        print(f"{layers:>6} {r['seconds'][0]:>8.1f} {r['seconds'][1]:>8.1f} {r['rss_mb']:>8.0f} "
              f"{r['programs']:>8} {r['layers_sharing']:>8} {r['ops']:>6}  {verdict}", flush=True)
    (few, small), (many, large) = rows[0], rows[-1]
    print(f"{many} layers over {few}: wall {large['seconds'][0] / small['seconds'][0]:.2f}x, "
          f"cpu {large['seconds'][1] / small['seconds'][1]:.2f}x, peak memory {large['rss_mb'] / small['rss_mb']:.2f}x "
          f"(target: at most 2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
