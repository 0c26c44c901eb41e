"""Decode attention over a paged KV cache, written as key blocks with an online-softmax
combine (flash-decoding), in plain PyTorch.

``paged_decode_attention(query, k_cache, v_cache, block_table, seq_lens)`` is what a
serving engine's paged-attention kernel computes for one new token per sequence: query
``(batch, heads, head_dim)``, page pools ``(num_blocks, block_size, kv_heads, head_dim)``
(a flat ``(num_blocks * block_size, kv_heads, head_dim)`` cache viewed so is the same),
``block_table (batch, blocks_per_sequence)`` naming each sequence's pages in order and
``seq_lens (batch,)``; key ``t`` of a sequence is token ``t % block_size`` of its page
``t // block_size`` and counts while ``t < seq_len``.  Grouped-query attention shares each
key/value head among ``heads // kv_heads`` query heads.  Eager, it equals softmax attention
over the gathered pages (within the rounding of another summation order); compiled with
``backend="spyre_rules"``, every op is one the planner tiles, so when the gathered pages
overflow the span limit the keys are tiled in blocks and each block's pages are gathered
inside the key loop (a per-tile buffer, never the whole gathered cache).

Why this form, and not softmax over the gathered pages (``pool[block_table]`` reshaped to
``(batch, tokens, ...)``): the backend runs every op as its own kernel, so the gather is a
buffer of its own, and a tiled op writes its tile into that full buffer; its page
coordinate spans every page of every sequence whatever the tile, and the block table's
row of page ids is one stick, so no split of pages is legal.  The planner refuses it
(``tests/serving/test_paged_attention_tiling.py``), unless ``paged_attention_rewrite.py``
recognises it and rewrites it into ``key_block_attention`` below.  Here:

* **Key block ``j`` is in-page position ``j`` of every page** (``block_size`` blocks of
  ``blocks_per_sequence`` keys).  Softmax attention does not depend on the order of the
  keys, so any partition of them is exact.  This one is the partition the pool's layout
  allows: the stick layout of ``(num_blocks, block_size, kv_heads, head_dim)`` is
  ``[block_size, kv_heads, head_dim / stick, num_blocks, stick]`` (the outermost host dim
  moves just before the stick), pages innermost, so a read of whole pages spans the whole
  pool while a read of ``k`` in-page positions of any pages spans ``k / block_size`` of it.
* **The gather writes kv heads, then blocks, outermost.**
  ``pool.permute(2, 1, 0, 3)[None, :, :, table]`` is ``(1, kv_heads, block_size, batch,
  blocks_per_sequence, head_dim)``: the leading unit dim is the one moved next to the stick,
  so kv heads and blocks are the outermost device dims and a tile of (heads, blocks) writes
  one contiguous slab of the gathered buffer.  Kv heads come first because the key loop
  tiles them as an output level, which must be outside the reduction level over the blocks.
* **The combine is one reduction.**  ``softmax_values`` (``softmax_values.py``) reduces the
  scores and the values over the keys (blocks, pages) to ``softmax(s) @ v``; tiled over the
  key blocks, its accumulator carries flash-decoding's running state (``acc``, ``max``,
  ``sum``) across the key tiles in ONE loop with both page gathers
  (``docs/accumulation.md``), and ``acc / sum`` is stored once after it.

Numerics follow eager's hand-written decode (``softmax(float(q @ k^T) / sqrt(d)).to(dtype)
@ v``) up to the softmax: the scores are the product in the cache dtype, widened; max,
exponentials, sums, the product with the widened values and the combine are float32 (the
probabilities are not rounded to the value dtype), rounded once to the output dtype.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from spyre_rules.backend.batch_matmul import batchmatmul
from spyre_rules.backend.softmax_values import softmax_values

__all__ = ["paged_decode_attention", "key_block_attention", "gather_key_blocks"]


def gather_key_blocks(pool: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    """The sequences' pages as ``(1, kv_heads, block_size, batch, blocks_per_sequence,
    head_dim)``: block ``j`` (host dim 2) holds in-page token ``j`` of every page; kv heads
    then blocks are the outermost dims of the gathered buffer's device layout."""
    return pool.permute(2, 1, 0, 3).unsqueeze(0)[:, :, :, block_table]


