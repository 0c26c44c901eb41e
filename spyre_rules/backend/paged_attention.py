"""Decode attention over a paged KV cache, written as key blocks with a softmax combine
(flash-decoding), in plain PyTorch.

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
* **The gather writes its blocks outermost.**  ``pool.permute(1, 0, 2, 3)[None, :, table]``
  is ``(1, block_size, batch, blocks_per_sequence, kv_heads, head_dim)``: the leading unit
  dim is the one moved next to the stick, so the block dim is the outermost device dim and a
  tile of blocks writes one contiguous slab of the gathered buffer.  Every later op keeps
  the block dim at host dim 1 for the same reason.
* **The combine.**  The key loop computes per block the scores, their max ``m_j`` (0 for a
  block with no valid key) and ``l_j = sum exp(s - m_j)``; then ``M = max_j m_j`` and
  ``w_j = exp(m_j - M)`` (0 for an empty block), and the value loop accumulates the
  rescaled partial outputs ``sum_j w_j * (exp(s_j - m_j) @ v_j)`` (a reduction level over
  the blocks, ``docs/accumulation.md``), divided once by ``sum_j w_j * l_j``.  This is
  flash-decoding's split-KV combine (the running max replaced by the max over the blocks'
  maxima, which the key loop leaves behind): the same value as a running max, and each
  loop reads its cache once.

Numerics follow eager's hand-written decode (``softmax(float(q @ k^T) / sqrt(d)).to(dtype)
@ v``): the scores are the product in the cache dtype, widened; max, exponentials, sums and
the combine are float32; each block's probabilities are rounded to the value dtype for the
product with ``v``, whose partial outputs are widened before the combine.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from spyre_rules.backend.batch_matmul import batchmatmul

__all__ = ["paged_decode_attention", "key_block_attention", "gather_key_blocks"]


def gather_key_blocks(pool: torch.Tensor, block_table: torch.Tensor) -> torch.Tensor:
    """The sequences' pages as ``(1, block_size, batch, blocks_per_sequence, kv_heads,
    head_dim)``: block ``j`` (host dim 1) holds in-page token ``j`` of every page, and is the
    outermost dim of the gathered buffer's device layout."""
    return pool.permute(1, 0, 2, 3).unsqueeze(0)[:, :, block_table]


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
    (the caller's scaling, casts and mask).  Max, exponentials, sums and the combine are at
    least float32; each block's probabilities are rounded to the value dtype for their
    product with ``v``."""
    batch, heads, dim = query.shape
    kv_heads = k_cache.shape[2]
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads do not share {kv_heads} key/value heads evenly")
    group = heads // kv_heads
    keys = gather_key_blocks(k_cache, block_table)     # (1, bs, b, pages, kvh, d)
    values = gather_key_blocks(v_cache, block_table)
    block_size = k_cache.shape[1]
    q = query.view(1, 1, batch, kv_heads, group, dim).expand(1, block_size, batch, kv_heads, group, dim)
    # products over the real batch dims, however the caller is traced (batch_matmul.py)
    scores = masked_scores(batchmatmul(q, keys.permute(0, 1, 2, 4, 5, 3)))   # (1, bs, b, kvh, g, pages)
    scores = scores.to(torch.promote_types(scores.dtype, torch.float32))
    block_max = scores.amax(-1, keepdim=True)          # (1, bs, b, kvh, g, 1)
    block_max = torch.where(block_max == -math.inf, 0.0, block_max)
    weights = torch.exp(scores - block_max)
    block_sum = weights.sum(-1, keepdim=True)
    partial = batchmatmul(weights.to(v_cache.dtype), values.permute(0, 1, 2, 4, 3, 5))   # (.., g, d)
    rescale = torch.exp(block_max - block_max.amax(1, keepdim=True))
    rescale = torch.where(block_sum > 0, rescale, 0.0)
    total = (rescale * block_sum).sum(1)               # (1, b, kvh, g, 1)
    out = (rescale * partial.to(scores.dtype)).sum(1) / total   # (1, b, kvh, g, d)
    return out.reshape(batch, heads, v_cache.shape[-1]).to(out_dtype)
