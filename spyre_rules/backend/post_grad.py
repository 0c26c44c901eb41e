"""Our post-grad graph pass: Inductor's ``post_grad_custom_pre_pass``.

Inductor runs it on the functional ATen graph after AOT autograd and before its own
post-grad passes (reinplacing among them) and lowering.  Two rewrites, in order:

1. ``complex_as_real``: complex64 values (rotary embeddings) as real and imaginary
   float32 parts (``complex_as_real.py``);
2. ``slice_scatters_as_cat``: a step-1 ``slice_scatter`` not bound for a graph input
   as a concatenation (``concat.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass, get_hash_for_files

from spyre_rules.backend.complex_as_real import complex_as_real
from spyre_rules.backend.concat import slice_scatters_as_cat

__all__ = ["RulesPostGradPass"]


class RulesPostGradPass(CustomGraphPass):
    def __call__(self, graph: torch.fx.Graph) -> None:
        changed = complex_as_real(graph)
        changed = slice_scatters_as_cat(graph) or changed
        if changed:
            graph.lint()

    def uuid(self) -> Any:
        files = [str(Path(__file__).parent / name)
                 for name in ("post_grad.py", "complex_as_real.py", "concat.py")]
        return get_hash_for_files(tuple(files)).hex()
