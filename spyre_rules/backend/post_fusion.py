"""The post-fusion seam: ``torch._inductor.config._post_fusion_custom_pass``.

Inductor calls it with the scheduler node list right after fusion (our
Scheduling refuses every fusion, so each node is one ComputedBuffer) and before
codegen.  It runs ``pass_lists.POST_FUSION_PASSES`` in order; each is
``fn(nodes) -> nodes``.

The pass object must stay stateless: Inductor deep-copies and pickles it into
its FX-cache key (docs/inductor_integration.md pitfall 7).  The passes
therefore live in a module-level list (``pass_lists.py``), not on the object.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch._inductor.custom_graph_pass import CustomSchedulerPass, get_hash_for_files

from spyre_rules.backend.pass_lists import POST_FUSION_PASSES

__all__ = ["RulesPostFusionPass"]


class RulesPostFusionPass(CustomSchedulerPass):
    def __call__(self, nodes: list[Any]) -> list[Any]:
        for fn in list(POST_FUSION_PASSES):
            nodes = fn(nodes)
        return nodes

    def uuid(self) -> Any:
        # Covers the whole backend package: any change to our passes is a new key.
        files = sorted(str(p) for p in Path(__file__).parent.glob("*.py"))
        return get_hash_for_files(tuple(files)).hex()
