"""Bundled example models (for ``spyre-rules demo``, the README and the benchmark).

``EXAMPLES`` maps a name to a factory returning ``(model, example_inputs)``;
models are in eval mode and meant to run under ``torch.no_grad()``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spyre_rules.examples.lm_block import LMBlock, lm_block_example
from spyre_rules.examples.mlp_softmax import MLPSoftmaxBlock, mlp_softmax_example

__all__ = ["EXAMPLES", "LMBlock", "MLPSoftmaxBlock", "lm_block_example", "mlp_softmax_example"]

EXAMPLES: dict[str, Callable[..., tuple[Any, tuple[Any, ...]]]] = {
    "mlp_softmax": mlp_softmax_example,
    "lm_block": lm_block_example,
}
