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

Used by ``spyre-rules plan --decode --paged`` (``commands/decode_plan.py``) and by the
serving tests.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache, CacheLayerMixin

__all__ = ["PagedCache", "PagedLayer"]


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
        return (self._write_and_gather(self.keys, key_states, table, slots),
                self._write_and_gather(self.values, value_states, table, slots))

    def _write_and_gather(self, flat: torch.Tensor, new: torch.Tensor, table: torch.Tensor,
                          slots: torch.Tensor) -> torch.Tensor:
        _, heads, dim = flat.shape
        batch, _, tokens, _ = new.shape
        flat.index_copy_(0, slots, new.transpose(1, 2).reshape(batch * tokens, heads, dim))
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
                 block_table: torch.Tensor, slots: torch.Tensor, seq_length: int) -> None:
        """``layers``: each layer's flat (keys, values) caches, ``(num_blocks * block_size,
        kv_heads, head_dim)``."""
        super().__init__(layers=[PagedLayer(k, v, self) for k, v in layers])
        self.block_size = block_size
        self.block_table, self.slots, self.seq_length = block_table, slots, seq_length

    @classmethod
    def for_decode(cls, layers: int, batch: int, context: int, block_size: int, kv_heads: int,
                   head_dim: int, dtype: torch.dtype, device: Any) -> "PagedCache":
        """A pool holding ``batch`` sequences of ``context`` tokens (their own pages, in
        order), the new token of each written into its last slot."""
        per_sequence = context // block_size
        blocks = batch * per_sequence
        shape = (blocks * block_size, kv_heads, head_dim)
        pools = [(torch.zeros(shape, dtype=dtype, device=device),
                  torch.zeros(shape, dtype=dtype, device=device)) for _ in range(layers)]
        table = torch.arange(blocks, device=device).reshape(batch, per_sequence)
        slots = table[:, -1] * block_size + block_size - 1
        return cls(pools, block_size, table, slots, context - 1)
