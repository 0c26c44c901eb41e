"""Real-size models compiled on the meta device: time, memory and the plan's shape.

    python bench/bench_real_scale.py                        # every shipped config, 2 layers
    python bench/bench_real_scale.py --models Llama-3-8B --seqs 2048 32768 --batches 1
    python bench/bench_real_scale.py --no-capture

Per shipped model config (``spyre_rules/model_configs``) and shape (``--seqs``
x ``--batches``), with ``--layers`` decoder layers, one fresh process runs
``spyre-rules plan``'s compile (``commands/model_plan.plan_model``: the model on
the meta device, automatic tiling at ``--max-span-bytes``, default 256 MiB) and
reports:

* compile: wall and CPU seconds of ``torch.compile``'s first call (Dynamo,
  Inductor, planner, codegen, span check; the model build is not included);
* peak RSS of the process (MB; imports and the meta model included);
* loop groups and the tiles of each, ops refused (Unsupported) and accesses
  over the limit (span check), and the compile error if the graph was refused.

A graph the planner refuses stops before code generation; ``--tiling off``
compiles every op untiled instead, so codegen and the span check run on every
op at its full size (their cost is measured too; the span check then reports
the overflows).

Then per model and batch: compile CPU time at the largest seq over the
smallest (target at most 1.5x: nothing in compilation should cost in
proportion to tensor sizes) and the largest peak RSS (target under 4 GB).

``--capture`` (on by default): ``capture_operations`` of one Llama-3-8B
decoder layer at seq 4096 with real (uninitialised) fp16 CPU weights and
inputs -- the capture never runs the graph, so this takes seconds where
running the layer's matmuls took minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RSS_BOUND_MB = 4096
RATIO_BOUND = 1.5


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def one_case(model: str, seq: int, batch: int, layers: int, limit: int, tiling: bool) -> dict:
    from spyre_rules.commands.model_plan import plan_model

    report = plan_model(model, seq=seq, batch=batch, layers=layers, max_span_bytes=limit,
                        automatic_tiling=tiling)
    groups = [g for graph in report["graphs"] for g in graph["loop_groups"]]
    return {
        "model": model, "seq": seq, "batch": batch, "layers": layers,
        "compile_wall": report["seconds"]["compile"][0],
        "compile_cpu": report["seconds"]["compile"][1],
        "peak_rss_mb": round(_peak_rss_mb()),
        "graphs": len(report["graphs"]),
        "loop_groups": len(groups),
        "tiles": [g["tiles"] for g in groups],
        "refused": report["unsupported"],
        "over_limit": report["overflows"],
        "error": report["error"],
    }


def one_capture(seq: int) -> dict:
    import torch
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

    import spyre_rules

    cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
                      num_key_value_heads=8, num_hidden_layers=1, vocab_size=128256,
                      max_position_embeddings=max(seq, 8192), rope_theta=500000.0)
    with torch.device("meta"):
        layer = LlamaDecoderLayer(cfg, 0).to(torch.float16).eval()
    layer = layer.to_empty(device="cpu")  # real CPU memory, uninitialised: no init cost
    hidden = torch.empty(1, seq, 4096, dtype=torch.float16)
    positions = torch.arange(seq).unsqueeze(0)
    cos, sin = LlamaRotaryEmbedding(cfg)(hidden, positions)

    def fn(h, c, s):
        out = layer(h, attention_mask=None, position_embeddings=(c, s))
        return out[0] if isinstance(out, tuple) else out

    start = time.perf_counter(), time.process_time()
    ops = spyre_rules.capture_operations(fn, hidden, cos, sin)
    wall, cpu = (b - a for a, b in zip(start, (time.perf_counter(), time.process_time())))
    return {"seq": seq, "ops": len(ops), "graphs": len(ops.graphs), "capture_wall": round(wall, 2),
            "capture_cpu": round(cpu, 2), "peak_rss_mb": round(_peak_rss_mb())}


def _child(args: list[str]) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    if proc.returncode != 0:
        return {"failed": proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _tiles(tiles: list) -> str:
    if not tiles:
        return "-"
    counts: dict[str, int] = {}
    for t in tiles:
        key = "x".join(map(str, t))
        counts[key] = counts.get(key, 0) + 1
    return " ".join(f"{k}:{n}" if n > 1 else k for k, n in counts.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="*", default=None)
    parser.add_argument("--seqs", nargs="*", type=int, default=[2048, 8192, 32768])
    parser.add_argument("--batches", nargs="*", type=int, default=[1, 4])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--max-span-bytes", type=int, default=256 * 1024 * 1024)
    parser.add_argument("--no-capture", action="store_true")
    parser.add_argument("--tiling", choices=("auto", "off"), default="auto",
                        help="off: compile every op untiled, so codegen and the span check "
                             "run on every op at full size (the cost check of the whole path)")
    parser.add_argument("--capture-seq", type=int, default=4096)
    parser.add_argument("--one", nargs=4, metavar=("MODEL", "SEQ", "BATCH", "LAYERS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--capture-one", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model, seq, batch, layers = args.one
        print(json.dumps(one_case(model, int(seq), int(batch), int(layers), args.max_span_bytes,
                                  args.tiling == "auto")))
        return 0
    if args.capture_one:
        print(json.dumps(one_capture(args.capture_one)))
        return 0

    sys.path.insert(0, str(ROOT))
    from spyre_rules.commands.model_plan import shipped_configs

    models = args.models or shipped_configs()
    tiling = "automatic tiling" if args.tiling == "auto" else "no tiling (full-size ops)"
    print(f"{args.layers} layers, fp16, limit {args.max_span_bytes} bytes, {tiling}, "
          "meta device (one process per case)")
    print(f"{'model':14} {'batch':>5} {'seq':>6} {'wall s':>7} {'cpu s':>6} {'RSS MB':>7} "
          f"{'groups':>6} {'refused':>7} {'over':>5}  tiles per group / error")
    rows = []
    for model in models:
        for batch in args.batches:
            for seq in args.seqs:
                row = _child(["--one", model, str(seq), str(batch), str(args.layers),
                              "--max-span-bytes", str(args.max_span_bytes),
                              "--tiling", args.tiling])
                row.update(model=model, batch=batch, seq=seq)
                rows.append(row)
                if "failed" in row:
                    print(f"{model:14} {batch:5} {seq:6} FAILED {row['failed']}", flush=True)
                    continue
                tail = _tiles(row["tiles"])
                if row["error"]:
                    tail += f" / {row['error'][:90]}"
                print(f"{model:14} {batch:5} {seq:6} {row['compile_wall']:7.1f} "
                      f"{row['compile_cpu']:6.1f} {row['peak_rss_mb']:7} {row['loop_groups']:6} "
                      f"{len(row['refused']):7} {len(row['over_limit']):5}  {tail}", flush=True)
    print()
    ok = True
    for model in models:
        for batch in args.batches:
            done = [r for r in rows if r["model"] == model and r["batch"] == batch
                    and "failed" not in r]
            if len(done) < 2:
                continue
            small, large = min(done, key=lambda r: r["seq"]), max(done, key=lambda r: r["seq"])
            ratio = large["compile_cpu"] / max(small["compile_cpu"], 1e-9)
            rss = max(r["peak_rss_mb"] for r in done)
            good = ratio <= RATIO_BOUND and rss < RSS_BOUND_MB
            ok &= good
            print(f"{model:14} batch {batch}: compile cpu seq {large['seq']} / seq {small['seq']} "
                  f"= {ratio:.2f}x (bound {RATIO_BOUND}x), peak RSS {rss} MB "
                  f"(bound {RSS_BOUND_MB} MB) {'ok' if good else 'OVER'}")
    if not args.no_capture:
        cap = _child(["--capture-one", str(args.capture_seq)])
        if "failed" in cap:
            print(f"capture_operations, Llama-3-8B layer: FAILED {cap['failed']}")
            ok = False
        else:
            print(f"capture_operations, one Llama-3-8B decoder layer (real fp16 CPU weights) at "
                  f"seq {cap['seq']}: {cap['capture_wall']} s wall, {cap['capture_cpu']} s CPU, "
                  f"{cap['ops']} ops in {cap['graphs']} graph(s), peak RSS {cap['peak_rss_mb']} MB")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
