"""Softmax attention over gathered pages, rewritten into key blocks (issue 38).

A serving engine's decode attention written in plain PyTorch gathers the sequences'
pages and runs softmax attention over them::

    k = k_cache[block_table].reshape(B, MB * BS, KVH, D).permute(0, 2, 1, 3)
    k = k.repeat_interleave(H // KVH, dim=1)          # or [:, :, None].expand(...).reshape
    s = (q @ k.transpose(-1, -2)).float() / D ** 0.5   # casts and scaling in any order
    s = s.masked_fill(mask, float("-inf"))            # or where(...), or + additive mask
    out = s.softmax(-1).to(q.dtype) @ v               # v gathered like k

The backend runs every op as its own kernel, so ``k_cache[block_table]`` is a buffer whose
page coordinate spans every page whatever the tile, and a sequence's row of page ids is
one stick: once the gathered pages overflow the span limit no split of the gather fits
and the planner refuses it (``backend/paged_attention.py``).  This pass, in the manner of
Inductor's attention-fusion patterns (``fx_passes/fuse_attention.py``) but over the Dynamo
graph before ``compile_fx`` (as ``einsum_batch.keep_einsum_batch`` is), replaces the
whole pattern by ``key_block_attention`` (``backend/paged_attention.py``): the keys in
blocks, block ``j`` in-page token ``j`` of every page, each block's pages gathered inside
the key loop, a split-KV softmax combine.

**What matches** (each piece checked on the nodes and on Dynamo's example values; anything
else leaves the graph alone):

* the output ``P @ V``, ``P (B, H, 1, T)`` (one query token), ``V (B, H, T, Dv)``;
* ``P``: ``softmax`` over the last dim (optionally with ``dtype=``), then at most one cast,
  through identities (``contiguous``, ``clone``, dropout that does nothing);
* the softmax input: a chain, from the product ``Q @ K^T`` (``Q (B, H, 1, D)``), of casts,
  ``/ * + -`` by a number or a tensor, ``masked_fill`` and ``where`` (the scores as either
  branch), every step keeping the scores' shape; each other operand does not depend on
  the scores and broadcasts to them, so it is a function of (batch, head, key): the mask
  is carried over as it is (any predicate or bias, not assumed to be ``seq_lens``);
* ``K^T``: ``K`` with its last two dims swapped; ``K`` and ``V`` each the gathered pages
  as heads: ``cache[table]`` (``cache (NB, BS, KVH, D)``, ``table (B, MB)`` integer, the
  same table for both) reshaped to ``(B, MB * BS, KVH, D)``, heads moved to dim 1, and
  for ``H = g * KVH`` query heads either ``repeat_interleave(g, dim=1)`` or a unit dim 2
  expanded to ``g`` and merged (query head ``h`` reads key head ``h // g``; ``repeat``,
  head ``h % KVH``, does not match).

**Semantics.**  The replacement applies the same steps, in the same order and dtypes, to
the products laid out in key blocks, each tensor operand rearranged the same way; key
``t`` of the gathered sequence is token ``t % BS`` of page ``t // BS`` on both sides.  The
softmax and ``@ V`` become the split-KV combine: the same value, with the float32 sums in
another order and the probabilities rounded to ``V``'s dtype before normalising (eager
rounds after): equal to eager within ``torch.testing.assert_close``'s default fp16
tolerance (``docs/accumulation.md``).

**Applied only where it is needed**: under automatic tiling, when the gathered pages of
one side are larger than the span limit (``_needed``).  Elsewhere the graph is left
alone and the program computes eager's attention bitwise; like a tiled reduction's
partial sums (``docs/accumulation.md``), the other order of the sums is the price of a
tiling that is required, never a default.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

import torch

from spyre_rules.backend.graph_calls import argument, call_of, int_dims, value_of
from spyre_rules.backend.paged_attention import key_block_attention

__all__ = ["rewrite_gathered_page_attention", "gathered_page_attention"]

F = torch.nn.functional
_log = logging.getLogger(__name__)
_SCALAR = (int, float, bool)


def gathered_page_attention(query: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                            block_table: torch.Tensor, steps: tuple, out_dtype: torch.dtype
                            ) -> torch.Tensor:
    """What the matched pattern computes, in key blocks: ``query (B, H, 1, D)``, the
    pools and table of the gather, ``steps`` the score chain (``_APPLY``); ``(B, H, 1, Dv)``."""
    batch, heads, _, dim = query.shape
    _, block_size, kv_heads, _ = k_cache.shape
    pages = block_table.shape[1]

    def key_blocks(operand: Any) -> Any:
        """A tensor broadcasting to the scores ``(B, H, 1, T)`` laid out as the products
        ``(1, BS, B, KVH, H / KVH, MB)``, its unit dims kept unit."""
        if not isinstance(operand, torch.Tensor):
            return operand
        b, h, _, t = (1,) * (4 - operand.dim()) + tuple(operand.shape)
        kvh, group = (kv_heads, heads // kv_heads) if h != 1 else (1, 1)
        mb, bs = (pages, block_size) if t != 1 else (1, 1)
        # a copy in that layout, read as the products are: read through a permuted view
        # instead, the masking op is planned on its own split and the key loop breaks in
        # two (the issue's repro at 16 KiB: the values' gather leaves the loop)
        return operand.reshape(b, kvh, group, mb, bs).permute(4, 0, 1, 2, 3).unsqueeze(0).contiguous()

    def masked_scores(products: torch.Tensor) -> torch.Tensor:
        scores = products
        for kind, *operands in steps:
            scores = _APPLY[kind](scores, *(key_blocks(o) for o in operands))
        return scores

    out = key_block_attention(query.reshape(batch, heads, dim), k_cache, v_cache, block_table,
                              masked_scores, out_dtype)
    return out[:, :, None]


_APPLY = {
    "cast": lambda s, dtype: s.to(dtype),
    "div": lambda s, o: s / o,
    "mul": lambda s, o: s * o,
    "add": lambda s, o: s + o,
    "sub": lambda s, o: s - o,
    "masked_fill": lambda s, mask, value: s.masked_fill(mask, value),
    "where_keep": lambda s, cond, other: torch.where(cond, s, other),   # where(c, s, o)
    "where_fill": lambda s, cond, other: torch.where(cond, other, s),   # where(c, o, s)
}


@dataclass
class _Pages:
    """One side (keys or values) of the pattern: ``cache[table]`` as ``(B, H, T, D)``."""
    cache: Any
    table: Any
    kv_heads: int
    nodes: list = field(default_factory=list)


def _through_identities(node: Any, nodes: list) -> Any:
    """``node`` past ops that return their input's values (recorded in ``nodes``)."""
    while True:
        call = call_of(node)
        if call is None:
            return node
        if call.name == "contiguous" and len(call.args) == 1 and not call.kwargs \
                or call.name == "clone" and len(call.args) == 1 and not call.kwargs:
            pass
        elif call.name == "dropout" and not call.kwargs.get("inplace", False) and \
                len(call.args) == 1 and (call.kwargs.get("training", True) is False
                                         or call.kwargs.get("p", 0.5) == 0):
            pass
        else:
            return node
        nodes.append(node)
        node = call.args[0]


