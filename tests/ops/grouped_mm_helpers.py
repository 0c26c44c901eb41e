"""What the grouped experts matmul tests share: transformers' grouped product, its inputs
(77 rows in 4 groups, one of them empty), the float64 reference row by row, automatic
tiling at a limit, and the plans of captured ops."""

from __future__ import annotations

import torch

from ops_helpers import randn

from spyre_rules import config
from spyre_rules.engine.api import plan_graph

ROWS = 77
GROUP_ROWS = (20, 0, 31, 26)  # an empty group; every row in one


def grouped_inputs(depth: int, weight_shape: tuple[int, ...]):
    """``x [ROWS, depth]``, the weight, and the groups' end offsets (int32)."""
    x, w = randn(ROWS, depth), randn(*weight_shape, seed=1)
    offs = torch.tensor(GROUP_ROWS, dtype=torch.int32).cumsum(0, dtype=torch.int32)
    return x, w, offs


def per_row(x, w, offs, transposed: bool):
    """``x[t] @ w[g(t)]`` (``transposed``: the weight stored ``[E, K, N]``) or
    ``x[t] @ w[g(t)].T`` (``[E, N, K]``, as ``nn.Linear`` stores it), row by row."""
    group = torch.searchsorted(offs, torch.arange(x.shape[0], dtype=offs.dtype), right=True)
    return torch.einsum("tk,tkn->tn" if transposed else "tk,tnk->tn", x, w[group])


def auto_tiled(limit: int):
    return config.patch(max_span_bytes=limit, span_check="error", ignore_span_overflow_hints=False)


def split_levels(ops) -> list[tuple[str, list[tuple[int, int]] | None]]:
    """Each captured op's name and its plan's (host dim, split count) levels (None: no plan)."""
    return [(op.get_name(), None if d.plan is None else
             [(lv.selected_host_dim, lv.split_count) for lv in d.plan.levels])
            for op, d in zip(ops, plan_graph(ops))]
