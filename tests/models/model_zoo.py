"""Small transformer models built from configs (no network, no weights).

Every model: 2 layers, hidden 64, 4 heads, vocabulary 128, random init with a
fixed seed, ``eval()``; inputs are ``input_ids`` of shape (1, SEQ).  A plain
module (not conftest.py) so tests and ``bench/bench_models.py`` import it.
"""

from __future__ import annotations

import torch

SEQ = 16
VOCAB = 128
HIDDEN = 64
HEADS = 4
LAYERS = 2
FFN = 128
SEED = 0


def _common(attn: str) -> dict:
    return {"attn_implementation": attn}


def gpt2(attn: str):
    from transformers import GPT2Config, GPT2Model

    return GPT2Model, GPT2Config(
        vocab_size=VOCAB, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_inner=FFN,
        n_positions=64, bos_token_id=0, eos_token_id=0, **_common(attn))


def llama(attn: str):
    from transformers import LlamaConfig, LlamaModel

    return LlamaModel, LlamaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, **_common(attn))


def bert(attn: str):
    from transformers import BertConfig, BertModel

    return BertModel, BertConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, max_position_embeddings=64, **_common(attn))


def granite(attn: str):
    from transformers import GraniteConfig, GraniteModel

    return GraniteModel, GraniteConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, **_common(attn))


def roberta(attn: str):
    from transformers import RobertaConfig, RobertaModel

    return RobertaModel, RobertaConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
        intermediate_size=FFN, max_position_embeddings=64, pad_token_id=1, **_common(attn))


def mistral(attn: str):
    from transformers import MistralConfig, MistralModel

    return MistralModel, MistralConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, max_position_embeddings=64,
        sliding_window=None, bos_token_id=0, eos_token_id=0, **_common(attn))


def qwen2(attn: str):
    from transformers import Qwen2Config, Qwen2Model

    return Qwen2Model, Qwen2Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=2, max_position_embeddings=64,
        bos_token_id=0, eos_token_id=0, **_common(attn))


def phi(attn: str):
    from transformers import PhiConfig, PhiModel

    return PhiModel, PhiConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
        **_common(attn))


def opt(attn: str):
    from transformers import OPTConfig, OPTModel

    return OPTModel, OPTConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, word_embed_proj_dim=HIDDEN, ffn_dim=FFN,
        num_hidden_layers=LAYERS, num_attention_heads=HEADS, max_position_embeddings=64,
        pad_token_id=1, bos_token_id=0, eos_token_id=0, **_common(attn))


def gpt_neox(attn: str):
    from transformers import GPTNeoXConfig, GPTNeoXModel

    return GPTNeoXModel, GPTNeoXConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, max_position_embeddings=64, bos_token_id=0, eos_token_id=0,
        **_common(attn))


#: name -> builder(attn_implementation) -> (model class, config)
MODELS = {
    "gpt2": gpt2, "llama": llama, "bert": bert, "granite": granite,
    "roberta": roberta, "mistral": mistral, "qwen2": qwen2, "phi": phi,
    "opt": opt, "gpt_neox": gpt_neox,
}


# -- mixtures of experts (transformers' grouped-experts path) and the Granite 4 hybrid --

EXPERTS = 4
EXPERTS_PER_TOKEN = 2


def _experts(layers: int = 1, **extra) -> dict:
    # one layer: every experts layer lowers alike, and each costs seconds of compile
    return {"vocab_size": VOCAB, "hidden_size": HIDDEN, "intermediate_size": FFN,
            "num_hidden_layers": layers, "num_attention_heads": HEADS, "num_key_value_heads": 2,
            "max_position_embeddings": 64, "num_experts_per_tok": EXPERTS_PER_TOKEN,
            "bos_token_id": 0, "eos_token_id": 0, **extra}


def mixtral(attn: str):
    from transformers import MixtralConfig, MixtralModel

    return MixtralModel, MixtralConfig(num_local_experts=EXPERTS, sliding_window=None,
                                       **_experts(**_common(attn)))


def qwen2_moe(attn: str):
    from transformers import Qwen2MoeConfig, Qwen2MoeModel

    return Qwen2MoeModel, Qwen2MoeConfig(num_experts=EXPERTS, moe_intermediate_size=FFN,
                                         shared_expert_intermediate_size=FFN,
                                         **_experts(**_common(attn)))


def granitemoe(attn: str):
    from transformers import GraniteMoeConfig, GraniteMoeModel

    return GraniteMoeModel, GraniteMoeConfig(num_local_experts=EXPERTS, **_experts(**_common(attn)))


def olmoe(attn: str):
    from transformers import OlmoeConfig, OlmoeModel

    return OlmoeModel, OlmoeConfig(num_experts=EXPERTS, **_experts(**_common(attn)))


def granitemoehybrid(attn: str):
    """Granite 4: a Mamba2 layer then an attention layer, both with experts."""
    from transformers import GraniteMoeHybridConfig, GraniteMoeHybridModel

    return GraniteMoeHybridModel, GraniteMoeHybridConfig(
        num_local_experts=EXPERTS, shared_intermediate_size=FFN, layer_types=["mamba", "attention"],
        mamba_n_heads=4, mamba_d_head=2 * HIDDEN // 4, mamba_d_state=16, mamba_chunk_size=SEQ,
        use_cache=False, **_experts(layers=2, **_common(attn)))


#: name -> builder, as MODELS (not in it: these need host steps, README "Transformer models")
EXPERT_MODELS = {
    "mixtral": mixtral, "qwen2_moe": qwen2_moe, "granitemoe": granitemoe, "olmoe": olmoe,
    "granitemoehybrid": granitemoehybrid,
}


def build(name: str, attn: str = "eager", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """The model, randomly initialised with a fixed seed, in ``dtype``, eval mode."""
    cls, cfg = {**MODELS, **EXPERT_MODELS}[name](attn)
    torch.manual_seed(SEED)
    return cls(cfg).to(dtype).eval()


def input_ids(seq: int = SEQ) -> torch.Tensor:
    gen = torch.Generator().manual_seed(SEED + 1)
    return torch.randint(2, VOCAB, (1, seq), generator=gen)


class LastHidden(torch.nn.Module):
    """``model(input_ids).last_hidden_state`` as a plain tensor function (what we compare)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids).last_hidden_state
