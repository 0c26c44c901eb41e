"""A manual spyre_hint inside a model's forward: tile the sequence dim of the MLP
block of one decoder layer.  (The attention block's scores have the sequence
dim twice -- queries and keys -- so one name cannot say which one to split:
``HintError: dim 'S' names several dims``.)"""

from __future__ import annotations

import torch

from spyre_rules.hints import declare_tensor_dim, spyre_hint

SEQ_DIM = "S"


def mlp_block(model: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    """``(module, method)`` computing the MLP block of the first layer of a model_zoo model."""
    if name == "gpt2":
        return model.h[0].mlp, "forward"
    if name in ("bert", "roberta"):
        return model.encoder.layer[0], "feed_forward_chunk"
    return model.layers[0].mlp, "forward"


def hint_sequence_dim(module: torch.nn.Module, method: str, seq: int, count: int) -> None:
    """Run ``module.<method>`` inside ``spyre_hint(slices={"S": count})`` with the
    (batch, seq, features) tensors it creates named ``[None, "S", None]``: its ops
    run in a counted loop of ``count`` tiles of the sequence dim."""
    declare_tensor_dim(SEQ_DIM, seq)
    forward = getattr(module, method)

    # One positional parameter, like each of the wrapped methods (BERT's chunking
    # helper checks the signature of feed_forward_chunk).
    def hinted(hidden_states):
        with spyre_hint(slices={SEQ_DIM: count}, named_dims=[None, SEQ_DIM, None]):
            return forward(hidden_states)

    setattr(module, method, hinted)