def _shape(node: Any) -> tuple | None:
    value = value_of(node)
    if not isinstance(value, torch.Tensor) or not all(isinstance(s, int) for s in value.shape):
        return None
    return tuple(value.shape)


def _permutation(call: Any, rank: int) -> list[int] | None:
    if call is None:
        return None
    if call.name == "permute":
        dims = call.args[1:] or (call.kwargs.get("dims"),)
        return int_dims(dims, rank)
    if call.name == "transpose" and len(call.args) == 3 and not call.kwargs:
        pair = int_dims(call.args[1:], rank)
        if pair is None:
            return None
        perm = list(range(rank))
        perm[pair[0]], perm[pair[1]] = perm[pair[1]], perm[pair[0]]
        return perm
    return None


def _reinterpreted(node: Any, shape: tuple, nodes: list) -> Any:
    """The node whose values, row-major, ``node`` holds in ``shape`` (a reshape, view,
    flatten, unsqueeze or indexing by ``None`` and full slices), or None."""
    call = call_of(node)
    if call is None or not call.args:
        return None
    if call.name == "getitem":
        index = call.args[1] if len(call.args) == 2 else None
        index = index if isinstance(index, tuple) else (index,)
        if not all(i is None or i is Ellipsis or i == slice(None) for i in index):
            return None
    elif call.name not in ("reshape", "view", "flatten", "unsqueeze"):
        return None
    source = call.args[0]
    if _shape(source) != shape:
        return None
    nodes.append(node)
    return _through_identities(source, nodes)


