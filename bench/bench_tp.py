"""One rank's shard of a 70B model on N tensor-parallel cards, planned at real size (issue 39).

    python bench/bench_tp.py                         # the must-show table, 2 layers
    python bench/bench_tp.py --cases Llama-3-70B:4 --seqs 8192 --layers 1

Per case (model, ranks) and sequence length, one fresh process runs
``spyre-rules plan MODEL --tp N --seq S`` (commands/tp_plan.py: the model on the meta
device, sharded by its own tensor-parallel plan over a fake process group of N ranks,
compiled as rank 0 with automatic tiling at 256 MiB) and prints one row: the shard's
split sizes, loop groups, the collective steps (and how many run in chunks because a
whole buffer spans more than 256 MiB), accesses over the limit, refused ops, the
verdict (ok: every access of every rank's shard fits; every split divides by N, so the
ranks' shards have the same shapes) and compile wall / CPU seconds.  Every decoder
layer has the same shapes, so ``--layers`` (default 2) layers stand for all of them.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = ("Llama-3-70B:4", "Llama-3-70B:8", "Qwen2-72B:4")
SEQS = (8192, 32768)


def one_case(model: str, tp: int, seq: int, layers: int) -> dict:
    from spyre_rules.commands.tp_plan import plan_tensor_parallel

    report = plan_tensor_parallel(model, tp, seq=seq, layers=layers)
    shard = report["tp"]["split"]
    return {
        "model": model, "tp": tp, "seq": seq, "layers": layers,
        "heads": shard["num_attention_heads"][1], "kv_heads": shard["num_key_value_heads"][1],
        "ffn": shard["intermediate_size"][1],
        "loop_groups": sum(len(g["loop_groups"]) for g in report["graphs"]),
        "collectives": report["tp"]["collectives"],
        "overflows": len(report["overflows"]), "unsupported": len(report["unsupported"]),
        "error": report["error"], "ok": report["ok"],
        "compile_s": report["seconds"]["compile"],
    }


def _child(model: str, tp: int, seq: int, layers: int) -> dict:
    run = subprocess.run([sys.executable, __file__, "--one", model, str(tp), str(seq),
                          str(layers)], capture_output=True, text=True, cwd=ROOT)
    lines = run.stdout.strip().splitlines()
    if run.returncode != 0 or not lines:
        return {"model": model, "tp": tp, "seq": seq, "error": run.stderr.strip()[-300:],
                "ok": False}
    return json.loads(lines[-1])


def _collectives(c: dict) -> str:
    return " ".join(f"{name}x{v['steps']}" + (f"({v['chunked']} chunked)" if v["chunked"] else "")
                    for name, v in c.items() if name != "wait_tensor")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), help="MODEL:RANKS")
    parser.add_argument("--seqs", nargs="+", type=int, default=list(SEQS))
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        model, tp, seq, layers = args.one
        print(json.dumps(one_case(model, int(tp), int(seq), int(layers))))
        return 0
    print(f"{args.layers} layers, fp16, batch 1, limit 256 MiB, rank 0 of N on a fake process "
          "group, meta device")
    print(f"{'model':12} {'tp':>3} {'seq':>6} {'heads':>5} {'kv':>3} {'ffn':>5} {'groups':>6} "
          f"{'over':>4} {'refused':>7} {'ok':>3} {'wall s':>7} {'cpu s':>6}  collectives")
    failed = False
    for case in args.cases:
        model, _, tp = case.partition(":")
        for seq in args.seqs:
            row = _child(model, int(tp), seq, args.layers)
            if "heads" not in row:
                print(f"{model:12} {tp:>3} {seq:>6} FAILED: {row['error']}")
                failed = True
                continue
            wall, cpu = row["compile_s"]
            print(f"{model:12} {tp:>3} {seq:>6} {row['heads']:>5} {row['kv_heads']:>3} "
                  f"{row['ffn']:>5} {row['loop_groups']:>6} {row['overflows']:>4} "
                  f"{row['unsupported']:>7} {'yes' if row['ok'] else 'NO':>3} {wall:>7.1f} "
                  f"{cpu:>6.1f}  {_collectives(row['collectives'])}"
                  + (f"  error: {row['error']}" if row["error"] else ""))
            failed |= not row["ok"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
