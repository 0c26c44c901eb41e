"""A sweep over transformers' causal-LM architectures with tiny configs (issue 41).

Every architecture of ``MODEL_FOR_CAUSAL_LM_MAPPING_NAMES`` is built from its config
class with the same tiny sizes (2 layers, hidden 128, 4 heads, 2 KV heads, head dim
32, vocabulary 256, experts 4 of which 2 per token), randomly initialised, and its
logits for one sequence of 128 tokens compared with eager:

* ``builds``: the model builds and runs eagerly (many configs refuse these sizes or
  need other inputs: they are listed, not counted);
* ``error``: compiled with ``torch.compile(backend="spyre_rules")`` under
  ``fallback="error"``: ``program`` when every graph compiles wholly on the program and
  the logits equal eager (within 1e-4 absolute and relative), ``WRONG`` when they do not,
  else the refusal;
* ``default``: where ``error`` refused, compiled again under the default
  ``fallback="eager"`` and run: ``ok`` (equal eager), ``WRONG`` or ``CRASH`` (a graph
  wholly on the program under ``error`` made no fallback decision, so the default
  compiles that same program: ``ok (same program)``);
* ``auto``: (for those on the program) compiled again with automatic tiling at
  ``--limit-kib`` KiB under ``fallback="error"``: ``program`` or the refusal.

Each architecture runs in its own subprocess (a crash or a hang costs one row, not the
sweep), ``--timeout`` seconds each.  The totals line gives the three shares the issue
asks for.  Usage::

    python3 bench/bench_arch_sweep.py [--limit-kib 64] [--only mixtral,llama] [--out rows.jsonl]
    python3 bench/bench_arch_sweep.py --totals rows.jsonl   # the totals of batches run so far
    python3 bench/bench_arch_sweep.py --seq 77 --sizes '{"hidden_size": 256, "num_attention_heads": 8}'

``--seq`` and ``--sizes`` (JSON merged over the tiny config, before each architecture's own
fields) run the sweep at other sizes: an odd sequence length, wider layers, other heads.

The default limit is 64 KiB: an experts model's grouped matmul reads its weights
gathered (any token may pick any expert), so one tile spans all 4 experts of the
output columns it covers, and a tile cannot be narrower than one output stick: 32
float32 columns x 128 deep x 4 experts x 4 bytes = 64 KiB (so the intermediate size
is 128 too).  ``--only`` keeps its order; without it the experts and hybrid models
and the issue's known tiling gaps run first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

SEQ = 128
#: how the parent hands ``--seq`` and ``--sizes`` to each architecture's subprocess
SEQ_VARIABLE, SIZES_VARIABLE = "SPYRE_RULES_SWEEP_SEQ", "SPYRE_RULES_SWEEP_SIZES"
VOCAB = 256
TINY = {
    "vocab_size": VOCAB, "hidden_size": 128, "intermediate_size": 128, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
    "max_position_embeddings": 512, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
    "use_cache": False,
    # experts
    "num_local_experts": 4, "num_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2,
    "moe_intermediate_size": 128, "shared_expert_intermediate_size": 128,
    "shared_intermediate_size": 128,
}
TOLERANCE = 1e-4

#: config fields an architecture needs at the tiny sizes (its defaults assume other sizes),
#: and the tiny fields its config reads from elsewhere (a derived property has no setter)
ARCH_FIELDS = {
    "gptj": {"rotary_dim": 16},           # rotates 64 dims of each head by default: heads are 32
    "codegen": {"rotary_dim": 16},
    "dots1": {"n_shared_experts": 1},     # None by default: its shared expert is sized by it
    "zaya": {"num_experts_per_tok": 1},   # its config refuses more than one expert per token
    # multi-head latent attention: its own head dims and low ranks (head_dim is not read),
    # one key/value head per query head (its keys come from the latent, never grouped)
    # (num_key_value_heads follows num_attention_heads: see _arch_fields)
    "deepseek_v2": {"qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 32,
                    "kv_lora_rank": 64, "q_lora_rank": 64},
    "deepseek_v3": {"qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 32,
                    "kv_lora_rank": 64, "q_lora_rank": 64},
    "mamba2": {"num_heads": 8},           # hidden * expand (256) must be heads * head_dim (32)
    # real DBRX clips qkv at 8 (None fails transformers' clamp)
    "dbrx": {"d_model": 128, "n_heads": 4, "n_layers": 2,
             "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
             "ffn_config": {"hidden_size": 128, "ffn_hidden_size": 128, "moe_num_experts": 4,
                            "moe_top_k": 2}},
}
# Gemma 3 (the image-text model) reads its sizes from its sub-configs: the tiny fields at
# the top level left it at its defaults (text 2304 wide, 26 layers, 262k vocabulary; a
# 12-layer vision tower), a real-size model the sweep timed out on, not a tiny one.
# Its text model gets the tiny fields; the vision tower (built, never run on text
# input) a tiny size too.
# (the text config takes the sweep's sizes: see _arch_fields)
ARCH_FIELDS["gemma3"] = {
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 128,
                      "intermediate_size": 128, "num_hidden_layers": 1,
                      "num_attention_heads": 4, "image_size": 224, "patch_size": 14},
}
ARCH_DROPS = {
    "falcon": ("head_dim",),              # hidden_size // num_attention_heads (a property)
    "deepseek_v3": ("head_dim",),         # its rotary dim: qk_rope_head_dim
}


#: architectures whose keys come from a latent, one key/value head per query head
ONE_KV_HEAD_PER_HEAD = ("deepseek_v2", "deepseek_v3")


def _arch_fields(name: str, sizes: dict) -> dict:
    """The fields ``name`` needs over ``sizes`` (the tiny sizes with ``--sizes`` merged)."""
    fields = dict(ARCH_FIELDS.get(name, {}))
    if name in ONE_KV_HEAD_PER_HEAD:
        fields["num_key_value_heads"] = sizes["num_attention_heads"]
    if name == "gpt_neo":  # one attention type per layer, global and local alternating
        layers = sizes["num_hidden_layers"]
        fields["attention_types"] = [[["global", "local"], layers // 2]] * (layers > 1) \
            + [[["global"], 1]] * (layers % 2)
    if name == "gemma3":
        fields["text_config"] = {**sizes, "model_type": "gemma3_text"}
    return fields


def architectures() -> list[str]:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


#: run first: the experts and hybrid models, then the issue's known tiling gaps
FIRST = ["mixtral", "qwen2_moe", "granitemoe", "olmoe", "granitemoehybrid", "qwen3_moe",
         "granitemoeshared", "phimoe", "ernie4_5_moe", "gpt_oss", "minimax", "dots1", "qwen3_next",
         "helium", "ernie4_5", "diffllama", "doge", "bloom", "mpt", "ctrl", "xglm", "rwkv",
         "falcon", "llama", "mistral", "qwen2", "granite", "gpt2"]


def _first_line(exc: BaseException) -> str:
    """The innermost cause's text: a refusal names the op (Dynamo's wrapper text dropped)."""
    from spyre_rules.errors import cause_chain_text

    text = cause_chain_text(exc).splitlines()[0]
    for marker in ("BackendCompileError: ", "raised: "):
        if marker in text:
            text = text.rsplit(marker, 1)[1]
            break
    return text[:300]


def _build(name: str):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    sizes = {**TINY, **json.loads(os.environ.get(SIZES_VARIABLE, "{}"))}
    fields = {k: v for k, v in sizes.items() if k not in ARCH_DROPS.get(name, ())}
    config = AutoConfig.for_model(name, **{**fields, **_arch_fields(name, sizes)})
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).float().eval()
    # A weight matrix transformers initialises to zeros (AFMoE's router gate) makes every
    # score equal: which experts a top-k of ties picks is ATen's implementation detail
    # (its CPU topk gave experts 2 and 3, ours the lowest indices 0 and 1), so eager
    # would be no reference.  Trained weights are never all zero: such matrices get
    # small random values, seeded.
    with torch.no_grad():
        generator = torch.Generator().manual_seed(2)
        for param in model.parameters():
            if param.dim() >= 2 and not param.any():
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)
    seq = int(os.environ.get(SEQ_VARIABLE, SEQ))
    ids = torch.randint(3, VOCAB, (1, seq), generator=torch.Generator().manual_seed(1))
    return model, ids


def _equal(out, ref) -> bool:
    import torch

    return out.shape == ref.shape and torch.allclose(out.float(), ref.float(), atol=TOLERANCE,
                                                     rtol=TOLERANCE, equal_nan=True)


def worker(name: str, limit: int) -> dict:
    import torch
    import spyre_rules  # noqa: F401  (registers the backend)
    from spyre_rules import config
    from spyre_rules.backend.compile import spyre_rules_backend

    row: dict = {"model": name}
    try:
        model, ids = _build(name)
        with torch.no_grad():
            expected = model(input_ids=ids).logits
    except Exception as exc:  # noqa: BLE001  (a config that refuses the tiny sizes)
        row["builds"] = False
        row["why"] = _first_line(exc)
        return row
    row["builds"] = True

    graphs, refusals = [], []

    def capturing(gm, example_inputs):
        graphs.append((gm, list(example_inputs)))
        try:
            return spyre_rules_backend(gm, example_inputs)
        except Exception as exc:  # noqa: BLE001
            refusals.append(_first_line(exc))
            return gm.forward

    torch._dynamo.reset()
    try:
        with config.patch(fallback="error"), torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = torch.compile(model, backend=capturing)(input_ids=ids).logits
    except Exception as exc:  # noqa: BLE001  (Dynamo itself)
        row["error"] = f"dynamo: {_first_line(exc)}"
        return row
    row["graphs"] = len(graphs)
    if refusals:
        row["error"] = refusals[0]
    else:
        row["error"] = "program" if _equal(out, expected) else "WRONG"

    def rerun(**settings) -> str:
        try:
            with config.patch(**settings), torch.no_grad(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch._dynamo.reset()
                compiled = torch.compile(model, backend=spyre_rules_backend)
                out = compiled(input_ids=ids).logits
        except Exception as exc:  # noqa: BLE001
            return f"CRASH: {_first_line(exc)}" if settings.get("fallback") == "eager" \
                else _first_line(exc)
        if not _equal(out, expected):
            return "WRONG"
        return "ok" if settings.get("fallback") == "eager" else "program"

    # a graph wholly on the program under "error" made no fallback decision: the default
    # fallback compiles the same program (recompiled only where "error" refused)
    row["default"] = "ok (same program)" if row["error"] == "program" else rerun(fallback="eager")
    if row["error"] == "program":
        row["auto"] = rerun(fallback="error", max_span_bytes=limit,
                            ignore_span_overflow_hints=False)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-kib", type=int, default=64)
    parser.add_argument("--only", default="", help="comma-separated model types")
    parser.add_argument("--timeout", type=int, default=900)
    parser.add_argument("--out", default="", help="append each row as JSON to this file")
    parser.add_argument("--totals", default="", help="print the totals of the rows in this "
                        "JSONL file (the last row of each model counts) and exit")
    parser.add_argument("--seq", type=int, default=SEQ, help="tokens of the one sequence")
    parser.add_argument("--sizes", default="{}", help="JSON config fields merged over the "
                        "tiny sizes, e.g. '{\"hidden_size\": 256}'")
    parser.add_argument("--worker", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    json.loads(args.sizes)  # a typo fails here, not in every subprocess
    limit = args.limit_kib * 1024
    if args.totals:
        with open(args.totals) as f:
            by_model = {row["model"]: row for row in map(json.loads, filter(str.strip, f))}
        print(f"models: {','.join(by_model)}")
        print(totals(list(by_model.values())))
        return 0
    if args.worker:
        print("ROW " + json.dumps(worker(args.worker, limit)), flush=True)
        return 0
    names = [n for n in args.only.split(",") if n]
    if not names:
        every = architectures()
        names = [n for n in FIRST if n in every] + [n for n in every if n not in FIRST]
    rows = []
    print(f"{'model':28} {'builds':6} {'fallback=error':40} {'default':24} "
          f"auto@{args.limit_kib}KiB  seconds")
    for name in names:
        start = time.perf_counter()
        try:
            done = subprocess.run(
                [sys.executable, __file__, "--worker", name, "--limit-kib", str(args.limit_kib)],
                capture_output=True, text=True, timeout=args.timeout,
                env={**os.environ, SEQ_VARIABLE: str(args.seq), SIZES_VARIABLE: args.sizes})
            lines = [ln for ln in done.stdout.splitlines() if ln.startswith("ROW ")]
            row = json.loads(lines[-1][4:]) if lines else {
                "model": name, "builds": True, "error": "CRASH (worker died)",
                "default": "CRASH (worker died)", "why": done.stderr.strip().splitlines()[-1:]}
        except subprocess.TimeoutExpired:
            row = {"model": name, "builds": True, "error": f"timeout {args.timeout} s"}
        row["seconds"] = round(time.perf_counter() - start)
        rows.append(row)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
        print(f"{name:28} {str(row['builds']):6} {row.get('error', '-')[:40]:40} "
              f"{row.get('default', '-')[:24]:24} {row.get('auto', '-')[:24]:24} {row['seconds']}",
              flush=True)
    print(totals(rows))
    return 0


def totals(rows: list[dict]) -> str:
    built = [r for r in rows if r.get("builds")]
    on_program = [r for r in built if r.get("error") == "program"]
    wrong = [r["model"] for r in built if "WRONG" in (r.get("error", ""), r.get("default", ""),
                                                       r.get("auto", ""))]
    crashes = [r["model"] for r in built if str(r.get("default", "")).startswith("CRASH")]
    auto = [r for r in on_program if r.get("auto") == "program"]

    def share(part: list, whole: list) -> str:
        return f"{len(part)}/{len(whole)} ({100 * len(part) / max(len(whole), 1):.0f}%)"

    return (f"built {len(built)} of {len(rows)}; fallback=error on the program and equal eager "
            f"{share(on_program, built)}; default fallback crashes {len(crashes)} {crashes}; "
            f"auto-tiled on the program {share(auto, on_program)}; wrong results {wrong}")


if __name__ == "__main__":
    sys.exit(main())
