"""A paged KV cache as a serving engine keeps it, as a ``transformers`` Cache.

Per layer a pool of pages, ``(num_blocks, block_size, kv_heads, head_dim)``, a block
table ``(batch, blocks_per_sequence)`` naming each sequence's pages in order, and the
flat slot ``(block * block_size + offset)`` of each new token.  ``update`` does what a
paged-attention engine does, in plain PyTorch: the new tokens' keys and values are
written with ``index_copy_`` into the flat cache ``(num_blocks * block_size, kv_heads,
head_dim)``, and the sequence's pages are gathered (``pool[block_table]``) into the
``(batch, kv_heads, tokens, head_dim)`` keys and values the model's own attention reads.
Page ``j`` of a sequence holds its tokens ``j * block_size ...``, so the model's causal
mask over ``blocks_per_sequence * block_size`` keys is the sequence's.

The tensor kept (a graph input the compiled step writes in place) is the flat cache;
the pool is its ``(num_blocks, block_size, ...)`` view, the same memory.  So the write
addresses its target's own dims (its heads outermost on the device, where the planner
tiles it: ``facts/in_place.py``), as an engine's ``reshape_and_cache`` does.

With ``attention="blocks"`` the cache hands the model's attention the page pools
themselves (``(num_blocks, block_size, kv_heads, head_dim)`` views of the flat caches) and
the model runs with ``attn_implementation=PAGED_ATTENTION``: the attention function
registered under that name computes ``spyre_rules.paged_decode_attention`` (key blocks
whose pages are gathered inside the key loop, a softmax combine) from the block table and
the sequences' lengths the model is called with (``paged_call_kwargs``), never gathering
the whole sequence.  It takes one new token per sequence; it knows the softmax attention of
Llama-style models: a scaling, grouped-query heads and a sliding window (the
``sliding_window`` the model passes its attention), nothing else (no logit softcapping, no attention sinks, no ALiBi).

Used by ``spyre-rules plan --decode --paged`` (``commands/decode_plan.py``) and by the
serving tests.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.cache_utils import Cache, CacheLayerMixin

from spyre_rules.backend.paged_attention import paged_decode_attention

__all__ = ["PAGED_ATTENTION", "PagedCache", "PagedLayer", "blocks_attention_fits",
           "paged_call_kwargs"]

#: The ``attn_implementation`` whose attention reads a ``PagedCache(attention="blocks")``.
PAGED_ATTENTION = "spyre_rules_paged"


def blocks_attention_fits(model: Any) -> bool:
    """Whether ``model``'s attention can run as ``PAGED_ATTENTION``: it calls a transformers
    attention function (Falcon's own attention code does not) and asks nothing the function
    lacks (Gemma 2's logit softcapping)."""
    config = model.config
    return bool(getattr(model, "_supports_attention_backend", False)) and \
        getattr(config, "attn_logit_softcapping", None) is None


def paged_call_kwargs(cache: "PagedCache", seq_lens: torch.Tensor) -> dict[str, Any]:
    """What a model call passes its attention for a blocks-mode cache: the block table and
    each sequence's length after the new token (the keys ``t < seq_len`` count)."""
    return {"paged_block_table": cache.block_table, "paged_seq_lens": seq_lens}


def _paged_attention(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                     attention_mask: Any, scaling: float | None = None, dropout: float = 0.0,
                     **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention-function contract: ``query (batch, heads, 1, head_dim)``,
    ``key`` / ``value`` the page pools a blocks-mode ``PagedLayer`` returned; the output
    ``(batch, 1, heads, head_dim)``."""
    if query.shape[2] != 1 or key.dim() != 4 or "paged_block_table" not in kwargs:
        raise NotImplementedError(
            f"{PAGED_ATTENTION} attention takes one new token per sequence against a "
            "PagedCache(attention='blocks') and the model call's paged_call_kwargs")
    unknown = [name for name in ("softcap", "s_aux") if kwargs.get(name) is not None]
    if dropout or unknown:
        raise NotImplementedError(f"{PAGED_ATTENTION} attention has no dropout, logit softcapping "
                                  f"or attention sinks (asked: {unknown or ['dropout']})")
    # a sliding-window model passes its window to the attention (Mistral, Qwen2)
    window = kwargs.get("sliding_window", getattr(module, "sliding_window", None))
    out = paged_decode_attention(query[:, :, 0], key, value, kwargs["paged_block_table"],
                                 kwargs["paged_seq_lens"], scale=scaling, window=window)
    return out[:, None], None


AttentionInterface.register(PAGED_ATTENTION, _paged_attention)


class PagedLayer(CacheLayerMixin):
    """One layer's flat K and V caches; the block table and slots are the cache's."""

    is_compileable = True
    is_sliding = False
    supports_early_init = False

    def __init__(self, keys: torch.Tensor, values: torch.Tensor, owner: "PagedCache") -> None:
        super().__init__()
        self.keys, self.values = keys, values
        self.owner = owner
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass  # the pool exists before the first step

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any,
               **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        table, slots = self.owner.block_table, self.owner.slots
        if self.owner.attention == "blocks":
            return (self._write_and_pool(self.keys, key_states, slots),
                    self._write_and_pool(self.values, value_states, slots))
        return (self._write_and_gather(self.keys, key_states, table, slots),
                self._write_and_gather(self.values, value_states, table, slots))

    def _write(self, flat: torch.Tensor, new: torch.Tensor, slots: torch.Tensor) -> None:
        _, heads, dim = flat.shape
        batch, _, tokens, _ = new.shape
        flat.index_copy_(0, slots, new.transpose(1, 2).reshape(batch * tokens, heads, dim))

    def _write_and_pool(self, flat: torch.Tensor, new: torch.Tensor,
                        slots: torch.Tensor) -> torch.Tensor:
        self._write(flat, new, slots)
        _, heads, dim = flat.shape
        return flat.view(-1, self.owner.block_size, heads, dim)

    def _write_and_gather(self, flat: torch.Tensor, new: torch.Tensor, table: torch.Tensor,
                          slots: torch.Tensor) -> torch.Tensor:
        self._write(flat, new, slots)
        _, heads, dim = flat.shape
        batch = new.shape[0]
        pages = flat.view(-1, self.owner.block_size, heads, dim)[table]
        return pages.reshape(batch, -1, heads, dim).transpose(1, 2)

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_max_length(), 0

    def get_seq_length(self) -> int:
        return self.owner.seq_length

    def get_max_length(self) -> int:
        return int(self.owner.block_table.shape[1]) * self.owner.block_size


class PagedCache(Cache):
    """Every layer's page pool, one block table and the new tokens' slots."""

    def __init__(self, layers: list[tuple[torch.Tensor, torch.Tensor]], block_size: int,
                 block_table: torch.Tensor, slots: torch.Tensor, seq_length: int,
                 attention: str = "gathered") -> None:
        """``layers``: each layer's flat (keys, values) caches, ``(num_blocks * block_size,
        kv_heads, head_dim)``.  ``attention``: ``"gathered"`` hands the model's attention
        each sequence's gathered pages, ``"blocks"`` the page pools (module docstring)."""
        if attention not in ("gathered", "blocks"):
            raise ValueError(f"attention must be 'gathered' or 'blocks', not {attention!r}")
        super().__init__(layers=[PagedLayer(k, v, self) for k, v in layers])
        self.attention = attention
        self.block_size = block_size
        self.block_table, self.slots, self.seq_length = block_table, slots, seq_length

    @classmethod
    def for_decode(cls, layers: int, batch: int, context: int, block_size: int, kv_heads: int,
                   head_dim: int, dtype: torch.dtype, device: Any,
                   attention: str = "gathered") -> "PagedCache":
        """A pool holding ``batch`` sequences of ``context`` tokens (their own pages, in
        order), the new token of each written into its last slot."""
        per_sequence = context // block_size
        blocks = batch * per_sequence
        shape = (blocks * block_size, kv_heads, head_dim)
        pools = [(torch.zeros(shape, dtype=dtype, device=device),
                  torch.zeros(shape, dtype=dtype, device=device)) for _ in range(layers)]
        table = torch.arange(blocks, device=device).reshape(batch, per_sequence)
        slots = table[:, -1] * block_size + block_size - 1
        return cls(pools, block_size, table, slots, context - 1, attention)
