"""A manual spyre_hint inside a model's forward: tile the sequence dim of one
decoder layer (attention and MLP blocks) of a model_zoo model.

The layer's input is named ``[None, "S", None]`` inside the forward, as a user
would: with ``name_tensor_dims`` on the hidden states, or with
``spyre_hint(named_dims=...)`` naming every rank-3 tensor the layer creates.
Attention scores read the sequence dim twice (queries and keys); the name stays
on the query dim, so the hint tiles the queries and every tile reads all keys
(the key and value projections run in a loop of their own before the scores).
"""

from __future__ import annotations

import torch

from spyre_rules.hints import declare_tensor_dim, name_tensor_dims, spyre_hint

SEQ_DIM = "S"


def decoder_layer(model: torch.nn.Module, name: str) -> torch.nn.Module:
    """The first decoder (or encoder) layer of a model_zoo model."""
    if name == "gpt2":
        return model.h[0]
    if name in ("bert", "roberta"):
        return model.encoder.layer[0]
    return model.layers[0]


def hint_sequence_dim(layer: torch.nn.Module, seq: int, count: int,
                      naming: str = "name_tensor_dims") -> None:
    """Run ``layer.forward`` inside ``spyre_hint(slices={"S": count})`` with its
    (batch, seq, hidden) input named ``[None, "S", None]`` (``naming``:
    ``"name_tensor_dims"`` or ``"named_dims"``): its ops run in counted loops of
    ``count`` tiles of the sequence dim."""
    declare_tensor_dim(SEQ_DIM, seq)
    forward = layer.forward
    names = [None, SEQ_DIM, None]

    def hinted(hidden_states, *args, **kwargs):
        if naming == "named_dims":
            with spyre_hint(slices={SEQ_DIM: count}, named_dims=names):
                return forward(hidden_states, *args, **kwargs)
        hidden_states = name_tensor_dims(hidden_states, names)
        with spyre_hint(slices={SEQ_DIM: count}):
            return forward(hidden_states, *args, **kwargs)

    layer.forward = hinted