def paged_decode_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           block_table: torch.Tensor, seq_lens: torch.Tensor,
                           scale: float | None = None, window: int | None = None) -> torch.Tensor:
    """One decode step's attention output ``(batch, heads, head_dim)`` (module docstring).

    ``window``: a sliding window of that many keys (the new token's and the ``window - 1``
    before it), as a sliding-window model's mask keeps them."""
    dim = query.shape[-1]
    block_size, pages = k_cache.shape[1], block_table.shape[1]
    scale = 1 / math.sqrt(dim) if scale is None else scale
    position = (torch.arange(pages, device=query.device)[None, :] * block_size
                + torch.arange(block_size, device=query.device)[:, None])   # (bs, pages)
    ends = seq_lens[None, None, :, None, None, None]
    valid = position[None, :, None, None, None, :] < ends
    if window is not None:
        valid = valid & (position[None, :, None, None, None, :] >= ends - window)

    def masked_scores(products: torch.Tensor) -> torch.Tensor:
        return torch.where(valid, products.float() * scale, -math.inf)

    return key_block_attention(query, k_cache, v_cache, block_table, masked_scores, query.dtype)


def key_block_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                        block_table: torch.Tensor,
                        masked_scores: Callable[[torch.Tensor], torch.Tensor],
                        out_dtype: torch.dtype) -> torch.Tensor:
    """Softmax attention of ``query (batch, heads, head_dim)`` over the sequences' pages in
    key blocks, combined (module docstring); ``(batch, heads, v_head_dim)`` in ``out_dtype``.

    ``masked_scores(products)`` turns the products ``q @ k^T`` (in the cache dtype, laid out
    ``(1, block_size, batch, kv_heads, group, pages)``: key ``page * block_size + j`` at
    ``[0, j, b, h, g, page]``) into the scores the softmax runs over, a masked key ``-inf``
    (the caller's scaling, casts and mask).  Max, exponentials, sums, the value product and
    the combine are at least float32 (``softmax_values``)."""
    batch, heads, dim = query.shape
    kv_heads = k_cache.shape[2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not share {kv_heads} key/value heads evenly")
    group = heads // kv_heads
    # both gathered tile by tile inside the key loop (the values' gather reads nothing the
    # loop computes: grouping.rules independent_gather_in_run)
    values = gather_key_blocks(v_cache, block_table)   # (1, kvh, bs, b, pages, d)
    keys = gather_key_blocks(k_cache, block_table)
    block_size, pages = k_cache.shape[1], block_table.shape[1]
    q = query.view(1, batch, kv_heads, group, dim).permute(0, 2, 1, 3, 4).unsqueeze(2).expand(
        1, kv_heads, block_size, batch, group, dim)
    # products over the real batch dims, however the caller is traced (batch_matmul.py)
    products = batchmatmul(q, keys.permute(0, 1, 2, 3, 5, 4))   # (1, kvh, bs, b, g, pages)
    scores = masked_scores(products.permute(0, 2, 3, 1, 4, 5))  # (1, bs, b, kvh, g, pages)
    # one reduction over the keys (blocks, pages): the key loop carries its running
    # max, sum and value accumulator (softmax_values.py); scores (1, b, kvh, g, bs, pages)
    keys_last = scores.permute(0, 2, 3, 4, 1, 5)
    per_key = values.permute(0, 3, 1, 2, 4, 5).unsqueeze(3).expand(
        1, batch, kv_heads, group, block_size, pages, values.shape[5])
    out = softmax_values(keys_last, per_key, 2)        # (1, b, kvh, g, d)
    return out.reshape(batch, heads, v_cache.shape[-1]).to(out_dtype)