def _gathered_heads(node: Any, heads: int) -> _Pages | None:
    """``node (B, heads, T, D)`` as the pages of a gather, or None (module doc)."""
    nodes: list = []
    node = _through_identities(node, nodes)
    shape = _shape(node)
    if shape is None or len(shape) != 4:
        return None
    batch, _, tokens, dim = shape
    call = call_of(node)
    if call is not None and call.name == "repeat_interleave":
        repeats, dim_arg = argument(call, 1, "repeats"), argument(call, 2, "dim")
        if not isinstance(repeats, int) or dim_arg not in (1, -3) or len(call.args) > 3 \
                or set(call.kwargs) - {"repeats", "dim"}:
            return None
        group = repeats
        nodes.append(node)
        node = _through_identities(call.args[0], nodes)
    elif call is not None and call.name in ("reshape", "view") and \
            len(_shape(call.args[0]) or ()) == 5:
        expanded = _through_identities(call.args[0], nodes)
        group = _shape(expanded)[2]
        nodes.append(node)
        node = _expanded_heads(expanded, group, nodes)
        if node is None:
            return None
    else:
        group = 1
    if heads % group or _shape(node) != (batch, heads // group, tokens, dim):
        return None
    kv_heads = heads // group
    if _permutation(call_of(node), 4) != [0, 2, 1, 3]:
        return None
    nodes.append(node)
    flat = _through_identities(call_of(node).args[0], nodes)
    if _shape(flat) != (batch, tokens, kv_heads, dim):
        return None
    call = call_of(flat)
    if call is None or call.name not in ("reshape", "view", "flatten") or not call.args:
        return None
    nodes.append(flat)
    gathered = _through_identities(call.args[0], nodes)
    gathered_shape = _shape(gathered)
    if gathered_shape is None or len(gathered_shape) != 5 or gathered_shape[0] != batch or \
            gathered_shape[3:] != (kv_heads, dim) or gathered_shape[1] * gathered_shape[2] != tokens:
        return None
    call = call_of(gathered)
    if call is None or call.name != "getitem" or len(call.args) != 2:
        return None
    cache, table = call.args
    cache_shape, table_value = _shape(cache), value_of(table)
    if cache_shape is None or len(cache_shape) != 4 or cache_shape[1:] != gathered_shape[2:] or \
            _shape(table) != gathered_shape[:2] or table_value.dtype not in (torch.int32, torch.int64):
        return None
    nodes.append(gathered)
    return _Pages(cache, table, kv_heads, nodes)


def _expanded_heads(expanded: Any, group: int, nodes: list) -> Any:
    """``(B, KVH, group, T, D)``, a unit dim 2 expanded: the ``(B, KVH, T, D)`` node."""
    call = call_of(expanded)
    if call is None or call.name != "expand":
        return None
    nodes.append(expanded)
    unit = _through_identities(call.args[0], nodes)
    b, kvh, _, t, d = _shape(expanded)
    if _shape(unit) != (b, kvh, 1, t, d):
        return None
    return _reinterpreted(unit, (b, kvh, t, d), nodes)


@dataclass
class _Match:
    query: Any
    keys: _Pages
    values: _Pages
    steps: list
    nodes: list


class _Matcher:
    """Matches the pattern at an output product ``P @ V`` of one graph (module doc)."""

    def __init__(self, graph: Any) -> None:
        self.order = {n: i for i, n in enumerate(graph.nodes)}

    def match(self, node: Any) -> _Match | None:
        call = call_of(node)
        if call is None or call.name != "matmul" or len(call.args) != 2 or call.kwargs:
            return None
        probabilities, v = call.args
        out_shape, p_shape = _shape(node), _shape(probabilities)
        if out_shape is None or p_shape is None or len(p_shape) != 4 or p_shape[2] != 1:
            return None
        batch, heads, _, tokens = p_shape
        nodes: list = [node]
        found = self._softmax(probabilities, nodes)
        if found is None:
            return None
        scores, softmax_cast = found
        chain = self._scores(scores, p_shape, nodes)
        if chain is None:
            return None
        product, steps = chain
        operands = [o for step in steps for o in step[1:] if isinstance(o, torch.fx.Node)]
        if any(self._depends_on(o, product) for o in operands):
            return None
        steps = steps + softmax_cast
        call = call_of(product)
        query, transposed = call.args if len(call.args) == 2 and not call.kwargs else (None, None)
        if query is None or len(_shape(query) or ()) != 4 or _shape(query)[:3] != (batch, heads, 1):
            return None
        dim = _shape(query)[3]
        key_nodes: list = []
        transposed = _through_identities(transposed, key_nodes)
        if _shape(transposed) != (batch, heads, dim, tokens) or \
                _permutation(call_of(transposed), 4) != [0, 1, 3, 2]:
            return None
        keys = _gathered_heads(call_of(transposed).args[0], heads)
        values = _gathered_heads(v, heads)
        if keys is None or values is None or keys.table is not values.table or \
                keys.kv_heads != values.kv_heads or \
                _shape(keys.cache)[1] != _shape(values.cache)[1] or \
                len({value_of(n).device for n in (query, keys.cache, values.cache, keys.table)}) != 1:
            return None
        keys.nodes += key_nodes + [transposed]
        return _Match(query, keys, values, steps, nodes + [product])

    def _softmax(self, node: Any, nodes: list) -> tuple[Any, list] | None:
        """The softmax's input and its ``dtype=`` as a cast step, past at most one cast."""
        node = _through_identities(node, nodes)
        call = call_of(node)
        if call is not None and call.name == "cast" and self._plain_cast(node, call):
            nodes.append(node)
            node = _through_identities(call.args[0], nodes)
            call = call_of(node)
        if call is None or call.name != "softmax" or not call.args:
            return None
        rank = len(_shape(node) or ())
        if node.target is F.softmax:   # softmax(input, dim, _stacklevel, dtype)
            dim, dtype = argument(call, 1, "dim"), argument(call, 3, "dtype")
            known = {"dim", "_stacklevel", "dtype"}
        else:                          # softmax(input, dim, dtype)
            dim, dtype = argument(call, 1, "dim"), argument(call, 2, "dtype")
            known = {"dim", "dtype"}
        if not isinstance(dim, int) or dim not in (-1, rank - 1) or set(call.kwargs) - known \
                or not (dtype is None or isinstance(dtype, torch.dtype)):
            return None
        nodes.append(node)
        return call.args[0], ([] if dtype is None else [("cast", dtype)])

    @staticmethod
    def _plain_cast(node: Any, call: Any) -> bool:
        """A dtype change only: same shape, same device."""
        source, result = value_of(call.args[0]) if call.args else None, value_of(node)
        return isinstance(source, torch.Tensor) and isinstance(result, torch.Tensor) and \
            source.shape == result.shape and source.device == result.device

    def _scores(self, node: Any, shape: tuple, nodes: list) -> tuple[Any, list] | None:
        """``(product, steps)``: ``node`` is ``steps`` applied in order to ``product``, a
        matmul, every value of ``shape`` (module doc); None if not."""
        node = _through_identities(node, nodes)
        if _shape(node) != shape:
            return None
        call = call_of(node)
        if call is None:
            return None
        if call.name == "matmul":
            return node, []
        for scores, step in self._step_readings(node, call):
            if not all(self._operand_fits(o, node) for o in step[1:] if not isinstance(o, torch.dtype)):
                continue
            tried: list = []
            found = self._scores(scores, shape, tried)
            if found is not None:
                nodes += tried + [node]
                return found[0], found[1] + [step]
        return None

    def _step_readings(self, node: Any, call: Any) -> list[tuple[Any, tuple]]:
        """Each way of reading ``node`` as ``step(scores)``: ``(scores, step)``."""
        args, name = call.args, call.name
        if name == "cast":
            return [(args[0], ("cast", value_of(node).dtype))] if self._plain_cast(node, call) else []
        if name in ("div", "mul", "add", "sub"):
            if len(args) != 2 or call.kwargs:
                return []   # torch.div(rounding_mode=), torch.add(alpha=)
            readings = [(args[0], (name, args[1]))]
            if name in ("mul", "add"):
                readings.append((args[1], (name, args[0])))
            return readings
        if name == "masked_fill" and len(args) + len(call.kwargs) == 3:
            return [(args[0], ("masked_fill", argument(call, 1, "mask"), argument(call, 2, "value")))]
        if name == "where" and len(args) == 3 and not call.kwargs:
            cond, keep, fill = args
            return [(keep, ("where_keep", cond, fill)), (fill, ("where_fill", cond, keep))]
        if name == "where_method" and len(args) == 3 and not call.kwargs:
            return [(args[0], ("where_keep", args[1], args[2]))]
        return []

    def _operand_fits(self, operand: Any, step: Any) -> bool:
        """A number, or a tensor node of rank <= 4 on the step's device."""
        if isinstance(operand, _SCALAR):
            return True
        shape = _shape(operand)
        return shape is not None and len(shape) <= 4 and \
            value_of(operand).device == value_of(step).device

    def _depends_on(self, operand: Any, product: Any) -> bool:
        """Whether ``operand`` is computed from ``product`` (a graph is in topological
        order: a node before the product does not depend on it)."""
        seen, todo = set(), [operand]
        while todo:
            n = todo.pop()
            if n is product:
                return True
            if n in seen or self.order[n] < self.order[product]:
                continue
            seen.add(n)
            todo.extend(n.all_input_nodes)
        return False


def rewrite_gathered_page_attention(gm: torch.fx.GraphModule) -> bool:
    """Replace every softmax attention over gathered pages in ``gm`` (module doc) by
    ``gathered_page_attention``; True if any changed."""
    graph = gm.graph
    matcher = _Matcher(graph)
    erased: set = set()
    for node in list(graph.nodes):
        found = None if node in erased else matcher.match(node)
        if found is not None and _needed(found):
            erased |= _replace(graph, node, found, matcher.order)
    changed = bool(erased)
    if changed:
        graph.lint()
        gm.recompile()
    return changed


def _needed(found: _Match) -> bool:
    """Automatic tiling is on and one side's gathered pages, ``table (B, MB)`` rows of
    ``cache (NB, BS, KVH, D)``, are larger than the span limit."""
    from spyre_rules import config

    if config.ignore_span_overflow_hints:
        return False
    for pages in (found.keys, found.values):
        cache, table = value_of(pages.cache), value_of(pages.table)
        rows = int(table.numel())
        if rows * (cache.numel() // cache.shape[0]) * cache.element_size() > config.max_span_bytes:
            return True
    return False


def _replace(graph: Any, node: Any, found: _Match, order: dict) -> set:
    """Insert the key-block call for ``node``'s pattern; the nodes erased (at least ``node``,
    none when the call cannot be traced on the example values)."""
    steps = tuple(tuple(step) for step in found.steps)
    args = (found.query, found.keys.cache, found.values.cache, found.keys.table, steps,
            value_of(node).dtype)
    example_args = torch.fx.node.map_arg(args, value_of)
    fake_mode = getattr(value_of(found.query), "fake_mode", None)   # Dynamo's, not the context's
    try:
        with fake_mode if fake_mode is not None else contextlib.nullcontext():
            example = gathered_page_attention(*example_args)
    except Exception as exc:  # noqa: BLE001 - a replacement we cannot trace: keep the graph
        _log.debug("paged attention at %s left alone: %s", node, exc)
        return set()
    with graph.inserting_before(node):
        out = graph.call_function(gathered_page_attention, args)
    out.meta = {**node.meta, "example_value": example}
    node.replace_all_uses_with(out)
    matched = {*found.nodes, *found.keys.nodes, *found.values.nodes}
    erased = set()
    for dead in sorted(matched, key=lambda n: -order[n]):
        if not dead.users:
            graph.erase_node(dead)
            erased.add(dead)
    return erased
