"""One decode step at real size: does every shipped model plan at serving batch and context?

    python bench/bench_decode.py                                 # 4 models x 7 shapes x {static, paged}
    python bench/bench_decode.py --models Llama-3-8B --shapes 16x32768
    python bench/bench_decode.py --caches paged --block-size 16
    python bench/bench_decode.py --models bench/configs/Falcon-7B.json --caches static

Per shipped model (``--models``; default Llama-3-8B, Granite-3-8B, Mistral-7B,
Qwen2-7B; or a config JSON: ``bench/configs/Falcon-7B.json`` is multi-query attention,
71 query heads on one key/value head, with its own attention code, so static cache
only), shape ``BATCHxCONTEXT`` (``--shapes``; default batch 1, 4 and 16 x 8192
and 32768, and 1 x 131072) and cache form (``--caches``: the model's own static
cache, and a paged cache of ``--block-size`` tokens per page), one decoder layer
(``--layers``) and the LM head are planned as ``spyre-rules plan MODEL --decode
--context N --batch B [--paged]`` does (``commands/decode_plan.plan_decode``: the
meta device, automatic tiling at 256 MiB, fallback='error', nothing runs), and one
line reports:

* fits: every access fits the span limit (the plan's verdict: no op refused, no
  access over the limit, every op span-checked) -- else the first refusal;
* host: host steps of the program (0 under fallback='error', or the compile fails);
* ops, loop groups, and the in-place cache writes that are tiled (their levels);
* cpu s / wall s: the compile's CPU and wall seconds (CPU is the steadier figure on
  a shared machine; the target is under 30 s each).

The exit status is 0 only when every line fits.  Plans run one after the other in
this process (``torch._dynamo.reset()`` between them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("Llama-3-8B", "Granite-3-8B", "Mistral-7B", "Qwen2-7B")
SHAPES = ("1x8192", "4x8192", "16x8192", "1x32768", "4x32768", "16x32768", "1x131072")


def shape(text: str) -> tuple[int, int]:
    batch, _, context = text.partition("x")
    return int(batch), int(context)


def summary(report: dict) -> dict:
    ops = [r for g in report["graphs"] for r in g["ops"]]
    writes = [r for r in ops if "index_put_" in r.get("description", "")
              or "index_copy_" in r.get("description", "")]
    return {
        "fits": report["ok"],
        "host": sum(1 for r in ops if r.get("host_step")),
        "ops": len(ops),
        "groups": sum(len(g["loop_groups"]) for g in report["graphs"]),
        "writes": " ".join("".join(f"({h},{k})" for h, k in r.get("levels") or []) or "-"
                           for r in writes),
        "first": (report["error"] or (report["unsupported"] or [""])[0]
                  or ", ".join(report["overflows"]) or ", ".join(report["unchecked"])),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES))
    parser.add_argument("--caches", nargs="+", choices=("static", "paged"),
                        default=["static", "paged"])
    parser.add_argument("--block-size", type=int, default=16)
    parser.add_argument("--layers", type=int, default=1)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from spyre_rules.commands.decode_plan import plan_decode

    print(f"{'model':13} {'cache':6} {'batch':>5} {'context':>7} {'fits':5} {'host':>4} "
          f"{'ops':>4} {'groups':>6} {'cache writes':14} {'cpu s':>6} {'wall s':>6}  first refusal")
    failed = 0
    for model in args.models:
        for cache in args.caches:
            for text in args.shapes:
                batch, context = shape(text)
                report = plan_decode(model, context=context, batch=batch, layers=args.layers,
                                     paged=cache == "paged", block_size=args.block_size)
                s = summary(report)
                wall, cpu = report["seconds"]["compile"]
                failed += not s["fits"]
                print(f"{model:13} {cache:6} {batch:5} {context:7} {str(s['fits']):5} "
                      f"{s['host']:4} {s['ops']:4} {s['groups']:6} {s['writes']:14} {cpu:6.1f} "
                      f"{wall:6.1f}  {s['first'][:160]}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
