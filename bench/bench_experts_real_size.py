"""Experts, hybrid and Falcon models at real size, planned on the meta device (issue 41).

Each config is its model's published numbers (Granite-4.0-H-Small: its shape, the
attention layers' positions among the Mamba2 layers approximated), planned with
``spyre-rules plan``'s own ``plan_model`` (automatic tiling, the real 256 MiB limit,
``fallback="error"``) at each sequence length; one line per (model, length): whether
every access fits, the loop groups, the ops planned, seconds, or the refusal.

    python3 bench/bench_experts_real_size.py [--layers 1] [--seq 8192,32768] [--only Mixtral-8x7B]

``--layers`` (default 1) plans that many decoder layers: every layer of these models
lowers alike (GraniteMoeHybrid's first attention layer is moved into the first
``--layers``, so one layer of each kind is planned with 2).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
from pathlib import Path

CONFIGS = {
    "Mixtral-8x7B": {
        "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
        "num_attention_heads": 32, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
        "max_position_embeddings": 32768, "rms_norm_eps": 1e-5, "rope_theta": 1e6,
        "sliding_window": None, "tie_word_embeddings": False,
    },
    "Granite-3.0-3B-A800M": {
        "model_type": "granitemoe", "hidden_size": 1536, "intermediate_size": 512,
        "num_attention_heads": 24, "num_key_value_heads": 8, "num_hidden_layers": 32,
        "num_local_experts": 40, "num_experts_per_tok": 8, "vocab_size": 49155,
        "max_position_embeddings": 4096, "embedding_multiplier": 12.0,
        "attention_multiplier": 0.015625, "residual_multiplier": 0.22, "logits_scaling": 6.0,
        "rope_theta": 10000.0, "tie_word_embeddings": True,
    },
    "Qwen2-57B-A14B": {
        "model_type": "qwen2_moe", "hidden_size": 3584, "intermediate_size": 18944,
        "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
        "num_attention_heads": 28, "num_key_value_heads": 4, "num_hidden_layers": 28,
        "num_experts": 64, "num_experts_per_tok": 8, "vocab_size": 151936,
        "max_position_embeddings": 32768, "rope_theta": 1e6, "decoder_sparse_step": 1,
        "norm_topk_prob": False, "use_sliding_window": False, "tie_word_embeddings": False,
    },
    "Granite-4.0-H-Small": {
        "model_type": "granitemoehybrid", "hidden_size": 4096, "intermediate_size": 1536,
        "shared_intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8,
        "num_hidden_layers": 40, "num_local_experts": 72, "num_experts_per_tok": 10,
        "vocab_size": 100352, "max_position_embeddings": 131072, "mamba_n_heads": 128,
        "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
        "mamba_expand": 2, "mamba_chunk_size": 256, "position_embedding_type": "nope",
        "layer_types": ["mamba"] * 40, "attention_layers": [1, 11, 21, 31],
        "tie_word_embeddings": True,
    },
    "Falcon-7B": {
        "model_type": "falcon", "hidden_size": 4544, "num_attention_heads": 71,
        "num_hidden_layers": 32, "vocab_size": 65024, "multi_query": True, "parallel_attn": True,
        "new_decoder_architecture": False, "bias": False, "alibi": False,
        "layer_norm_epsilon": 1e-5, "bos_token_id": 11, "eos_token_id": 11,
    },
}


def _config(name: str, layers: int | None) -> dict:
    data = dict(CONFIGS[name])
    attention = data.pop("attention_layers", None)
    if attention is not None:
        types = list(data["layer_types"])
        for i in attention:
            types[i] = "attention"
        if layers is not None:
            types = types[:layers]
        data["layer_types"] = types
    return data


def main(argv: list[str] | None = None) -> int:
    from spyre_rules.commands.model_plan import plan_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=1)
    parser.add_argument("--seq", default="8192,32768")
    parser.add_argument("--only", default="")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    failed = 0
    for name in names:
        for seq in (int(s) for s in args.seq.split(",")):
            with tempfile.TemporaryDirectory() as scratch:
                path = Path(scratch) / f"{name}.json"
                path.write_text(json.dumps(_config(name, args.layers)))
                report = plan_model(str(path), seq=seq, layers=args.layers, dtype="bf16")
            fits = report.get("ok")
            failed += not fits
            graphs = report.get("graphs", [])
            groups = sum(len(g["loop_groups"]) for g in graphs)
            ops = sum(len(g["ops"]) for g in graphs)
            # one trip per tile: the product of an op's split counts (1 untiled)
            trips = sum(math.prod(n for _, n in op.get("levels") or []) for g in graphs
                        for op in g["ops"])
            seconds = report.get("seconds", {}).get("compile", [0])[0]
            why = report.get("error") or "; ".join(
                report["unsupported"][:1] + [f"over the limit: {report['overflows'][:5]}"] * bool(
                    report["overflows"]) + [f"unchecked: {report['unchecked'][:5]}"] * bool(
                    report["unchecked"]))
            print(f"{name:22} seq {seq:6} layers {args.layers}: "
                  f"{'every access fits' if fits else 'FAILS'}; {ops} ops, {groups} loop groups, "
                  f"{trips} loop trips, "
                  f"{len(report.get('deferred_indirect_reads', []))} indirect reads deferred, "
                  f"{seconds:.0f} s" + ("" if fits else f"; {why}"), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
