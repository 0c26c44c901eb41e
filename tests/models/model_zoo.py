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


def build(name: str, attn: str = "eager", dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """The model, randomly initialised with a fixed seed, in ``dtype``, eval mode."""
    cls, cfg = MODELS[name](attn)
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
